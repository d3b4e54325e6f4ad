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
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricInfo:
    """One metric: ``direction`` -1 when lower is better, +1 when higher is, 0 when neither
    (a description, not a score); ``percent``: a fraction shown × 100."""

    name: str
    label: str
    direction: int
    percent: bool = True

    def format(self, value: float, digits: int = 2) -> str:
        """``value`` for a table: × 100 where it is a fraction."""
        return f"{value * (100 if self.percent else 1):.{digits}f}"


def plus_minus(mean: float, std: float, digits: int) -> str:
    """'mean ± std' with ``digits`` decimals."""
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def mean_std(values: Iterable[float | None], *, scale: float = 1.0, digits: int = 2) -> str:
    """'mean ± std' (sample std) of the finite ``values`` × ``scale``; the mean alone for one
    value; "—" for none. Every table of calibkit formats spread over seeds with this."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return "—"
    if len(vals) == 1:
        return f"{vals[0] * scale:.{digits}f}"
    return plus_minus(statistics.mean(vals) * scale, statistics.stdev(vals) * scale, digits)


METRICS_TABLE: tuple[MetricInfo, ...] = (
    MetricInfo("accuracy", "Accuracy", +1),
    MetricInfo("ece", "ECE", -1),
    MetricInfo("aece", "AECE", -1),
    MetricInfo("mce", "MCE", -1),
    MetricInfo("classwise_ece", "Classwise ECE", -1),
    MetricInfo("nll", "NLL", -1, percent=False),
    MetricInfo("brier", "Brier", -1),
    MetricInfo("entropy", "Entropy", 0, percent=False),
    MetricInfo("refinement_auroc", "Refinement AUROC", +1),
    MetricInfo("ks_error", "KS error", -1),
    MetricInfo("smooth_ece", "Smooth ECE", -1),
    MetricInfo("rms_ce", "RMS calibration error", -1),
    MetricInfo("debiased_rms_ce", "Debiased RMS calibration error", -1),
    MetricInfo("aurc", "AURC", -1),
    MetricInfo("optimal_ece", "Optimal ECE", -1),
    MetricInfo("mean_confidence", "Mean confidence", 0),
    MetricInfo("gap", "Confidence − accuracy", 0),
    MetricInfo("overconfident", "Over-confidence", 0),
    MetricInfo("underconfident", "Under-confidence", 0),
    MetricInfo("ood_auroc", "OOD AUROC", +1),
    MetricInfo("ood_fpr95", "OOD FPR95", -1),
    MetricInfo("ood_aupr", "OOD AUPR-In", +1),
)
_BY_NAME = {m.name: m for m in METRICS_TABLE}

#: what :func:`~calibkit.metrics.evaluate` reports, in order (OOD ones need OOD scores)
METRICS = tuple(m.name for m in METRICS_TABLE if not m.name.startswith("ood_"))
OOD_METRICS = ("ood_auroc", "ood_fpr95", "ood_aupr")
#: what a bench run stores per split and calibrator, and ``compare``'s columns
HARNESS = METRICS[:9]
COMPARE = METRICS[:8]


def info(name: str) -> MetricInfo:
    """The table's row of ``name``; ``ood_auroc:<split>`` reads as ``ood_auroc``."""
    base = name.split(":", 1)[0]
    if base not in _BY_NAME:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(_BY_NAME)}")
    return _BY_NAME[base]


def direction(name: str) -> int:
    """-1 (lower is better), +1 (higher is better) or 0; 0 for names not in the table."""
    base = name.split(":", 1)[0]
    return _BY_NAME[base].direction if base in _BY_NAME else 0
