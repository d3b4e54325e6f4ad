"""The ``calibkit`` command (also ``python -m calibkit``).

Errors in what the user passed print one line (``error: ...``) and exit with code 2;
no traceback reaches the terminal.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import click
import torch

from . import __version__
from .metrics.binning import BINNINGS

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
USER_ERRORS = (
    ValueError,
    TypeError,
    FileNotFoundError,
    PermissionError,
    NotADirectoryError,
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


@contextmanager
def _options_named():
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


def _console():
    from rich.console import Console

    console = Console(stderr=False, highlight=False)
    if not console.is_terminal:  # piped or captured: do not wrap wide tables at 80 columns
        console = Console(stderr=False, highlight=False, width=200)
    return console


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

        def tick(k: int, new_total: int | None = None, record: dict | None = None) -> None:
            """Advance by k, or (with ``new_total``) set the position to k of new_total."""
            if new_total is None:
                bar.advance(task, k)
                return
            text = f"{label} epoch {record['epoch']}" if record else None
            bar.update(task, completed=k, total=new_total, description=text or label)

        yield tick


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
    json_option,
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
@bootstrap_option(1000)
@json_option
def demo(output, seed, bootstrap, as_json) -> None:
    """Make logits with no download (a small MLP on scikit-learn's bundled digits), save them,
    and measure their calibration with intervals and a reliability diagram.

    \b
    Example:
      calibkit demo -o calibkit-demo
      calibkit evaluate calibkit-demo/digits_logits.npz --bootstrap 200
    """
    from .demo import digits_logits
    from .io import check_writable, save_npz

    out = check_writable(output)  # before a minute of training, not after
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


_key_options = [
    click.option(
        "--logits-key", default=None, help="Array of logits (default: logits_<split> or logits)."
    ),
    click.option(
        "--labels-key", default=None, help="Array of labels (default: labels_<split> or labels)."
    ),
]


def key_options(f):
    for option in reversed(_key_options):
        f = option(f)
    return f


def _metric_rows(before, after) -> list[tuple[str, str, str]]:
    from .posthoc.compare import COLUMNS

    return [(c, f"{before[c]:.4f}", f"{after[c]:.4f}") for c in COLUMNS]


@cli.command(context_settings=CONTEXT)
@click.option(
    "--method", "method", required=True, help="Calibrator spec, e.g. ts or dir-odir:folds=5."
)
@click.option(
    "--val", "val", required=True, type=click.Path(dir_okay=False), help="Calibration split file."
)
@key_options
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Calibrator file to write.",
)
@json_option
def fit(method, val, logits_key, labels_key, output, as_json) -> None:
    """Fit a post-hoc calibrator on a calibration split and save it (safetensors + JSON,
    never pickle). Prints the fit report and the metrics before and after on that split.

    \b
    Examples:
      calibkit fit --method ts --val run.npz -o ts.calib
      calibkit fit --method dir-odir:folds=5 --val resnet110_cifar10.npz -o dir.calib
    """
    import warnings

    from . import posthoc
    from .io import load_split
    from .metrics import evaluate

    cal = posthoc.create(method)  # a bad spec fails before the data is read
    if cal.level != "logits":
        raise ValueError(
            f"{cal.name} calibrates a network, not logits: use calibkit calibrate "
            f"{method} RUN_DIR (or --model, --checkpoint, --data)"
        )
    z, y = load_split(val, "val", logits_key=logits_key, labels_key=labels_key)
    cal.fit(z, y)
    path = cal.save(output)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        before = evaluate(z, y, optimal=False, smooth=False).metrics
        after = evaluate(cal(torch.as_tensor(z)).double(), y, optimal=False, smooth=False).metrics
    if as_json:
        click.echo(
            json.dumps(
                {
                    "method": method,
                    "file": str(path),
                    "fit": cal.fit_report_.__dict__,
                    "before": before,
                    "after": after,
                },
                indent=2,
                default=str,
            )
        )
        return
    from rich.table import Table

    console = _console()
    console.print(f"{method}: {cal.fit_report_}")
    table = Table(title=f"fit split ({len(y)} samples)", title_justify="left")
    for col in ("metric", "before", "after"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in _metric_rows(before, after):
        table.add_row(*row)
    console.print(table)
    console.print(f"calibrator written to {path}")


@cli.command(context_settings=CONTEXT)
@click.argument("calibrator", type=click.Path(dir_okay=False))
@click.argument("file", type=click.Path(dir_okay=False))
@key_options
@click.option(
    "--split", default="test", show_default=True, help="Split whose keys to read (logits_<split>)."
)
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False), help=".npz to write."
)
def apply(calibrator, file, logits_key, labels_key, split, output) -> None:
    """Apply a saved calibrator to logits and write calibrated logits (key logits; they are
    log-probabilities for binning and isotonic maps), probabilities (probs) and the labels.

    \b
    Example:
      calibkit apply ts.calib test.npz -o test_calibrated.npz
    """

    from . import posthoc
    from .io import read_arrays, save_npz

    cal = posthoc.load(calibrator)
    arrays = read_arrays(file) if file.endswith((".npz", ".pt", ".pth")) else {}
    key = logits_key or (f"logits_{split}" if f"logits_{split}" in arrays else "logits")
    if arrays and key not in arrays:
        raise ValueError(
            f"{file}: no logits array {key!r} (found: {', '.join(sorted(arrays))}); "
            "use --logits-key"
        )
    z = arrays[key] if arrays else None
    if z is None:
        from .io import load_scores

        z, _ = load_scores(file, logits_key=key, labels_key=labels_key or "labels")
    out = cal(z)  # checked: finite, non-empty, the calibrator's number of classes
    result = {"logits": out.numpy(), "probs": torch.softmax(out.double(), 1).numpy()}
    lkey = labels_key or (f"labels_{split}" if f"labels_{split}" in arrays else "labels")
    if lkey in arrays:
        from ._checks import as_labels

        labels = as_labels(arrays[lkey], out.shape[1], name=f"{file}: {lkey}")
        if len(labels) != len(out):
            raise ValueError(f"{file}: {len(labels)} labels for {len(out)} rows of logits")
        result["labels"] = labels.numpy()
    path = save_npz(output, **result)
    _console().print(f"{len(out)} samples calibrated with {cal.name}; written to {path}")


@cli.command(context_settings=CONTEXT)
@click.option("--val", type=click.Path(dir_okay=False), help="Calibration split file.")
@click.option("--test", type=click.Path(dir_okay=False), help="Test split file.")
@click.option(
    "--file",
    "both",
    type=click.Path(dir_okay=False),
    help="One file holding logits_val, labels_val, logits_test, labels_test.",
)
@click.option("--methods", default=None, help="Comma-separated specs (default: every calibrator).")
@click.option(
    "--seeds",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seeds: of methods with randomness, or with --split of the splits (mean ± std).",
)
@click.option(
    "--split",
    "fraction",
    default=None,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="For a file with one split: calibrate on this stratified fraction, test on the rest, "
    "a new split per seed.",
)
@bootstrap_option(200)
@json_option
def compare(val, test, both, methods, seeds, fraction, bootstrap, as_json) -> None:
    """Fit every calibrator on the calibration split and compare them on the test split:
    accuracy, ECE, AECE, MCE, classwise ECE, NLL, Brier and entropy with bootstrap
    intervals; the best value per column is marked with *. A file with one split (a
    network's test logits) is split with --split: stratified calibration and test parts,
    redrawn for each of --seeds seeds.

    \b
    Examples:
      calibkit compare --file resnet110_cifar10.npz
      calibkit compare --val val.npz --test test.npz --methods ts,ts-grid,dir-odir --seeds 5 --json
      calibkit compare --file cifar10_resnet20.npz --split 0.5 --seeds 5 --methods ts,vector
    """
    from . import posthoc
    from .io import load_split
    from .posthoc.compare import (
        COLUMNS,
        best_per_column,
        cell,
        compare_methods,
        compare_resplit,
    )

    if fraction is not None and (val or test or not both):
        raise click.UsageError("--split divides one file: pass --file FILE, not --val/--test")
    if both:
        val = val or both
        test = test or both
    if not val or not test:
        raise click.UsageError(
            "pass --val FILE and --test FILE, or --file FILE holding both splits (or one "
            "split, with --split 0.5)"
        )
    specs = [m.strip() for m in methods.split(",") if m.strip()] if methods is not None else None
    if specs == []:
        raise click.UsageError(f"--methods {methods!r} names no method; e.g. --methods ts,dir-odir")
    for m in specs or []:  # every spec is checked before any data is read or fitted
        if m != "uncalibrated":
            posthoc.create(m)
    with _progress(len(specs or []) or 12, "fitting", not as_json) as tick:
        ticks = (lambda _m: tick(1)) if tick else None
        if fraction is None:
            zv, yv = load_split(val, "val")
            zt, yt = load_split(test, "test")
            results = compare_methods(
                (zv, yv), (zt, yt), specs, seeds=seeds, bootstrap=bootstrap, progress=ticks
            )
            title = f"fitted on {len(yv)} samples, tested on {len(yt)}"
        else:
            z, y = load_split(both, "test")
            results = compare_resplit(z, y, specs, fraction=fraction, seeds=seeds,
                                      bootstrap=bootstrap, progress=ticks)  # fmt: skip
            n_cal = round(fraction * len(y))
            title = (f"{seeds} stratified splits of {len(y)} samples: fitted on about {n_cal}, "
                     f"tested on the other {len(y) - n_cal}")  # fmt: skip
    if as_json:
        click.echo(
            json.dumps(
                {
                    "val": str(val),
                    "test": str(test),
                    "split": fraction,
                    "seeds": seeds,
                    "bootstrap": bootstrap,
                    "methods": results,
                },
                indent=2,
            )
        )
        return
    from rich.table import Table

    best = best_per_column(results)
    table = Table(title=title, title_justify="left")
    table.add_column("method")
    for c in COLUMNS:
        table.add_column(c, justify="right")
    for m, r in results.items():
        table.add_row(
            m, *[("*" if best.get(c) == m else "") + cell(r, c, intervals=False) for c in COLUMNS]
        )
    console = _console()
    console.print(table)
    if bootstrap:
        console.print("intervals: use --json (95 % bootstrap intervals for every cell)")
    console.print(
        "* best in column; ± std over "
        + ("the splits" if fraction is not None else "seeds for methods with randomness")
    )


@cli.command(context_settings=CONTEXT)
@click.option("--data", "data_spec", default="digits", show_default=True, help="Dataset spec.")
@click.option("--model", default="cnn", show_default=True, help="Model spec.")
@click.option("--loss", default="ce", show_default=True, help="Loss spec, e.g. focal:gamma=3.")
@click.option("--epochs", default=30, show_default=True, type=int)
@click.option("--batch-size", default=128, show_default=True, type=int)
@click.option("--lr", default=0.1, show_default=True, type=float, help="Initial learning rate.")
@click.option("--momentum", default=0.9, show_default=True, type=float)
@click.option("--weight-decay", default=5e-4, show_default=True, type=float)
@click.option(
    "--schedule",
    default="cifar",
    show_default=True,
    help="cifar, tiny-imagenet, constant or step:milestones=A/B,gamma=G.",
)
@click.option("--mixup", default=0.0, show_default=True, type=float, help="Mixup alpha (0: off).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--extra", multiple=True, help="Extra evaluation split (dataset spec); repeat for more."
)
@click.option(
    "--record-learned-epochs", is_flag=True, help="Record learned epochs and final max logits."
)
@click.option(
    "--record-grad-norms",
    default="",
    help="Epochs (e.g. 10/20/30) at which to record per-sample gradient norms and Brier scores.",
)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option(
    "--checkpoint",
    default=None,
    type=click.Path(dir_okay=False),
    help="Pretrained weights to start from; with --stage2 they are stage 1 (no training).",
)
@click.option(
    "--stage2",
    default=None,
    help="Then retrain the head: maccal[:width=128,adaptive=decaying,gamma=0.9,...].",
)
@click.option(
    "--from",
    "source",
    default=None,
    type=click.Path(file_okay=False),
    help="With --stage2: start from this finished stage-1 run instead of training one.",
)
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="Run folder.")
@click.option("--resume", is_flag=True, help="Continue the run in --output from its checkpoint.")
@json_option
def train(
    data_spec, model, loss, epochs, batch_size, lr, momentum, weight_decay, schedule, mixup,
    seed, extra, record_learned_epochs, record_grad_norms, device, checkpoint, stage2, source,
    output, resume, as_json,
) -> None:  # fmt: skip
    """Train a model and write its logits for val, test and extra splits (the format
    `calibkit compare --file` reads), its per-epoch history and a checkpoint per epoch.

    \b
    Examples:
      calibkit train --data digits --model cnn --loss bsce-gra --epochs 30 --seed 1 -o runs/x
      calibkit train --data cifar10:root=~/data --model resnet110 --loss focal:gamma=3 \\
          --epochs 350 --extra cifar10.1:root=~/data -o runs/r110-focal
      calibkit train ... -o runs/x --resume          # after a crash: finishes the same run
      calibkit train ... --stage2 maccal -o runs/m   # + MaC-Cal (stage 1 in runs/m/stage1)
      calibkit train --from runs/x --stage2 maccal:adaptive=static -o runs/x-maccal
      calibkit train --data folder:root=~/cifar10-jpeg --model resnet20 \\
          --checkpoint resnet20.th --stage2 maccal -o runs/r20-maccal   # on pretrained weights
      torchrun --nproc-per-node 2 -m calibkit train ...   # data-parallel (gloo on CPU)
    """
    from .training import TrainConfig
    from .training import train as run_training
    from .training.maccal import stage2_config

    settings = stage2_config(stage2) if stage2 else None
    if source and settings is None:
        raise click.UsageError("--from needs --stage2 (which stage-2 method to run)")
    if source:
        _stage2(source, settings, output, device, as_json)
        return
    with _options_named():
        try:
            parts = str(record_grad_norms).replace(",", "/").split("/")
            grad_epochs = [int(e) for e in parts if e.strip()]
        except ValueError:
            raise ValueError(
                f"record_grad_norms: expected epochs such as 10/20, got {record_grad_norms!r}"
            ) from None
        config = TrainConfig(
            data=data_spec, model=model, loss=loss, epochs=epochs, batch_size=batch_size, lr=lr,
            momentum=momentum, weight_decay=weight_decay, schedule=schedule, mixup=mixup,
            seed=seed, extra=list(extra), record_learned_epochs=record_learned_epochs,
            record_grad_norms=grad_epochs, device=device, checkpoint=checkpoint,
        ).check()  # fmt: skip
    stage1 = Path(output) / "stage1" if settings else Path(output)
    if checkpoint and settings:
        from .training.runs import pretrained_run

        _stage2(pretrained_run(config, stage1), settings, output, device, as_json)
        return
    with _progress(1, "training", not as_json) as tick:
        result = run_training(config, stage1, resume=resume, progress=tick)
    if settings:
        _stage2(stage1, settings, output, device, as_json)
        return
    if as_json:
        click.echo(json.dumps({"output": str(output), "history": result.history}, indent=2))
        return
    h = result.history[-1]
    _console().print(
        f"{h['epoch']} epochs: train accuracy {h['train_acc']:.4f}; validation accuracy "
        f"{h['val_acc']:.4f}, ECE {h['val_ece']:.4f}, NLL {h['val_nll']:.4f}, optimal ECE "
        f"{h['val_optimal_ece']:.4f}\nwritten to {output}/ (logits.npz, history.json, run.json, "
        "model.safetensors)"
    )


def pretrained_options(f):
    """--model, --checkpoint and --data: a pretrained network instead of a run folder."""
    f = click.option("--data", "data_spec", default=None, help="Dataset spec (with --checkpoint).")(
        f
    )
    f = click.option(
        "--checkpoint", default=None, type=click.Path(dir_okay=False),
        help="Pretrained weights (torch or safetensors; the common CIFAR-ResNet layout too).",
    )(f)  # fmt: skip
    return click.option("--model", default=None, help="Model spec (with --checkpoint).")(f)


@cli.command(context_settings=CONTEXT)
@json_option
def methods(as_json) -> None:
    """List every calibration method with what it fits on (logits, or a network and its
    inputs) and its settings.

    \b
    Examples:
      calibkit methods
      calibkit methods --json
    """
    from . import posthoc

    rows = [
        {"name": n, "level": posthoc.REGISTRY.factory(n).level,
         "settings": posthoc.REGISTRY.parameters(n)}
        for n in posthoc.names()
    ]  # fmt: skip
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['name']:<16} {r['level']:<7} {', '.join(r['settings']) or '-'}")


@cli.command(context_settings=CONTEXT)
@click.argument("method")
@click.argument("run_dir", type=click.Path(file_okay=False), required=False)
@pretrained_options
@click.option("--device", default="auto", show_default=True)
@click.option(
    "-o", "--output", default=None, type=click.Path(file_okay=False),
    help="Folder for the calibrated logits and the method's file (default RUN_DIR/<method>).",
)  # fmt: skip
@json_option
def calibrate(method, run_dir, model, checkpoint, data_spec, device, output, as_json):
    """Fit any calibration method (METHOD: a spec; `calibkit methods` lists them) on the
    validation split of a finished run, or of a pretrained network (--model, --checkpoint,
    --data), then write calibrated logits of every split in the format `calibkit compare
    --file` reads, and the fitted method (calibrator.safetensors). Methods on logits use
    the run's saved logits; methods on the network (neural-clamping) use its inputs. A
    pretrained network's uncalibrated run is written to OUTPUT/pretrained first.

    \b
    Examples:
      calibkit calibrate ts runs/x                   # writes runs/x/ts/logits.npz
      calibkit calibrate "neural-clamping:gamma_pool=[1,2,3],init=data" runs/x -o runs/x-nc
      calibkit calibrate neural-clamping --model resnet20 --checkpoint resnet20.th \\
          --data "folder:root=cifar10-jpeg,mean=[0.485,0.456,0.406],std=[0.229,0.224,0.225]" -o nc
    """
    from . import posthoc
    from .io import save_npz
    from .training.runs import run_evidence
    from .training.trainer import pick_device

    spec = posthoc.REGISTRY.check(method)  # a bad spec fails before anything is read
    with _options_named():
        pick_device(device)
    run_dir = _pretrained_or_run(run_dir, model, checkpoint, data_spec, device, output)
    evidence, _ = run_evidence(run_dir, device)
    if "val" not in evidence.logits:
        raise ValueError(f"{run_dir}: the run has no validation split to calibrate on")
    cal = posthoc.create(spec).fit_on(evidence)
    out = Path(output) if output else Path(run_dir) / spec.name
    arrays = {}
    for name, z in cal.apply_on(evidence).items():
        arrays[f"logits_{name}"] = z.detach().float().cpu().numpy()
        if not name.startswith("ood_"):
            arrays[f"labels_{name}"] = evidence.labels[name].numpy()
    save_npz(out / "logits.npz", **arrays)
    cal.save(out / "calibrator.safetensors")
    report = cal.fit_report_
    if as_json:
        click.echo(json.dumps({"method": str(spec), "output": str(out), "fit": asdict(report)},
                              indent=2, default=str))  # fmt: skip
        return
    _console().print(f"{spec}: {report}\nwritten to {out}/ (logits.npz, calibrator.safetensors)")


@cli.command(context_settings=CONTEXT)
@click.argument("spec", default="default")
@click.option(
    "--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
    help="local processes, or Ray tasks (pip install 'calibkit[ray]').",
)  # fmt: skip
@click.option(
    "--workers", default=0, type=click.IntRange(min=0),
    help="Local worker processes (default: one per CPU core).",
)  # fmt: skip
@click.option(
    "--threads", default=1, show_default=True, type=click.IntRange(min=1),
    help="CPU threads per run (the same for every engine, so that numbers agree).",
)  # fmt: skip
@click.option("--address", default=None, help="Ray cluster address (default: start a local one).")
@click.option(
    "-o", "--out", default="calibkit-results", show_default=True,
    type=click.Path(file_okay=False), help="Folder for the store, run folders and the report.",
)  # fmt: skip
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="Store path.")
@click.option(
    "--data-root", default=None, type=click.Path(file_okay=False),
    help="With the `real` preset: the folder of real data (logits/zoo, cifar10-jpeg, weights).",
)  # fmt: skip
@click.option(
    "--doc", default=None, type=click.Path(dir_okay=False),
    help="With the `real` preset: also write the report's markdown here (docs/real.md).",
)  # fmt: skip
@json_option
def bench(spec, engine, workers, threads, address, out, db, data_root, doc, as_json) -> None:
    """Run a benchmark sweep from a YAML spec or a preset (default: `default`, built-in data,
    about 12 minutes on 2 cores), store every result in SQLite, write the report and print
    the headline table. Killed and started again, it finishes only what is missing.
    The `real` preset runs the papers' methods on real networks and images from
    --data-root (about 20 minutes on 2 cores; docs/real.md).

    \b
    Examples:
      calibkit bench                                  # the default preset into calibkit-results/
      calibkit bench my-sweep.yaml --workers 2 -o results/
      calibkit bench paper-cifar --engine ray --address auto
      calibkit bench real --data-root /data/calib -o real-results --doc docs/real.md
    """
    from .bench.report import write_report
    from .bench.runner import run_bench
    from .bench.spec import load_spec

    if spec == "real":
        _bench_real(data_root, out, workers, doc, as_json)
        return
    if data_root or doc:
        raise click.UsageError("--data-root and --doc belong to the `real` preset")

    plan = load_spec(spec)
    workers = workers or max(1, (os.cpu_count() or 1) // threads)
    with _progress(len(plan.runs), f"bench {plan.name}", not as_json) as tick:
        counts = run_bench(
            plan, out, engine=engine, workers=workers, address=address, db=db, threads=threads,
            progress=(lambda done, total, _run: tick(done, total)) if tick else None,
        )  # fmt: skip
    store = db or Path(out) / "results.sqlite"
    summary = write_report(store, out) if counts["done"] + counts["skipped"] else None
    report = str(Path(out) / "report.html") if summary else None
    failed = _failed_runs(store, plan)
    if as_json:
        click.echo(json.dumps({
            "counts": counts, "store": str(store), "report": report,
            "anomalies": summary["anomalies"] if summary else {},
            "failed": [{"method": r["method"], "seed": r["seed"], "error": r["error"]}
                       for r in failed],
        }, indent=2))  # fmt: skip
    else:
        _print_bench_summary(summary, counts, store, report, failed)
    if failed:
        sys.exit(1)


def _bench_real(data_root, out, workers, doc, as_json) -> None:
    from .bench.real import check_root, plan, run_real
    from .bench.real_report import write_real_report

    if data_root is None:
        raise click.UsageError(
            "the `real` preset needs --data-root DIR (with logits/zoo, cifar10-jpeg, weights)"
        )
    base = check_root(data_root)
    started = time.perf_counter()
    with _progress(len(plan(base)), "bench real", not as_json) as tick:
        ticks = (lambda done, total, _k: tick(done, total)) if tick else None
        summary = run_real(base, out, workers=workers or 2, progress=ticks)
    info = write_real_report(Path(out) / "results.sqlite", out, doc)
    wall = time.perf_counter() - started
    if as_json:
        click.echo(json.dumps(summary | info | {"wall_seconds": wall}, indent=2, default=str))
        return
    console = _console()
    for paper, claim, verdict, _ in info["verdicts"][1:]:
        console.print(f"{paper}: {claim}: [bold]{verdict}[/bold]")
    flagged = ", ".join(f"{k} {v}" for k, v in sorted(info["anomalies"].items())) or "none"
    console.print(
        f"{summary['done']} units run, {summary['skipped']} already done, {wall:.0f} s; "
        f"anomalies: {flagged}\nreport: {out}/report.md and {out}/report.html"
        + (f"; {doc}" if doc else "")
    )


def _failed_runs(store: Path, plan) -> list[dict]:
    """The spec's runs recorded as failed in ``store`` (and not finished since)."""
    from .bench.store import Store

    keys = {r.key for r in plan.runs}
    return [r for r in Store(store, create=False).runs("failed") if r["key"] in keys]


def _print_bench_summary(summary, counts, store, report, failed) -> None:
    console = _console()
    if summary:
        from rich.table import Table

        head, *rows = summary["headline"]
        table = Table(
            title="test ECE (%), uncalibrated: mean ± std over seeds", title_justify="left"
        )
        for h in head:
            table.add_column(h, justify="left" if h == "method" else "right")
        for row in rows:
            table.add_row(*[c.replace("**", "*") for c in row])
        console.print(table)
        verdicts = summary["verdicts"][1:]
        for paper, claim, column, verdict, numbers in verdicts:
            console.print(f"{verdict.strip('*'):>27}  {paper}: {claim} ({column}); {numbers}",
                          markup=False, highlight=False)  # fmt: skip
        kinds = summary["anomalies"]
        if kinds:
            listed = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            console.print(f"anomalies flagged: {listed} (see the report's Anomalies section)",
                          markup=False)  # fmt: skip
        else:
            console.print("anomalies flagged: none")
    where = f"report {report} and report.md" if report else "no report (no finished run)"
    console.print(
        f"{counts['done']} runs done, {counts['skipped']} already in the store, "
        f"{counts['failed']} failed; store {store}; {where}", markup=False,
    )  # fmt: skip
    for r in failed:
        console.print(f"failed: {r['method']} seed {r['seed']}: {r['error']}", markup=False)


@cli.command(context_settings=CONTEXT)
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), help="Report folder.")
def report(db, out) -> None:
    """Write report.md and a standalone report.html (tables and figures) from a results store.

    \b
    Example:
      calibkit report calibkit-results/results.sqlite -o report/
    """
    from .bench.report import write_report

    info = write_report(db, out)
    _console().print(
        f"{info['runs']} runs: {info['tables']} tables, {info['figures']} figures written to "
        f"{out}/report.md and {out}/report.html"
    )


def _pretrained_or_run(run_dir, model, checkpoint, data_spec, device, output) -> Path:
    """RUN_DIR, or the run folder written for --model/--checkpoint/--data under OUTPUT."""
    given = [o for o, v in (("--model", model), ("--checkpoint", checkpoint),
                            ("--data", data_spec)) if v is not None]  # fmt: skip
    if run_dir is not None:
        if given:
            raise click.UsageError(f"give RUN_DIR or {', '.join(given)}, not both")
        return Path(run_dir)
    if len(given) < 3 or output is None:
        raise click.UsageError(
            "give a finished RUN_DIR, or a pretrained network: --model, --checkpoint, --data "
            "and -o OUTPUT"
        )
    from .training import TrainConfig
    from .training.runs import pretrained_run

    with _options_named():
        config = TrainConfig(data=data_spec, model=model, checkpoint=checkpoint, device=device)
        config.check()
    return pretrained_run(config, Path(output) / "pretrained")


def _stage2(source, settings, output, device: str, as_json: bool) -> None:
    from .training.runs import run_stage2

    with _progress(1, "stage 2", not as_json) as tick:
        history = run_stage2(source, settings, output, device=device, progress=tick)
    if as_json:
        click.echo(json.dumps({"output": str(output), "stage2_history": history}, indent=2))
        return
    h = history[-1]
    _console().print(
        f"stage 2: {h['epoch']} epochs, final mask rate q = {h['q']:.3f}; validation accuracy "
        f"{h['val_acc']:.4f}, ECE {h['val_ece']:.4f}\nwritten to {output}/"
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``calibkit`` script."""
    cli.main(args=argv, prog_name="calibkit")


if __name__ == "__main__":
    main()
