"""calibkit's speed on a quiet machine and beside a fixed background load.

The benchmark starts ``--load`` busy-loop processes (default 3 per core: the load of 5–6
on 2 cores that issue 29 measured), bounded in time and stopped by the benchmark itself,
and times each operation quiet and loaded under three settings, each in a fresh process
(OpenMP reads its wait policy once, when PyTorch loads it):

* ``before``: PyTorch's defaults (all cores, GNU OpenMP's spinning wait), calibkit's thread
  rule off (``CALIBKIT_THREADS=0``);
* ``calibkit``: calibkit's defaults (its thread rule, calibkit/_threads.py);
* ``passive wait``: the rule off, ``OMP_WAIT_POLICY=PASSIVE``;
* ``1 thread``: ``torch.set_num_threads(1)``, the rule off.

torchmetrics' top-label ECE runs in the same processes, so it gets each setting too.

    python benchmarks/overhead/loaded.py --data ../shared/data/logits/resnet110_cifar10.npz
    python benchmarks/overhead/loaded.py --data ... --load 2      # one busy loop per core
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ODIR = "dir-odir:lambdas=[0.01,1],mus=[0.01,1],folds=3"
EVALUATE = {"bootstrap": 200, "optimal": False, "smooth": False}
SETTINGS = ("before", "calibkit", "passive wait", "1 thread")


def _ops(data: str):
    """(name, callable) of each timed operation."""
    import numpy as np
    import torch

    from calibkit import posthoc
    from calibkit.metrics import ece, evaluate

    d = np.load(data)
    z, y = d["logits_val"], d["labels_val"]
    zt = torch.as_tensor(z, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    big = torch.randn(10_000, 10, generator=g, dtype=torch.float64) * 3
    big_y = torch.randint(10, (10_000,), generator=g)
    ops = [
        ("ts fit (5,000 × 10)", lambda: posthoc.create("ts").fit(z, y)),
        ("vector fit (5,000 × 10)", lambda: posthoc.create("vector").fit(z, y)),
        (
            "dir-odir fit, 2 × 2 grid, 3 folds",
            lambda: posthoc.create("dir-odir:lambdas=[0.01,1],mus=[0.01,1],folds=3").fit(z, y),
        ),
        ("log_softmax 5,000 × 10 f64 (plain torch)", lambda: torch.log_softmax(zt, 1)),
        ("ECE (1e4, 10)", lambda: ece(big, big_y)),
        (
            "evaluate, 200 resamples (1e4, 10)",
            lambda: evaluate(big, big_y, bootstrap=200, optimal=False, smooth=False),
        ),
    ]
    try:
        from torchmetrics.functional.classification import multiclass_calibration_error

        probs = torch.softmax(big, 1).float()
        ops.append(
            (
                "torchmetrics ECE (1e4, 10)",
                lambda: multiclass_calibration_error(
                    probs, big_y, num_classes=10, n_bins=15, norm="l1"
                ),
            )
        )
    except ImportError:
        pass
    return ops


def child(setting: str, data: str, repeats: int) -> None:
    """Time every operation in this process under ``setting``; print JSON."""
    if setting != "calibkit":
        os.environ["CALIBKIT_THREADS"] = "0"
    if setting == "passive wait":
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # before torch loads OpenMP
    import torch

    if setting == "1 thread":
        torch.set_num_threads(1)
    out = {}
    for name, op in _ops(data):
        op()  # warm-up: first-call costs are not what this measures
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            op()
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times)
    print(json.dumps(out))


def measure(setting: str, data: str, repeats: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "CALIBKIT_THREADS")}
    done = subprocess.run(
        [sys.executable, __file__, "--child", setting, "--data", data, "--repeats", str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def busy(n: int, seconds: float) -> list[subprocess.Popen]:
    """``n`` busy-loop processes that end by themselves after ``seconds``."""
    loop = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="an .npz with logits_val and labels_val")
    ap.add_argument(
        "--load",
        type=int,
        default=3 * (os.cpu_count() or 1),
        help="busy-loop processes beside it (default 3 per core)",
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=900, help="bound on the load")
    ap.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.data, a.repeats)
        return
    quiet = {s: measure(s, a.data, a.repeats) for s in SETTINGS}
    loops = busy(a.load, a.max_seconds)
    try:
        time.sleep(1)
        loaded = {s: measure(s, a.data, a.repeats) for s in SETTINGS}
    finally:
        for p in loops:
            p.kill()
    print(
        f"{os.cpu_count()} cores, {a.load} busy-loop processes; median of {a.repeats} "
        "after a warm-up; ms quiet → loaded (× loaded/quiet)\n"
    )
    print("| operation | " + " | ".join(SETTINGS) + " |")
    print("|" + " --- |" * (1 + len(SETTINGS)))
    for name in quiet["before"]:
        cells = [
            f"{1e3 * quiet[s][name]:.3g} → {1e3 * loaded[s][name]:.3g} "
            f"(×{loaded[s][name] / quiet[s][name]:.1f})"
            for s in SETTINGS
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
