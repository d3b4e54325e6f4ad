"""Type-I error and power of calibkit's paired tests, by simulation.

Three tests of "method A and method B have the same test ECE (or NLL)":

* ``compare_paired``: one network per method, the test rows bootstrapped (paired);
* the verdicts' paired t-test over seeds (:func:`calibkit.bench._results.compare`), n = 3;
* ``compare_nested``: the test rows bootstrapped within each of the 3 seeds, paired, the
  difference averaged over the seeds.

The data: a test set of N rows from a perfectly calibrated
:class:`~calibkit.metrics._synthetic.SyntheticClassifier` (K = 10), shared by the seeds. A
"network" of method X in seed s outputs the logits β · log p, with β = β_X · exp(τ η_s)
(η_s ~ N(0, 1): the seed's training randomness) times a per-row jitter exp(0.1 ε_i): β > 1
is over-confident. Under H0 both methods have the same β_X; under H1 method B has a
smaller one (better calibrated). Each regime is replicated R times; the table gives the
share of replications in which each test rejects at 0.05.

    python benchmarks/correctness/paired_tests.py --reps 200     # the table in docs/metrics.md
    python benchmarks/correctness/paired_tests.py --reps 50      # a quick look
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

from calibkit.bench._results import compare
from calibkit.metrics import compare_nested, compare_paired
from calibkit.metrics._synthetic import SyntheticClassifier

METRICS = ("ece", "nll")
SEEDS = 3
#: (name, β_A, β_B, τ): the regimes of the table
REGIMES = (
    ("H0, no seed effect", 1.3, 1.3, 0.0),
    ("H0, seed effect τ = 0.015", 1.3, 1.3, 0.015),
    ("H1 (β_B = 1.25), no seed effect", 1.3, 1.25, 0.0),
    ("H1 (β_B = 1.25), seed effect τ = 0.015", 1.3, 1.25, 0.015),
)


def network(log_p: np.ndarray, beta: float, tau: float, rng: np.random.Generator) -> np.ndarray:
    """Logits of one trained network: β exp(τ η) exp(0.1 ε_i) log p."""
    scale = beta * math.exp(tau * rng.standard_normal())
    return log_p * (scale * np.exp(0.1 * rng.standard_normal(len(log_p))))[:, None]


def replicate(n: int, beta_a: float, beta_b: float, tau: float, seed: int, boot: int) -> dict:
    """Whether each test rejects, per metric, in one replication."""
    rng = np.random.default_rng(seed)
    probs, labels = SyntheticClassifier(10).sample(n, seed=seed)
    log_p = np.log(probs)
    groups = [
        (network(log_p, beta_a, tau, rng), network(log_p, beta_b, tau, rng), labels)
        for _ in range(SEEDS)
    ]
    one = compare_paired(*groups[0], bootstrap=boot, seed=seed, metrics=METRICS)
    nested = compare_nested(groups, bootstrap=boot, seed=seed, metrics=METRICS)
    out = {}
    for m in METRICS:
        values_a = _values(groups, m, 0)
        test = compare(dict(enumerate(values_a)), dict(enumerate(_values(groups, m, 1))))
        out[m] = {
            "seed std": float(np.std(values_a, ddof=1)),
            "compare_paired (1 seed)": one.p_values[m] < 0.05,
            "t-test over 3 seeds": test is not None and test[0] < 0.05,
            "compare_nested (3 seeds)": nested.p_values[m] < 0.05,
            "diff": nested.diff[m],
        }
    return out


def _values(groups, metric: str, side: int) -> list[float]:
    from calibkit.metrics import evaluate

    return [
        evaluate(g[side], g[2], optimal=False, smooth=False, metrics=[metric])[metric]
        for g in groups
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--n", type=int, default=5000, help="test rows")
    ap.add_argument("--bootstrap", type=int, default=400)
    a = ap.parse_args()
    torch.set_num_threads(1)
    tests = ("compare_paired (1 seed)", "t-test over 3 seeds", "compare_nested (3 seeds)")
    print(
        f"Rejection rate at 0.05 (%), N = {a.n:,} test rows, K = 10, {a.reps} replications,"
        f" B = {a.bootstrap}; ± is one standard error of the rate\n"
    )
    print("| regime | metric | mean B − A | A's std over seeds | " + " | ".join(tests) + " |")
    print("|" + " --- |" * (4 + len(tests)))
    for name, ba, bb, tau in REGIMES:
        runs = [replicate(a.n, ba, bb, tau, 1000 * r + 7, a.bootstrap) for r in range(a.reps)]
        for m in METRICS:
            cells = []
            for t in tests:
                rate = float(np.mean([r[m][t] for r in runs]))
                se = math.sqrt(max(rate * (1 - rate), 1e-12) / a.reps)
                cells.append(f"{100 * rate:.1f} ± {100 * se:.1f}")
            diff = float(np.mean([r[m]["diff"] for r in runs]))
            std = float(np.mean([r[m]["seed std"] for r in runs]))
            print(
                f"| {name} | {m} | {diff:+.4f} | {std:.4f} | " + " | ".join(cells) + " |",
                flush=True,
            )


if __name__ == "__main__":
    main()
