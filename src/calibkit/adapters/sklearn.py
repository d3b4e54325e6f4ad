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
from collections.abc import Callable
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .. import metrics, posthoc
from ..metrics.internal import direction

__all__ = [
    "METRIC_NAMES",
    "SKLEARN_METHODS",
    "CalibratedClassifier",
    "CalibratedPair",
    "estimator",
    "scorer",
]

_CLASSES: dict[str, type] = {}


class _CalibratorEstimator(ClassifierMixin, BaseEstimator):
    """Base of the classes :func:`estimator` makes; ``_method`` names the calibkit method.

    ``X`` are logits, one column per class (or, on two classes, one column: the positive
    class's, as a binary ``decision_function``), checked by scikit-learn's own
    ``validate_data`` (sparse, complex, empty, non-finite and mis-shaped input refused with
    its messages). The classes are the columns': 0..K−1 where ``y``'s labels are such
    integers (a calibration split may lack a class), else ``y``'s sorted distinct labels,
    which must then number K (``classes_``, as scikit-learn's classifiers). Fitted,
    ``n_iter_`` is the method's iterations (:class:`~calibkit.posthoc.FitReport`), and
    ``decision_function`` gives the calibrated logits: (n, K), or on two classes the (n,)
    difference of the second's and the first's, scikit-learn's binary convention."""

    _method: str = ""

    def fit(self, X: Any, y: Any) -> _CalibratorEstimator:
        from sklearn.utils.multiclass import check_classification_targets
        from sklearn.utils.validation import validate_data

        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        z = self._logits(X)
        k = z.shape[1]
        if np.issubdtype(y.dtype, np.integer) and y.min() >= 0 and y.max() < k:
            self.classes_, labels = np.arange(k), y.astype(np.int64)
        else:
            self.classes_, labels = np.unique(y, return_inverse=True)
        if len(self.classes_) != k:
            raise ValueError(
                f"X: expected logits, one column per class; y has {len(self.classes_)} "
                f"classes and X {X.shape[1]} columns"
            )
        self.calibrator_ = posthoc.create(self._method, **self.get_params()).fit(z, labels)
        self.n_iter_ = self.calibrator_.fit_report_.iterations
        return self

    @staticmethod
    def _logits(X: np.ndarray) -> torch.Tensor:
        """(n, K) logits of checked X: one column d is the binary pair [0, d] (:func:`_pair`)."""
        return torch.as_tensor(_pair(X[:, 0]) if X.shape[1] == 1 else X)

    def _checked(self, X: Any) -> torch.Tensor:
        from sklearn.utils.validation import validate_data

        check_is_fitted(self, "calibrator_")
        return self._logits(validate_data(self, X, dtype=np.float64, reset=False))

    def decision_function(self, X: Any) -> np.ndarray:
        """Calibrated logits (log-probabilities for binning and isotonic maps): (n, K), or
        (n,) on two classes."""
        z = self._checked(X)
        z = self.calibrator_(z).numpy()
        return z[:, 1] - z[:, 0] if z.shape[1] == 2 else z

    def predict_proba(self, X: Any) -> np.ndarray:
        z = self._checked(X)
        return self.calibrator_.predict_proba(z).numpy()

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)  # NotFittedError before classes_ is read
        return self.classes_[proba.argmax(1)]


def estimator(name: str) -> type:
    """The scikit-learn estimator class of the registered logits method ``name``; its
    ``__init__`` takes the method's settings as keyword parameters with their defaults.

    Examples
    --------
    A calibrator on logits as a scikit-learn estimator (``fit(X, y)`` with X the logits),
    so that scikit-learn's tools (pipelines, ``clone``, grid search) take it:

    >>> from sklearn.base import clone
    >>> from calibkit.adapters.sklearn import estimator
    >>> from calibkit.data import demo_logits
    >>> TS = estimator("ts")
    >>> d = demo_logits()
    >>> ts = clone(TS(t_max=50)).fit(d["logits_val"], d["labels_val"])
    >>> ts.predict_proba(d["logits_test"]).shape
    (497, 10)
    >>> round(ts.score(d["logits_test"], d["labels_test"]), 4)  # accuracy, as a classifier's
    0.9759
    """
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


@dataclass(frozen=True)
class CalibratedPair:
    """One fitted estimator and the calibkit method fitted on its scores, answering what
    scikit-learn's ``_CalibratedClassifier`` answers: ``estimator``, ``calibrators`` (one
    map per class for ``sigmoid`` and ``isotonic``, else the one calibkit method) and
    ``predict_proba(X)``, this pair's own calibrated probabilities (the classifier averages
    them over its pairs).

    Examples
    --------
    What :class:`CalibratedClassifier` keeps per fold in ``calibrated_classifiers_``:

    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from calibkit.adapters.sklearn import CalibratedClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> forest = RandomForestClassifier(n_estimators=50, random_state=0)
    >>> clf = CalibratedClassifier(forest, method="ts", cv=3).fit(X, y)
    >>> pair = clf.calibrated_classifiers_[0]
    >>> type(pair.estimator).__name__, [type(c).__name__ for c in pair.calibrators]
    ('RandomForestClassifier', ['TemperatureScaling'])
    >>> folds = [p.predict_proba(X[:5]) for p in clf.calibrated_classifiers_]
    >>> bool(np.allclose(np.mean(folds, axis=0), clf.predict_proba(X[:5])))
    True
    """

    estimator: Any
    calibrator: Any
    #: the estimator's features for X as the calibrator reads them (the classifier's own)
    features: Callable[[Any, Any], np.ndarray] = field(repr=False, compare=False)

    @property
    def calibrators(self) -> list[Any]:
        """The fitted maps: one per class (scikit-learn's ``sigmoid`` and ``isotonic``), or
        the one calibkit method."""
        return list(getattr(self.calibrator, "maps_", [self.calibrator]))

    def predict_proba(self, X: Any) -> np.ndarray:
        """This pair's calibrated probabilities (n, K) of ``X``."""
        return _proba(self.calibrator, self.features(self.estimator, X))


#: scikit-learn's calibration method names with scikit-learn's meaning: ``sigmoid`` and
#: ``isotonic`` map each class's raw score one-vs-rest (only the positive class's on two
#: classes) by calibkit's Platt scaling or isotonic regression and normalise the rows
#: (:class:`PerClass`); ``temperature`` is calibkit's ``ts``
SKLEARN_METHODS = {"sigmoid": "platt", "isotonic": "isotonic", "temperature": "ts"}


class PerClass:
    """scikit-learn's one-vs-rest calibration (``method="sigmoid"`` or ``"isotonic"``): class
    j's raw score f_j (a decision value, or the probability where the estimator has only
    ``predict_proba``) is mapped against ``y == j``, and the rows normalised (a row of zeros:
    uniform). On two classes only the second's score is mapped and the first's probability
    is 1 − p. ``sigmoid`` is Platt's (1999) fit as scikit-learn and LibSVM make it:
    σ(a f + c) by maximum likelihood against Platt's smoothed targets (N₊ + 1)/(N₊ + 2) and
    1/(N₋ + 2) (:func:`~calibkit.posthoc._binning.logistic_newton`; calibkit's own ``platt``
    fits the 0/1 labels of the softmax confidences instead); ``isotonic`` is calibkit's
    isotonic regression of σ(f_j) (a monotone transform of f_j: the same fit). Fitted by
    :class:`CalibratedClassifier`; ``maps_`` holds (a, c) or the fitted isotonic method."""

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def fit(
        self, raw: np.ndarray, labels: np.ndarray, n_classes: int, weights: Any = None
    ) -> PerClass:
        self.n_classes_ = n_classes
        self.maps_ = [self._fit_one(raw[:, j], labels == k, weights) for j, k in self._columns(raw)]
        return self

    def _columns(self, raw: np.ndarray) -> list[tuple[int, int]]:
        """(column of ``raw``, class) of each map: on two classes the second's alone."""
        if self.n_classes_ == 2:
            return [(raw.shape[1] - 1, 1)]
        return [(k, k) for k in range(self.n_classes_)]

    def _fit_one(self, f: np.ndarray, hit: np.ndarray, weights: Any = None) -> Any:
        if self.spec == "isotonic":
            if hit.all() or not hit.any():  # one target: the constant scikit-learn fits
                return float(hit.any())
            return posthoc.create("isotonic:mode=one-vs-rest").fit(
                _pair(f), hit.astype(np.int64), sample_weight=weights, probs=False
            )  # [0, f] are logits built here, even where f is 1 on every row
        from ..posthoc.internal import logistic_newton

        # Platt's priors are the weighted counts, as scikit-learn's _sigmoid_calibration
        w = np.ones(len(f)) if weights is None else np.asarray(weights, dtype=np.float64)
        positives, negatives = w[hit].sum(), w[~hit].sum()
        t = np.where(hit, (positives + 1) / (positives + 2), 1 / (negatives + 2))
        x = torch.as_tensor(np.column_stack([f, np.ones_like(f)]), dtype=torch.float64)
        rows = None if weights is None else torch.as_tensor(w)
        coef, _, _ = logistic_newton(x, torch.as_tensor(t, dtype=torch.float64), 100, rows)
        return coef.numpy()

    def predict_proba(self, raw: np.ndarray) -> np.ndarray:
        mapped = np.column_stack(
            [
                self._apply(m, raw[:, j])
                for m, (j, _) in zip(self.maps_, self._columns(raw), strict=True)
            ]
        )
        if self.n_classes_ == 2:
            return np.column_stack([1 - mapped[:, 0], mapped[:, 0]])
        total = mapped.sum(1, keepdims=True)
        uniform = np.full_like(mapped, 1 / self.n_classes_)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, mapped / total, uniform)

    @staticmethod
    def _apply(fitted: Any, f: np.ndarray) -> np.ndarray:
        if isinstance(fitted, float):  # isotonic on one target value
            return np.full(len(f), fitted)
        if isinstance(fitted, np.ndarray):  # Platt's (a, c)
            return 1 / (1 + np.exp(-(fitted[0] * f + fitted[1])))
        # the positive class's map itself, as scikit-learn's IsotonicRegression predicts it
        # (a 0 stays 0; the renormalised probabilities floor it at float64's tiny)
        return fitted.one_vs_rest_scores(torch.as_tensor(_pair(f)))[:, 1].numpy()


class Uncalibrated:
    """The scores of a fold whose calibration rows hold one class, as probabilities without
    calibration: softmax of logits, σ of a single raw decision against 1 − σ, or the
    estimator's own probabilities (``probabilities``) with their rows normalised."""

    def __init__(self, n_classes: int, probabilities: bool = False) -> None:
        self.n_classes_, self.probabilities = n_classes, probabilities

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        if self.probabilities:
            return features / features.sum(1, keepdims=True)
        z = torch.as_tensor(features, dtype=torch.float64)
        if z.shape[1] == 1:
            p = torch.sigmoid(z[:, 0])
            return torch.stack([1 - p, p], 1).numpy()
        return torch.softmax(z, 1).numpy()


class Embedded:
    """A fold whose training rows lacked classes, as scikit-learn calibrates it: the method
    (``calibrator``) maps the K' classes the fold's estimator knows, placed at ``present``
    (their indices among all K), and a class the estimator never saw gets probability 0
    (scikit-learn's ``test_calibration_less_classes``)."""

    def __init__(self, calibrator: Any, present: np.ndarray, n_classes: int) -> None:
        self.calibrator, self.present, self.n_classes_ = calibrator, present, n_classes

    @property
    def maps_(self) -> list[Any]:
        """The method's maps, as :attr:`CalibratedPair.calibrators` reads them."""
        return list(getattr(self.calibrator, "maps_", [self.calibrator]))

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        out = np.zeros((len(features), self.n_classes_))
        out[:, self.present] = _proba(self.calibrator, features)
        return out


def _pair(score: np.ndarray) -> np.ndarray:
    """One score column as two-column logits [0, f]: softmax's second column is σ(f)."""
    return np.column_stack([np.zeros_like(score), score]).astype(np.float64)


class CalibratedClassifier(ClassifierMixin, BaseEstimator):
    """A scikit-learn classifier and a calibkit method fitted on its scores, with the
    parameters and their meanings of scikit-learn's ``CalibratedClassifierCV``.

    * ``cv=None`` (default) is 5-fold cross-validation, as in scikit-learn; an int or a
      splitter as there. ``fit(X, y)`` clones ``estimator`` and cross-validates. With
      ``ensemble=True`` (``"auto"``, the default, unless the estimator is a
      ``FrozenEstimator``) each fold's clone is fitted on the other folds and the method on
      its held-out fold; ``predict_proba`` averages the folds' calibrated probabilities.
      With ``ensemble=False`` the method is fitted once on the out-of-fold scores of every
      row (``cross_val_predict``) and the estimator refitted on all of X.
    * An estimator that is already fitted is calibrated as it is with
      ``FrozenEstimator(est)`` (scikit-learn's way) or ``cv="prefit"``: ``fit(X, y)`` fits
      the method on its scores on the calibration data X (a frozen estimator with
      ``ensemble=True``: one map per fold, each fitted on its held-out rows, as there).

    ``method``: any calibkit logits method's spec (``"ts"``, ``"dir-odir"``), or
    scikit-learn's names with scikit-learn's meaning (:data:`SKLEARN_METHODS`: ``sigmoid``
    is one-vs-rest Platt scaling and ``isotonic`` one-vs-rest isotonic regression of each
    class's score, the rows normalised; on two classes the positive class's score alone).
    More folds than a class has rows is refused, as scikit-learn refuses it. The scores
    are ``decision_function``, or the log of ``predict_proba``
    where the estimator has none (``response`` forces one).

    ``sample_weight`` and other fit parameters go to the estimator's ``fit`` (with
    scikit-learn's metadata routing where it is enabled) and weight the calibration as
    scikit-learn's do: ``sigmoid``, ``isotonic`` and calibkit's weighted methods (``ts``,
    ``isotonic``: ``posthoc.Calibrator.weighted``) give each row its weight's share of the
    objective (2 counts a row twice, 0.5 half; never rows repeated, so a weight's size
    costs nothing); the other methods refuse weights that differ, in one line (equal weights
    are no weights). ``n_jobs``: folds fitted in parallel (joblib). ``estimator=None`` is
    scikit-learn's default, ``LinearSVC(random_state=0)``. ``calibrated_classifiers_``
    lists the fitted (estimator, calibrator) pairs as scikit-learn's attribute of that name
    does; ``predict_log_proba`` and ``decision_function`` (the calibrated log-probabilities;
    on two classes the log-odds of the second, shape (n,), as scikit-learn's binary
    classifiers) complete the classifier API. What a calibrator's checks warn
    (:class:`~calibkit.posthoc._anomalies.CalibrationWarning`) points at the caller's ``fit``
    line.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from calibkit.adapters.sklearn import CalibratedClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> model = CalibratedClassifier(LogisticRegression(max_iter=500), method="ts", cv=3)
    >>> model.fit(X / 16, y).predict_proba(X[:2] / 16).shape
    (2, 10)
    >>> len(model.calibrated_classifiers_)  # one (estimator, calibrator) pair a fold
    3
    """

    #: checked by scikit-learn's own parameter validation at ``fit``, with its messages
    _parameter_constraints: ClassVar[dict[str, list]] = {"n_jobs": [Integral, None]}

    def __init__(
        self,
        estimator: Any = None,
        method: str = "ts",
        response: str = "auto",
        cv: Any = None,
        ensemble: Any = "auto",
        n_jobs: int | None = None,
    ) -> None:
        self.estimator, self.method, self.response = estimator, method, response
        self.cv, self.ensemble, self.n_jobs = cv, ensemble, n_jobs

    def _estimator(self) -> Any:
        if self.estimator is not None:
            return self.estimator
        from sklearn.svm import LinearSVC

        return LinearSVC(random_state=0)

    def _response(self, est: Any) -> str:
        use = self.response
        if use not in ("auto", "decision_function", "predict_proba"):
            raise ValueError(
                f"response: expected auto, decision_function or predict_proba, got {use!r}"
            )
        if use == "auto":
            use = "decision_function" if hasattr(est, "decision_function") else "predict_proba"
        return use

    def _as_features(self, out: Any, use: str) -> np.ndarray:
        """A response's output as what the method maps: logits for calibkit's methods (the
        log of probabilities; a binary decision d as [0, d]), the raw scores (n, 1 or K) for
        scikit-learn's per-class ``sigmoid`` and ``isotonic`` (:class:`PerClass`)."""
        out = np.asarray(out, dtype=np.float64)
        if self.method in ("sigmoid", "isotonic"):
            return out[:, None] if out.ndim == 1 else out
        if use == "predict_proba":
            return np.log(np.clip(out, 1e-300, None))
        return np.column_stack([np.zeros_like(out), out]) if out.ndim == 1 else out

    def _scores(self, est: Any, X: Any) -> np.ndarray:
        use = self._response(est)
        return self._as_features(getattr(est, use)(X), use)

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any):
        """Fit the estimator (unless frozen or prefit) and the method; see the class."""
        from sklearn.utils import column_or_1d, indexable
        from sklearn.utils.multiclass import check_classification_targets

        self._validate_params()
        check_classification_targets(y)
        X, y = indexable(X, y)
        y = column_or_1d(y, warn=True)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            self._fit(X, y, sample_weight, fit_params)
        for w in said:  # at the caller's line, not calibkit's
            warnings.warn(w.message, w.category, stacklevel=2)
        first = self.pairs_[0][0]
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(first, name):
                setattr(self, name, getattr(first, name))
        return self

    def _fit(self, X: Any, y: np.ndarray, sample_weight: Any, fit_params: dict) -> None:
        from sklearn.frozen import FrozenEstimator

        self.classes_ = np.unique(y)
        self.method_ = self._check_method(len(self.classes_))
        weights = self._check_weights(sample_weight, X)
        estimator = self._estimator()
        routed = self._routed(estimator, weights, fit_params)
        # a frozen estimator is calibrated once on all of X, unless ensemble=True asks for
        # scikit-learn's ensemble of folds (each fold's map fitted on its held-out rows)
        if self.cv == "prefit" or (
            isinstance(estimator, FrozenEstimator) and self.ensemble is not True
        ):
            if self.cv == "prefit":
                check_is_fitted(estimator)
            prefit = estimator if self.cv == "prefit" else estimator.estimator
            known = np.isin(y, prefit.classes_)
            if not known.all():
                raise ValueError(
                    f"y: label {y[~known][0].item()!r} is not one of the estimator's classes"
                )
            self.classes_ = np.asarray(prefit.classes_)
            self.pairs_ = [(estimator, self._calibrate(self._scores(estimator, X), y, weights))]
            return
        self._fit_cv(X, y, estimator, routed, weights)

    def _check_method(self, n_classes: int) -> str:
        """The calibkit spec of ``method`` (scikit-learn's names mapped)."""
        spec = SKLEARN_METHODS.get(self.method, self.method)
        if posthoc.REGISTRY.factory(posthoc.REGISTRY.check(spec).name).level != "logits":
            raise ValueError(f"method: {self.method!r} does not calibrate logits")
        return spec

    def _check_weights(self, sample_weight: Any, X: Any) -> np.ndarray | None:
        """``sample_weight`` checked (scikit-learn's rules); used as weights in the fit, never
        as repeated rows (a weight of 1e9 costs what a weight of 1 does)."""
        if sample_weight is None:
            return None
        from sklearn.utils.validation import _check_sample_weight

        return _check_sample_weight(sample_weight, X)

    def _routed(self, estimator: Any, weights: Any, fit_params: dict) -> Any:
        """The fit parameters of the estimator and the splitter (metadata routing)."""
        from sklearn.utils.metadata_routing import _routing_enabled, process_routing

        if _routing_enabled():
            extra = {} if weights is None else {"sample_weight": weights}
            return process_routing(self, "fit", **extra, **fit_params)
        from sklearn.utils import Bunch

        takes = "sample_weight" in inspect.signature(estimator.fit).parameters
        if weights is not None and not takes:  # as scikit-learn warns
            warnings.warn(
                f"sample_weight: {type(estimator).__name__}.fit takes no sample_weight, so "
                "the weights are used by the calibration alone",
                UserWarning,
                stacklevel=3,
            )
        fit = dict(fit_params) | (
            {"sample_weight": weights} if takes and weights is not None else {}
        )
        return Bunch(estimator=Bunch(fit=fit), splitter=Bunch(split={}))

    def get_metadata_routing(self) -> Any:
        """Where fit's metadata goes: the estimator's ``fit`` and the splitter's ``split``."""
        from sklearn.model_selection import check_cv
        from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping

        return (
            MetadataRouter(owner=self.__class__.__name__)
            .add_self_request(self)
            .add(
                estimator=self._estimator(),
                method_mapping=MethodMapping().add(caller="fit", callee="fit"),
            )
            .add(
                splitter=check_cv(None if self.cv == "prefit" else self.cv),
                method_mapping=MethodMapping().add(caller="fit", callee="split"),
            )
        )

    def _calibrate(
        self, scores: np.ndarray, y: np.ndarray, weights: Any = None, classes: Any = None
    ) -> Any:
        """The method fitted on ``scores`` (:meth:`_as_features`) of labels ``y``, each row
        weighted by ``weights`` where given (scikit-learn's ``sample_weight``). ``classes``:
        those the scores are of (default all): a row of another class is a negative of every
        one-vs-rest map, as in scikit-learn, and is left out of a calibkit method's fit (its
        classes have no score for it)."""
        classes = self.classes_ if classes is None else np.asarray(classes)
        labels = np.searchsorted(classes, y).clip(max=len(classes) - 1)
        known = classes[labels] == y
        if not known.all() and self.method in ("sigmoid", "isotonic"):
            labels = np.where(known, labels, -1)
        elif not known.all():
            scores, labels = scores[known], labels[known]
            weights = None if weights is None else weights[known]
        if weights is not None and len(np.unique(labels[weights > 0])) < 2:
            raise ValueError(
                "sample_weight: the rows with a weight hold one class; calibrating needs "
                "at least two classes"
            )
        if len(np.unique(labels)) < 2:  # a small fold: scikit-learn copes, and so do we
            warnings.warn(
                f"the calibration rows of a fold hold one class "
                f"({classes[labels[:1]].tolist()[0]!r}); "
                "its scores are used uncalibrated (use fewer folds)",
                posthoc.CalibrationWarning,
                stacklevel=2,
            )
            raw_probs = self.method in ("sigmoid", "isotonic") and (
                self._response(self._estimator()) == "predict_proba"
            )
            return Uncalibrated(len(classes), probabilities=raw_probs)
        if self.method in ("sigmoid", "isotonic"):
            return PerClass(self.method_).fit(scores, labels, len(classes), weights)
        # the scores are logits built by _as_features, whatever their values look like
        return posthoc.create(self.method_).fit(scores, labels, sample_weight=weights, probs=False)

    def _fit_cv(self, X: Any, y: np.ndarray, estimator: Any, routed: Any, weights: Any) -> None:
        from joblib import Parallel, delayed
        from sklearn.base import clone
        from sklearn.model_selection import LeaveOneOut, check_cv, cross_val_predict

        if isinstance(self.cv, LeaveOneOut):  # scikit-learn's rule: no split holds every class
            raise ValueError(
                "cv: LeaveOneOut cross-validation does not allow all classes to be present in "
                "test splits; use a splitter whose test splits hold every class"
            )
        folds = check_cv(self.cv, y, classifier=True)
        # scikit-learn's rule: only a number of folds the user gave (cv=None is not checked)
        n_folds = self.cv if isinstance(self.cv, int) else getattr(self.cv, "n_splits", 0)
        if np.unique(y, return_counts=True)[1].min() < n_folds:
            raise ValueError(
                f"cv: Requesting {n_folds}-fold cross-validation, but at least one class has "
                f"fewer than {n_folds} rows; use fewer folds (scikit-learn's rule)"
            )
        fit = routed.estimator.fit
        if self.ensemble is False:
            use = self._response(estimator)
            out = cross_val_predict(
                clone(estimator), X, y, cv=folds, method=use, n_jobs=self.n_jobs, params=fit
            )
            calibrator = self._calibrate(self._as_features(out, use), y, weights)
            self.pairs_ = [(clone(estimator).fit(X, y, **fit), calibrator)]
            return
        if self.ensemble not in (True, "auto"):
            raise ValueError(f"ensemble: expected True, False or 'auto', got {self.ensemble!r}")
        splits = list(folds.split(X, y, **routed.splitter.split))
        self.pairs_ = Parallel(n_jobs=self.n_jobs)(
            delayed(self._fold)(i, clone(estimator), X, y, train, held, fit, weights)
            for i, (train, held) in enumerate(splits)
        )

    def _fold(self, i, est, X, y, train, held, fit, weights):
        """One fold: the clone fitted on ``train``, the method on its scores on ``held``."""
        from sklearn.utils import _safe_indexing

        params = {k: _safe_indexing(v, train) if _per_sample(v, y) else v for k, v in fit.items()}
        est.fit(_safe_indexing(X, train), y[train], **params)
        held_X = _safe_indexing(X, held)
        held_w = None if weights is None else weights[held]
        scores = self._scores(est, held_X)
        if len(est.classes_) == len(self.classes_):
            return est, self._calibrate(scores, y[held], held_w)
        # training rows that lack a class: scikit-learn's rule, that class gets p = 0
        fitted = self._calibrate(scores, y[held], held_w, classes=est.classes_)
        present = np.searchsorted(self.classes_, est.classes_)
        return est, Embedded(fitted, present, len(self.classes_))

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
        return [CalibratedPair(est, cal, self._scores) for est, cal in self.pairs_]

    def predict_proba(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "pairs_")
        probs = [_proba(cal, self._scores(est, X)) for est, cal in self.pairs_]
        return np.mean(probs, axis=0)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """The log of :meth:`predict_proba` (an exact zero gives -inf, as scikit-learn's)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """Calibrated scores: the log-probabilities, (n, K), argmax as :meth:`predict`; on
        two classes the log-odds of the second, (n,), as scikit-learn's binary classifiers
        give (so ``roc_auc`` and ``average_precision`` scorers take it). Always finite: a
        probability is floored at 1e-300 before its log, so the 0 and 1 of an isotonic or
        binning map give ±690.8, not ±inf, which scikit-learn's scorers refuse."""
        logp = np.log(np.clip(self.predict_proba(X), 1e-300, None))
        return logp[:, 1] - logp[:, 0] if logp.shape[1] == 2 else logp

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)  # NotFittedError before classes_ is read
        return self.classes_[proba.argmax(1)]

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import get_tags

        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = get_tags(self._estimator()).input_tags.sparse
        return tags


def _proba(calibrator: Any, features: np.ndarray) -> np.ndarray:
    """Calibrated probabilities (n, K) from a calibkit method or a :class:`PerClass`."""
    if isinstance(calibrator, PerClass | Uncalibrated | Embedded):
        return calibrator.predict_proba(features)
    return calibrator.predict_proba(torch.as_tensor(features)).numpy()


def _per_sample(value: Any, y: np.ndarray) -> bool:
    """Whether a fit parameter holds one value per sample (indexed by the folds)."""
    return hasattr(value, "__len__") and not isinstance(value, str) and len(value) == len(y)


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
    (:data:`METRIC_NAMES`: ``"ECE"``, ``"brier_score"``, ``"log_loss"``, ...).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from sklearn.model_selection import cross_val_score
    >>> from calibkit.adapters.sklearn import scorer
    >>> X, y = load_digits(return_X_y=True)
    >>> forest = RandomForestClassifier(n_estimators=50, random_state=0)
    >>> scores = cross_val_score(forest, X, y, cv=3, scoring=scorer("ece"))
    >>> scorer("ece").__name__, [round(float(s), 3) for s in scores]  # negated: higher is better
    ('neg_ece', [-0.229, -0.229, -0.22])
    """
    metric = METRIC_NAMES.get(metric.lower().replace("-", "_"), metric.lower())
    fn = getattr(metrics, metric, None)
    if fn is None or not callable(fn):
        raise ValueError(f"metric: calibkit.metrics has no function {metric!r}")
    sign = -1.0 if direction(metric) < 0 else 1.0

    def score(estimator: Any, X: Any, y: Any) -> float:
        proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
        labels = np.searchsorted(np.asarray(estimator.classes_), np.asarray(y))
        return sign * fn(proba, labels, probs=True, **options)

    score.__name__ = f"{'neg_' if sign < 0 else ''}{metric}"
    return score


for _name in posthoc.names("logits"):
    estimator(_name)
