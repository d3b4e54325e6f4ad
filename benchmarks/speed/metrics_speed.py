"""Speed of calibkit's metrics against torchmetrics, netcal and TorchUncertainty.

Everything runs in one process on the same synthetic float32 logits. Each tool starts
from the logits: where a tool only takes probabilities (netcal, TorchUncertainty), its
time includes a ``torch.softmax``. Times are medians of repeated calls; the whole table is
measured three times and each cell keeps its best median, since absolute times on a shared
2-core machine move by up to 2x between runs. Ratios are the measure.

    python benchmarks/speed/metrics_speed.py            # every size (several minutes)
    python benchmarks/speed/metrics_speed.py --quick    # skip the slow competitor cases
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from calibkit import metrics as M
from calibkit._allocator import retain_freed_memory

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the peers' loader of the tests
from tests.peers import torch_uncertainty

SIZES = [(10_000, 10), (10_000, 100), (100_000, 100), (50_000, 1000), (1_000_000, 10)]


def load_torch_uncertainty():
    """TorchUncertainty's adaptive and classwise calibration errors, or None where it is not
    installed (``pip install --no-deps torch-uncertainty==0.13.0``, the version these
    timings used; :mod:`tests.peers` loads its modules without torchvision)."""
    ace = torch_uncertainty("calibration.adaptive_calibration_error")
    if ace is None:
        return None
    cw = torch_uncertainty("calibration.classwise_calibration_error")
    return ace.MulticlassAdaptiveCalibrationError, cw.ClasswiseCalibrationError


def timed(fn: Callable[[], object], budget: float) -> float:
    """Median seconds of ``fn`` over as many calls as fit in ``budget`` (at least one)."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    reps = int(min(15, max(0, budget / max(first, 1e-9) - 1)))
    times = [first]
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cases(z: torch.Tensor, y: torch.Tensor, tu, quick: bool) -> dict[str, Callable[[], object]]:
    import torchmetrics.functional.classification as tmf
    from netcal.metrics import ECE as NetcalECE

    n, k = z.shape
    out: dict[str, Callable[[], object]] = {
        "floor: torch.sum": lambda: z.sum(),
        "log_softmax": lambda: torch.log_softmax(z, 1),
        "calibkit ece": lambda: M.ece(z, y),
        "calibkit ece, trusted": lambda: M.ece(M.trusted(z, y)),
        "calibkit aece": lambda: M.aece(z, y),
        "calibkit classwise_ece": lambda: M.classwise_ece(z, y),
        "calibkit evaluate (core)": lambda: M.evaluate(z, y, optimal=False, smooth=False),
        "calibkit evaluate (+smooth)": lambda: M.evaluate(z, y, optimal=False),
        "torchmetrics ece": lambda: tmf.multiclass_calibration_error(z, y, k, n_bins=15),
        "torchmetrics ece, trusted": lambda: tmf.multiclass_calibration_error(
            z, y, k, n_bins=15, validate_args=False
        ),
    }
    slow_netcal = quick and n * k > 5_000_000
    if not slow_netcal:
        yn = y.numpy()
        out["netcal ece"] = lambda: NetcalECE(15).measure(torch.softmax(z, 1).numpy(), yn)
    if tu is not None:
        ace_cls, cw_cls = tu

        def tu_ace():
            m = ace_cls(num_classes=k, n_bins=15)
            m.update(torch.softmax(z, 1), y)
            return m.compute()

        def tu_cw():
            m = cw_cls(num_classes=k, num_bins=15)
            m.update(torch.softmax(z, 1), y)
            return m.compute()

        out["TorchUncertainty aece"] = tu_ace
        if not (quick and k >= 1000):
            out["TorchUncertainty classwise"] = tu_cw
    return out


def run_table(quick: bool, budget: float, rounds: int) -> dict[tuple[int, int], dict[str, float]]:
    tu = load_torch_uncertainty()
    if tu is None:
        print(
            "TorchUncertainty not installed: its columns are skipped (pip install --no-deps "
            "torch-uncertainty==0.13.0: its own dependencies pull torchvision and CUDA)"
        )
    results: dict[tuple[int, int], dict[str, float]] = {}
    gen = torch.Generator().manual_seed(0)
    data = {}
    for n, k in SIZES:
        z = (3 * torch.randn(n, k, generator=gen)).float()
        y = torch.randint(k, (n,), generator=gen)
        data[(n, k)] = (z, y)
    for r in range(rounds):
        for size, (z, y) in data.items():
            for name, fn in cases(z, y, tu, quick).items():
                if r > 0 and results[size].get(name, 0) > 20:  # one measurement of very slow cases
                    continue
                t = timed(fn, budget)
                results.setdefault(size, {})
                results[size][name] = min(t, results[size].get(name, float("inf")))
            print(f"round {r + 1}/{rounds}: {size} done", file=sys.stderr, flush=True)
    return results


def fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t * 1e3:9.2f} ms" if t < 10 else f"{t:9.2f} s "


def report(results) -> None:
    names = list(next(iter(results.values())).keys())
    names += [n for r in results.values() for n in r if n not in names]
    names = list(dict.fromkeys(names))
    header = f"{'':30s}" + "".join(f"{f'{n:.0e} x {k}':>14s}" for n, k in results)
    print("\nMedian time per call (best of the rounds)")
    print(header)
    for name in names:
        print(f"{name:30s}" + "".join(f"{fmt_time(r.get(name)):>14s}" for r in results.values()))

    def ratio_row(label, num, den, target):
        cells = []
        for r in results.values():
            if num in r and den in r:
                cells.append(f"{r[num] / r[den]:13.2f}x")
            else:
                cells.append(f"{'-':>14s}")
        print(f"{label:30s}" + "".join(cells) + f"   target {target}")

    print("\nRatios (> 1: calibkit faster, unless stated)")
    ratio_row("torchmetrics / calibkit ece", "torchmetrics ece", "calibkit ece", ">= 3")
    ratio_row(
        "trusted: torchmetrics / calibkit",
        "torchmetrics ece, trusted",
        "calibkit ece, trusted",
        ">= 3",
    )
    ratio_row("netcal / calibkit ece", "netcal ece", "calibkit ece", "-")
    ratio_row("TU / calibkit aece", "TorchUncertainty aece", "calibkit aece", ">= 1")
    ratio_row(
        "TU / calibkit classwise",
        "TorchUncertainty classwise",
        "calibkit classwise_ece",
        ">= 30 at 5e4x1000",
    )
    ratio_row("classwise / ece (calibkit)", "calibkit classwise_ece", "calibkit ece", "<= 3")
    ratio_row("evaluate core / log_softmax", "calibkit evaluate (core)", "log_softmax", "<= 3")
    ratio_row("calibkit ece / torch.sum floor", "calibkit ece", "floor: torch.sum", "-")
    ratio_row("torchmetrics ece / floor", "torchmetrics ece", "floor: torch.sum", "-")


def bootstrap_and_memory(rounds: int) -> None:
    gen = torch.Generator().manual_seed(1)
    for k in (10, 100):
        z = (3 * torch.randn(100_000, k, generator=gen)).float()
        y = torch.randint(k, (100_000,), generator=gen)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            M.evaluate(z, y, optimal=False, smooth=False, bootstrap=1000)
            times.append(time.perf_counter() - start)
        what = f"1000 bootstrap resamples, N = 1e5, K = {k}, every metric but smooth ECE"
        each = ", ".join(f"{t:.2f}" for t in times)
        print(f"{what}: best {min(times):6.2f} s of {each} (target < 10 s)")
    z = (3 * torch.randn(1000, 10, generator=gen)).float()
    y = torch.randint(10, (1000,), generator=gen)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        M.evaluate(z, y, bootstrap=1000, optimal=False)
    t = time.perf_counter() - start
    print(f"evaluate with 1000 resamples incl. smooth ECE, N = 1e3, K = 10: {t:6.2f} s")
    print("\nStreaming meter state (keep_samples=False) against N:")
    for n in (10_000, 100_000, 1_000_000):
        m = M.CalibrationMeter(keep_samples=False)
        z = (3 * torch.randn(n, 10, generator=gen)).float()
        y = torch.randint(10, (n,), generator=gen)
        for zb, yb in zip(z.split(50_000), y.split(50_000), strict=True):
            m.update(zb, yb)
        print(f"  N = {n:>9,d}: {m.state_nbytes():>6,d} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="skip the slowest competitor cases")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measure the table this many times")
    parser.add_argument(
        "--glibc-defaults",
        action="store_true",
        help="measure with glibc's malloc defaults instead of calibkit._allocator's setting",
    )
    args = parser.parse_args()
    retained = not args.glibc_defaults and retain_freed_memory()
    print(f"freed memory retained (calibkit._allocator, as the calibkit command): {retained}")
    torch.set_num_threads(torch.get_num_threads())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}")
    results = run_table(args.quick, args.budget, args.rounds)
    report(results)
    print()
    bootstrap_and_memory(args.rounds)


if __name__ == "__main__":
    main()
