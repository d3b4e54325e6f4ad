"""Fit several calibrators on one split and score them on another, side by side.

Methods with randomness (a ``seed`` setting: cross-validated and split-based ones) are
fitted once per seed and reported as mean ± std over seeds; the interval of every method is
the bootstrap interval of its first seed's test metrics.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..metrics import evaluate
from . import REGISTRY, create

#: Columns of the comparison, in order (all lower is better except accuracy and entropy).
COLUMNS = ("accuracy", "ece", "aece", "mce", "classwise_ece", "nll", "brier", "entropy")
HIGHER_IS_BETTER = {"accuracy"}
NEUTRAL = {"entropy"}  # reported (Neural Clamping's "Entropy ↑") but not ranked


def default_methods() -> list[str]:
    return ["uncalibrated", *REGISTRY.names()]


def has_randomness(spec: str) -> bool:
    name = spec.split(":", 1)[0]
    return name != "uncalibrated" and "seed" in REGISTRY.parameters(name)


def compare_methods(
    val: tuple[Any, Any],
    test: tuple[Any, Any],
    methods: list[str] | None = None,
    *,
    seeds: int = 1,
    bootstrap: int = 200,
    n_bins: int = 15,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Fit each method on ``val`` and score it on ``test``.

    Returns {method: {"metrics", "std", "intervals", "fit", "seeds"}}.
    """
    methods = methods or default_methods()
    for m in methods:  # validate every spec before fitting anything
        if m != "uncalibrated":
            create(m)
    z_val, y_val = val
    z_test, y_test = test
    out: dict[str, dict[str, Any]] = {}
    for spec in methods:
        if progress:
            progress(spec)
        runs = seeds if has_randomness(spec) else 1
        values, first, fit = [], None, None
        for s in range(runs):
            if spec == "uncalibrated":
                scores = z_test
            else:
                cal = create(spec, seed=s) if has_randomness(spec) else create(spec)
                cal.fit(z_val, y_val)
                scores = cal(torch.as_tensor(z_test)).double()
                fit = fit or cal.fit_report_
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r = evaluate(scores, y_test, n_bins=n_bins, optimal=False, smooth=False,
                             bootstrap=bootstrap if s == 0 else 0, seed=0)  # fmt: skip
            values.append([r[c] for c in COLUMNS])
            first = first or r
        arr = np.array(values)
        out[spec] = {
            "metrics": dict(zip(COLUMNS, arr.mean(0).tolist(), strict=True)),
            "std": dict(zip(COLUMNS, arr.std(0, ddof=1).tolist(), strict=True))
            if runs > 1
            else None,
            "intervals": {c: list(first.intervals[c]) for c in COLUMNS} if bootstrap else None,
            "fit": None if fit is None else {"report": str(fit), **fit.details},
            "seeds": runs,
        }
    return out


def best_per_column(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The method with the best mean value in each ranked column."""
    best = {}
    for c in COLUMNS:
        if c in NEUTRAL:
            continue
        vals = {m: r["metrics"][c] for m, r in results.items() if not math.isnan(r["metrics"][c])}
        pick = max if c in HIGHER_IS_BETTER else min
        best[c] = pick(vals, key=vals.get)
    return best


def cell(result: dict[str, Any], column: str, intervals: bool = True) -> str:
    """'0.0113 ± 0.0004 [0.0095, 0.0131]' for one method and column."""
    v = result["metrics"][column]
    text = f"{v:.4f}"
    if result["std"]:
        text += f" ± {result['std'][column]:.4f}"
    if intervals and result["intervals"]:
        lo, hi = result["intervals"][column]
        text += f" [{lo:.4f}, {hi:.4f}]"
    return text
