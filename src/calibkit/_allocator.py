"""Keep freed memory in the process instead of handing it back to the OS after every
operation (glibc's malloc only).

Why: PyTorch's CPU tensors come from ``malloc``. glibc serves a block above its mmap
threshold (128 KiB at start, raised on the fly to at most 32 MiB) with a fresh ``mmap`` and
unmaps it on free, and it trims the heap whenever more than its trim threshold lies free at
the top. Every torch operation allocates its output, so a loop of operations on tensors of
a few megabytes maps, page-faults (the kernel zero-fills each page) and unmaps the same
memory over and over: the page faults cost more than the arithmetic. Measured on 2 cores,
1000 bootstrap resamples of every metric at N = 1e5 (``benchmarks/speed/metrics_speed.py``):
8.5–10.9 s with glibc's defaults, 4.5–5.0 s with the memory retained.

Cost: the process keeps the heap it has grown to (its resident size does not shrink after
a large computation, though the memory is reused). The ``calibkit`` command and its worker
processes call :func:`retain_freed_memory` at start; a library user opts in by calling it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
#: the largest mmap threshold glibc accepts on 64-bit systems (HEAP_MAX_SIZE / 2)
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 1 << 30


@functools.cache
def retain_freed_memory() -> bool:
    """Make glibc keep freed blocks of up to 32 MiB in the heap and stop trimming the heap
    below 1 GiB of free memory. Returns True when applied, False where the C library is
    not glibc (macOS, Windows, musl), where nothing changes. Calling it again does nothing.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
