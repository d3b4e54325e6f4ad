"""Progress for the benchmarks' long fits and trainings, with calibkit's own progress
lines: off a terminal a line on stderr every 10 s (a heartbeat repeats it while an epoch
runs), on one a bar."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from calibkit.cli._progress import progress


@contextmanager
def epochs(label: str) -> Iterator[Callable[..., None]]:
    """A ``progress(step, total, record)`` callback for ``fit_on`` and ``train``, shown
    under ``label`` while the block runs."""
    with progress(1, label, True) as tick:
        yield lambda step, total, record=None: tick(step, total, record)
