"""Progress of long commands: a rich bar on a terminal; off one (a pipe, ``nohup``, CI, a
notebook's subprocess) a line on stderr every :data:`PROGRESS_EVERY` seconds with
done/total, elapsed time and ETA."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

import click

#: seconds between two progress lines off a terminal
PROGRESS_EVERY = 10.0


def _progress_lines(total: int, label: str):
    """The tick of :func:`progress` off a terminal: from :data:`PROGRESS_EVERY` seconds on, a
    line on stderr at most every :data:`PROGRESS_EVERY` seconds and at the end: done/total,
    elapsed, ETA."""
    start = time.monotonic()
    state = {"done": 0, "total": total, "said": start, "label": label}

    def tick(k: int, new_total: int | None = None, record: dict | None = None) -> None:
        if new_total is None:
            state["done"] += k
        else:
            state["done"], state["total"] = k, new_total
            state["label"] = f"{label} epoch {record['epoch']}" if record else label
        now = time.monotonic()
        finished = state["done"] >= state["total"]
        if now - start < PROGRESS_EVERY or (now - state["said"] < PROGRESS_EVERY and not finished):
            return  # a command done within PROGRESS_EVERY says nothing
        state["said"] = now
        elapsed = now - start
        done, total_ = state["done"], state["total"]
        eta = elapsed / done * (total_ - done) if done else float("nan")
        click.echo(f"{state['label']}: {done}/{total_}, elapsed {_clock(elapsed)}, "
                   f"ETA {_clock(eta)}", err=True)  # fmt: skip

    return tick


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
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=console, transient=True, get_time=get_time,
        speed_estimate_period=24 * 3600,
    )  # fmt: skip


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
        yield _progress_lines(total, label)
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

        yield tick
