"""scikit-learn adapters: every logits calibrator as an estimator, a wrapper that calibrates
any fitted classifier, and scorers.

* :func:`estimator` (``estimator("dir-odir")``): a scikit-learn estimator class for a
  registered logits method whose parameters are the method's settings, so ``clone``,
  ``get_params``/``set_params``, ``Pipeline`` and ``GridSearchCV`` work on them. ``fit(X,
  y)`` takes logits X (n, K) and class indices y (the columns of X); ``predict_proba``,
  ``predict`` and ``decision_function`` (calibrated logits) follow.
* :class:`CalibratedClassifier`: calibrates a fitted classifier's ``decision_function`` (or
  the log of its ``predict_proba``) with any calibkit method, in the manner of
  ``CalibratedClassifierCV`` on a frozen estimator.
* :func:`scorer` (``scorer("ece")``): a scorer for ``cross_val_score``/``GridSearchCV``,
  negated where lower is better, as scikit-learn's ``neg_*`` scorers are. It is a callable
  ``(estimator, X, y)`` rather than a ``make_scorer`` product because a score function made
  by ``make_scorer`` never sees the estimator's ``classes_``: on a fold that lacks a class
  it could not tell which probability column is which.

>>> from calibkit.adapters.sklearn import estimator
>>> TS = estimator("ts")
>>> TS(t_max=50.0).get_params()["t_max"]
50.0
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .. import metrics, posthoc
from ..metrics import table

_CLASSES: dict[str, type] = {}


class _CalibratorEstimator(ClassifierMixin, BaseEstimator):
    """Base of the classes :func:`estimator` makes; ``_method`` names the calibkit method."""

    _method: str = ""

    def fit(self, X: Any, y: Any) -> _CalibratorEstimator:
        z = np.asarray(X, dtype=np.float64)
        self.calibrator_ = posthoc.create(self._method, **self.get_params()).fit(z, y)
        self.classes_ = np.arange(z.shape[1])
        self.n_features_in_ = z.shape[1]
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Calibrated logits (log-probabilities for binning and isotonic maps), (n, K)."""
        check_is_fitted(self, "calibrator_")
        return self.calibrator_(torch.as_tensor(np.asarray(X, dtype=np.float64))).numpy()

    def predict_proba(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "calibrator_")
        z = torch.as_tensor(np.asarray(X, dtype=np.float64))
        return self.calibrator_.predict_proba(z).numpy()

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(1)]


def estimator(name: str) -> type:
    """The scikit-learn estimator class of the registered logits method ``name``; its
    ``__init__`` takes the method's settings as keyword parameters with their defaults."""
    if name in _CLASSES:
        return _CLASSES[name]
    if name not in posthoc.names("logits"):
        raise ValueError(
            f"method: {name!r} is not a logits calibrator; choose one of "
            f"{', '.join(posthoc.names('logits'))}"
        )
    factory = posthoc.REGISTRY.factory(name)
    params = [
        p
        for p in inspect.signature(factory.__init__).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    ]

    def __init__(self, **settings: Any) -> None:
        unknown = sorted(set(settings) - {p.name for p in params})
        if unknown:
            raise TypeError(f"{type(self).__name__} has no parameter {unknown[0]!r}")
        for p in params:
            setattr(self, p.name, settings.get(p.name, p.default))

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    __init__.__signature__ = inspect.Signature([self_param, *params])  # what get_params reads
    cls_name = f"{factory.__name__}Estimator"
    cls = type(
        cls_name,
        (_CalibratorEstimator,),
        {"__init__": __init__, "_method": name, "__module__": __name__, "__doc__": (
            f"scikit-learn estimator of calibkit's {name!r} ({factory.__name__}); parameters: "
            f"its settings. fit(X=logits, y=class indices)."
        )},
    )  # fmt: skip
    globals()[cls_name] = cls  # importable by name, so that it pickles
    _CLASSES[name] = cls
    return cls


class CalibratedClassifier(ClassifierMixin, BaseEstimator):
    """A fitted scikit-learn classifier and a calibkit method fitted on its scores.

    ``estimator`` is used as it is (never refitted); ``fit(X, y)`` computes its scores on
    the calibration data X (``decision_function``, or the log of ``predict_proba`` where it
    has none; ``response`` forces one) and fits ``method`` (a calibkit spec) on them.
    """

    def __init__(self, estimator: Any, method: str = "ts", response: str = "auto") -> None:
        self.estimator, self.method, self.response = estimator, method, response

    def _scores(self, X: Any) -> np.ndarray:
        est = self.estimator
        use = self.response
        if use not in ("auto", "decision_function", "predict_proba"):
            raise ValueError(
                f"response: expected auto, decision_function or predict_proba, got {use!r}"
            )
        if use == "auto":
            use = "decision_function" if hasattr(est, "decision_function") else "predict_proba"
        out = np.asarray(getattr(est, use)(X), dtype=np.float64)
        if use == "predict_proba":
            return np.log(np.clip(out, 1e-300, None))
        return np.column_stack([np.zeros_like(out), out]) if out.ndim == 1 else out

    def fit(self, X: Any, y: Any) -> CalibratedClassifier:
        check_is_fitted(self.estimator)
        self.classes_ = np.asarray(self.estimator.classes_)
        y = np.asarray(y)
        known = np.isin(y, self.classes_)
        if not known.all():
            raise ValueError(
                f"y: label {y[~known][0].item()!r} is not one of the estimator's classes"
            )
        self.calibrator_ = posthoc.create(self.method).fit(
            self._scores(X), np.searchsorted(self.classes_, y)
        )
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "calibrator_")
        return self.calibrator_.predict_proba(torch.as_tensor(self._scores(X))).numpy()

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(1)]


def scorer(metric: str = "ece", **options: Any):
    """A scorer ``(estimator, X, y) -> float`` of the calibkit metric ``metric`` (a function
    of :mod:`calibkit.metrics` that takes probabilities: ece, aece, mce, classwise_ece,
    rms_ce, nll, brier, ...) on ``estimator.predict_proba(X)``, negated where lower is
    better (``neg_`` convention). ``options`` go to the metric (``n_bins=10``)."""
    fn = getattr(metrics, metric, None)
    if fn is None or not callable(fn):
        raise ValueError(f"metric: calibkit.metrics has no function {metric!r}")
    sign = -1.0 if table.direction(metric) < 0 else 1.0

    def score(estimator: Any, X: Any, y: Any) -> float:
        proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
        labels = np.searchsorted(np.asarray(estimator.classes_), np.asarray(y))
        return sign * fn(proba, labels, probs=True, **options)

    score.__name__ = f"{'neg_' if sign < 0 else ''}{metric}"
    return score


for _name in posthoc.names("logits"):
    estimator(_name)
