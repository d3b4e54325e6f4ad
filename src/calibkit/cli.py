"""The ``calibkit`` command (also ``python -m calibkit``).

Errors in what the user passed print one line (``error: ...``) and exit with code 2;
no traceback reaches the terminal.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import click

from . import __version__

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
USER_ERRORS = (
    ValueError,
    TypeError,
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    KeyError,
)


class CalibkitGroup(click.Group):
    """Group that turns user errors into one line and exit code 2."""

    def main(self, *args, **kwargs):  # type: ignore[override]
        kwargs["standalone_mode"] = False
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
        except click.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except USER_ERRORS as e:
            msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            click.echo(f"error: {msg.splitlines()[0] if msg else type(e).__name__}", err=True)
            sys.exit(2)
        except OSError as e:
            click.echo(f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), err=True)
            sys.exit(2)


@click.group(cls=CalibkitGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="calibkit")
def cli() -> None:
    """Measure, fix and benchmark the calibration of classifiers.

    \b
    Start here:
      calibkit demo                          # logits from a small digits model, measured
      calibkit evaluate run.npz --plot rel.png
    """


def _console():
    from rich.console import Console

    return Console(stderr=False, highlight=False)


@contextmanager
def _progress(total: int, label: str, enabled: bool):
    """A rich progress bar on stderr; yields a callback taking the number of steps done."""
    if not enabled or total <= 0:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda k: bar.advance(task, k)


def _print_result(result, title: str) -> None:
    from rich.table import Table

    ci = result.intervals is not None
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    if ci:
        table.add_column(f"{result.settings['ci']:.0%} CI", justify="right")
    for name, value, interval in result.rows():
        table.add_row(name, value, *([interval] if ci else []))
    console = _console()
    console.print(table)
    s = result.settings
    extra = f", T* = {s['optimal_temperature']:.2f}" if "optimal_temperature" in s else ""
    console.print(
        f"{result.n_samples} samples, {result.n_classes} classes, {s['n_bins']} bins "
        f"({s['binning']}){extra}"
    )
    for note in result.notes:
        console.print(f"note: {note}")


def _evaluate_and_report(
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
) -> None:
    import warnings

    from .metrics import evaluate

    if plot is not None:
        from .plots import FIGURE_FORMATS

        if Path(plot).suffix.lower() not in FIGURE_FORMATS:
            raise ValueError(
                f"--plot: use a file ending in {', '.join(FIGURE_FORMATS)}, got {plot}"
            )
    with _progress(bootstrap, "bootstrap", not as_json) as tick, warnings.catch_warnings():
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
            progress=tick,
        )
    if plot is not None:
        from .plots import reliability_diagram

        reliability_diagram(
            scores,
            labels,
            probs=probs,
            n_bins=n_bins,
            binning=binning,
            binary=binary,
            bootstrap=min(bootstrap, 1000),
            seed=seed,
            title=title,
            path=plot,
        )
    if as_json:
        payload = result.to_dict() | (extra or {})
        if plot is not None:
            payload["plot"] = str(plot)
        click.echo(json.dumps(payload, indent=2))
        return
    _print_result(result, title)
    if plot is not None:
        _console().print(f"reliability diagram written to {plot}")


_metric_options = [
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
        type=click.Choice(["calibkit", "torchmetrics", "netcal"]),
        help="Bin-edge convention (docs/metrics.md).",
    ),
    click.option(
        "--binary",
        default="top-label",
        show_default=True,
        type=click.Choice(["top-label", "positive"]),
        help="Binary problems: top label, or P(class 1) against y = 1.",
    ),
    click.option(
        "--bootstrap",
        default=0,
        show_default=True,
        type=click.IntRange(min=0),
        help="Bootstrap resamples for confidence intervals (0: none).",
    ),
    click.option("--seed", default=0, show_default=True, type=int, help="Bootstrap seed."),
    click.option(
        "--ci",
        default=0.95,
        show_default=True,
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        help="Interval level.",
    ),
    click.option("--no-optimal", is_flag=True, help="Skip optimal ECE (1000 temperatures)."),
    click.option("--no-smooth", is_flag=True, help="Skip smooth ECE."),
    click.option(
        "--plot",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write a reliability diagram (.png, .svg or .pdf).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table."),
]


def metric_options(f):
    for option in reversed(_metric_options):
        f = option(f)
    return f


@cli.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("labels_file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--logits-key", default="logits", show_default=True, help="Array (or column) of scores."
)
@click.option(
    "--labels-key", default="labels", show_default=True, help="Array (or column) of labels."
)
@click.option(
    "--ood",
    type=click.Path(dir_okay=False),
    default=None,
    help="File of out-of-distribution scores (same format) for OOD AUROC/FPR95.",
)
@click.option(
    "--ood-key", default=None, help="Array of OOD scores in --ood (default: --logits-key)."
)
@metric_options
def evaluate(
    file,
    labels_file,
    logits_key,
    labels_key,
    ood,
    ood_key,
    probs,
    n_bins,
    binning,
    binary,
    bootstrap,
    seed,
    ci,
    no_optimal,
    no_smooth,
    plot,
    as_json,
) -> None:
    """Measure the calibration of saved scores and labels.

    FILE is a .npz (keys --logits-key and --labels-key), .csv or .parquet (one column per
    class plus a label column), .pt (a dict of tensors, loaded with weights_only=True), or a
    .npy of scores followed by LABELS_FILE, a .npy of labels.

    \b
    Examples:
      calibkit evaluate run.npz --bootstrap 1000 --plot reliability.png
      calibkit evaluate logits.npy labels.npy --json
      calibkit evaluate cifar.npz --logits-key logits_test --labels-key labels_test
    """
    from .io import load_scores, read_arrays

    scores, labels = load_scores(file, labels_file, logits_key=logits_key, labels_key=labels_key)
    ood_scores = None
    if ood is not None:
        arrays = read_arrays(ood)
        key = ood_key or logits_key
        if key not in arrays:
            raise ValueError(
                f"{ood}: no array {key!r} (found: {', '.join(sorted(arrays))}); use --ood-key"
            )
        ood_scores = arrays[key]
    _evaluate_and_report(
        scores,
        labels,
        title=Path(file).name,
        probs=probs,
        n_bins=n_bins,
        binning=binning,
        binary=binary,
        bootstrap=bootstrap,
        seed=seed,
        ci=ci,
        ood=ood_scores,
        optimal=not no_optimal,
        smooth=not no_smooth,
        plot=plot,
        as_json=as_json,
        extra={"file": str(file)},
    )


@cli.command(context_settings=CONTEXT)
@click.option(
    "-o",
    "--output",
    default="calibkit-demo",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for the logits file and the reliability diagram.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Training seed.")
@click.option(
    "--bootstrap",
    default=1000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Bootstrap resamples for the intervals.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def demo(output, seed, bootstrap, as_json) -> None:
    """Make logits with no download (a small MLP on scikit-learn's bundled digits), save them,
    and measure their calibration with intervals and a reliability diagram.

    \b
    Example:
      calibkit demo -o calibkit-demo
      calibkit evaluate calibkit-demo/digits_logits.npz --bootstrap 200
    """
    from .demo import digits_logits
    from .io import save_npz

    out = Path(output)
    if not as_json:
        click.echo("training a small MLP on the bundled digits ...", err=True)
    data = digits_logits(seed=seed)
    path = save_npz(out / "digits_logits.npz", **data)
    if not as_json:
        _console().print(f"logits written to {path} (keys: {', '.join(data)})")
    _evaluate_and_report(
        data["logits"],
        data["labels"],
        title="digits MLP, test split",
        probs=False,
        n_bins=15,
        binning="calibkit",
        binary="top-label",
        bootstrap=bootstrap,
        seed=0,
        ci=0.95,
        ood=None,
        optimal=True,
        smooth=True,
        plot=str(out / "reliability.png"),
        as_json=as_json,
        extra={"file": str(path)},
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``calibkit`` script."""
    cli.main(args=argv, prog_name="calibkit")


if __name__ == "__main__":
    main()
