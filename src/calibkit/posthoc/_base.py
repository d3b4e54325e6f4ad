"""The contract of every calibration method (scikit-learn's estimator contract, on tensors,
as ``nn.Module``), at two levels: :class:`Calibrator` on logits, and
:class:`~calibkit.posthoc._model_level.ModelCalibrator` on a network and its inputs (Neural
Clamping, MaC-Cal stage 2). Both:

* take keyword-only settings in ``__init__``, stored as given and checked by ``fit``
  (and by the registry, through the class's ``check_settings``, before anything runs);
* ``fit(...) -> self``; learned state ends in ``_`` and exists only after ``fit`` (before,
  reading it raises :class:`NotFittedError`);
* ``fit_on(evidence, rows)`` / ``apply_on(evidence)``: the harness's and the CLI's calls,
  the same for every method (:class:`Evidence`: a run's logits, labels, model and inputs);

A logits calibrator:

* ``fit(logits, labels) -> self`` on a calibration split;
* ``forward(logits)`` returns calibrated logits (log-probabilities for binning and isotonic
  maps), ``predict_proba(logits)`` probabilities; both refuse another number of classes;
* ``fit_report_`` says what the fit did (objective before/after, iterations, converged);
* ``save(path)`` writes one safetensors file whose JSON metadata holds the class, settings,
  non-tensor results and a SHA-256 of everything; ``load(path)`` rebuilds it from the
  registry only, so a file can never run code, and a tampered file is refused.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from .._docs import Described, documented, documented_settings
from .._registry import SPEC_PARAMETERS
from .._settings import check_declared
from .._threads import for_work, size_of
from ..metrics.internal import prepare_scores
from ._anomalies import check_fit
from ._checks import check_fit_data, check_sample_weight, next_up
from ._files import (
    FORMAT_VERSION,
    first_line,
    loaded_problem,
    write_checked,
)


class NotFittedError(ValueError, AttributeError):
    """A calibrator was used before ``fit``.

    Examples
    --------
    >>> from calibkit import posthoc
    >>> posthoc.TemperatureScaling().predict_proba([[2.0, 0.0]])
    Traceback (most recent call last):
    ...
    calibkit.posthoc._base.NotFittedError: this TemperatureScaling is not fitted yet; call fit first
    """


class FitDivergedError(ValueError):
    """A fit ran away (non-finite, an insane parameter, a rising objective); one line."""


#: the parameters of the calibration API, described once for its docstrings
POSTHOC_PARAMETERS: dict[str, Described] = {
    "logits": (
        "array-like or Tensor, shape (N, K)",
        "Logits of N samples over K classes: NumPy, or PyTorch on any device (the result "
        "is computed there).",
    ),
    "labels": ("array-like or Tensor of int, shape (N,)", "The true class of each row."),
    "sample_weight": (
        "array-like or Tensor of float, shape (N,), or None, default None",
        "Each row's weight in the fit's objective (scikit-learn's meaning: 2 counts a row "
        "twice, 0.5 half); finite and non-negative. Used by the methods whose fit weights "
        "(``weighted``: ts, isotonic); the others refuse weights that differ.",
    ),
    "probs": (
        "bool or None, default None",
        "False: ``logits`` are logits whatever their values (logits whose rows happen to "
        "lie in [0, 1] and sum to 1, such as TorchUncertainty's test data); None: such rows "
        "are refused in one line as probabilities passed by mistake, and so are they where "
        "this calibrator is applied unless it was fitted with False. A calibrator maps "
        "logits: probabilities (True) are refused; pass their logarithm.",
    ),
    "path": ("str or Path", "The calibrator's file (safetensors with JSON metadata)."),
    "model": (
        "nn.Module or None, default None",
        "The network a model-level method calibrates (Neural Clamping, MaC-Cal); "
        "not copied, never changed.",
    ),
    "inputs": ("Tensor, shape (N, *input shape)", "The calibration split's inputs."),
    "data": ("keyword arguments", "Properties of the data a method may use (``input_range``)."),
    **SPEC_PARAMETERS,
    "level": ("str or None, default None", "Only 'logits' or only 'model' methods; None: all."),
}


@dataclass
class FitReport:
    """What a fit did: the objective on the fit split before and after, and how it got there.

    Examples
    --------
    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> report = posthoc.TemperatureScaling().fit(d["logits_val"], d["labels_val"]).fit_report_
    >>> report.objective, round(report.before, 4), round(report.after, 4), report.converged
    ('nll', 0.1043, 0.0946, True)
    >>> report.details, report.anomalies  # what the fit found, what the checks flagged
    ({'temperature': 1.488802}, [])
    """

    objective: str
    before: float
    after: float
    iterations: int = 0
    converged: bool = True
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    #: What the checks of :mod:`calibkit.posthoc._anomalies` flagged: {kind, detail, split}.
    anomalies: list[dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        extra = "".join(f", {k} = {_short(v)}" for k, v in self.details.items())
        splits: dict[str, list[str]] = {}
        for a in self.anomalies:
            splits.setdefault(a["split"], []).append(a["kind"])
        flagged = "".join(
            f"; flagged on the {split} split: {', '.join(kinds)}" for split, kinds in splits.items()
        )
        return (
            f"{self.objective}: {self.before:.6g} -> {self.after:.6g} in {self.iterations} "
            f"iterations ({state}, {duration(self.seconds)}){extra}{flagged}"
        )


def duration(seconds: float) -> str:
    """A time as people read it: "12.3 ms", "4.51 s", "6 min 44 s", "1 h 02 min"."""
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _short(value: Any) -> str:
    """A fit detail for a line of text: floats to 6 significant digits, lists item by item."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


class Method(nn.Module):
    """What every calibration method shares, on logits or on a model (see the module
    docstring): settings, their check, the fit report, files, and the harness's two calls.

    ``level`` says what ``fit`` takes: ``"logits"`` (:class:`Calibrator`) or ``"model"``
    (:class:`ModelCalibrator`). ``fit_split`` names the split of a run it learns from.

    Examples
    --------
    >>> from calibkit import posthoc
    >>> ts = posthoc.create("ts:t_max=50")
    >>> ts.level, ts.fit_split, ts.preserves_argmax
    ('logits', 'val', True)
    >>> ts.settings()  # every setting, defaults included: what save() writes
    {'t_min': 0.01, 't_max': 50, 'tol': 1e-12, 'max_iter': 100}
    """

    name: ClassVar[str] = ""
    level: ClassVar[str] = "logits"
    fit_split: ClassVar[str] = "val"
    #: True when ``forward`` never changes the predicted class.
    preserves_argmax: ClassVar[bool] = False
    #: One line on what the method is (``calibkit methods``); where empty, the first
    #: sentence of the class docstring.
    about: ClassVar[str] = ""
    #: Kinds of :mod:`~calibkit.posthoc._anomalies` that are the method's nature, not a
    #: failure: the checks do not flag them.
    expected_anomalies: ClassVar[frozenset[str]] = frozenset()
    #: True when ``fit`` picks settings by cross-validation: not in compare's fast default.
    cross_validated: ClassVar[bool] = False
    #: Settings that tune how ``fit`` runs, not what the method is: a verdict on the
    #: method prefers the run that changes no other setting (the full method, no ablation).
    incidental_settings: ClassVar[frozenset[str]] = frozenset({"seed"})

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.endswith("_") and not name.startswith("_") and not self.fitted:
                raise NotFittedError(
                    f"this {type(self).__name__} is not fitted yet ({name} is learned by fit)"
                ) from None
            raise

    @property
    def fitted(self) -> bool:
        """Whether ``fit`` (or ``load``) has run."""
        return "fit_report_" in self.__dict__

    def __sklearn_is_fitted__(self) -> bool:
        """What scikit-learn's ``check_is_fitted`` asks: :attr:`fitted`."""
        return self.fitted

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags, which its ``check_is_fitted`` reads (scikit-learn ≥ 1.6): an
        object that must be fitted, of no estimator type (a method is not an estimator;
        :func:`calibkit.adapters.sklearn.estimator` makes one), so that the maps in a
        ``CalibratedClassifier``'s ``calibrated_classifiers_`` answer as scikit-learn's
        do."""
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=True))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each method's docstring gets the Parameters section of its declared settings."""
        super().__init_subclass__(**kwargs)
        if cls.__doc__:  # its own docstring (one it inherits would be documented twice)
            documented_settings(cls)

    @classmethod
    def check_settings(cls, **settings: Any) -> dict[str, Any]:
        """Every setting (its declared default, or the value in ``settings``) checked against
        its declaration (:mod:`calibkit._settings`: type, bounds or choices), then by
        :meth:`_check` (what ties settings together, normalised forms); one-line
        ``ValueError`` naming the setting. Used by ``fit`` and by the registry, so a spec is
        checked before anything runs."""
        return cls._check(check_declared(cls, settings, who=cls.__name__))

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        """``s`` (every setting, each checked against its declaration) checked where settings
        depend on each other, and normalised; override per method."""
        return s

    #: learned tensors in which NaN is a value (an empty bin), not damage
    nan_means_empty: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def n_parameters(cls, k: int) -> int | None:
        """Parameters of the method's map for K classes where it has a count that grows with
        K (the affine maps: compare's default set leaves out a map with more than a tenth of
        the calibration rows); None for the others (a temperature, a binning)."""
        return None

    def settings(self) -> dict[str, Any]:
        """The keyword-only settings of ``__init__`` and their values, as given."""
        sig = inspect.signature(type(self).__init__)
        return {
            p.name: getattr(self, p.name)
            for p in sig.parameters.values()
            if p.kind is p.KEYWORD_ONLY
        }

    def checked(self) -> dict[str, Any]:
        """:meth:`check_settings` of this object's settings, computed once: kept until a
        setting is replaced (by identity), so a fit and its helpers read one checked copy.
        A method :func:`~calibkit.posthoc.create` built from a checked spec starts with the
        registry's result (:meth:`trust_settings`)."""
        raw = self.settings()
        memo = self.__dict__.get("_checked")
        if memo is None or any(raw[k] is not v for k, v in memo[0].items()):
            memo = (raw, type(self).check_settings(**raw))
            self.__dict__["_checked"] = memo
        return memo[1]

    def trust_settings(self, settings: dict[str, Any]) -> None:
        """Take ``settings``, what :meth:`check_settings` returned for this object's
        settings where a registry checked its spec, as :meth:`checked`'s result."""
        self.__dict__["_checked"] = (self.settings(), settings)

    def learned(self) -> dict[str, Any]:
        """Non-tensor learned values (chosen regularisation strengths, ...)."""
        return {}

    def _restore(self, learned: dict[str, Any]) -> None:
        """Set non-tensor learned values from :meth:`learned` output."""

    def _load(self, tensors: dict[str, Tensor], learned: dict[str, Any]) -> None:
        """Set the learned state read from a file: the tensors of :meth:`state_tensors` and
        the values of :meth:`learned`."""
        for k, v in tensors.items():
            setattr(self, k, v)
        self._restore(learned)

    def stored_values(self) -> dict[str, float]:
        """Fitted scalars a bench run stores beside the metrics, by name: the temperature
        of a method that fits one (TS, its variants, Neural Clamping, scaling-binning)."""
        t = self.__dict__.get("temperature_", self._buffers.get("temperature_"))
        return {} if t is None else {"temperature": float(t)}

    def invariant_problem(self) -> str | None:
        """What breaks an invariant that this method's own fit guarantees (a temperature
        within the fit's bounds, a monotone map, sorted edges, probabilities in [0, 1]), or
        None. A loaded file must keep them: its checksum has no key, so a forged value that
        is finite and of the right shape is caught here (posthoc._files.loaded_problem)."""
        return None

    def state_tensors(self) -> dict[str, Tensor]:
        """Learned tensors by name (names end in ``_``)."""
        return {
            k: v for k, v in vars(self).items() if k.endswith("_") and isinstance(v, Tensor)
        } | {k: v for k, v in self._buffers.items() if k.endswith("_") and v is not None}

    def _require_fitted(self) -> None:
        if not self.fitted:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    # ------------------------------------------------------------------ torch's own ways

    def get_extra_state(self) -> dict[str, Any]:
        """What ``fit`` learned, in ``state_dict()``: so ``torch.save(module.state_dict())``
        of a module holding a calibrator (a :class:`CalibratedModel`) keeps the calibration,
        and ``load_state_dict`` into one built with an unfitted calibrator of the same
        method restores it. Empty before ``fit``. Plain types and tensors only, so
        ``torch.load(..., weights_only=True)`` reads it."""
        if not self.fitted:
            return {}
        return {
            "method": self.name,
            "settings": self.settings(),
            "tensors": dict(self.state_tensors()),
            "learned": self.learned(),
            "n_classes": getattr(self, "n_classes_", None),
            "fit_report": asdict(self.fit_report_),
        }

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_extra_state` saved, all or nothing: the method must be the
        same and the restored state must pass the checks a loaded file passes; a refused
        state (one-line ``ValueError``) leaves the calibrator as it was. An empty state (an
        unfitted calibrator's) leaves it unfitted."""
        if not isinstance(state, dict):
            raise ValueError(
                f"the {self.name} state: expected a dict (get_extra_state's), got "
                f"{type(state).__name__}"
            )
        before, buffers = dict(self.__dict__), dict(self._buffers)
        try:
            self._unfit()
            if state:
                self._restore_state(state)
        except Exception as err:
            self.__dict__.clear()
            self.__dict__.update(before)
            self._buffers.clear()
            self._buffers.update(buffers)
            if isinstance(err, ValueError) and str(err).startswith(f"the {self.name} state"):
                raise
            raise ValueError(
                f"the {self.name} state does not hold: {first_line(err)} (nothing was changed)"
            ) from None

    def _unfit(self) -> None:
        """Forget what ``fit`` learned: the learned tensors, values and the fit report."""
        for k in list(self.state_tensors()):
            if k in self._buffers:
                del self._buffers[k]
            else:
                self.__dict__.pop(k, None)
        for k in ("fit_report_", "n_classes_"):
            self.__dict__.pop(k, None)

    def _restore_state(self, state: dict[str, Any]) -> None:
        if state.get("method") != self.name:
            raise ValueError(
                f"the {self.name} state is of calibrator {state.get('method')!r}, not {self.name!r}"
            )
        settings = type(self).check_settings(**state["settings"])
        for k, v in settings.items():
            setattr(self, k, v)
        if state["n_classes"] is not None:
            self.n_classes_ = state["n_classes"]
        self._load(state["tensors"], state["learned"])
        self.fit_report_ = FitReport(**state["fit_report"])
        problem = loaded_problem(self, state["tensors"])
        if problem:
            raise ValueError(f"the {self.name} state does not hold: {problem}")

    def extra_repr(self) -> str:
        """Settings, then what ``fit`` learned: small tensors by value, others by shape."""
        parts = [f"{k}={v!r}" for k, v in self.settings().items()]
        if not self.fitted:
            return ", ".join([*parts, "not fitted"])
        for k, v in self.state_tensors().items():
            if v.numel() <= 4:
                shown = ", ".join(f"{x:.4g}" for x in v.detach().flatten().tolist())
                parts.append(f"{k}={shown}")
            else:
                parts.append(f"{k}: {tuple(v.shape)}")
        parts += [f"{k}={v!r}" for k, v in self.learned().items() if v is not None]
        return ", ".join(parts)

    # ------------------------------------------------------------------ the harness's calls

    def fit_on(self, evidence: Evidence, idx: Tensor | None = None, progress: Any = None) -> Method:
        """Fit on ``evidence``'s ``fit_split`` (rows ``idx``, default all); ``progress(step,
        steps, record)`` is called after each epoch by methods that train for epochs."""
        raise NotImplementedError

    def history(self) -> list[dict[str, Any]]:
        """The fit's per-epoch records (empty for methods without epochs)."""
        return []

    def apply_on(self, evidence: Evidence) -> dict[str, Tensor]:
        """Calibrated logits (or log-probabilities) of every split of ``evidence``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ files

    @documented(POSTHOC_PARAMETERS, "Path: the file written.")
    def save(self, path: str | Path) -> Path:
        """Write the fitted method to ``path`` (safetensors with JSON metadata: the method,
        its settings, non-tensor results, the fit report), atomically. A model-level
        method's file holds what it learned, not the network."""
        self._require_fitted()
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.state_tensors().items()}
        meta = {
            "format": "calibkit-calibrator",
            "version": FORMAT_VERSION,
            "method": self.name,
            "level": self.level,
            "settings": self.settings(),
            "learned": self.learned(),
            "n_classes": getattr(self, "n_classes_", None),
            "fit_report": asdict(self.fit_report_),
        }
        return write_checked(path, tensors, meta)


@dataclass
class Evidence:
    """What a run offers a calibration method, the same for every method: logits and labels
    by split; for model-level methods also the model, the inputs of a split (``inputs(split,
    rows)``, on the model's device), the logits of any module on a split (``predict(module,
    split)``), the feasible input range and the training augmentation, or None.

    Examples
    --------
    A calibrator learns from its ``fit_split`` of a run's evidence, whichever method it is:

    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> run = posthoc.Evidence(
    ...     logits={"val": d["logits_val"], "test": d["logits_test"]},
    ...     labels={"val": d["labels_val"], "test": d["labels_test"]},
    ... )
    >>> round(float(posthoc.create("ts").fit_on(run).temperature_), 4)
    1.4888
    """

    logits: dict[str, Tensor]
    labels: dict[str, Tensor | None]
    model: nn.Module | None = None
    inputs: Callable[[str, Tensor | None], Tensor] | None = None
    predict: Callable[[nn.Module, str], Tensor] | None = None
    input_range: tuple[Any, Any] | None = None
    #: the run's training augmentation, ``(inputs, generator) -> inputs``, or None
    augment: Callable[[Tensor, Any], Tensor] | None = None


class Calibrator(Method):
    """Base class of every post-hoc calibrator on logits; see the module docstring.

    Examples
    --------
    Every calibrator on logits answers the same calls: ``fit``, calling it (calibrated
    logits or log-probabilities, as ``output`` says), ``predict_proba``, ``save``:

    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> for name in ("ts", "platt", "dir-l2:lambdas=[1],folds=2"):
    ...     cal = posthoc.create(name).fit(d["logits_val"], d["labels_val"])
    ...     p = cal.predict_proba(d["logits_test"])
    ...     print(f"{cal.name:7} {cal.output:17} {p.shape} {p.sum(1).round(6).min()}")
    ts      logits            (497, 10) 1.0
    platt   log-probabilities (497, 10) 1.0
    dir-l2  logits            (497, 10) 1.0
    """

    #: What ``forward`` returns: "logits" or "log-probabilities".
    output: ClassVar[str] = "logits"
    #: Whether ``_fit`` takes ``w``, the sample weights (``fit``'s ``sample_weight``).
    weighted: ClassVar[bool] = False

    # ------------------------------------------------------------------ contract

    @documented(
        POSTHOC_PARAMETERS,
        "Calibrator: this calibrator, fitted (``fit_report_`` says what the fit did).",
    )
    def fit(
        self, logits: Any, labels: Any, sample_weight: Any = None, *, probs: bool | None = None
    ) -> Calibrator:
        """Fit on a calibration split: ``logits`` (N, K), integer ``labels`` (N,) and,
        optionally, ``sample_weight`` (N,) non-negative weights, each row's share of the fit's
        objective (as scikit-learn's ``sample_weight``: weight 2 counts a row as two copies
        of it, 0.5 as half). Methods whose fit can weight (``weighted``) use them; the others
        refuse weights that are not all equal, in one line."""
        self.checked()
        with for_work(size_of(logits)):  # the input checks too: they are parallel ops
            z, y = check_fit_data(logits, labels, probs)
            w = (
                None
                if sample_weight is None
                else check_sample_weight(sample_weight, len(y), z.device)
            )
            if w is not None and not self.weighted:
                if bool((w != w[0]).any()):
                    raise ValueError(
                        f"sample_weight: {self.name} cannot weight its fit; methods that can: "
                        f"{', '.join(weighted_methods())}"
                    )
                w = None  # equal weights: the same fit
            start = time.perf_counter()
            self.n_classes_ = z.shape[1]
            report = self._fit(z, y) if w is None else self._fit(z, y, w=w)
            report.seconds = time.perf_counter() - start
            broken = self.invariant_problem()
            if broken:  # the same check as at load: the fit keeps what a file must hold
                raise FitDivergedError(f"{self.name}: the fit broke its own invariant: {broken}")
            self.fit_report_ = report
            self._logits_stated = probs is False  # its applications need not look again
            check_fit(self, z, self.calibrated(z), y, "calibration")  # warns at the caller
        return self

    def fit_on(
        self, evidence: Evidence, idx: Tensor | None = None, progress: Any = None
    ) -> Calibrator:
        z, y = evidence.logits[self.fit_split], evidence.labels[self.fit_split]
        return self.fit(z if idx is None else z[idx], y if idx is None else y[idx])

    def apply_on(self, evidence: Evidence) -> dict[str, Tensor]:
        return {k: self(z) for k, z in evidence.logits.items()}

    @documented(
        POSTHOC_PARAMETERS,
        "Tensor: (N, K) calibrated logits (or log-probabilities, see ``output``).",
    )
    def forward(self, logits: Tensor) -> Tensor:
        """Calibrated logits (or log-probabilities) for ``logits`` (N, K), in their dtype
        (float64 for other dtypes). Computed in float64; where rounding to float32 ties the
        predicted class with another, a calibrator that keeps the argmax raises the
        predicted class's entry by one float32 step, so that it still wins."""
        with for_work(size_of(logits)):
            return self.calibrated(self._check_apply(logits))

    def calibrated(self, z: Tensor) -> Tensor:
        """:meth:`forward` without the input checks: the traceable graph that ONNX export
        writes (no data-dependent Python control flow)."""
        out = self._transform(z.double())
        if z.dtype != torch.float32:
            return out
        low = out.float()
        if not self.preserves_argmax:
            return low
        pred = z.argmax(1, keepdim=True)
        lost = low.argmax(1, keepdim=True) != pred
        bumped = torch.where(lost, next_up(low.amax(1, keepdim=True)), low.gather(1, pred))
        return low.scatter(1, pred, bumped)

    @documented(
        POSTHOC_PARAMETERS, "Tensor or ndarray: (N, K) float64 probabilities, rows summing to one."
    )
    def predict_proba(self, logits: Any) -> Tensor | np.ndarray:
        """Calibrated float64 probabilities (N, K); rows sum to one. A NumPy array for a
        NumPy input (as scikit-learn's ``predict_proba``), a tensor otherwise."""
        p = torch.softmax(self.forward(logits).double(), 1)
        return p.cpu().numpy() if isinstance(logits, np.ndarray) else p

    # ------------------------------------------------------------------ to override

    def _fit(self, z: Tensor, y: Tensor) -> FitReport:
        raise NotImplementedError

    def _transform(self, z: Tensor) -> Tensor:
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers

    def _check_apply(self, logits: Any) -> Tensor:
        self._require_fitted()
        stated = getattr(self, "_logits_stated", False)  # fitted with probs=False
        z = prepare_scores(
            logits, probs=False if stated else None, name="logits", takes_probs=False
        )  # finite, 2-D; tensors not copied
        if z.ndim != 2 or z.shape[1] != self.n_classes_:
            got = z.shape[1] if z.ndim == 2 else f"shape {tuple(z.shape)}"
            raise ValueError(
                f"logits have {got} classes but this {type(self).__name__} was fitted on "
                f"{self.n_classes_}; apply it to logits of the same model"
            )
        return z


def weighted_methods() -> list[str]:
    """The names of the calibrators whose fit weights its rows (``weighted``)."""
    names, todo = set(), list(Calibrator.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.weighted and isinstance(getattr(cls, "name", None), str):
            names.add(cls.name)
    return sorted(names)
