"""The one table of metrics: name, label, direction and display format, in report order.

Every consumer (``evaluate``, the meter, the CLI, ``compare``, the bench harness and its
report) reads names, order, direction and format from here.

>>> info("ece").direction, info("ood_auroc:svhn").label
(-1, 'OOD AUROC')
>>> HARNESS[:3]
('accuracy', 'ece', 'aece')
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from torch import Tensor

from . import stats as st

__all__ = [
    "BASIC",
    "COMPARE",
    "COMPUTED",
    "HARNESS",
    "METRICS",
    "METRICS_TABLE",
    "OOD_METRICS",
    "SAMPLE_METRICS",
    "SPREAD",
    "M",
    "Memo",
    "MetricInfo",
    "Statistics",
    "direction",
    "in_percent",
    "info",
    "mean_std",
    "plus_minus",
    "spread",
    "with_unit",
]


class Statistics(Protocol):
    """The shared statistics a metric is computed from, for B weighted resamples at once
    (B = 1 without resampling): :func:`~calibkit.metrics.evaluate` builds them from the
    scores, :class:`~calibkit.metrics.CalibrationMeter` from its running sums. Each is
    computed only when a metric asks for it."""

    n: int  # samples (each resample's total weight)
    n_bins: int

    def sums(self) -> Tensor:
        """(B, 3, M) per equal-width bin: count, sum of confidence, sum of outcome."""

    def mean(self, per_sample: str) -> Tensor:
        """(B,) mean of ``correct``, ``nll``, ``brier`` or ``entropy`` per sample."""

    def classwise(self) -> tuple[Tensor, Any]:
        """(B, 3, K, M) per-class bin sums, and their bin scheme."""

    def runs(self) -> tuple[Any, Tensor, Tensor]:
        """The tie runs of the calibration pair, sorted by confidence, with (B, R) sizes and
        positives (needs every sample)."""

    def correct_runs(self) -> tuple[Tensor, Tensor]:
        """(B, R) sizes and positives of the top-label confidence's runs against
        correctness (needs every sample)."""

    def smooth(self) -> Tensor:
        """(B,) smooth ECE of the calibration pair (needs every sample)."""


class Memo:
    """Each statistic computed once per object: a :class:`Statistics` is built for one
    evaluation, and several metrics ask for the same tie runs or bin sums."""

    def __init__(self) -> None:
        self._done: dict[str, Any] = {}

    def _once(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._done:
            self._done[key] = make()
        return self._done[key]


@dataclass(frozen=True)
class MetricInfo:
    """One metric: ``direction`` -1 when lower is better, +1 when higher is, 0 when neither
    (a description, not a score); ``percent``: a fraction shown × 100; ``compute``: the
    (B,) values from the shared :class:`Statistics` (None where another path computes it:
    optimal ECE's temperature scan, the OOD metrics); ``samples``: it needs every sample
    (ranks or ties), not only bin sums; ``harness``: stored by every bench run;
    ``compare``: a column of ``calibkit compare``; ``interval``: the bootstrap interval
    ``evaluate`` gives it by default (:mod:`calibkit.metrics.intervals`, chosen by the
    coverage table in docs/metrics.md); ``least`` and ``most``: its least and greatest
    possible values (None: unbounded; every interval is clipped to them);
    ``plug_in``: for a debiased estimate, the plug-in metric it corrects (its ``two-pivot``
    interval needs that estimate too); ``null_test``: 0 at perfect calibration and computed
    from bin sums alone, so :mod:`calibkit.metrics.consistency` tests it and its interval
    reaches 0 where the test does not reject."""

    name: str
    label: str
    direction: int
    percent: bool = True
    compute: Callable[[Statistics], Tensor] | None = None
    samples: bool = False
    harness: bool = False
    compare: bool = False
    interval: str = "percentile"
    least: float | None = 0.0
    most: float | None = 1.0
    plug_in: str | None = None
    null_test: bool = False
    #: how a ``percent`` metric's × 100 reads in a heading: "%" for a share, "×100" for a
    #: score that is not one (Brier)
    unit: str = "%"

    def format(self, value: float, digits: int = 2) -> str:
        """``value`` for a table: × 100 where it is a fraction."""
        return f"{value * (100 if self.percent else 1):.{digits}f}"

    @property
    def shown_unit(self) -> str:
        """The unit of the value a table prints: "%", "×100", "nats", or "" (a number)."""
        return self.unit if self.percent or self.unit != "%" else ""

    @property
    def heading(self) -> str:
        """The label with its unit, for a table's title: "ECE (%)", "Brier (×100)",
        "NLL (nats)"."""
        return f"{self.label} ({self.shown_unit})" if self.shown_unit else self.label

    def display(self, value: float | None) -> str:
        """``value`` as printed for people: × 100 with 2 decimals where it is a fraction
        shown in %, else 4 decimals; "n/a" for a missing value. Machines get fractions
        (``--json``, the Python API)."""
        if value is None or math.isnan(value):
            return "n/a"
        return self.format(value, 2 if self.percent else 4)


def plus_minus(mean: float, std: float, digits: int) -> str:
    """'mean ± std' with ``digits`` decimals."""
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


#: what every "mean ± std" cell's ± is, for column headers
SPREAD = "± std over seeds"


def spread(label: str) -> str:
    """``label`` as the header of a column of :func:`mean_std` cells: 'ECE (± std over
    seeds)'."""
    return f"{label} ({SPREAD})"


def mean_std(values: Iterable[float | None], *, scale: float = 1.0, digits: int = 2) -> str:
    """'mean ± std' (sample std) of the finite ``values`` × ``scale``; the mean alone for one
    value; "—" for none. Every table of calibkit formats spread over seeds with this."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return "—"
    if len(vals) == 1:
        return f"{vals[0] * scale:.{digits}f}"
    return plus_minus(statistics.mean(vals) * scale, statistics.stdev(vals) * scale, digits)


def _gap(s: Statistics) -> Tensor:
    sums = s.sums()
    return (sums[:, 1].sum(-1) - sums[:, 2].sum(-1)) / s.n


def _aece(s: Statistics) -> Tensor:
    return st.aece_from_runs(*s.runs(), s.n, s.n_bins)


def _classwise_ece(s: Statistics, debias: bool = False) -> Tensor:
    sums, scheme = s.classwise()
    if debias:
        return st.debiased_classwise_from_sums(sums, s.n, scheme)
    return st.classwise_ece_from_sums(sums, s.n, scheme)


def _ks(s: Statistics) -> Tensor:
    return st.ks_from_runs(*s.runs(), s.n)


M = MetricInfo
#: the calibration errors' default interval: the coverage study (docs/metrics.md, "Do the
#: intervals cover?") finds their percentile intervals biased upwards
BASIC = "basic"
#: the debiased binned errors' default: basic widened to the plug-in pivot (docs/metrics.md,
#: "The debiased estimators' intervals": it covers 90–94 % where basic covered 79 %)
TWO_PIVOT = "two-pivot"
#: every metric in report order: adding one is a row here and its calculation
#: (docs/architecture.md, "Adding a metric")
METRICS_TABLE: tuple[MetricInfo, ...] = (
    M("accuracy", "Accuracy", +1, compute=lambda s: s.mean("correct"), harness=True,
      compare=True),
    M("ece", "ECE", -1, compute=lambda s: st.ece_from_sums(s.sums(), s.n), harness=True,
      compare=True, interval=BASIC, null_test=True),
    M("aece", "AECE", -1, compute=_aece, samples=True, harness=True, compare=True,
      interval=BASIC),
    # no consistency test: its largest gap sits in a bin of one or two samples, whose gap is
    # as large when labels are drawn from the model (p = 1 on the uncalibrated ResNet-110)
    M("mce", "MCE", -1, compute=lambda s: st.mce_from_sums(s.sums()), harness=True,
      compare=True, interval=BASIC),
    # netcal's ACE: every non-empty bin weighs the same (no interval study: percentile)
    M("ace", "ACE (bin mean)", -1, compute=lambda s: st.ace_from_sums(s.sums())),
    M("classwise_ece", "Classwise ECE", -1,
      compute=lambda s: _classwise_ece(s), harness=True,
      compare=True, interval=BASIC, null_test=True),
    M("nll", "NLL", -1, percent=False, unit="nats", compute=lambda s: s.mean("nll"), harness=True,
      compare=True, most=None),
    # the sum over classes of squared errors: 2 where all mass sits on a wrong class
    M("brier", "Brier", -1, compute=lambda s: s.mean("brier"), harness=True, compare=True,
      unit="×100", most=2.0),
    M("entropy", "Entropy", 0, percent=False, unit="nats", compute=lambda s: s.mean("entropy"),
      harness=True, compare=True, most=None),
    M("refinement_auroc", "Refinement AUROC", +1,
      compute=lambda s: st.auroc_from_runs(*s.correct_runs()), samples=True, harness=True),
    M("ks_error", "KS error", -1, compute=_ks, samples=True, interval=BASIC),
    M("smooth_ece", "Smooth ECE", -1, compute=lambda s: s.smooth(), samples=True),
    M("rms_ce", "RMS calibration error", -1, compute=lambda s: st.rms_from_sums(s.sums(), s.n),
      interval=BASIC, null_test=True),
    M("debiased_rms_ce", "Debiased RMS calibration error", -1,
      compute=lambda s: st.rms_from_sums(s.sums(), s.n, debias=True), interval=BASIC,
      null_test=True),
    M("debiased_ece", "Debiased ECE", -1,
      compute=lambda s: st.debiased_ece_from_sums(s.sums(), s.n), interval=TWO_PIVOT,
      plug_in="ece", null_test=True),
    M("debiased_classwise_ece", "Debiased classwise ECE", -1,
      compute=lambda s: _classwise_ece(s, debias=True), interval=TWO_PIVOT,
      plug_in="classwise_ece", null_test=True),
    M("aurc", "AURC", -1, compute=lambda s: st.aurc_from_runs(*s.correct_runs()),
      samples=True),
    M("augrc", "AUGRC", -1, compute=lambda s: st.augrc_from_runs(*s.correct_runs()),
      samples=True),
    M("optimal_ece", "Optimal ECE", -1),
    M("mean_confidence", "Mean confidence", 0, compute=lambda s: s.sums()[:, 1].sum(-1) / s.n),
    M("gap", "Confidence − accuracy", 0, compute=_gap, least=-1.0),
    M("overconfident", "Over-confidence", 0,
      compute=lambda s: st.over_under_from_sums(s.sums(), s.n)[0], interval=BASIC),
    M("underconfident", "Under-confidence", 0,
      compute=lambda s: st.over_under_from_sums(s.sums(), s.n)[1], interval=BASIC),
    M("ood_auroc", "OOD AUROC", +1),
    M("ood_fpr95", "OOD FPR95", -1),
    M("ood_aupr", "OOD AUPR-In", +1),
)  # fmt: skip


_BY_NAME = {m.name: m for m in METRICS_TABLE}

#: what :func:`~calibkit.metrics.evaluate` reports, in order (OOD ones need OOD scores)
METRICS = tuple(m.name for m in METRICS_TABLE if not m.name.startswith("ood_"))
OOD_METRICS = tuple(m.name for m in METRICS_TABLE if m.name.startswith("ood_"))
#: what a bench run stores per split and calibrator, and ``compare``'s columns
HARNESS = tuple(m.name for m in METRICS_TABLE if m.harness)
COMPARE = tuple(m.name for m in METRICS_TABLE if m.compare)
#: the metrics that need every sample (ranks, ties), not only bin sums
SAMPLE_METRICS = tuple(m.name for m in METRICS_TABLE if m.samples)
#: the metrics computed from :class:`Statistics`, in report order
COMPUTED = tuple(m for m in METRICS_TABLE if m.compute is not None)


def info(name: str) -> MetricInfo:
    """The table's row of ``name``; ``ood_auroc:<split>`` reads as ``ood_auroc``."""
    base = name.split(":", 1)[0]
    if base not in _BY_NAME:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(_BY_NAME)}")
    return _BY_NAME[base]


def with_unit(name: str) -> str:
    """``name`` with the unit its printed values are in, as every table names a column or
    row: "ece (%)", "nll (nats)", "brier (×100)"; a unitless metric keeps its name."""
    unit = info(name).shown_unit
    return f"{name} ({unit})" if unit else name


def direction(name: str) -> int:
    """-1 (lower is better), +1 (higher is better) or 0; 0 for names not in the table."""
    base = name.split(":", 1)[0]
    return _BY_NAME[base].direction if base in _BY_NAME else 0


def in_percent(name: str) -> bool:
    """Whether ``name`` is a fraction shown × 100; False for names not in the table (a
    fitted parameter such as TS's temperature)."""
    base = name.split(":", 1)[0]
    return base in _BY_NAME and _BY_NAME[base].percent
