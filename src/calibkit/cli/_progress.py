"""Progress of long commands: a rich bar on a terminal; off one (a pipe, ``nohup``, CI, a
notebook's subprocess) a line on stderr every :data:`PROGRESS_EVERY` seconds with
done/total, elapsed time, ETA and what is running, repeated by a heartbeat while a long
step runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

#: seconds between two progress lines off a terminal
PROGRESS_EVERY = 10.0


class _Lines:
    """The tick of :func:`progress` off a terminal: from :data:`PROGRESS_EVERY` seconds on, a
    line on stderr at most every :data:`PROGRESS_EVERY` seconds and at the end: done/total,
    elapsed, ETA, and what is running now (:meth:`status`). A heartbeat thread repeats the
    line while no step ends, so that a long step (an epoch, a bench run, a network's first
    pass) is never silent. The ETA is the mean time between the ends of finished steps, measured
    from the first step that ends (so that one-off costs before it, reading data or building a
    network, do not inflate it), times the steps left, less the time the running step has had
    (up to one mean step): a step that runs longer than the others holds the ETA still instead
    of raising it by the steps left every second (a bench whose runs differ in cost)."""

    def __init__(self, total: int, label: str) -> None:
        self.start = self.said = time.monotonic()
        self.done, self.total, self.label, self.base = 0, total, label, label
        self.first: tuple[float, int] | None = None  # (time, done) when a step first ended
        self.last = self.start  # when a step last ended
        self.text = ""
        self.lock = threading.Lock()

    def __call__(self, k: int, new_total: int | None = None, record: dict | None = None) -> None:
        with self.lock:
            if new_total is None:
                self.done += k
            else:
                self.done, self.total = k, new_total
                self.label = f"{self.base} epoch {record['epoch']}" if record else self.base
            now = time.monotonic()
            if self.first is None and self.done > 0:
                self.first = (now, self.done)
            if k or new_total is not None:
                self.last = now
            self._say(self.done >= self.total)

    def status(self, text: str) -> None:
        """What is running now, shown after the counts (bench: the runs in the workers)."""
        with self.lock:
            self.text = text

    def beat(self) -> None:
        with self.lock:
            self._say(False)

    def eta(self, now: float) -> float:
        if self.done >= self.total:
            return 0.0
        if self.first is None or self.done <= self.first[1]:
            return float("nan")  # one step is not a rate: its cost may be one-off
        t0, d0 = self.first
        step = (self.last - t0) / (self.done - d0)
        return max(step * (self.total - self.done) - min(now - self.last, step), 0.0)

    def _say(self, finished: bool) -> None:
        now = time.monotonic()
        if now - self.start < PROGRESS_EVERY or (now - self.said < PROGRESS_EVERY and not finished):
            return  # a command done within PROGRESS_EVERY says nothing
        self.said = now
        status = f"; {self.text}" if self.text else ""
        click.echo(
            f"{self.label}: {self.done}/{self.total}, elapsed {_clock(now - self.start)}, "
            f"ETA {_clock(self.eta(now))}{status}",
            err=True,
        )


@contextmanager
def _heartbeat(tick: _Lines) -> Iterator[None]:
    """Call ``tick.beat`` every second while the block runs (it prints when a line is due)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(min(1.0, PROGRESS_EVERY or 1.0)):
            tick.beat()

    thread = threading.Thread(target=run, daemon=True, name="calibkit-progress")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _clock(seconds: float) -> str:
    if seconds != seconds:  # NaN: nothing done yet
        return "-:--"
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def terminal_bar(console: Any, get_time: Any = None) -> Any:
    """The rich bar of :func:`progress`: label, bar, done/total, ETA. Its speed is averaged
    over the whole command: rich's default, the last 30 s, leaves the ETA at -:--:-- when a
    step (a bench run, a Neural Clamping epoch) takes longer."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        get_time=get_time,
        speed_estimate_period=24 * 3600,
    )


@contextmanager
def progress(total: int, label: str, enabled: bool):
    """A rich progress bar on stderr, or off a terminal a line every few seconds; yields a
    callback taking the number of steps done."""
    if not enabled or total <= 0:
        yield None
        return
    from rich.console import Console

    err = Console(stderr=True)
    if not err.is_terminal:  # piped, captured, nohup: a line every few seconds instead
        tick = _Lines(total, label)
        with _heartbeat(tick):
            yield tick
        return
    with terminal_bar(err) as bar:
        task = bar.add_task(label, total=total)

        def tick(k: int, new_total: int | None = None, record: dict | None = None) -> None:
            """Advance by k, or (with ``new_total``) set the position to k of new_total."""
            if new_total is None:
                bar.advance(task, k)
                return
            text = f"{label} epoch {record['epoch']}" if record else None
            bar.update(task, completed=k, total=new_total, description=text or label)

        def status(text: str) -> None:
            bar.update(task, description=f"{label} ({text})" if text else label)

        tick.status = status  # type: ignore[attr-defined]
        yield tick
