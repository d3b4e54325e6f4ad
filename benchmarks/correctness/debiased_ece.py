"""The debiased binned errors (issue 46): their bias against the known truth of the
synthetic classifier, beside the plug-in's, and their cost relative to the plug-in.

    python benchmarks/correctness/debiased_ece.py               # about 2 minutes on 2 cores
    python benchmarks/correctness/debiased_ece.py --seeds 5     # quicker, noisier

Bias: the mean over ``--seeds`` samples of each estimator, per (K, N, model), against the
population value (docs/metrics.md, "Debiased binned errors"). Cost: the time of the
bin sums and of each estimator from them, for one evaluation and for 1,000 bootstrap
resamples, at N = 100,000 and K = 100 (best of ``--rounds``); the ratio is debiased over
plug-in, for the estimator alone and for the whole metric (sums included).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from calibkit.cli._progress import progress
from calibkit.metrics import classwise_ece, ece
from calibkit.metrics._binning import BinScheme
from calibkit.metrics._consistency import calibrated_replicates
from calibkit.metrics._inputs import prepare
from calibkit.metrics._resample import bootstrap_vectors
from calibkit.metrics._stats import (
    classwise_ece_from_sums,
    classwise_sums,
    debiased_classwise_from_sums,
)
from calibkit.metrics._synthetic import SyntheticClassifier

CELLS = [(k, n, g) for g in (1.5, 1.0) for k in (100, 10) for n in (500, 5_000, 50_000)]


def bias_table(seeds: int) -> list[str]:
    lines = [
        "| K | N | model | truth: classwise ECE | plug-in | debiased | truth: ECE | plug-in "
        "| debiased |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    with progress(len(CELLS), "cells", True) as tick:  # a line every few seconds
        for cell in CELLS:
            lines.append(_bias_row(*cell, seeds))
            tick(1)
    return lines


def _bias_row(k: int, n: int, gamma: float, seeds: int) -> str:
    """One table row: the truth, and the mean over ``seeds`` samples of each estimator."""
    model = SyntheticClassifier(k, gamma=gamma)
    truth = model.truth()
    got: dict[str, list[float]] = {key: [] for key in ("cw", "cw_d", "e", "e_d")}
    for seed in range(seeds):
        probs, labels = model.sample(n, seed=seed)
        got["cw"].append(classwise_ece(probs, labels, probs=True))
        got["cw_d"].append(classwise_ece(probs, labels, probs=True, debias=True))
        got["e"].append(ece(probs, labels, probs=True))
        got["e_d"].append(ece(probs, labels, probs=True, debias=True))
    m = {key: float(np.mean(v)) for key, v in got.items()}
    name = "over-confident" if gamma > 1 else "calibrated"
    return (
        f"| {k} | {n:,} | {name} | {truth['classwise_ece']:.5f} | {m['cw']:.5f} | "
        f"{m['cw_d']:.5f} | {truth['ece']:.5f} | {m['e']:.5f} | {m['e_d']:.5f} |"
    )


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def cost(rounds: int) -> list[str]:
    probs, labels = SyntheticClassifier(100, gamma=1.5).sample(100_000, seed=0)
    p = prepare(torch.from_numpy(probs), torch.from_numpy(labels), probs=True)
    scheme = BinScheme(15, "calibkit", p.probs.dtype)
    lines = ["| what | plug-in (s) | debiased (s) | ratio |", "| --- | --- | --- | --- |"]
    sums = classwise_sums(p, scheme)
    t_sums = best(lambda: classwise_sums(p, scheme), rounds)
    t_plug = best(lambda: classwise_ece_from_sums(sums, p.n, scheme), rounds)
    t_deb = best(lambda: debiased_classwise_from_sums(sums, p.n, scheme), rounds)
    lines.append(
        f"| estimator from the sums, one evaluation | {t_plug:.4f} | {t_deb:.4f} | "
        f"{t_deb / t_plug:.1f} |"
    )
    whole = (t_sums + t_deb) / (t_sums + t_plug)
    lines.append(
        f"| metric with its sums, one evaluation | {t_sums + t_plug:.4f} | "
        f"{t_sums + t_deb:.4f} | {whole:.2f} |"
    )
    boot = {}
    for name in ("classwise_ece", "debiased_classwise_ece"):
        only = frozenset({name})
        boot[name] = best(
            lambda only=only: bootstrap_vectors([p], scheme, 1000, 0, smooth=False, only=only),
            rounds,
        )
    a, b = boot["classwise_ece"], boot["debiased_classwise_ece"]
    lines.append(f"| 1,000 bootstrap resamples (sums included) | {a:.2f} | {b:.2f} | {b / a:.2f} |")
    # the consistency test (calibkit.metrics._consistency): 1,000 label draws, against the
    # bootstrap it comes with
    tests = {
        name: best(lambda name=name: calibrated_replicates(p, scheme, [name], 1000, 0), rounds)
        for name in ("classwise_ece", "debiased_classwise_ece")
    }
    c, d = tests["classwise_ece"], tests["debiased_classwise_ece"]
    lines.append(f"| consistency test, 1,000 label draws | {c:.2f} | {d:.2f} | {d / c:.2f} |")
    lines.append(f"| the test ÷ the bootstrap | {c / a:.2f} | {d / b:.2f} | |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cost-only", action="store_true", help="only the cost table")
    a = ap.parse_args()
    torch.manual_seed(0)
    if not a.cost_only:
        print("\n".join(bias_table(a.seeds)) + "\n")
    print("N = 100,000, K = 100:")
    print("\n".join(cost(a.rounds)))


if __name__ == "__main__":
    main()
