"""What every command shares: the group, one-line errors (exit code 2), progress bars,
console output, the shared options, and options made from a configuration dataclass."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..allocator import retain_freed_memory
from ..conventions import BINNINGS, INTERVALS
from .progress import progress

__all__ = [
    "CONTEXT",
    "KEY_OPTIONS",
    "METRIC_OPTIONS",
    "SEED",
    "USER_ERRORS",
    "CalibkitGroup",
    "Terminated",
    "bootstrap_option",
    "cli",
    "console",
    "data_roots",
    "device_choice",
    "device_option",
    "echo_json",
    "evaluate_and_report",
    "json_option",
    "key_options",
    "metric_options",
    "metric_rows",
    "on_device",
    "one_line_warning",
    "options_named",
    "pretrained_options",
    "pretrained_or_run",
    "pretrained_with_progress",
    "print_before_after",
    "print_result",
    "split_option",
    "strict_json",
]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
USER_ERRORS = (
    ValueError,
    TypeError,
    FileNotFoundError,
    PermissionError,
    NotADirectoryError,
    IsADirectoryError,
    KeyError,
    ImportError,  # an optional library is missing: the message is the install hint
)


class CalibkitGroup(click.Group):
    """Group that turns user errors into one line and exit code 2."""

    def main(self, *args, **kwargs):  # type: ignore[override]
        kwargs["standalone_mode"] = False
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _terminated)  # unwind: workers stopped, files closed
        with warnings.catch_warnings():
            warnings.showwarning = one_line_warning
            return self._main(*args, **kwargs)

    def _main(self, *args, **kwargs):
        given = kwargs.get("args") if kwargs.get("args") is not None else sys.argv[1:]
        newline = any("\n" in str(a) for a in given or [])
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.ctx.get_help() if e.ctx else str(e))
            sys.exit(2)
        except click.UsageError as e:
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
            click.echo(f"error: {e.format_message()}{hint}", err=True)
            sys.exit(2)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.Abort as e:
            terminated = isinstance(e.__context__, Terminated)
            click.echo("terminated" if terminated else "aborted", err=True)
            sys.exit(143 if terminated else 130)
        except USER_ERRORS as e:
            msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            click.echo(f"error: {_one_line(msg, newline) or type(e).__name__}", err=True)
            sys.exit(2)
        except OSError as e:
            click.echo(f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), err=True)
            sys.exit(2)


def _one_line(message: str, newline_given: bool) -> str:
    """An error as one line: its first line; where an argument held a newline (a path), the
    whole message with each newline shown as \\n, so that the path is not cut."""
    if newline_given:
        return message.replace("\n", "\\n")
    return message.splitlines()[0] if message else ""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is so that it unwinds as after Ctrl-C."""


def _terminated(signum, frame) -> None:
    raise Terminated


def one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Show a warning as one ``warning: ...`` line on stderr, without its source line (a
    :class:`~calibkit.posthoc.anomalies.CalibrationWarning` names the method and what went
    wrong; any other warning its first line)."""
    text = str(message).strip().splitlines() or [category.__name__]
    click.echo(f"warning: {text[0]}", err=True)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: calibkit's version and which row scan serves the metrics."""
    if not value or ctx.resilient_parsing:
        return
    from ..metrics import native_scan

    kernel = native_scan.kernel()
    scan = f"compiled ({kernel})" if kernel else "PyTorch"
    why = (
        ""
        if kernel
        else (
            f" ({native_scan.ENV}=0)"
            if os.environ.get(native_scan.ENV, "").strip() == "0"
            else " (the compiled scan is not built or this CPU lacks AVX2)"
        )
    )
    click.echo(f"calibkit, version {__version__}\nrow scan: {scan}{why}")
    ctx.exit()


@click.group(cls=CalibkitGroup, context_settings=CONTEXT)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and the row scan in use, and exit.",
)
def cli() -> None:
    """Measure, fix and benchmark the calibration of classifiers.

    \b
    Start here:
      calibkit demo                          # logits from a small digits model, measured
      calibkit evaluate run.npz --plot rel.png
    """
    retain_freed_memory()


@contextmanager
def options_named():
    """Name the command-line option in an error raised for a setting (``lr: ...`` becomes
    ``--lr: ...``)."""
    try:
        yield
    except ValueError as err:
        name, sep, rest = str(err).partition(": ")
        options = {p.name for p in click.get_current_context().command.params}
        if sep and name in options:
            raise ValueError(f"--{name.replace('_', '-')}: {rest}") from None
        raise


def console():
    from rich.console import Console

    console = Console(stderr=False, highlight=False)
    if not console.is_terminal:  # piped or captured: do not wrap wide tables at 80 columns
        told = os.environ.get("COLUMNS", "")  # unless told a width
        width = int(told) if told.isdigit() and int(told) > 0 else 200
        console = Console(stderr=False, highlight=False, width=width)
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
        from ..metrics.intervals import describe

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
    import warnings

    from ..metrics import evaluate

    if plot is not None:
        from ..plots import FIGURE_FORMATS

        if Path(plot).suffix.lower() not in FIGURE_FORMATS:
            raise ValueError(
                f"--plot: use a file ending in {', '.join(FIGURE_FORMATS)}, got {plot}"
            )
    with progress(bootstrap, "bootstrap", not as_json) as tick, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # undefined AUROC is reported as a note
        result = evaluate(
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
        console().print(f"reliability diagram written to {plot}")


def _resolve_device(ctx: click.Context, param: click.Parameter, value: str):
    from ..training.config import pick_device

    try:
        return pick_device(value)
    except ValueError as err:  # worded as every command's --device error, train's too
        raise click.UsageError(f"--device: {str(err).removeprefix('device: ')}", ctx) from None


def device_choice(default: str):
    """``--device``, resolved once where the command starts to a ``torch.device`` that
    the rest of the command trusts (:func:`~calibkit.training.config.pick_device`)."""
    return click.option(
        "--device",
        default=default,
        show_default=True,
        callback=_resolve_device,
        help="Where to compute: cpu, cuda, cuda:N, mps or auto (a GPU where there is one).",
    )


#: --device for the commands that compute on logits files (evaluate, fit, apply, compare)
device_option = device_choice("cpu")


def on_device(array: Any, device: Any) -> Any:
    """A loaded array as a tensor on ``device`` (None stays None)."""
    import torch

    return None if array is None else torch.as_tensor(array).to(device)


def bootstrap_option(default: int):
    """--bootstrap N, shared by every command that reports intervals."""
    return click.option(
        "--bootstrap",
        default=default,
        show_default=True,
        type=click.IntRange(min=0),
        help="Bootstrap resamples for 95 % intervals (0: none).",
    )


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


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


#: a seed: a whole number that NumPy's and torch's generators both take
SEED = click.IntRange(0, 2**63 - 1)

METRIC_OPTIONS = [
    click.option("--probs", is_flag=True, help="Scores are probabilities, not logits."),
    click.option(
        "--n-bins",
        default=15,
        show_default=True,
        type=click.IntRange(min=1),
        help="Number of equal-width (and equal-mass) bins.",
    ),
    click.option(
        "--binning",
        default="calibkit",
        show_default=True,
        type=click.Choice(list(BINNINGS)),
        help="Bin-edge convention (docs/metrics.md).",
    ),
    click.option(
        "--binary",
        default="top-label",
        show_default=True,
        type=click.Choice(["top-label", "positive"]),
        help="Binary problems: top label, or P(class 1) against y = 1.",
    ),
    bootstrap_option(0),
    click.option("--seed", default=0, show_default=True, type=SEED, help="Bootstrap seed."),
    click.option(
        "--ci",
        default=0.95,
        show_default=True,
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        help="Interval level.",
    ),
    click.option(
        "--interval",
        default="auto",
        show_default=True,
        type=click.Choice(INTERVALS),
        help="Bootstrap interval: auto picks each metric's by the coverage study "
        "(docs/metrics.md).",
    ),
    click.option("--no-optimal", is_flag=True, help="Skip optimal ECE (1000 temperatures)."),
    click.option("--no-smooth", is_flag=True, help="Skip smooth ECE."),
    click.option(
        "--plot",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write a reliability diagram (.png, .svg or .pdf).",
    ),
    json_option,
]


def metric_options(f):
    for option in reversed(METRIC_OPTIONS):
        f = option(f)
    return f


KEY_OPTIONS = [
    click.option(
        "--logits-key",
        default=None,
        help="Array (or CSV column) of logits (default: logits_<split> or logits).",
    ),
    click.option(
        "--labels-key",
        default=None,
        help="Array (or CSV column) of labels (default: labels_<split> or labels).",
    ),
]

#: the split whose keys apply and evaluate read (fit reads the calibration split, val)
split_option = click.option(
    "--split",
    default="test",
    show_default=True,
    help="Split whose keys to read from a file that holds several (logits_<split>).",
)


def key_options(f):
    for option in reversed(KEY_OPTIONS):
        f = option(f)
    return f


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
    from ..metrics.table import info, with_unit
    from ..posthoc.compare import COLUMNS

    return [(with_unit(c), info(c).display(before[c]), info(c).display(after[c])) for c in COLUMNS]


def data_roots(*specs) -> list[str]:
    """The folders that dataset specs read (their ``root`` settings): inputs that an output
    may not replace (:func:`calibkit.outputs.check_output`). Text is parsed; a parsed
    :class:`~calibkit.registry.Spec` is read as it is."""
    from ..registry import parse_spec

    roots = []
    for spec in specs:
        if spec is None:
            continue
        parsed = parse_spec(spec) if isinstance(spec, str) else spec
        root = parsed.kwargs.get("root")
        if isinstance(root, str):
            roots.append(root)
    return roots


def pretrained_options(f):
    """--model, --checkpoint and --data: a pretrained network instead of a run folder."""
    f = click.option("--data", "data_spec", default=None, help="Dataset spec (with --checkpoint).")(
        f
    )
    f = click.option(
        "--checkpoint",
        default=None,
        type=click.Path(dir_okay=False),
        help="Pretrained weights (torch or safetensors; the common CIFAR-ResNet layout too).",
    )(f)
    return click.option("--model", default=None, help="Model spec (with --checkpoint).")(f)


def pretrained_or_run(run_dir, model, checkpoint, data_spec, device, output, as_json) -> Path:
    """RUN_DIR, or the run folder written for --model/--checkpoint/--data under OUTPUT (with a
    progress line while it reads the data and predicts every split: half a minute for the
    CIFAR JPEG tree on 2 cores)."""
    given = [
        o
        for o, v in (("--model", model), ("--checkpoint", checkpoint), ("--data", data_spec))
        if v is not None
    ]
    if run_dir is not None:
        if given:
            raise click.UsageError(f"give RUN_DIR or {', '.join(given)}, not both")
        return Path(run_dir)
    if len(given) < 3 or output is None:
        raise click.UsageError(
            "give a finished RUN_DIR, or a pretrained network: --model, --checkpoint, --data "
            "and -o OUTPUT"
        )
    from ..training import TrainConfig

    with options_named():
        config = TrainConfig(
            data=data_spec, model=model, checkpoint=checkpoint, device=str(device)
        )  # the option's resolved device, as the field's text (resolved again: no "auto")
        config.check()
    return pretrained_with_progress(config, Path(output) / "pretrained", not as_json)


def pretrained_with_progress(config, out: Path, enabled: bool) -> Path:
    """:func:`calibkit.runs.pretrained_run` with a progress line while it reads the data and
    predicts every split (half a minute for the CIFAR JPEG tree on 2 cores): what
    ``calibrate --checkpoint`` and ``train --checkpoint --stage2`` both do first."""
    from ..runs import pretrained_run

    with progress(1, "pretrained run", enabled) as tick:
        if tick:
            tick.status(f"reading {config.data.name} and predicting its splits with the network")
        pretrained_run(config, out)
        if tick:
            tick(1)
    return out
