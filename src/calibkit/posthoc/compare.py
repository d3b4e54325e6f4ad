"""Fit several calibrators on one split and score them on another, side by side.

Methods with randomness (a ``seed`` setting: cross-validated and split-based ones) are
fitted once per seed and reported as mean ± std over seeds. Data with one split (a network's
test logits, as most published logits come) is divided into stratified calibration and test
parts, once per seed (:func:`compare_resplit`); there every method is fitted on every
seed's split and the spread is over splits. The interval of every method is the bootstrap
interval of its first seed's test metrics.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..metrics import evaluate, table
from ..registry import parse_spec
from . import REGISTRY, create, names
from .checks import check_fit_data

#: Columns of the comparison, in order (the metrics table's ``COMPARE``); a column whose
#: metric has no direction (entropy: Neural Clamping's "Entropy ↑") is shown, not ranked.
COLUMNS = table.COMPARE


def default_methods() -> list[str]:
    """Every method on logits, after "uncalibrated"."""
    return ["uncalibrated", *names("logits")]


def has_randomness(spec: str) -> bool:
    name = parse_spec(spec).name
    return name != "uncalibrated" and "seed" in REGISTRY.parameters(name)


def stratified_split(labels: Any, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(calibration, test) positions: ``fraction`` of every class to calibration, drawn with
    ``seed`` (scikit-learn's ``StratifiedShuffleSplit``), both sorted."""
    from sklearn.model_selection import StratifiedShuffleSplit

    if not isinstance(fraction, float | int) or not 0 < fraction < 1:
        raise ValueError(f"split: expected a fraction in (0, 1) for calibration, got {fraction!r}")
    y = np.asarray(labels)
    counts = np.bincount(y)
    if (counts == 1).any():
        k = int(np.flatnonzero(counts == 1)[0])
        raise ValueError(f"split: class {k} has one sample; a stratified split needs two per class")
    try:
        cal, test = next(
            StratifiedShuffleSplit(1, train_size=fraction, random_state=seed).split(y, y)
        )
    except ValueError as err:
        raise ValueError(f"split: {err}") from None
    return np.sort(cal), np.sort(test)


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
    """Fit each method on ``val`` and score it on ``test``; methods with randomness are
    fitted once per seed.

    Returns {method: {"metrics", "std", "intervals", "fit", "seeds"}}.
    """
    pairs = [(s, val, test) for s in range(seeds)]
    return _compare(pairs, methods, False, bootstrap, n_bins, progress)


def compare_resplit(
    scores: Any,
    labels: Any,
    methods: list[str] | None = None,
    *,
    fraction: float = 0.5,
    seeds: int = 5,
    bootstrap: int = 200,
    n_bins: int = 15,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """For data with one split (test logits only): per seed, a stratified ``fraction`` of it
    calibrates and the rest tests (:func:`stratified_split`); every method is fitted on each
    seed's split, and mean ± std are over the ``seeds`` splits. Same return as
    :func:`compare_methods`."""
    z, y = check_fit_data(scores, labels)  # shapes, values and labels, before any split
    z, y = z.cpu(), y.cpu()
    pairs = []
    for s in range(seeds):
        cal, test = (torch.from_numpy(i) for i in stratified_split(y.numpy(), fraction, s))
        pairs.append((s, (z[cal], y[cal]), (z[test], y[test])))
    return _compare(pairs, methods, True, bootstrap, n_bins, progress)


def _compare(pairs, methods, every_seed: bool, bootstrap: int, n_bins: int, progress):
    """Each method over (seed, val, test) ``pairs``: all pairs when ``every_seed`` (splits
    differ), else only the first unless the method has randomness (one split, many seeds)."""
    methods = methods or default_methods()
    for m in methods:  # validate every spec before fitting anything
        if m != "uncalibrated":
            create(m)
    out: dict[str, dict[str, Any]] = {}
    for spec in methods:
        if progress:
            progress(spec)
        random = has_randomness(spec)
        runs = pairs if every_seed or random else pairs[:1]
        values, first, fit = [], None, None
        for s, (z_val, y_val), (z_test, y_test) in runs:
            if spec == "uncalibrated":
                scores = z_test
            else:
                cal = create(spec, seed=s) if random else create(spec)
                cal.fit(z_val, y_val)
                scores = cal(torch.as_tensor(z_test)).double()
                fit = fit or cal.fit_report_
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r = evaluate(scores, y_test, n_bins=n_bins, optimal=False, smooth=False,
                             bootstrap=bootstrap if first is None else 0, seed=0)  # fmt: skip
            values.append([r[c] for c in COLUMNS])
            first = first or r
        arr = np.array(values)
        out[spec] = {
            "metrics": dict(zip(COLUMNS, arr.mean(0).tolist(), strict=True)),
            "std": dict(zip(COLUMNS, arr.std(0, ddof=1).tolist(), strict=True))
            if len(runs) > 1
            else None,
            "intervals": {c: list(first.intervals[c]) for c in COLUMNS} if bootstrap else None,
            "fit": None if fit is None else {"report": str(fit), **fit.details},
            "seeds": len(runs),
        }
    return out


def best_per_column(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The method with the best mean value in each ranked column."""
    best = {}
    for c in COLUMNS:
        if not table.direction(c):
            continue
        vals = {m: r["metrics"][c] for m, r in results.items() if not math.isnan(r["metrics"][c])}
        pick = max if table.direction(c) > 0 else min
        best[c] = pick(vals, key=vals.get)
    return best


def cell(result: dict[str, Any], column: str, intervals: bool = True) -> str:
    """'0.0113 ± 0.0004 [0.0095, 0.0131]' for one method and column."""
    v = result["metrics"][column]
    text = f"{v:.4f}"
    if result["std"]:
        text = table.plus_minus(v, result["std"][column], 4)
    if intervals and result["intervals"]:
        lo, hi = result["intervals"][column]
        text += f" [{lo:.4f}, {hi:.4f}]"
    return text
