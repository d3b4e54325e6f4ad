"""A bench worker's start, before anything heavy is imported: its guard that exits when the
process that started it is gone, its line to the driver and its GPU.

A spawned worker unpickles its initializer by importing the initializer's module. In
:mod:`calibkit.bench._runner` that import took PyTorch and the bench with it: seconds on
a quiet machine, more than 15 under load, and a worker whose parent was killed meanwhile
ran on until it finished importing (``tests/bench/test_spec_store.py``'s kill test failed
so in a loaded CI run). Here, beside :mod:`calibkit` (whose import is lazy, 25 ms), the
guard starts first. Only the standard library is imported."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

#: the driver's queue of progress lines, where the bench gave one (``put((pid, text))``)
REPORTS: Any = None


def start(parent: int, reports: Any, gpus: Any) -> None:
    """The initializer of a bench worker: :func:`exit_with` ``parent``, keep ``reports``
    (:data:`REPORTS`), and take one of ``gpus`` (a queue of device indices, where the runs
    train on CUDA) as ``CUDA_VISIBLE_DEVICES``."""
    global REPORTS
    exit_with(parent)
    REPORTS = reports
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpus.get())


def exit_with(parent: int) -> None:
    """Exit as soon as the process ``parent`` is gone (killed with SIGKILL it cannot stop
    its workers, which would otherwise run on for hours): a thread polls every second."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, daemon=True, name="calibkit-parent-watch").start()
