"""What the metric functions take. Their settings are declared once here, as
``Annotated`` aliases (:mod:`calibkit._settings`) that every signature uses, so a
function's Parameters section, type, default and meaning come from its own signature; the
inputs (``scores``, ``labels``, ...), which are data rather than settings, are described
once in :data:`METRIC_PARAMETERS` (:func:`calibkit._docs.documented`). It sits beside
:mod:`calibkit._settings`, outside :mod:`calibkit.metrics`, because the command line
builds its metric options from these declarations (``cli/_options.py``) and its ``--help``
imports no PyTorch."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Annotated, Any

from ._conventions import BINNINGS, INTERVALS
from ._docs import Described
from ._settings import MAX_BINS, Bounds, OneOf, Setting, is_number

#: the values of ``n_bins`` and ``binning``, which the binning scheme checks
N_BINS = Bounds(1, MAX_BINS, integer=True)
BINNING = OneOf(BINNINGS)

Probs = Annotated[
    bool | None,
    Setting(
        "Read ``scores`` as probabilities (True: rows in [0, 1] summing to 1) or as logits "
        "whatever their values (False); unset (None), as logits refused in one line where "
        "every row lies in [0, 1] and sums to 1, probabilities passed by mistake. Nothing is "
        "guessed from the values"
    ),
]
MetricBins = Annotated[int, Setting("Number of equal-width confidence bins", N_BINS)]
Binning = Annotated[
    str,
    Setting("Convention for a value on a bin edge (:mod:`calibkit.metrics._binning`)", BINNING),
]
#: the calibration pairs every metric measures; the binned ones reduce more (PairBinary)
BINARY_MODES = ("top-label", "positive")
_TOP_R = re.compile(r"top-([0-9]+)")
Binary = Annotated[
    str,
    Setting(
        "Which calibration pair is measured: 'top-label' (confidence and correctness) or "
        "'positive' (P(class 1) and 1[y = 1], K = 2)",
        OneOf(BINARY_MODES),
    ),
]


class _PairModes:
    """The values of a binned metric's ``binary``: :data:`BINARY_MODES`, ``"pooled"`` or
    ``"top-<r>"`` with r >= 2 (:mod:`calibkit.metrics._inputs`)."""

    def __str__(self) -> str:
        return f"one of {list(BINARY_MODES)}, 'pooled' or 'top-<r>' with r >= 2"

    def check(self, name: str, value: Any) -> str:
        if value in (*BINARY_MODES, "pooled"):
            return value
        m = _TOP_R.fullmatch(value) if isinstance(value, str) else None
        if m is None or int(m.group(1)) < 2:
            raise ValueError(f"{name}: expected {self} ('top-label' is r = 1), got {value!r}")
        return value


PairBinary = Annotated[
    str,
    Setting(
        "Which calibration pair is measured: 'top-label' (confidence and correctness), "
        "'positive' (P(class 1) and 1[y = 1], K = 2), 'pooled' (every class's probability "
        "against its indicator) or 'top-<r>' (the r-th most probable class) "
        "(:mod:`calibkit.metrics._inputs`)",
        _PairModes(),
    ),
]
Debias = Annotated[
    bool,
    Setting(
        "Replace each bin's gap by its debiased estimate (docs/metrics.md, "
        '"Debiased binned errors")'
    ),
]
#: the values of ``one_sample_bins``
ONE_SAMPLE_BINS = OneOf(("keep", "drop"))
OneSampleBins = Annotated[
    str,
    Setting(
        "With ``debias``: a bin holding one sample keeps its plug-in squared gap ('keep', "
        "torchmetrics' reading) or counts 0 ('drop', as Kumar et al.'s "
        "``uncertainty-calibration`` code does)",
        ONE_SAMPLE_BINS,
    ),
]
#: the conventions of the selective-prediction areas (AURC, AUGRC), of smooth ECE and of the
#: adaptive ECE: calibkit's own, and a peer's (docs/metrics.md, "Peers' conventions")
SELECTIVE_CONVENTIONS = ("calibkit", "torch-uncertainty")
SMOOTH_CONVENTIONS = ("calibkit", "torch-uncertainty")
AECE_CONVENTIONS = ("calibkit", "focal-calibration", "torch-uncertainty")
KS_CONVENTIONS = ("calibkit", "spline-calibration")
SelectiveConvention = Annotated[
    str,
    Setting(
        "'calibkit': the mean over the N coverages k/N; 'torch-uncertainty': "
        "TorchUncertainty's trapezoid over [1/N, 1] divided by 1 − 1/N (NaN below 2 samples), "
        "its tied samples averaged over their orders",
        OneOf(SELECTIVE_CONVENTIONS),
    ),
]
AeceConvention = Annotated[
    str,
    Setting(
        "'calibkit': equal-mass bins, ties never split; 'focal-calibration': the edges and "
        "(lo, hi] bins of focal_calibration's AdaptiveECELoss (the smallest confidence left "
        "out); 'torch-uncertainty': TorchUncertainty's AdaptiveCalibrationError, the sorted "
        "confidences cut by ``tensor_split`` (the first bins one sample larger, ties split)",
        OneOf(AECE_CONVENTIONS),
    ),
]
#: the reductions of the bins' gaps, as torchmetrics and TorchUncertainty name them
NORMS = ("l1", "l2", "max")
AdaptiveNorm = Annotated[
    str,
    Setting(
        "How the equal-mass bins' gaps are reduced: 'l1' (weighted by bin size, the adaptive "
        "ECE), 'l2' (the root of the weighted mean square, an adaptive RMS calibration "
        "error) or 'max' (the largest gap, an adaptive MCE), as TorchUncertainty's "
        "``AdaptiveCalibrationError(norm=...)``",
        OneOf(NORMS),
    ),
]
KsConvention = Annotated[
    str,
    Setting(
        "'calibkit': the largest gap taken at the ends of runs of tied confidences, whatever "
        "their order; 'spline-calibration': after every sample in NumPy's ``argsort`` order, "
        "as Gupta et al.'s code does (a tie run's samples in the order that sort leaves them)",
        OneOf(KS_CONVENTIONS),
    ),
]
SmoothConvention = Annotated[
    str,
    Setting(
        "'calibkit': the reflected Gaussian kernel of the paper; 'torch-uncertainty': "
        "TorchUncertainty's default, a Gaussian kernel in logit space "
        "(:mod:`calibkit.metrics._smooth_logit`)",
        OneOf(SMOOTH_CONVENTIONS),
    ),
]
Bandwidth = Annotated[
    float | None,
    Setting(
        "The kernel's bandwidth; None: the fixed point (calibkit) or TorchUncertainty's "
        "bisection ('torch-uncertainty')",
        Bounds(0, 1, low_open=True),
    ),
]
ClasswiseBinning = Annotated[
    str,
    Setting(
        "Convention for a value on a bin edge (:mod:`calibkit.metrics._binning`), or "
        "'equal-mass': per class, ``n_bins`` bins of N/M samples each",
        OneOf((*BINNINGS, "equal-mass")),
    ),
]
Cells = Annotated[
    str,
    Setting(
        "'marginal' (each class's bins) or 'joint' (the joint bins of all K probabilities)",
        OneOf(("marginal", "joint")),
    ),
]
Power = Annotated[
    int,
    Setting("1 for |acc − conf|, 2 for (acc − conf)² without a root", Bounds(1, 2, integer=True)),
]
ReturnTemperature = Annotated[bool, Setting("Also return the temperature that reaches it")]

#: named ``clip`` conventions of :func:`~calibkit.metrics.nll` and the ε each clips at
NLL_CLIPS = {"sklearn-1.2": sys.float_info.epsilon}


@dataclass(frozen=True)
class _ClipEps:
    """The values of ``nll``'s ``clip``: a name in :data:`NLL_CLIPS` or a number ε in
    (0, 0.5); checked, it is the ε."""

    def __str__(self) -> str:
        return f"a number in (0, 0.5) or one of {sorted(NLL_CLIPS)}"

    def check(self, name: str, value: Any) -> float:
        if isinstance(value, str) and value in NLL_CLIPS:
            return NLL_CLIPS[value]
        if is_number(value) and 0 < value < 0.5:
            return float(value)
        hint = (
            " ('sklearn' depended on the input's dtype: use 1e-15 for scikit-learn up to 1.1 "
            "and the published tables, or 'sklearn-1.2')"
            if value == "sklearn"
            else ""
        )
        raise ValueError(f"{name}: expected None, {self}, got {value!r}{hint}")


NllClip = Annotated[
    str | float | None, Setting("Clip p_y to [ε, 1 − ε] first: ε, or 'sklearn-1.2'", _ClipEps())
]
#: the values of ``bootstrap`` and ``ci``
RESAMPLES = Bounds(0, 10**7, integer=True)
LEVEL = Bounds(0, 1, low_open=True, high_open=True)
Bootstrap = Annotated[int, Setting("Number of bootstrap resamples (0: no intervals)", RESAMPLES)]
#: a comparison's resamples: its p-values need at least one
Resamples = Annotated[
    int, Setting("Number of bootstrap resamples", Bounds(1, RESAMPLES.high, integer=True))
]
Interval = Annotated[
    str,
    Setting(
        "Bootstrap interval: 'auto' takes each metric's own, chosen by the coverage study "
        "(docs/metrics.md); or one method for all",
        OneOf(INTERVALS),
    ),
]
Ci = Annotated[float, Setting("Level of the intervals, such as 0.95", LEVEL)]
Smooth = Annotated[bool, Setting("Compute smooth ECE (False skips it: it is the slowest)")]
Optimal = Annotated[bool, Setting("Compute optimal ECE (False skips it: 1,000 temperatures)")]
BootstrapSeed = Annotated[
    int, Setting("Seed of the bootstrap draws", Bounds(0, 2**63 - 1, integer=True))
]

#: the inputs of the metric functions, described once for their docstrings
METRIC_PARAMETERS: dict[str, Described] = {
    "scores": (
        "array-like or Tensor, shape (N, K), or (N,) for a binary problem; or Prepared",
        "Logits, or probabilities with ``probs=True``; NumPy, PyTorch on any device, or "
        "anything ``torch.as_tensor`` takes. Computed where they are. Or an input checked "
        "once by :func:`~calibkit.metrics.prepare` (or vouched for by "
        ":func:`~calibkit.metrics.trusted`), taken as it is, without ``labels``.",
    ),
    "labels": (
        "array-like or Tensor of int, shape (N,); None with a prepared input",
        "The true class of each row, in 0..K-1.",
    ),
    "ood_scores": (
        "array-like or Tensor, shape (M, K)",
        "Scores of out-of-distribution samples (no labels), in the same form as ``scores``.",
    ),
}
