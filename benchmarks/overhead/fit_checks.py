"""What the checks on every fit cost (``calibkit.posthoc._anomalies.check_fit``): each
method's fit on the ResNet-110 CIFAR-10 validation logits (5,000 x 10), median time of the
fit (which makes the checks on its calibration split, always) and of those checks alone,
and their share of the fit.

    python benchmarks/overhead/fit_checks.py --data ../shared/data/logits/resnet110_cifar10.npz
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from calibkit import posthoc
from calibkit.posthoc._anomalies import check_fit


def median_ms(fn, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data/logits/resnet110_cifar10.npz")
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()
    with np.load(args.data) as d:
        z, y = torch.from_numpy(d["logits_val"]), torch.from_numpy(d["labels_val"])
    print(
        f"{len(y):,} x {z.shape[1]} logits, {torch.get_num_threads()} threads, "
        f"median of {args.reps} fits"
    )
    for spec in ("ts", "ts-grid", "vector", "hist-binning", "isotonic"):
        fit = median_ms(lambda s=spec: posthoc.create(s).fit(z, y), args.reps)
        cal = posthoc.create(spec).fit(z, y)
        checks = median_ms(
            lambda c=cal: check_fit(c, z, c.calibrated(z), y, "calibration"), args.reps
        )
        print(
            f"{spec:14s} fit with its checks {fit:8.2f} ms   the checks {checks:8.2f} ms   "
            f"share {checks / fit:6.1%}"
        )


if __name__ == "__main__":
    main()
