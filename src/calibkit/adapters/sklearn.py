"""scikit-learn adapters: every logits calibrator as an estimator, a wrapper that calibrates
any fitted classifier, and scorers.

* :func:`estimator` (``estimator("dir-odir")``): a scikit-learn estimator class for a
  registered logits method whose parameters are the method's settings, so ``clone``,
  ``get_params``/``set_params``, ``Pipeline`` and ``GridSearchCV`` work on them. ``fit(X,
  y)`` takes logits X (n, K) and class indices y (the columns of X); ``predict_proba``,
  ``predict`` and ``decision_function`` (calibrated logits) follow.
* :class:`CalibratedClassifier`: calibrates a classifier's ``decision_function`` (or the
  log of its ``predict_proba``) with any calibkit method, in the two modes of
  ``CalibratedClassifierCV``: a frozen, fitted estimator (``cv=None``), or cross-validated
  (``cv=5``, with or without ``ensemble``).
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
import warnings
from typing import Any, NamedTuple

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .. import metrics, posthoc
from ..metrics import table

__all__ = ["METRIC_NAMES", "CalibratedClassifier", "CalibratedPair", "estimator", "scorer"]

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
        {
            "__init__": __init__,
            "_method": name,
            "__module__": __name__,
            "__doc__": (
                f"scikit-learn estimator of calibkit's {name!r} ({factory.__name__}); parameters: "
                f"its settings. fit(X=logits, y=class indices)."
            ),
        },
    )
    globals()[cls_name] = cls  # importable by name, so that it pickles
    _CLASSES[name] = cls
    return cls


class CalibratedPair(NamedTuple):
    """One fitted estimator and the calibkit method fitted on its scores."""

    estimator: Any
    calibrator: Any


class CalibratedClassifier(ClassifierMixin, BaseEstimator):
    """A scikit-learn classifier and a calibkit method fitted on its scores, in the two modes
    of scikit-learn's ``CalibratedClassifierCV``.

    * ``cv=None`` (default): ``estimator`` is already fitted and used as it is (never
      refitted, as ``CalibratedClassifierCV(FrozenEstimator(est))``); ``fit(X, y)`` fits
      ``method`` on its scores on the calibration data X.
    * ``cv=5`` (an int or a splitter, as ``CalibratedClassifierCV(cv=5)``): ``fit(X, y)``
      clones ``estimator`` and cross-validates. With ``ensemble=True`` (the default) each
      fold's clone is fitted on the other folds and the method on its held-out fold;
      ``predict_proba`` averages the folds' calibrated probabilities. With
      ``ensemble=False`` the method is fitted once on the out-of-fold scores of every row
      (``cross_val_predict``) and the estimator refitted on all of X.

    The scores are ``decision_function``, or the log of ``predict_proba`` where the
    estimator has none (``response`` forces one).

    ``estimator=None`` is scikit-learn's default, ``LinearSVC(random_state=0)``, cross-
    validated in 5 folds where ``cv`` is not given (an unfitted estimator cannot be used
    as it is). ``calibrated_classifiers_`` lists the fitted (estimator, calibrator) pairs as
    scikit-learn's attribute of that name does; ``predict_log_proba`` and
    ``decision_function`` (the calibrated log-probabilities) complete the classifier API.
    What a calibrator's checks warn (:class:`~calibkit.posthoc.anomalies.CalibrationWarning`)
    points at the caller's ``fit`` line.
    """

    def __init__(
        self,
        estimator: Any = None,
        method: str = "ts",
        response: str = "auto",
        cv: Any = None,
        ensemble: bool = True,
    ) -> None:
        self.estimator, self.method, self.response = estimator, method, response
        self.cv, self.ensemble = cv, ensemble

    def _response(self, est: Any) -> str:
        use = self.response
        if use not in ("auto", "decision_function", "predict_proba"):
            raise ValueError(
                f"response: expected auto, decision_function or predict_proba, got {use!r}"
            )
        if use == "auto":
            use = "decision_function" if hasattr(est, "decision_function") else "predict_proba"
        return use

    def _as_logits(self, out: Any, use: str) -> np.ndarray:
        out = np.asarray(out, dtype=np.float64)
        if use == "predict_proba":
            return np.log(np.clip(out, 1e-300, None))
        return np.column_stack([np.zeros_like(out), out]) if out.ndim == 1 else out

    def _scores(self, est: Any, X: Any) -> np.ndarray:
        use = self._response(est)
        return self._as_logits(getattr(est, use)(X), use)

    def fit(self, X: Any, y: Any) -> CalibratedClassifier:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            self._fit(X, np.asarray(y))
        for w in said:  # at the caller's line, not calibkit's
            warnings.warn(w.message, w.category, stacklevel=2)
        return self

    def _fit(self, X: Any, y: np.ndarray) -> None:
        if self.estimator is None:
            from sklearn.svm import LinearSVC

            self._fit_cv(X, y, LinearSVC(random_state=0), 5 if self.cv is None else self.cv)
        elif self.cv is None:
            check_is_fitted(self.estimator)
            self.classes_ = np.asarray(self.estimator.classes_)
            known = np.isin(y, self.classes_)
            if not known.all():
                raise ValueError(
                    f"y: label {y[~known][0].item()!r} is not one of the estimator's classes"
                )
            self.pairs_ = [(self.estimator, self._calibrate(self._scores(self.estimator, X), y))]
        else:
            self._fit_cv(X, y, self.estimator, self.cv)

    def _calibrate(self, scores: np.ndarray, y: np.ndarray) -> Any:
        return posthoc.create(self.method).fit(scores, np.searchsorted(self.classes_, y))

    def _fit_cv(self, X: Any, y: np.ndarray, estimator: Any, cv: Any) -> None:
        from sklearn.base import clone
        from sklearn.model_selection import check_cv, cross_val_predict
        from sklearn.utils import _safe_indexing

        self.classes_ = np.unique(y)
        folds = check_cv(cv, y, classifier=True)
        if not self.ensemble:
            use = self._response(estimator)
            out = cross_val_predict(clone(estimator), X, y, cv=folds, method=use)
            calibrator = self._calibrate(self._as_logits(out, use), y)
            self.pairs_ = [(clone(estimator).fit(X, y), calibrator)]
            return
        self.pairs_ = []
        for i, (train, held) in enumerate(folds.split(X, y)):
            est = clone(estimator).fit(_safe_indexing(X, train), y[train])
            if len(est.classes_) != len(self.classes_):
                raise ValueError(
                    f"cv: fold {i + 1}'s training rows lack class "
                    f"{np.setdiff1d(self.classes_, est.classes_)[0].item()!r}; use fewer folds "
                    "or ensemble=False"
                )
            held_y = y[held]
            self.pairs_.append(
                (est, self._calibrate(self._scores(est, _safe_indexing(X, held)), held_y))
            )

    @property
    def calibrator_(self) -> Any:
        """The calibkit method fitted (the first fold's, with ``cv`` and ``ensemble``)."""
        check_is_fitted(self, "pairs_")
        return self.pairs_[0][1]

    @property
    def calibrated_classifiers_(self) -> list[CalibratedPair]:
        """The fitted (estimator, calibrator) pairs: one, or one per fold with ``cv`` and
        ``ensemble`` (scikit-learn's attribute of that name)."""
        check_is_fitted(self, "pairs_")
        return [CalibratedPair(est, cal) for est, cal in self.pairs_]

    def predict_proba(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "pairs_")
        probs = [
            cal.predict_proba(torch.as_tensor(self._scores(est, X))).numpy()
            for est, cal in self.pairs_
        ]
        return np.mean(probs, axis=0)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """The log of :meth:`predict_proba` (an exact zero gives -inf, as scikit-learn's)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """Calibrated scores, (n, K): the log-probabilities (argmax as :meth:`predict`)."""
        return self.predict_log_proba(X)

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(1)]


#: other libraries' names of calibkit's metrics (scikit-learn's scorers, torchmetrics)
METRIC_NAMES = {
    "brier_score": "brier", "brier_score_loss": "brier", "log_loss": "nll",
    "neg_log_loss": "nll", "neg_brier_score": "brier", "expected_calibration_error": "ece",
    "calibration_error": "ece", "maximum_calibration_error": "mce", "adaptive_ece": "aece",
}  # fmt: skip


def scorer(metric: str = "ece", **options: Any):
    """A scorer ``(estimator, X, y) -> float`` of the calibkit metric ``metric`` (a function
    of :mod:`calibkit.metrics` that takes probabilities: ece, aece, mce, classwise_ece,
    rms_ce, nll, brier, ...) on ``estimator.predict_proba(X)``, negated where lower is
    better (``neg_`` convention). ``options`` go to the metric (``n_bins=10``). Names are
    read without case, and scikit-learn's and torchmetrics' spellings are taken
    (:data:`METRIC_NAMES`: ``"ECE"``, ``"brier_score"``, ``"log_loss"``, ...)."""
    metric = METRIC_NAMES.get(metric.lower().replace("-", "_"), metric.lower())
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
