"""How many CPU threads calibkit's own work uses: none that would wait for a busy core.

On a machine whose cores are busy with other processes, PyTorch's intra-op threads wait for
each other at every parallel operation; a descheduled thread stalls the rest, and the many
small operations of a calibrator's fit (hundreds per fit on 5,000 × 10 logits) each pay it.
Under a load of 6 on 2 cores a vector-scaling fit took 23 times its quiet time with
PyTorch's two threads and 4.3 times with one, while on a quiet machine two threads are
about 30 % faster than one (docs/performance.md). So calibkit sizes its threads by
what is free, at the start of each fit or evaluation (:func:`for_work`):

* **spare cores**: the cores this process may use (its CPU affinity) less the threads
  other processes keep runnable right now (Linux ``/proc/stat``'s ``procs_running`` less
  this process's runnable threads; read at most every :data:`REFRESH` seconds); at least 1;
* **the work's size**: below :data:`SMALL` elements (PyTorch's grain size: it would not
  split such work anyway) one thread;
* **the cap**: PyTorch's setting (``torch.set_num_threads``), or ``CALIBKIT_THREADS=n`` /
  :func:`set_threads` (n); ``CALIBKIT_THREADS=0`` turns the rule off and leaves PyTorch's
  setting untouched everywhere. Bench workers run one thread each and as many workers as
  cores (workers × threads ≤ cores; ``calibkit bench`` warns when asked for more).

Where ``/proc/stat`` cannot be read (not Linux) the spare cores are the cap. ``torch.
set_num_threads`` is process-wide: code that runs torch in other Python threads at the same
time shares the setting while calibkit's work runs.

OpenMP's wait policy: GNU OpenMP's threads spin for a while at a barrier before they
sleep, which burns the time slice a loaded core needs for the thread being waited for: that
is the cliff. calibkit avoids it by not running a second thread where no core is spare,
and leaves the policy alone: ``OMP_WAIT_POLICY=PASSIVE`` (set before PyTorch is imported)
also avoids it for your own PyTorch code, but costs calibkit's fits 30–50 % on a quiet
machine (every small parallel operation then wakes a sleeping thread; docs/performance.md).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import torch

F = TypeVar("F", bound=Callable[..., Any])

#: below this many elements of the work's main tensor, one thread (PyTorch's grain size)
SMALL = 32_768
#: seconds between two reads of the spare cores
REFRESH = 0.5
ENV = "CALIBKIT_THREADS"

_cap: int | None = None


def set_threads(n: int | None) -> None:
    """Cap the threads of calibkit's large work at ``n`` (0: leave PyTorch's setting alone
    everywhere; None: back to ``CALIBKIT_THREADS``, else PyTorch's setting)."""
    global _cap
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        raise ValueError(f"threads: expected an integer >= 0, got {n!r}")
    _cap = n


def _configured() -> int | None:
    """The cap: :func:`set_threads`, else ``CALIBKIT_THREADS``, else None (PyTorch's)."""
    if _cap is not None:
        return _cap
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise ValueError(f"{ENV}: expected an integer >= 0, got {raw!r}")
    return int(raw)


_seen: list[float] = [-1.0, 0.0]  # (time read, spare cores)


def spare_cores() -> int | None:
    """Cores of this process's affinity that no other runnable thread needs right now
    (at least 1); None where it cannot be read."""
    now = time.monotonic()
    if now - _seen[0] < REFRESH:
        return int(_seen[1])
    try:
        with open("/proc/stat", "rb") as f:
            text = f.read()
        i = text.index(b"procs_running ")
        running = int(text[i + 14 : text.index(b"\n", i)])
        cores = len(os.sched_getaffinity(0))
        own = _own_running()
    except (OSError, ValueError, AttributeError):
        return None
    spare = max(1, cores - max(0, running - own))
    _seen[:] = [now, float(spare)]
    return spare


def _own_running() -> int:
    """Threads of this process that are runnable now (the caller, and OpenMP workers that
    spin after a parallel region): they are not other work."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        count += stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"R"
    return max(count, 1)


def threads_for(elements: int) -> int | None:
    """The threads for work on ``elements`` elements: 1 below :data:`SMALL`, else the
    cap (:func:`set_threads`, ``CALIBKIT_THREADS``, or PyTorch's setting) limited to the
    spare cores; None where the rule is off (``CALIBKIT_THREADS=0``)."""
    cap = _configured()
    if cap == 0:
        return None
    if elements < SMALL:
        return 1
    want = torch.get_num_threads() if cap is None else cap
    spare = spare_cores()
    return want if spare is None else max(1, min(want, spare))


_inside = threading.local()


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """PyTorch's intra-op threads set to ``n`` for the block, then restored (a no-op where
    ``n`` is the setting already)."""
    before = torch.get_num_threads()
    if n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def for_work(elements: int) -> Iterator[None]:
    """Run the block with :func:`threads_for` ``(elements)`` intra-op threads, then restore.
    Nested calls keep the outermost choice: switching the thread count inside a fit (whose
    loss calls metric code) would make OpenMP rebuild its team at every switch."""
    if getattr(_inside, "depth", 0):
        _inside.depth += 1
        try:
            yield
        finally:
            _inside.depth -= 1
        return
    want = threads_for(elements)
    _inside.depth = 1
    try:
        with torch_threads(torch.get_num_threads() if want is None else want):
            yield
    finally:
        _inside.depth = 0


def size_of(value: Any) -> int:
    """Elements of an array, a tensor (or anything with ``numel()``: a prepared metric
    input) or a sequence of them (a list of groups: the sum)."""
    if isinstance(value, torch.Tensor) or callable(getattr(value, "numel", None)):
        return value.numel()
    if isinstance(value, list | tuple) and value and isinstance(value[0], tuple | list):
        return sum(size_of(v[0]) for v in value)
    try:
        return int(np.size(value))
    except (TypeError, ValueError):
        return 0


def sized_by_first_argument(fn: F) -> F:
    """Run ``fn`` under :func:`for_work` of its first argument's size (the scores)."""

    @functools.wraps(fn)
    def run(first: Any, *args: Any, **kwargs: Any) -> Any:
        with for_work(size_of(first)):
            return fn(first, *args, **kwargs)

    return run  # type: ignore[return-value]
