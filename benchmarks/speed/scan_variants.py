"""The PyTorch scan behind top-label ECE (``calibkit.metrics._scan.scan_rows`` with
``CALIBKIT_NATIVE=0``) against the faster scans tried for issue 29: the compiled kernel that
calibkit now uses, and three PyTorch variants that were dropped (docs/performance.md, "ECE
against torchmetrics"). Each variant returns every row's 1 − confidence; the table gives
its median time and its largest relative difference from the PyTorch scan's; then each
compiled kernel alone, on one thread::

    python benchmarks/speed/scan_variants.py  # (1e4, 10), (1e5, 100), (5e4, 1000), (1e6, 10)

* ``compiled``: ``calibkit.metrics._rowscan`` (:mod:`calibkit.metrics._scan`), the scan
  calibkit uses for float32 logits where it is built;
* ``softmax``: ``torch.softmax`` per chunk (its own vectorised exp), the row maximum zeroed,
  the rest summed in float32;
* ``exp2``: exp(d) as exp2(d · log2 e), the row maximum zeroed, the rest summed in float32,
  the buffer padded so that no element takes PyTorch's scalar tail;
* ``two threads``: two Python threads, each scanning half the rows on one intra-op thread
  (no OpenMP barrier per operation).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from calibkit.metrics import _scan as native_scan
from calibkit.metrics._scan import CHUNK_VALUES, scan_rows

SIZES = ((10_000, 10), (100_000, 100), (50_000, 1000), (1_000_000, 10))
LOG2E = 1.4426950408889634


def scan(z: torch.Tensor) -> torch.Tensor:
    """The PyTorch scan (main() runs it with CALIBKIT_NATIVE=0)."""
    s = scan_rows(z, False).s
    return (s - 1) / s


def compiled(z: torch.Tensor) -> torch.Tensor:
    (_, s), _ = native_scan.scan_logits(z, full=False)
    return (s - 1) / s


def softmax(z: torch.Tensor) -> torch.Tensor:
    n, k = z.shape
    rows, rest = max(1, CHUNK_VALUES // k), torch.empty(n, dtype=z.dtype)
    for start in range(0, n, rows):
        p = torch.softmax(z[start : start + rows], 1)
        p.scatter_(1, p.argmax(1, keepdim=True), 0.0)
        torch.sum(p, 1, out=rest[start : start + len(p)])
    return rest.double()


def exp2(z: torch.Tensor) -> torch.Tensor:
    n, k = z.shape
    rows = max(1, CHUNK_VALUES // k)
    unit = 32 * math.lcm(*range(1, torch.get_num_threads() + 1))  # whole vectors per thread
    flat = torch.zeros(-(-min(rows, n) * k // unit) * unit, dtype=z.dtype)
    rest = torch.empty(n, dtype=z.dtype)
    for start in range(0, n, rows):
        c = z[start : start + rows]
        m, i = c.max(1, keepdim=True)
        d = flat[: len(c) * k].view(len(c), k)
        torch.sub(c, m, out=d)
        flat.mul_(LOG2E).exp2_()
        d.scatter_(1, i, 0.0)
        torch.sum(d, 1, out=rest[start : start + len(c)])
    s = 1 + rest.double()
    return (s - 1) / s


_POOL = ThreadPoolExecutor(2)


def two_threads(z: torch.Tensor) -> torch.Tensor:
    half = len(z) // 2
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        parts = list(_POOL.map(scan, (z[:half], z[half:])))
    finally:
        torch.set_num_threads(before)
    return torch.cat(parts)


def median_ms(fn, z: torch.Tensor, calls: int = 9) -> float:
    fn(z)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(z)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    variants = {"scan": scan, "softmax": softmax, "exp2": exp2, "two threads": two_threads}
    kernel = native_scan.kernel()
    if kernel is not None:
        print(f"compiled kernel: {kernel}")
        variants["compiled"] = compiled
    else:
        print("calibkit.metrics._rowscan is not built or turned off: no 'compiled' column")
    os.environ[native_scan.ENV] = "0"  # scan_rows: the PyTorch scan; compiled(): the widest kernel
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; median of 9 calls, ms "
        "(largest relative difference of 1 − confidence from the scan's)"
    )
    print(f"{'(N, K)':>14}" + "".join(f"{v:>24}" for v in variants))
    for n, k in SIZES:
        z = (3 * torch.randn(n, k, generator=gen)).float()
        ref = scan(z)
        cells = []
        for fn in variants.values():
            ms = median_ms(fn, z)
            diff = float(((fn(z) - ref).abs() / ref.clamp_min(1e-300)).max())
            cells.append(f"{ms:9.2f} ({diff:.1e})")
        print(f"{f'({n:.0e}, {k})':>14}" + "".join(f"{c:>24}" for c in cells))
    if kernel is not None:
        kernel_alone(gen)


def kernel_alone(gen: torch.Generator) -> None:
    """Each compiled kernel this CPU runs, called on NumPy arrays on one thread."""
    import numpy as np

    from calibkit.metrics import _rowscan

    names = native_scan.runnable()
    print("\nThe kernel alone, one thread, ms (ns per value)")
    print(f"{'(N, K)':>14}" + "".join(f"{v:>20}" for v in names))
    for n, k in SIZES:
        z = (3 * torch.randn(n, k, generator=gen)).float().numpy()
        out = (np.empty(n), np.empty(n))
        cells = []
        for name in names:
            ms = median_ms(lambda z, o=out, i=name: _rowscan.scan(z, *o, instructions=i), z)
            cells.append(f"{ms:9.2f} ({1e6 * ms / z.size:.2f})")
        print(f"{f'({n:.0e}, {k})':>14}" + "".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
