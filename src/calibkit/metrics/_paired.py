"""Two calibrations of the same samples compared: each one's metrics and the bootstrapped
difference, resampling the samples once for both (paired), so that what they share cancels.

:func:`compare_nested` does the same over several seeds (trained networks, calibration
splits): the test rows are resampled within each seed, paired between the two methods, and
the difference averaged over the seeds. It treats the seeds as fixed, so it answers "on
these networks, over this test population" and has far more power than a t-test over three
seeds, which answers "over the training randomness too" (docs/metrics.md, "Paired tests:
type-I error and power").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from .._docs import documented
from .._metric_settings import (
    METRIC_PARAMETERS,
    Binary,
    Binning,
    BootstrapSeed,
    Ci,
    MetricBins,
    Probs,
    Resamples,
    Smooth,
)
from .._settings import checks_declared
from .._threads import sized_by_first_argument
from ._binning import BinScheme
from ._inputs import prepare
from ._resample import (  # the evaluation's own steps, shared with the paired comparison
    MetricNames,
    bootstrap_vectors,
    format_value,
    json_float,
    metric_vectors,
    percentile_interval,
)


@dataclass
class PairedComparison:
    """Metrics of two calibrations of the same samples and their bootstrapped difference
    (means over the seeds for :func:`compare_nested`); ``p_values``: the bootstrap's
    two-sided p-value of each difference, 2 min(P*(d* <= 0), P*(d* >= 0)).

    Examples
    --------
    >>> import torch
    >>> from calibkit.metrics import compare_paired
    >>> g = torch.Generator().manual_seed(0)
    >>> z = 4 * torch.randn(400, 3, generator=g); y = torch.randint(3, (400,), generator=g)
    >>> c = compare_paired(z, z / 4, y, bootstrap=200, smooth=False)
    >>> round(c.a["ece"], 3), round(c.b["ece"], 3), round(c.diff["ece"], 3)  # b − a
    (0.528, 0.266, -0.263)
    >>> lo, hi = c.intervals["ece"]
    >>> bool(lo < c.diff["ece"] < hi < 0), c.p_values["ece"]
    (True, 0.0)
    """

    a: dict[str, float]
    b: dict[str, float]
    diff: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    settings: dict[str, Any]
    p_values: dict[str, float] = field(default_factory=dict)

    def significant(self, name: str) -> bool:
        """True when the interval of ``b - a`` for ``name`` excludes zero."""
        lo, hi = self.intervals[name]
        return lo > 0 or hi < 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "metrics": {
                k: {
                    "a": json_float(self.a[k]),
                    "b": json_float(self.b[k]),
                    "diff": json_float(self.diff[k]),
                    "interval": [json_float(x) for x in self.intervals[k]],
                    "significant": self.significant(k),
                    "p_value": json_float(self.p_values.get(k, float("nan"))),
                }
                for k in self.diff
            },
        }

    def table(self) -> str:
        head = ("metric", "a", "b", "b - a", f"{self.settings['ci']:.0%} CI of b - a")
        rows = [
            (
                k,
                format_value(self.a[k]),
                format_value(self.b[k]),
                format_value(self.diff[k]),
                f"[{format_value(self.intervals[k][0])}, {format_value(self.intervals[k][1])}]"
                + (" *" if self.significant(k) else ""),
            )
            for k in self.diff
        ]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]
        ]
        lines.insert(1, "-" * len(lines[0]))
        return "\n".join(x.rstrip() for x in lines) + "\n* interval excludes 0"

    def __str__(self) -> str:
        return self.table()


@documented(
    METRIC_PARAMETERS,
    "PairedComparison: each metric of a and of b, their difference b − a with its interval "
    "and p-value.",
    scores_a=("array-like or Tensor, shape (N, K)", "The first calibration's scores."),
    scores_b=("array-like or Tensor, shape (N, K)", "The second's, of the same samples."),
    settings=("keyword arguments", "Those of :func:`compare_nested`."),
)
def compare_paired(scores_a: Any, scores_b: Any, labels: Any, **settings: Any) -> PairedComparison:
    """Compare two calibrations (for example before and after a calibrator) of the same samples.

    Both score sets are resampled with the *same* bootstrap draws, so the interval of each
    metric's difference ``b - a`` accounts for their correlation. ``settings``: those of
    :func:`compare_nested` (``probs``, ``n_bins``, ``binning``, ``binary``, ``bootstrap``,
    ``seed``, ``ci``, ``smooth``, ``metrics``). Its type-I error and power: docs/metrics.md.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> z = 4 * torch.randn(400, 3, generator=g); y = torch.randint(3, (400,), generator=g)
    >>> c = compare_paired(z, z / 4, y, bootstrap=200, smooth=False)
    >>> c.diff["ece"] < 0 and c.significant("ece")
    True
    """
    return compare_nested([(scores_a, scores_b, labels)], **settings)


@documented(
    METRIC_PARAMETERS,
    "PairedComparison: each metric of a and of b (means over the groups), the mean "
    "difference b − a with its interval and p-value.",
    groups=(
        "sequence of (scores_a, scores_b, labels)",
        "One per seed: the two methods' scores of the same test rows, and their labels.",
    ),
)
@checks_declared
@sized_by_first_argument
def compare_nested(
    groups: Sequence[tuple[Any, Any, Any]],
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: Binary = "top-label",
    bootstrap: Resamples = 1000,
    seed: BootstrapSeed = 0,
    ci: Ci = 0.95,
    smooth: Smooth = True,
    metrics: MetricNames = None,
) -> PairedComparison:
    """Two methods compared over seeds: ``groups`` holds one ``(scores_a, scores_b, labels)``
    per seed. Each bootstrap replicate resamples every seed's test rows (the same draws for
    both methods; every seed with ``seed``, so seeds that share their test rows share their
    resamples) and averages the differences b − a over the seeds. ``a``, ``b`` and ``diff``
    are the means over the seeds. With one group it is :func:`compare_paired`.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> runs = []
    >>> for s in range(3):
    ...     z = 4 * torch.randn(300, 3, generator=g); y = torch.randint(3, (300,), generator=g)
    ...     runs.append((z, z / 4, y))
    >>> c = compare_nested(runs, bootstrap=200, metrics=["ece"])
    >>> c.diff["ece"] < 0 and c.significant("ece") and c.p_values["ece"] < 0.05
    True
    """
    only = metrics  # checked where it entered: a frozenset, or None for all
    scheme = BinScheme(n_bins, binning, torch.float64)  # checked once, before the data
    if not groups:
        raise ValueError("groups: empty; give one (scores_a, scores_b, labels) per seed")
    est_a, est_b, reps = [], [], []
    for scores_a, scores_b, labels in groups:
        pa = prepare.trusting(scores_a, labels, probs=probs, binary=binary)
        pb = prepare.trusting(scores_b, labels, probs=probs, binary=binary)
        if pa.k != pb.k:
            raise ValueError(
                f"scores_a and scores_b have {pa.k} and {pb.k} classes; they must match"
            )
        for est, pr in ((est_a, pa), (est_b, pb)):
            vec = metric_vectors(pr, scheme, None, smooth=smooth, only=only)
            est.append({k: float(v[0]) for k, v in vec.items()})
        ba, bb = bootstrap_vectors([pa, pb], scheme, bootstrap, seed, smooth=smooth, only=only)
        reps.append({k: bb[k] - ba[k] for k in est_a[-1]})
    names = list(est_a[0])
    a = {k: statistics.fmean(e[k] for e in est_a) for k in names}
    b = {k: statistics.fmean(e[k] for e in est_b) for k in names}
    d = {k: torch.stack([r[k] for r in reps]).mean(0) for k in names}
    intervals = {k: percentile_interval(d[k], ci) for k in names}
    p_values = {k: _p_value(d[k]) for k in names}
    settings = {
        "n_bins": n_bins,
        "binning": binning,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
        "seeds": len(groups),
    }
    return PairedComparison(a, b, {k: b[k] - a[k] for k in names}, intervals, settings, p_values)


def _p_value(d: Tensor) -> float:
    """Two-sided bootstrap p-value of a difference from its replicates (NaN dropped)."""
    d = d[~torch.isnan(d)]
    if d.numel() == 0:
        return math.nan
    return min(1.0, 2 * min(float((d <= 0).double().mean()), float((d >= 0).double().mean())))
