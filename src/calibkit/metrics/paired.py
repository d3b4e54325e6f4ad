"""Two calibrations of the same samples compared: each one's metrics and the bootstrapped
difference, resampling the samples once for both (paired), so that what they share cancels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._checks import check_positive_int
from .binning import BinScheme
from .evaluate import (  # the evaluation's own steps, shared with the paired comparison
    _bootstrap_vectors,
    _check_ci,
    _fmt,
    _interval,
    _json_float,
    _metric_vectors,
)
from .inputs import prepare


@dataclass
class PairedComparison:
    """Metrics of two calibrations of the same samples and their bootstrapped difference."""

    a: dict[str, float]
    b: dict[str, float]
    diff: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    settings: dict[str, Any]

    def significant(self, name: str) -> bool:
        """True when the interval of ``b - a`` for ``name`` excludes zero."""
        lo, hi = self.intervals[name]
        return lo > 0 or hi < 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "metrics": {
                k: {
                    "a": _json_float(self.a[k]),
                    "b": _json_float(self.b[k]),
                    "diff": _json_float(self.diff[k]),
                    "interval": [_json_float(x) for x in self.intervals[k]],
                    "significant": self.significant(k),
                }
                for k in self.diff
            },
        }

    def table(self) -> str:
        head = ("metric", "a", "b", "b - a", f"{self.settings['ci']:.0%} CI of b - a")
        rows = [
            (
                k,
                _fmt(self.a[k]),
                _fmt(self.b[k]),
                _fmt(self.diff[k]),
                f"[{_fmt(self.intervals[k][0])}, {_fmt(self.intervals[k][1])}]"
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


def compare_paired(
    scores_a: Any,
    scores_b: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
    bootstrap: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    smooth: bool = True,
) -> PairedComparison:
    """Compare two calibrations (for example before and after a calibrator) of the same samples.

    Both score sets are resampled with the *same* bootstrap draws, so the interval of each
    metric's difference ``b - a`` accounts for their correlation.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> z = 4 * torch.randn(400, 3, generator=g); y = torch.randint(3, (400,), generator=g)
    >>> c = compare_paired(z, z / 4, y, bootstrap=200, smooth=False)
    >>> c.diff["ece"] < 0 and c.significant("ece")
    True
    """
    check_positive_int(bootstrap, "bootstrap")
    ci = _check_ci(ci)
    pa = prepare(scores_a, labels, probs=probs, binary=binary)
    pb = prepare(scores_b, labels, probs=probs, binary=binary)
    if pa.k != pb.k:
        raise ValueError(f"scores_a and scores_b have {pa.k} and {pb.k} classes; they must match")
    BinScheme.make(n_bins, binning, pa.scores.dtype)  # validates the settings
    va = {
        k: float(v[0]) for k, v in _metric_vectors(pa, binning, n_bins, None, smooth=smooth).items()
    }
    vb = {
        k: float(v[0]) for k, v in _metric_vectors(pb, binning, n_bins, None, smooth=smooth).items()
    }
    ba, bb = _bootstrap_vectors([pa, pb], binning, n_bins, bootstrap, seed, smooth=smooth)
    intervals = {k: _interval(bb[k] - ba[k], ci) for k in va}
    settings = {
        "n_bins": n_bins,
        "binning": binning,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
    }
    return PairedComparison(va, vb, {k: vb[k] - va[k] for k in va}, intervals, settings)
