"""Which bootstrap pivot suits a debiased binned error? (issue 46, docs/metrics.md, "The
debiased estimators' intervals").

The basic interval [2θ̂ − q_{1−α}, 2θ̂ − q_α] takes θ̂* − θ̂ as the law of θ̂ − θ: the
estimate θ̂ stands for the truth of the bootstrap world. For a plug-in error that is right
(with bins fixed, the resampled population's binned error *is* the sample's plug-in). For a
debiased estimate it is not: the bootstrap world's truth is still the sample's plug-in θ̂ₚ,
so the pivot is θ̂_d* − θ̂ₚ, and the interval [θ̂_d − (q_{1−α} − θ̂ₚ), θ̂_d − (q_α − θ̂ₚ)]
("plug-in pivot"). Where a cell's gaps are noise (a calibrated model) the basic interval is
right and the plug-in pivot too high; where they are signal, the other way round; the
bootstrap cannot tell which. "Both" is their hull, [basic's lower end, the plug-in pivot's
upper end]: the basic interval widened upwards by the debiasing θ̂ₚ − θ̂_d. This study
measures the three, and a fourth, "+ test": two-pivot whose lower end is 0 wherever the
consistency test does not reject calibration (:mod:`calibkit.metrics._consistency`; what
``evaluate`` gives by default), on the synthetic classifier's known truth, in
the grid of the coverage study (K ∈ {10, 100}, N ∈ {500, 5,000, 50,000}, calibrated and
over-confident), for ``debiased_ece`` and ``debiased_classwise_ece``, and for the plug-ins
``ece`` and ``classwise_ece`` (whose plug-in pivot and two-pivot are their basic interval).

    python benchmarks/correctness/debiased_intervals.py --out /tmp/di.jsonl               # the grid
    python benchmarks/correctness/debiased_intervals.py --out /tmp/di.jsonl --markdown

One line per finished cell goes to ``--out`` (JSON lines, written atomically): a killed run
resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from calibkit.cli._progress import progress
from calibkit.metrics._binning import BinScheme
from calibkit.metrics._consistency import calibrated_replicates, p_value
from calibkit.metrics._inputs import prepare
from calibkit.metrics._resample import bootstrap_vectors, metric_vectors
from calibkit.metrics._synthetic import SyntheticClassifier

#: each metric and the plug-in its bootstrap world has as truth (a plug-in: itself)
PAIRS = {
    "ece": "ece",
    "classwise_ece": "classwise_ece",
    "debiased_ece": "ece",
    "debiased_classwise_ece": "classwise_ece",
}
CASES = {"calibrated": 1.0, "over-confident": 1.5}
#: the study's bins: 15, calibkit's convention
SCHEME = BinScheme(15, "calibkit", torch.float64)
PIVOTS = ("basic", "plug-in pivot", "both", "+ test")


def coverage_cell(n: int, k: int, gamma: float, reps: int, boot: int) -> dict:
    """Coverage (share of ``reps`` samples whose 95 % interval holds the truth) of each
    pivot, per debiased metric, with the intervals' mean width."""
    model = SyntheticClassifier(k, gamma=gamma)
    truth = model.truth()
    only = frozenset(PAIRS)
    hits = {m: dict.fromkeys(PIVOTS, 0) for m in PAIRS}
    width = {m: dict.fromkeys(PIVOTS, 0.0) for m in PAIRS}
    levels = torch.tensor([0.025, 0.975], dtype=torch.float64)
    for r in range(reps):
        probs, labels = model.sample(n, seed=r)
        p = prepare(probs, labels, probs=True)
        values = metric_vectors(p, SCHEME, None, smooth=False, only=only)
        est = {m: float(v[0]) for m, v in values.items()}
        rep = bootstrap_vectors([p], SCHEME, boot, r, smooth=False, only=only)[0]
        null = calibrated_replicates(p, SCHEME.for_dtype(p.dtype), list(PAIRS), boot, r + 1)
        for m, plug in PAIRS.items():
            lo_q, hi_q = torch.quantile(rep[m].double(), levels).tolist()
            ends = {
                pivot: (max(est[m] - (hi_q - centre), 0.0), max(est[m] - (lo_q - centre), 0.0))
                for pivot, centre in (("basic", est[m]), ("plug-in pivot", est[plug]))
            }
            ends["both"] = (min(e[0] for e in ends.values()), max(e[1] for e in ends.values()))
            consistent = p_value(est[m], null[m]) > 0.05  # the test does not reject
            ends["+ test"] = (0.0 if consistent else ends["both"][0], max(ends["both"][1], est[m]))
            for pivot, (lo, hi) in ends.items():
                hits[m][pivot] += lo <= truth[m] <= hi
                width[m][pivot] += hi - lo
    return {
        "n": n,
        "k": k,
        "gamma": gamma,
        "reps": reps,
        "bootstrap": boot,
        "truth": {m: truth[m] for m in PAIRS},
        "coverage": {m: {t: hits[m][t] / reps for t in PIVOTS} for m in PAIRS},
        "width": {m: {t: width[m][t] / reps for t in PIVOTS} for m in PAIRS},
    }


def read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def run(out: Path, reps: int, boot: int) -> None:
    """Every cell of the grid not yet in ``out`` (N = 50,000 with a third of ``reps``)."""
    done = {(c["case"], c["n"], c["k"]) for c in read(out)}
    for case, gamma in CASES.items():
        for k in (10, 100):
            for n in (500, 5_000, 50_000):
                if (case, n, k) in done:
                    continue
                t0 = time.time()
                r = reps if n < 50_000 else max(reps // 3, 10)
                with progress(1, f"{case} N={n} K={k}", True):
                    cell = coverage_cell(n, k, gamma, r, boot)
                cell.update(case=case, seconds=round(time.time() - t0, 1))
                tmp = out.with_suffix(".tmp")
                tmp.write_text("".join(json.dumps(c) + "\n" for c in [*read(out), cell]))
                os.replace(tmp, out)  # atomic: a killed run never leaves half a line
                print(f"{case} N={n} K={k}: {cell['seconds']} s", file=sys.stderr, flush=True)


def markdown(path: Path) -> str:
    """One table per case: metric × (K, N) cells, coverage of basic / plug-in pivot / both
    in %, and the mean width of "both" over basic's."""
    rows = read(path)
    out = []
    for case in CASES:
        got = sorted((c for c in rows if c["case"] == case), key=lambda c: (c["k"], c["n"]))
        head = ["metric", *(f"K={c['k']}, N={c['n']:,}" for c in got)]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for m in PAIRS:
            cov = [" / ".join(f"{100 * c['coverage'][m][t]:.0f}" for t in PIVOTS) for c in got]
            lines.append(f"| `{m}` | " + " | ".join(cov) + " |")
            ratio = [
                f"{c['width'][m]['both'] / max(c['width'][m]['basic'], 1e-300):.2f}" for c in got
            ]
            lines.append(f"| `{m}`: width of both ÷ basic | " + " | ".join(ratio) + " |")
        reps = "; ".join(f"N = {c['n']:,}: R = {c['reps']}" for c in got if c["k"] == 10)
        out.append(
            f"**{case}** (γ = {CASES[case]}): coverage in % of basic / plug-in pivot / both / "
            "both + test 95 % "
            f"intervals; {reps}; B = {got[0]['bootstrap'] if got else '-'}.\n\n" + "\n".join(lines)
        )
    return "\n\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON-lines results (resumable)")
    ap.add_argument("--reps", type=int, default=150, help="samples per cell (N < 50,000)")
    ap.add_argument("--bootstrap", type=int, default=300, help="resamples per sample")
    ap.add_argument("--markdown", action="store_true", help="print the tables of --out")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads (1: beside other work, 2 threads on 2 busy cores ran about 95 "
        "times slower)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.markdown:
        print(markdown(args.out))
        return
    run(args.out, args.reps, args.bootstrap)
    print(markdown(args.out))


if __name__ == "__main__":
    main()
