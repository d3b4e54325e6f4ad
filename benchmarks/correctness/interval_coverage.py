"""Do calibkit's 95 % bootstrap intervals cover the truth? A coverage study on data whose
every metric is known exactly (:class:`calibkit.metrics._synthetic.SyntheticClassifier`).

For each cell (N samples, K classes, calibrated or over-confident) it draws R independent
samples, evaluates each with B bootstrap resamples, and records for every metric and every
interval method (percentile, basic, BCa) whether the interval covers the metric's true
value, and whether it excludes the sample's own estimate. Results go to a JSON-lines file,
one line per finished cell, so a killed run resumes where it stopped.

    python benchmarks/correctness/interval_coverage.py --out /tmp/coverage.jsonl  # the full grid
    python benchmarks/correctness/interval_coverage.py --out /tmp/coverage.jsonl --markdown
    python benchmarks/correctness/interval_coverage.py --out /tmp/c.jsonl --quick  # N <= 5,000

The test suite runs a small version of the same study (tests/metrics/test_coverage.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from calibkit.cli._progress import progress
from calibkit.metrics._binning import BinScheme
from calibkit.metrics._inputs import prepare
from calibkit.metrics._intervals import interval, policy
from calibkit.metrics._resample import (
    bootstrap_vectors,
    jackknife_vectors,
    metric_vectors,
)
from calibkit.metrics._synthetic import SyntheticClassifier

METHODS = ("percentile", "basic", "bca")
#: the study's bins: 15, calibkit's convention
SCHEME = BinScheme(15, "calibkit", torch.float64)
CASES = {"calibrated": 1.0, "over-confident": 1.5}
#: replications per sample size (the standard error of a 95 % coverage is
#: sqrt(0.95 · 0.05 / R): 1.0 points at R = 500, 1.3 at 300, 2.2 at 100)
REPLICATIONS = {500: 500, 5_000: 300, 50_000: 100}
SMOOTH_SIZES = (500, 5_000)  # smooth ECE's bootstrap costs ~10 s per 1,000 resamples


def coverage_cell(
    n: int,
    k: int,
    gamma: float,
    reps: int,
    boot: int,
    *,
    smooth: bool,
    seed0: int = 0,
    metrics: tuple[str, ...] | None = None,
) -> dict:
    """Coverage and estimate-exclusion rates of each interval method for one cell."""
    model = SyntheticClassifier(k, gamma=gamma)
    truth = model.truth()
    names = tuple(m for m in (metrics or truth) if smooth or m != "smooth_ece")
    only = frozenset(names)
    hits = {m: {meth: 0 for meth in METHODS} for m in names}
    outside = {m: {meth: 0 for meth in METHODS} for m in names}
    width = {m: {meth: 0.0 for meth in METHODS} for m in names}
    valid = dict.fromkeys(names, 0)
    for r in range(reps):
        probs, labels = model.sample(n, seed=seed0 + r)
        p = prepare(probs, labels, probs=True)
        est = {
            m: float(v[0])
            for m, v in metric_vectors(p, SCHEME, None, smooth=smooth, only=only).items()
        }
        rep = bootstrap_vectors([p], SCHEME, boot, seed0 + r, smooth=smooth, only=only)[0]
        jack = jackknife_vectors(p, SCHEME, r, smooth=smooth, only=only)
        for m in names:
            if not math.isfinite(est[m]):
                continue
            valid[m] += 1
            for meth in METHODS:
                lo, hi = interval(
                    rep[m], est[m], 0.95, meth, lower_bound=policy(m).least, jack=jack[m]
                )
                hits[m][meth] += lo <= truth[m] <= hi
                outside[m][meth] += not lo <= est[m] <= hi
                width[m][meth] += hi - lo
    return {
        "n": n,
        "k": k,
        "gamma": gamma,
        "reps": reps,
        "bootstrap": boot,
        "truth": {m: truth[m] for m in names},
        "coverage": {m: {t: hits[m][t] / max(valid[m], 1) for t in METHODS} for m in names},
        "excludes_estimate": {
            m: {t: outside[m][t] / max(valid[m], 1) for t in METHODS} for m in names
        },
        "width": {m: {t: width[m][t] / max(valid[m], 1) for t in METHODS} for m in names},
    }


def cells(quick: bool, cases: tuple[str, ...] = tuple(CASES)):
    sizes = {500: 60, 5_000: 30} if quick else REPLICATIONS
    for case, gamma in CASES.items():
        if case not in cases:
            continue
        for k in (10, 100):
            for n, reps in sizes.items():
                yield case, gamma, n, k, reps


def run(
    out: Path,
    boot: int,
    quick: bool,
    only: tuple[str, ...] | None = None,
    cases: tuple[str, ...] = tuple(CASES),
) -> None:
    """Every cell not yet in ``out``; ``only``: just these metrics (a study of its own, in
    its own file); ``cases``: just these models (one process per file: two processes can
    share the cores, each writing its own file; ``--markdown`` reads several)."""
    done = {(c["case"], c["n"], c["k"], c["smooth"]) for c in read(out)}
    for case, gamma, n, k, reps in cells(quick, cases):
        for smooth in (False, True):
            if smooth and (k != 10 or n not in SMOOTH_SIZES or (only and "smooth_ece" not in only)):
                continue
            if (case, n, k, smooth) in done:
                continue
            t0 = time.time()
            metrics = (
                ("smooth_ece",)
                if smooth
                else tuple(m for m in only or () if m != "smooth_ece") or None
            )
            b, r = (boot // 5, min(reps, 100)) if smooth else (boot, reps)
            label = f"{case} N={n} K={k}{' smooth' if smooth else ''}"
            with progress(1, label, True):  # a line every few seconds while a cell runs
                cell = coverage_cell(n, k, gamma, r, b, smooth=smooth, metrics=metrics)
            cell.update(case=case, smooth=smooth, seconds=round(time.time() - t0, 1))
            tmp = out.with_suffix(".tmp")
            tmp.write_text(out.read_text() if out.exists() else "")
            with tmp.open("a") as f:
                f.write(json.dumps(cell) + "\n")
            os.replace(tmp, out)  # atomic: a killed run never leaves half a line
            print(
                f"{case} N={n} K={k}{' smooth' if smooth else ''}: {cell['seconds']} s",
                file=sys.stderr,
                flush=True,
            )


def read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def markdown(path: Path) -> str:
    """One table per case: metric rows, (N, K) columns, coverage of percentile / basic /
    BCa in each cell (and the truth's range)."""
    rows = read(path)
    out = []
    for case in CASES:
        got = [c for c in rows if c["case"] == case]
        cols = sorted({(c["k"], c["n"]) for c in got})
        metrics: list[str] = []
        for c in got:
            metrics += [m for m in c["coverage"] if m not in metrics]
        head = ["metric"] + [f"K={k}, N={n:,}" for k, n in cols]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for m in metrics:
            cells_ = []
            for k, n in cols:
                c = next(
                    (c for c in got if (c["k"], c["n"]) == (k, n) and m in c["coverage"]), None
                )
                cells_.append(
                    ""
                    if c is None
                    else " / ".join(f"{100 * c['coverage'][m][t]:.0f}" for t in METHODS)
                )
            lines.append(f"| `{m}` | " + " | ".join(cells_) + " |")

        def sizes(smooth: bool, got: list[dict] = got) -> str:
            reps = sorted(
                {(c["n"], c["reps"], c["bootstrap"]) for c in got if c["smooth"] == smooth}
            )
            return "; ".join(f"N = {n:,}: R = {r}, B = {b}" for n, r, b in reps)

        out.append(
            f"**{case}** (γ = {CASES[case]}): coverage in % of percentile / basic / "
            f"BCa 95 % intervals. Replications R and resamples B: {sizes(False)}; "
            f"smooth ECE (K = 10 only, its bootstrap is slow): {sizes(True)}.\n\n"
            + "\n".join(lines)
        )
    return "\n\n".join(out)


#: a method must beat a simpler one's lowest coverage by more than this to be chosen
#: (about the standard error of a coverage at R = 100 replications)
MARGIN = 0.03


def choose(path: Path) -> dict[str, tuple[str, float, float]]:
    """Per metric, the simplest method (percentile, then basic, then BCa) whose lowest and
    mean coverage over every cell are both within :data:`MARGIN` of the best of the three,
    with its lowest and mean coverage (where none is, the highest lowest coverage)."""
    rows = read(path)
    best = {}
    for m in sorted({m for c in rows for m in c["coverage"]}):
        cells_ = [c["coverage"][m] for c in rows if m in c["coverage"]]
        low = {t: min(c[t] for c in cells_) for t in METHODS}
        mean = {t: float(np.mean([c[t] for c in cells_])) for t in METHODS}
        near = [
            t
            for t in METHODS
            if low[t] >= max(low.values()) - MARGIN and mean[t] >= max(mean.values()) - MARGIN
        ]
        t = near[0] if near else max(METHODS, key=lambda t: (low[t], mean[t]))
        best[m] = (t, low[t], mean[t])
    return best


def choice_table(path: Path) -> str:
    """Before (percentile everywhere) and after (each metric's chosen method): the lowest
    and the mean coverage over every cell of both cases, and calibkit's default."""
    from calibkit.metrics._intervals import policy

    rows = read(path)
    lines = [
        "| metric | percentile: lowest / mean | chosen | chosen: lowest / mean | "
        "calibkit's default |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m, (t, low, mean) in choose(path).items():
        pct = [c["coverage"][m]["percentile"] for c in rows if m in c["coverage"]]
        lines.append(
            f"| `{m}` | {100 * min(pct):.0f} / {100 * np.mean(pct):.0f} | {t} | "
            f"{100 * low:.0f} / {100 * mean:.0f} | {policy(m).method} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON-lines results (resumable)")
    ap.add_argument("--bootstrap", type=int, default=500)
    ap.add_argument("--quick", action="store_true", help="N ≤ 5,000, fewer replications")
    ap.add_argument("--markdown", action="store_true", help="print the tables and stop")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--metrics", default=None, help="comma-separated: only these metrics")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    a = ap.parse_args()
    if a.markdown:
        print(markdown(a.out) + "\n\n" + choice_table(a.out))
        return
    torch.set_num_threads(a.threads)
    np.seterr(all="ignore")
    only = tuple(a.metrics.split(",")) if a.metrics else None
    run(a.out, a.bootstrap, a.quick, only, tuple(a.cases.split(",")))
    print(markdown(a.out) + "\n\n" + choice_table(a.out))


if __name__ == "__main__":
    main()
