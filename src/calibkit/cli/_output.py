"""What commands print: tables for people (rich), one JSON object for machines
(``--json``, strict: no NaN), and the before/after tables of a calibration."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import click

from ._progress import progress


def console():
    """The console commands print to: rich's markup off (a name or path with ``[red]`` or
    ``[/]`` in it is printed as written; styles are given as ``style=``), no highlighting,
    200 columns where it is not a terminal. A sentence that names a path is printed with
    ``soft_wrap=True``: never broken inside the path, which a user copies."""
    from rich.console import Console

    console = Console(stderr=False, highlight=False, markup=False)
    if not console.is_terminal:  # piped or captured: do not wrap wide tables at 80 columns
        told = os.environ.get("COLUMNS", "")  # unless told a width
        width = int(told) if told.isdigit() and int(told) > 0 else 200
        console = Console(stderr=False, highlight=False, markup=False, width=width)
    return console


def print_result(result, title: str) -> None:
    from rich.table import Table

    ci = result.intervals is not None
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    if ci:
        table.add_column(f"{result.settings['ci']:.0%} CI", justify="right")
    for name, value, interval in result.rows():
        table.add_row(name, value, *([interval] if ci else []))
    out = console()
    out.print(table)
    s = result.settings
    extra = f", T* = {s['optimal_temperature']:.2f}" if "optimal_temperature" in s else ""
    out.print(
        f"{result.n_samples} samples, {result.n_classes} classes, {s['n_bins']} bins "
        f"({s['binning']}){extra}"
    )
    out.print(
        "units: each metric's, beside its name (%: × 100); --json gives fractions"
        + ("; T*: the temperature whose scaling gives optimal_ece, the lowest ECE" if extra else "")
        + "; what each metric is: `calibkit evaluate --help`, docs/metrics.md"
    )
    if ci:
        from ..metrics.internal import describe

        out.print(describe(s["interval"], result.intervals))
    if result.calibration_p:
        out.print(result.calibration_line())
    for note in result.notes:
        out.print(f"note: {note}")


def evaluate_and_report(
    scores,
    labels,
    *,
    title: str,
    probs: bool,
    n_bins: int,
    binning: str,
    binary: str,
    bootstrap: int,
    seed: int,
    ci: float,
    ood,
    optimal: bool,
    smooth: bool,
    plot: str | None,
    as_json: bool,
    extra: dict | None = None,
    interval: str = "auto",
) -> None:

    from ..metrics import evaluate

    if plot is not None:
        from ..plots import FIGURE_FORMATS

        if Path(plot).suffix.lower() not in FIGURE_FORMATS:
            raise ValueError(
                f"--plot: use a file ending in {', '.join(FIGURE_FORMATS)}, got {plot}"
            )
    with progress(bootstrap, "bootstrap", not as_json) as tick, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # undefined AUROC is reported as a note
        result = evaluate.trusting(  # every setting checked where its option entered
            scores,
            labels,
            probs=probs,
            n_bins=n_bins,
            binning=binning,
            binary=binary,
            ood_scores=ood,
            optimal=optimal,
            smooth=smooth,
            bootstrap=bootstrap,
            seed=seed,
            ci=ci,
            interval=interval,
            progress=tick,
        )
    if plot is not None:
        from ..plots import reliability_diagram

        reliability_diagram(result, title=title, path=plot)
    if as_json:
        payload = result.to_dict() | (extra or {})
        if plot is not None:
            payload["plot"] = str(plot)
        echo_json(payload)
        return
    print_result(result, title)
    if plot is not None:
        console().print(f"reliability diagram written to {plot}", soft_wrap=True)


def strict_json(value: Any) -> Any:
    """``value`` with NaN and ±inf as None (JSON has no such numbers; Python's ``json`` would
    write the invalid tokens NaN and Infinity), tuples as lists, and paths and other objects
    as their string."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def echo_json(value: dict[str, Any]) -> None:
    """Print a command's ``--json`` output: strict JSON (see :func:`strict_json`), indented,
    with ``schema_version`` first; its shape is the JSON Schema :mod:`calibkit.schemas` ships."""
    from ..schemas import SCHEMA_VERSION

    document = {"schema_version": SCHEMA_VERSION} | value
    click.echo(json.dumps(strict_json(document), indent=2, allow_nan=False))


def print_before_after(out, title: str, before, after) -> None:
    """A metric | before | after table of the compare columns, in their units, on ``out``
    (a rich console): what ``fit``, ``apply`` and ``calibrate`` show of a calibration."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("metric", "before", "after"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in metric_rows(before, after):
        table.add_row(*row)
    out.print(table)


def metric_rows(before, after) -> list[tuple[str, str, str]]:
    """(metric with its unit, before, after) rows in the unit each metric is printed in."""
    from ..metrics.internal import display, with_unit
    from ..posthoc.internal import COLUMNS

    return [(with_unit(c), display(c, before[c]), display(c, after[c])) for c in COLUMNS]
