"""torchmetrics adapters: ``Metric`` subclasses backed by calibkit's statistics.

The binned metrics (:class:`ECE`, :class:`MCE`, :class:`RMSCalibrationError`) keep one
state, the equal-width top-label bin sums (3 × bins: count, Σ confidence, Σ correct) in
float64, sum-reduced across processes by torchmetrics' own ``dist_reduce_fx``: O(bins)
memory and communication. The rank-based metrics (:class:`AdaptiveECE`, :class:`AURC`,
:class:`RefinementAUROC`) need every sample's place in the order of confidences, so they keep
two per-sample states (confidence, float64; correctness), concatenated across processes
(O(N), as torchmetrics' own AUROC). ``compute`` derives each metric exactly as
:mod:`calibkit.metrics` does, so a metric over any split of the data into batches and
processes equals the one-shot function (to float64 summation order). Inputs are logits (or
probabilities with ``probs=True``) and integer labels, checked as calibkit checks them.

>>> import torch
>>> from calibkit.adapters.torchmetrics import ECE
>>> metric = ECE(n_bins=15)
>>> metric.update(torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0]))
>>> round(float(metric.compute()), 4)
0.4251
"""

from __future__ import annotations

from typing import Annotated, Any

import torch
from torch import Tensor

try:
    from torchmetrics import Metric
    from torchmetrics.utilities import dim_zero_cat
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "calibkit.adapters.torchmetrics needs torchmetrics: pip install 'calibkit[torchmetrics]'"
    ) from None

from .._checks import check_flag, check_positive_int
from .._settings import Bounds, Setting, checks_declared
from ..metrics import BinScheme, prepare, trusted
from ..metrics.internal import (
    NORMS,
    AdaptiveNorm,
    AeceConvention,
    Binning,
    Debias,
    MetricBins,
    Probs,
    Runs,
    aece_from_runs,
    aurc_from_runs,
    auroc_from_runs,
    check_adaptive,
    classwise_ece_from_sums,
    classwise_sums,
    ece_from_sums,
    mce_from_sums,
    peer_aece,
    reduce_bins,
    rms_from_sums,
    run_sums,
    smooth_ece_batch,
    topbin_sums,
    undefined_auroc_message,
)

__all__ = [
    "AURC",
    "ECE",
    "MCE",
    "AdaptiveECE",
    "BinaryCalibrationError",
    "CalibrationError",
    "ClasswiseECE",
    "MulticlassCalibrationError",
    "RMSCalibrationError",
    "RefinementAUROC",
    "SmoothECE",
]


class _BinnedCalibration(Metric):
    """The shared state and update; subclasses say what ``compute`` derives."""

    full_state_update = False
    is_differentiable = False
    higher_is_better = False

    @checks_declared
    def __init__(
        self,
        n_bins: MetricBins = 15,
        binning: Binning = "calibkit",
        probs: Probs = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        scheme = BinScheme(n_bins, binning, torch.float64)
        self.n_bins, self.binning, self.probs = n_bins, binning, probs
        zeros = torch.zeros(3, scheme.n_slots, dtype=torch.float64)
        self.add_state("bins", default=zeros, dist_reduce_fx="sum")

    def update(self, preds: Tensor, target: Tensor) -> None:
        """Add a batch: ``preds`` (N, K) logits (probabilities with ``probs=True``), ``target``
        (N,) class indices."""
        p = prepare.trusting(preds, target, probs=self.probs)
        sums = topbin_sums(p, BinScheme(self.n_bins, self.binning, p.dtype))
        self.bins += sums[0].to(self.bins)

    def plot(self, val: Any = None, ax: Any = None) -> tuple[Any, Any]:
        """The reliability diagram of every batch so far (calibkit's
        :func:`~calibkit.plots.draw_reliability`: accuracy per bin over the diagonal, gaps
        shaded, the confidence histogram beneath). ``val`` is not used: the diagram needs the
        bins, which the state holds. ``ax``: a pair of axes (top, bottom) to draw into.
        Returns (figure, its axes), as torchmetrics' ``plot`` does."""
        from ..metrics.internal import bins_of
        from ..plots import draw_reliability

        sums, _ = self._sums()  # refuses an empty state in one line
        scheme = BinScheme(self.n_bins, self.binning, torch.float64)
        fig = draw_reliability(
            bins_of(sums.detach().double().cpu(), scheme), n_bins=self.n_bins, ax=ax
        )
        return fig, fig.axes

    def _sums(self) -> tuple[Tensor, float]:
        n = float(self.bins[0].sum())
        if n == 0:
            raise ValueError("compute: no samples yet; call update() with at least one batch")
        return self.bins[None], n


class ECE(_BinnedCalibration):
    """Expected calibration error (calibkit's :func:`~calibkit.metrics.ece`).

    Examples
    --------
    >>> import torch
    >>> from calibkit.adapters.torchmetrics import ECE
    >>> from calibkit.metrics import ece
    >>> logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]])
    >>> labels = torch.tensor([0, 1, 2, 1])
    >>> metric = ECE(n_bins=15)
    >>> metric.update(logits[:2], labels[:2])  # batch by batch
    >>> metric.update(logits[2:], labels[2:])
    >>> round(float(metric.compute()), 4) == round(ece(logits, labels), 4)
    True
    """

    def compute(self) -> Tensor:
        sums, n = self._sums()
        return ece_from_sums(sums, n)[0]


class MCE(_BinnedCalibration):
    """Maximum calibration error (:func:`~calibkit.metrics.mce`).

    Examples
    --------
    Updated batch by batch, it gives what :func:`~calibkit.metrics.mce` gives on the whole:

    >>> import torch
    >>> from calibkit.adapters.torchmetrics import MCE
    >>> from calibkit.metrics import mce
    >>> g = torch.Generator().manual_seed(0)
    >>> logits, labels = 3 * torch.randn(200, 5, generator=g), torch.randint(5, (200,), generator=g)
    >>> metric = MCE()
    >>> for rows in torch.arange(200).split(64):
    ...     metric.update(logits[rows], labels[rows])
    >>> abs(float(metric.compute()) - mce(logits, labels)) < 1e-6
    True
    """

    def compute(self) -> Tensor:
        sums, _ = self._sums()
        return mce_from_sums(sums)[0]


class RMSCalibrationError(_BinnedCalibration):
    """RMS (L2) calibration error, Kumar et al.'s debiased estimator with ``debias=True``
    (:func:`~calibkit.metrics.rms_ce`).

    Examples
    --------
    Updated batch by batch, it gives what :func:`~calibkit.metrics.rms_ce` gives on the whole:

    >>> import torch
    >>> from calibkit.adapters.torchmetrics import RMSCalibrationError
    >>> from calibkit.metrics import rms_ce
    >>> g = torch.Generator().manual_seed(0)
    >>> logits, labels = 3 * torch.randn(200, 5, generator=g), torch.randint(5, (200,), generator=g)
    >>> metric = RMSCalibrationError(debias=True)
    >>> for rows in torch.arange(200).split(64):
    ...     metric.update(logits[rows], labels[rows])
    >>> abs(float(metric.compute()) - rms_ce(logits, labels, debias=True)) < 1e-6
    True
    """

    @checks_declared
    def __init__(self, debias: Debias = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.debias = debias

    def compute(self) -> Tensor:
        sums, n = self._sums()
        return rms_from_sums(sums, n, debias=self.debias)[0]


class _RankedCalibration(Metric):
    """The per-sample states and update of the rank-based metrics."""

    full_state_update = False
    is_differentiable = False
    higher_is_better = False

    @checks_declared
    def __init__(self, probs: Probs = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.probs = probs
        self.add_state("confidence", default=[], dist_reduce_fx="cat")
        self.add_state("correct", default=[], dist_reduce_fx="cat")

    def update(self, preds: Tensor, target: Tensor) -> None:
        """Add a batch: ``preds`` (N, K) logits (probabilities with ``probs=True``), ``target``
        (N,) class indices."""
        p = prepare.trusting(preds, target, probs=self.probs)
        conf, correct = p.cal_pair
        self.confidence.append(conf)
        self.correct.append(correct)

    def _pairs(self) -> tuple[Tensor, Tensor]:
        """Every sample's (confidence, correct) so far; refuses an empty state in one line."""
        # a list of batches here; one tensor after torchmetrics' sync has concatenated them
        if isinstance(self.confidence, list) and not self.confidence:
            raise ValueError("compute: no samples yet; call update() with at least one batch")
        return dim_zero_cat(self.confidence), dim_zero_cat(self.correct)

    def _runs(self) -> tuple[Runs, int]:
        conf, correct = self._pairs()
        return Runs.from_values(conf, correct.bool()), len(conf)


class AdaptiveECE(_RankedCalibration):
    """Adaptive (equal-mass) ECE (:func:`~calibkit.metrics.aece`); ``norm="l2"`` and
    ``norm="max"`` give the adaptive RMS calibration error and the adaptive MCE of the same
    bins, and ``convention="torch-uncertainty"`` TorchUncertainty's
    ``AdaptiveCalibrationError(norm=...)``, as the function does.

    Examples
    --------
    Updated batch by batch, it gives what :func:`~calibkit.metrics.aece` gives on the whole:

    >>> import torch
    >>> from calibkit.adapters.torchmetrics import AdaptiveECE
    >>> from calibkit.metrics import aece
    >>> g = torch.Generator().manual_seed(0)
    >>> logits, labels = 3 * torch.randn(200, 5, generator=g), torch.randint(5, (200,), generator=g)
    >>> metric = AdaptiveECE()
    >>> for rows in torch.arange(200).split(64):
    ...     metric.update(logits[rows], labels[rows])
    >>> abs(float(metric.compute()) - aece(logits, labels)) < 1e-6
    True
    """

    @checks_declared
    def __init__(
        self,
        n_bins: MetricBins = 15,
        norm: AdaptiveNorm = "l1",
        convention: AeceConvention = "calibkit",
        **kwargs: Any,
    ) -> None:
        check_adaptive(norm, convention)
        super().__init__(**kwargs)
        self.n_bins, self.norm, self.convention = n_bins, norm, convention

    def compute(self) -> Tensor:
        if self.convention != "calibkit":
            value = peer_aece(*self._pairs(), self.n_bins, self.norm, self.convention)
            return torch.tensor(value, dtype=torch.float64, device=self.device)
        runs, n = self._runs()
        size, pos = run_sums(runs, None)
        return aece_from_runs(runs, size, pos, n, self.n_bins, self.norm)[0]


class SmoothECE(_RankedCalibration):
    """Smooth ECE (:func:`~calibkit.metrics.smooth_ece`, Błasiok and Nakkiran 2023), at its
    fixed-point bandwidth: the kernel smoothing needs every sample's confidence, so the
    state is per sample, concatenated across processes as torchmetrics' AUROC's is.

    Examples
    --------
    Updated batch by batch, it gives what :func:`~calibkit.metrics.smooth_ece` gives on the
    whole:

    >>> import torch
    >>> from calibkit.adapters.torchmetrics import SmoothECE
    >>> from calibkit.metrics import smooth_ece
    >>> g = torch.Generator().manual_seed(0)
    >>> logits, labels = 3 * torch.randn(200, 5, generator=g), torch.randint(5, (200,), generator=g)
    >>> metric = SmoothECE()
    >>> for rows in torch.arange(200).split(64):
    ...     metric.update(logits[rows], labels[rows])
    >>> abs(float(metric.compute()) - smooth_ece(logits, labels)) < 1e-12
    True
    """

    def compute(self) -> Tensor:
        return smooth_ece_batch(*self._pairs())[0][0]


class AURC(_RankedCalibration):
    """Area under the risk-coverage curve (:func:`~calibkit.metrics.aurc`).

    Examples
    --------
    Updated batch by batch, it gives what :func:`~calibkit.metrics.aurc` gives on the whole:

    >>> import torch
    >>> from calibkit.adapters.torchmetrics import AURC
    >>> from calibkit.metrics import aurc
    >>> g = torch.Generator().manual_seed(0)
    >>> logits, labels = 3 * torch.randn(200, 5, generator=g), torch.randint(5, (200,), generator=g)
    >>> metric = AURC()
    >>> for rows in torch.arange(200).split(64):
    ...     metric.update(logits[rows], labels[rows])
    >>> abs(float(metric.compute()) - aurc(logits, labels)) < 1e-6
    True
    """

    def compute(self) -> Tensor:
        runs, _ = self._runs()
        return aurc_from_runs(*run_sums(runs, None))[0]


class RefinementAUROC(_RankedCalibration):
    """AUROC of the confidence separating correct from wrong predictions
    (:func:`~calibkit.metrics.refinement_auroc`); raises ``ValueError`` where every
    prediction is correct, or every one wrong.

    Examples
    --------
    Updated batch by batch, it gives what :func:`~calibkit.metrics.refinement_auroc` gives
    on the whole:

    >>> import torch
    >>> from calibkit.adapters.torchmetrics import RefinementAUROC
    >>> from calibkit.metrics import refinement_auroc
    >>> g = torch.Generator().manual_seed(0)
    >>> logits, labels = 3 * torch.randn(200, 5, generator=g), torch.randint(5, (200,), generator=g)
    >>> metric = RefinementAUROC()
    >>> for rows in torch.arange(200).split(64):
    ...     metric.update(logits[rows], labels[rows])
    >>> abs(float(metric.compute()) - refinement_auroc(logits, labels)) < 1e-6
    True
    """

    higher_is_better = True

    def compute(self) -> Tensor:
        runs, n = self._runs()
        value = auroc_from_runs(*run_sums(runs, None))[0]
        if bool(value.isnan()):
            raise ValueError(undefined_auroc_message(n, int(runs.positives.sum())))
        return value


#: the number of classes a metric's state is sized for
_NumClasses = Annotated[
    int, Setting("K, the number of classes (the state's size)", Bounds(2, 2**31, integer=True))
]


class ClasswiseECE(Metric):
    """Classwise ECE (:func:`~calibkit.metrics.classwise_ece`): per class k, equal-width
    bins over p_k of every sample, the mean over classes of Σ_m |B_mk|/N · |acc − conf|
    (the sum with ``binning="kull"``, as Kull et al. 2019 report it). The state is the
    per-class bin sums, 3 × ``num_classes`` × bins in float64, sum-reduced across processes;
    ``num_classes`` is needed up front for that reason, as torchmetrics' multiclass metrics
    need it.

    Examples
    --------
    >>> import torch
    >>> from calibkit.adapters.torchmetrics import ClasswiseECE
    >>> from calibkit.metrics import classwise_ece
    >>> g = torch.Generator().manual_seed(0)
    >>> logits, labels = 3 * torch.randn(200, 5, generator=g), torch.randint(5, (200,), generator=g)
    >>> metric = ClasswiseECE(num_classes=5)
    >>> for rows in torch.arange(200).split(64):
    ...     metric.update(logits[rows], labels[rows])
    >>> abs(float(metric.compute()) - classwise_ece(logits, labels)) < 1e-12
    True
    """

    full_state_update = False
    is_differentiable = False
    higher_is_better = False

    @checks_declared
    def __init__(
        self,
        num_classes: _NumClasses,
        n_bins: MetricBins = 15,
        binning: Binning = "calibkit",
        probs: Probs = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scheme = BinScheme(n_bins, binning, torch.float64)
        self.num_classes, self.n_bins, self.binning, self.probs = (
            num_classes,
            n_bins,
            binning,
            probs,
        )
        zeros = torch.zeros(3, num_classes, self.scheme.n_slots, dtype=torch.float64)
        self.add_state("sums", default=zeros, dist_reduce_fx="sum")

    def update(self, preds: Tensor, target: Tensor) -> None:
        """Add a batch: ``preds`` (N, num_classes) logits (probabilities with
        ``probs=True``), ``target`` (N,) class indices."""
        p = prepare.trusting(preds, target, probs=self.probs)
        if p.k != self.num_classes:
            raise ValueError(f"preds: {p.k} classes (axis 1) where num_classes={self.num_classes}")
        self.sums += classwise_sums(p, self.scheme)[0].to(self.sums)

    def compute(self) -> Tensor:
        n = float(self.sums[0, 0].sum())
        if n == 0:
            raise ValueError("compute: no samples yet; call update() with at least one batch")
        return classwise_ece_from_sums(self.sums[None], n, self.scheme)[0]


class _TorchmetricsCalibration(_BinnedCalibration):
    """torchmetrics' calibration errors under their names, arguments and conventions, so
    that changing only the import gives torchmetrics' numbers: values all in [0, 1] are
    probabilities, anything else logits (softmax, or sigmoid on binary); ``ignore_index``
    drops those targets; ``validate_args=False`` skips calibkit's checks of the values;
    torchmetrics' bins (``binning="torchmetrics"``: [b, b'), a confidence of exactly 1.0 in
    a bin of its own) with multiclass confidences in float32, as torchmetrics casts them.
    The state is calibkit's O(bins) float64 bin sums, summed across processes."""

    def __init__(
        self,
        n_bins: int = 15,
        norm: str = "l1",
        ignore_index: int | None = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> None:
        if norm not in NORMS:
            raise ValueError(f"norm: expected one of {', '.join(NORMS)}, got {norm!r}")
        if ignore_index is not None and (
            isinstance(ignore_index, bool) or not isinstance(ignore_index, int)
        ):
            raise ValueError(f"ignore_index: expected None or an integer, got {ignore_index!r}")
        if "probs" in kwargs:  # torchmetrics' rule decides, as in torchmetrics
            raise TypeError(
                f"{type(self).__name__} takes no probs: it reads preds as torchmetrics does "
                "(values all in [0, 1] are probabilities, anything else logits); calibkit's "
                "ECE, MCE and RMSCalibrationError take probs="
            )
        kwargs.setdefault("binning", "torchmetrics")
        super().__init__(n_bins=n_bins, probs=True, **kwargs)
        self.norm, self.ignore_index = norm, ignore_index
        self.validate_args = check_flag(validate_args, "validate_args")

    def _add(self, probs: Tensor, target: Tensor, binary: str, dtype: torch.dtype) -> None:
        read = prepare.trusting if self.validate_args else trusted
        p = read(probs, target, probs=True, binary=binary)
        sums = topbin_sums(p, BinScheme(self.n_bins, self.binning, dtype))
        self.bins += sums[0].to(self.bins)

    def _kept(self, preds: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        if self.ignore_index is None:
            return preds, target
        keep = target != self.ignore_index
        return preds[keep], target[keep]

    def compute(self) -> Tensor:
        sums, n = self._sums()
        return reduce_bins(sums, n, self.norm)[0]


class MulticlassCalibrationError(_TorchmetricsCalibration):
    """torchmetrics' ``MulticlassCalibrationError(num_classes, n_bins=15, norm="l1",
    ignore_index=None, validate_args=True)``: top-label calibration error of ``preds``
    (N, C, ...) probabilities or logits against ``target`` (N, ...) class indices
    (:class:`_TorchmetricsCalibration`). ``norm="l1"`` is calibkit's :class:`ECE`, ``"max"``
    :class:`MCE`, ``"l2"`` :class:`RMSCalibrationError` (without debiasing), each in
    torchmetrics' bins; ``binning="calibkit"`` gives calibkit's.

    Examples
    --------
    The same value as torchmetrics' own class, on the same batches:

    >>> import torch, torchmetrics
    >>> from calibkit.adapters.torchmetrics import MulticlassCalibrationError
    >>> g = torch.Generator().manual_seed(0)
    >>> preds = torch.softmax(2 * torch.randn(100, 3, generator=g), 1)
    >>> target = torch.randint(3, (100,), generator=g)
    >>> ours = MulticlassCalibrationError(num_classes=3)
    >>> theirs = torchmetrics.classification.MulticlassCalibrationError(num_classes=3)
    >>> for metric in (ours, theirs):
    ...     metric.update(preds, target)
    >>> abs(float(ours.compute()) - float(theirs.compute())) < 1e-6
    True
    """

    def __init__(
        self,
        num_classes: int,
        n_bins: int = 15,
        norm: str = "l1",
        ignore_index: int | None = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> None:
        check_positive_int(num_classes, "num_classes", 2)  # required, as in torchmetrics
        super().__init__(n_bins, norm, ignore_index, validate_args, **kwargs)
        self.num_classes = num_classes

    def update(self, preds: Tensor, target: Tensor) -> None:
        """Add a batch: ``preds`` (N, C, ...) probabilities or logits, ``target`` (N, ...)."""
        preds, target = torch.as_tensor(preds), torch.as_tensor(target)
        if preds.ndim > 2:  # (N, C, ...) -> (N·..., C), as torchmetrics reads them
            preds = preds.movedim(1, -1).reshape(-1, preds.shape[1])
            target = target.reshape(-1)
        if preds.ndim == 2 and preds.shape[1] != self.num_classes:
            raise ValueError(
                f"preds: {preds.shape[1]} classes (axis 1) where num_classes={self.num_classes}"
            )
        preds, target = self._kept(preds, target)
        if not bool(((preds >= 0) & (preds <= 1)).all()):
            preds = preds.softmax(1)
        # torchmetrics bins float32 confidences; half precision stays itself (exact in
        # float32, and its rows are checked at its own rounding)
        probs = preds.float() if preds.dtype == torch.float64 else preds
        self._add(probs, target, "top-label", torch.float32)


class BinaryCalibrationError(_TorchmetricsCalibration):
    """torchmetrics' ``BinaryCalibrationError(n_bins=15, norm="l1", ignore_index=None,
    validate_args=True)``: calibration of P(class 1) (``preds`` (N, ...), a probability, or
    a logit where any value lies outside [0, 1]) against the 0/1 ``target`` (N, ...), binned
    in the predictions' dtype as torchmetrics does (calibkit's ``binary="positive"``).

    Examples
    --------
    The same value as torchmetrics' own class, on the same batches:

    >>> import torch, torchmetrics
    >>> from calibkit.adapters.torchmetrics import BinaryCalibrationError
    >>> g = torch.Generator().manual_seed(0)
    >>> preds = torch.rand(100, generator=g)  # P(class 1)
    >>> target = torch.randint(2, (100,), generator=g)
    >>> ours = BinaryCalibrationError(n_bins=10)
    >>> theirs = torchmetrics.classification.BinaryCalibrationError(n_bins=10)
    >>> for metric in (ours, theirs):
    ...     metric.update(preds, target)
    >>> abs(float(ours.compute()) - float(theirs.compute())) < 1e-6
    True
    """

    def update(self, preds: Tensor, target: Tensor) -> None:
        """Add a batch: ``preds`` (N, ...) probabilities or logits of class 1, ``target``."""
        preds, target = torch.as_tensor(preds).reshape(-1), torch.as_tensor(target).reshape(-1)
        preds, target = self._kept(preds, target)
        if not preds.is_floating_point():
            raise ValueError(f"preds: expected floating scores, got {preds.dtype}")
        if not bool(((preds >= 0) & (preds <= 1)).all()):
            preds = preds.sigmoid()
        self._add(torch.stack([1 - preds, preds], 1), target, "positive", preds.dtype)


class CalibrationError(Metric):
    """torchmetrics' generic name, a ``Metric`` class as there: ``CalibrationError(task=
    "binary")`` makes a :class:`BinaryCalibrationError`, ``task="multiclass"`` a
    :class:`MulticlassCalibrationError` (``num_classes`` required, an int), with ``n_bins``,
    ``norm``, ``ignore_index``, ``validate_args`` as there. Like torchmetrics' wrapper it has
    no ``update`` or ``compute`` of its own: the object made is the task's metric.

    Examples
    --------
    >>> from calibkit.adapters.torchmetrics import CalibrationError
    >>> type(CalibrationError(task="binary")).__name__
    'BinaryCalibrationError'
    >>> type(CalibrationError(task="multiclass", num_classes=10, norm="max")).__name__
    'MulticlassCalibrationError'
    >>> CalibrationError(task="multiclass")
    Traceback (most recent call last):
    ...
    ValueError: num_classes: task="multiclass" needs the number of classes, an int; got None
    """

    def __new__(  # type: ignore[misc]
        cls,
        task: str,
        n_bins: int = 15,
        norm: str = "l1",
        num_classes: int | None = None,
        ignore_index: int | None = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> _TorchmetricsCalibration:
        kwargs |= {
            "n_bins": n_bins,
            "norm": norm,
            "ignore_index": ignore_index,
            "validate_args": validate_args,
        }
        if task == "binary":
            return BinaryCalibrationError(**kwargs)
        if task == "multiclass":
            if isinstance(num_classes, bool) or not isinstance(num_classes, int):
                raise ValueError(
                    'num_classes: task="multiclass" needs the number of classes, an int; '
                    f"got {num_classes!r}"
                )
            return MulticlassCalibrationError(num_classes, **kwargs)
        raise ValueError(f"task: expected 'binary' or 'multiclass', got {task!r}")

    def update(self, *args: Any, **kwargs: Any) -> None:  # pragma: no cover - never made
        raise NotImplementedError("CalibrationError has no update: use the task's metric")

    def compute(self) -> None:  # pragma: no cover - never made
        raise NotImplementedError("CalibrationError has no compute: use the task's metric")
