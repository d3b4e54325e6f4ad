"""The compiled fast path of the row scan (:mod:`calibkit.metrics._scan`) for float32 logits.

``calibkit.metrics._rowscan`` is a small C extension built at install time (``src/calibkit/metrics/
_rowscan.c``). Per row it takes the maximum and the float64 sums of exp(z − max), and for
Brier and entropy of its square and of exp · (z − max), in one fused pass. PyTorch needs four
parallel operations per chunk for the same. Rows are split between Python threads (the C
code releases the GIL), as many as :func:`calibkit._threads.for_work` chose for the work, so
no OpenMP barrier waits on a busy core. Timings are in docs/performance.md.

It takes contiguous float32 logits on the CPU; any other input takes the PyTorch scan. It
also reports whether every value was finite, so that :func:`calibkit.metrics._inputs.prepare`
need not read valid logits a second time to check them. Both scans compute d = z − max and
exp(d) in float32; the kernel's exp is within 2 float32 ulps of float64's, and its sums
agree with float64 ones from the same d to 3e-7 relative (tests/metrics/test_native_scan.py).

``CALIBKIT_NATIVE`` chooses: unset, the widest kernel the CPU runs (AVX-512, else AVX2 with
FMA); ``0``, the PyTorch scan; ``avx2`` or ``avx512``, that kernel. Where the extension was
not built (no C compiler at install time) or the CPU has neither instruction set, calibkit
uses the PyTorch scan; :func:`kernel` tells which is in use.
"""

from __future__ import annotations

import functools
import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

try:
    from . import _rowscan
except ImportError:  # not compiled: the PyTorch scan serves
    _rowscan = None

ENV = "CALIBKIT_NATIVE"
KERNELS = ("avx512", "avx2")
#: at least this many values per thread: below it a thread costs more than it saves
PER_THREAD = 1 << 16


def kernel() -> str | None:
    """The compiled kernel in use ("avx512" or "avx2"), or None for the PyTorch scan."""
    raw = os.environ.get(ENV, "").strip().lower()
    if _rowscan is None or raw == "0":
        return None
    if raw in ("", "1"):
        return _rowscan.instructions()
    if raw not in KERNELS:
        raise ValueError(f"{ENV}: expected 0, 1, avx2 or avx512, got {raw!r}")
    return raw


def runnable() -> list[str]:
    """The compiled kernels this CPU runs, widest first (empty where none is built)."""
    if _rowscan is None:
        return []
    one = np.zeros((1, 2), np.float32)
    found = []
    for name in KERNELS:
        try:
            _rowscan.scan(one, np.empty(1), np.empty(1), instructions=name)
        except ValueError:  # not a kernel this CPU runs
            continue
        found.append(name)
    return found


def usable(scores: Tensor) -> bool:
    """Whether :func:`scan_logits` takes ``scores``: contiguous float32 (N, K) on the CPU,
    with a compiled kernel in use."""
    return (
        scores.dtype == torch.float32
        and scores.device.type == "cpu"
        and scores.ndim == 2
        and scores.is_contiguous()
        and kernel() is not None
    )


def scan_logits(
    scores: Tensor, *, full: bool, instructions: str | None = None
) -> tuple[tuple[Tensor, ...], bool]:
    """((top, s) or, with ``full``, (top, s, sq, ed), finite) of float32 logits (N, K): each
    (N,) float64, the row maximum, Σ_k e_k, Σ_k e_k² and Σ_k e_k d_k with d_k = z_k − max
    and e_k = exp(d_k); ``finite`` False where a value is NaN or ±inf (the sums are then
    meaningless). ``instructions``: the kernel ("avx512" or "avx2"); by default
    :func:`kernel`'s, else the widest. Uses ``torch.get_num_threads()`` threads, fewer for
    small input."""
    n, k = scores.shape
    out = [torch.empty(n, dtype=torch.float64) for _ in range(4 if full else 2)]
    z = scores.detach().numpy()
    arrays = [o.numpy() for o in out]
    parts = max(1, min(torch.get_num_threads(), n, (n * k) // PER_THREAD))
    cuts = [n * i // parts for i in range(parts + 1)]
    pieces = [(z[a:b], *(x[a:b] for x in arrays)) for a, b in itertools.pairwise(cuts)]
    run = functools.partial(_rowscan.scan, instructions=instructions or kernel())
    if parts == 1:
        return tuple(out), run(*pieces[0])
    done = [_executor().submit(run, *p) for p in pieces[1:]]
    finite = run(*pieces[0])
    return tuple(out), all([finite, *(f.result() for f in done)])


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="calibkit-scan")


# a forked child has none of the pool's threads, but the pool would count its idle ones and
# wait on them forever: the child makes its own
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_executor.cache_clear)
