"""How a metric is shown to people: its label, which way is better, and its unit.

A fraction (an error, an accuracy) is printed × 100 in "%", the Brier score × 100 as
"×100" (it is not a share), NLL and entropy in nats; machines (``--json``, the Python API)
get fractions. Every table of calibkit (the CLI, ``compare``, the bench report) formats
values and spreads over seeds with these functions.

>>> shown("ece").heading, shown("ood_auroc:svhn").label, with_unit("nll")
('ECE (%)', 'OOD AUROC', 'nll (nats)')
>>> direction("accuracy"), direction("temperature"), display("brier", 0.0912)
(1, 0, '9.12')
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Shown:
    """How one metric is shown: ``label`` for people; ``direction`` -1 when lower is better,
    +1 when higher is, 0 when neither (a description, not a score); ``percent``: a fraction
    shown × 100; ``unit``: how that × 100 reads in a heading ("%" for a share, "×100" for a
    score that is not one), or the unit of a value shown as it is ("nats")."""

    label: str
    direction: int
    percent: bool = True
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
        shown in %, else 4 decimals; "n/a" for a missing value."""
        if value is None or math.isnan(value):
            return "n/a"
        return self.format(value, 2 if self.percent else 4)


S = Shown
#: every metric of :data:`calibkit.metrics._table.METRICS_TABLE`, in its order
SHOWN: dict[str, Shown] = {
    "accuracy": S("Accuracy", +1),
    "ece": S("ECE", -1),
    "aece": S("AECE", -1),
    "mce": S("MCE", -1),
    "ace": S("ACE (bin mean)", -1),
    "classwise_ece": S("Classwise ECE", -1),
    "nll": S("NLL", -1, percent=False, unit="nats"),
    "brier": S("Brier", -1, unit="×100"),
    "entropy": S("Entropy", 0, percent=False, unit="nats"),
    "refinement_auroc": S("Refinement AUROC", +1),
    "ks_error": S("KS error", -1),
    "smooth_ece": S("Smooth ECE", -1),
    "rms_ce": S("RMS calibration error", -1),
    "debiased_rms_ce": S("Debiased RMS calibration error", -1),
    "debiased_ece": S("Debiased ECE", -1),
    "debiased_classwise_ece": S("Debiased classwise ECE", -1),
    "aurc": S("AURC", -1),
    "augrc": S("AUGRC", -1),
    "optimal_ece": S("Optimal ECE", -1),
    "mean_confidence": S("Mean confidence", 0),
    "gap": S("Confidence − accuracy", 0),
    "overconfident": S("Over-confidence", 0),
    "underconfident": S("Under-confidence", 0),
    "ood_auroc": S("OOD AUROC", +1),
    "ood_fpr95": S("OOD FPR95", -1),
    "ood_aupr": S("OOD AUPR-In", +1),
}


def shown(name: str) -> Shown:
    """How metric ``name`` is shown; ``ood_auroc:<split>`` reads as ``ood_auroc``."""
    base = name.split(":", 1)[0]
    if base not in SHOWN:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(SHOWN)}")
    return SHOWN[base]


def display(name: str, value: float | None) -> str:
    """``value`` of metric ``name`` as printed for people (:meth:`Shown.display`)."""
    return shown(name).display(value)


def with_unit(name: str) -> str:
    """``name`` with the unit its printed values are in, as every table names a column or
    row: "ece (%)", "nll (nats)", "brier (×100)"; a unitless metric keeps its name."""
    unit = shown(name).shown_unit
    return f"{name} ({unit})" if unit else name


def direction(name: str) -> int:
    """-1 (lower is better), +1 (higher is better) or 0; 0 for names not in the table."""
    base = name.split(":", 1)[0]
    return SHOWN[base].direction if base in SHOWN else 0


def in_percent(name: str) -> bool:
    """Whether ``name`` is a fraction shown × 100; False for names not in the table (a
    fitted parameter such as TS's temperature)."""
    base = name.split(":", 1)[0]
    return base in SHOWN and SHOWN[base].percent


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
