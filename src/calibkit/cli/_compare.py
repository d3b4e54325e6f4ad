"""``compare``: every calibrator side by side on one split or on resplits of one file, with
the anomaly checks of ``bench`` under the table."""

from __future__ import annotations

import click

from .._escape import term_text
from .._settings import CalibrationShare, SeedCount
from ._common import CONTEXT, cli, in_flags
from ._options import (
    bootstrap_option,
    declared,
    declared_option,
    device_option,
    json_option,
    on_device,
)
from ._output import console, echo_json
from ._progress import progress


@cli.command(context_settings=CONTEXT)
@click.option("--val", type=click.Path(dir_okay=False), help="Calibration split file.")
@click.option("--test", type=click.Path(dir_okay=False), help="Test split file.")
@click.option(
    "--file",
    "both",
    type=click.Path(dir_okay=False),
    help="One file holding logits_val, labels_val, logits_test, labels_test.",
)
@click.option(
    "--methods",
    default=None,
    help="Comma-separated specs (default: the fast set, every calibrator but the "
    "cross-validated ones and the maps with more parameters than a tenth of the calibration "
    "rows); a spec's own settings may follow its commas: "
    "'dir-odir:folds=5,average_folds=true,ts' is two methods; 'all' is every one (--all).",
)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Without --methods: also the cross-validated maps (ms-odir, dir-l2, dir-odir), "
    "several times slower.",
)
@declared_option(declared("seeds", SeedCount, 1))  # of random methods, or of the splits
@declared_option(declared("fraction", CalibrationShare, None), "--split")  # one split's file
@bootstrap_option(200)
@device_option
@json_option
def compare(val, test, both, methods, every, seeds, fraction, bootstrap, device, as_json) -> None:
    """Fit calibrators (the fast default set, --all for every one, or --methods) on the
    calibration split and compare them on the test split:
    accuracy, ECE, AECE, MCE, classwise ECE, NLL, Brier and entropy with bootstrap
    intervals; the best value per column is marked with *. A file with one split (a
    network's test logits) is split with --split: stratified calibration and test parts,
    redrawn for each of --seeds seeds.

    \b
    Examples:
      calibkit compare --file resnet110_cifar10.npz
      calibkit compare --file resnet110_cifar10.npz --all     # + the cross-validated maps
      calibkit compare --val val.npz --test test.npz --methods ts,ts-grid,dir-odir --seeds 5 --json
      calibkit compare --file cifar10_resnet20.npz --split 0.5 --seeds 5 --methods ts,vector
    """
    from .._registry import split_specs
    from ..io import check_distinct_splits, has_both_splits, load_split
    from ..posthoc.internal import (
        COLUMNS,
        anomaly_lines,
        best_per_column,
        cell,
        check_logits_methods,
        compare_methods,
        compare_resplit,
        default_methods,
        expected_lines,
    )

    if fraction is not None and (val or test or not both):
        raise click.UsageError("--split divides one file: pass --file FILE, not --val/--test")
    if fraction is not None and has_both_splits(both):
        raise click.UsageError(
            f"{both} already holds a calibration split (logits_val) and a test split; drop "
            "--split to use them, or pass a file with one split"
        )
    if both:
        val = val or both
        test = test or both
    if not val or not test:
        raise click.UsageError(
            "pass --val FILE and --test FILE, or --file FILE holding both splits (or one "
            "split, with --split 0.5)"
        )
    if every and methods is not None:
        raise click.UsageError("--all adds to the default set; with --methods, name them all")
    if methods == "all":  # as the library says it (methods='all'): every method
        methods, every = None, True
    specs = split_specs(methods) if methods is not None else "all" if every else None
    if specs == []:
        raise click.UsageError(f"--methods {methods!r} names no method; e.g. --methods ts,dir-odir")
    if isinstance(specs, list):  # checked before any data is read, then trusted
        specs = check_logits_methods(specs)
    count = len(specs) if isinstance(specs, list) else len(default_methods(every=every)[0])
    with progress(count, "fitting", not as_json) as tick:
        ticks = (lambda _m: tick(1)) if tick else None
        if fraction is None:
            check_distinct_splits(val, test)
            zv, yv = _on_device(load_split(val, "val"), device)
            zt, yt = _on_device(load_split(test, "test"), device)
            found = compare_methods.trusting(  # its options checked where they entered
                (zv, yv), (zt, yt), specs, seeds=seeds, bootstrap=bootstrap, progress=ticks
            )
            title = f"fitted on {len(yv)} samples, tested on {len(yt)}"
        else:
            z, y = _on_device(load_split(both, "test"), device)
            found = compare_resplit.trusting(
                z, y, specs, fraction=fraction, seeds=seeds, bootstrap=bootstrap, progress=ticks
            )
            n_cal = round(fraction * len(y))
            title = (
                f"{seeds} stratified splits of {len(y)} samples: fitted on about {n_cal}, "
                f"tested on the other {len(y) - n_cal}"
            )
    results = found["methods"]
    if found["note"]:  # the library's words (methods='all') in this command's (--methods all)
        found["note"] = in_flags(found["note"], click.get_current_context().command)
    if as_json:
        echo_json(
            {
                "val": str(val),
                "test": str(test),
                "split": fraction,
                "seeds": seeds,
                "bootstrap": bootstrap,
                "methods": results,
                "left_out": found["left_out"],
                "note": found["note"],
            }
        )
        return
    from rich.table import Table

    best = best_per_column(results)
    from ..metrics.internal import with_unit

    heads = {c: f"{with_unit(c)} ± std" if seeds > 1 else with_unit(c) for c in COLUMNS}
    cells = {
        m: {c: ("*" if best.get(c) == m else "") + cell(r, c, intervals=False) for c in COLUMNS}
        for m, r in results.items()
    }
    out = console()
    for i, group in enumerate(column_groups(cells, heads, out.width)):
        table = Table(title=title if i == 0 else None, title_justify="left")
        table.add_column("method")
        for c in group:
            table.add_column(heads[c], justify="right")
        for m, row in cells.items():
            table.add_row(term_text(m), *[row[c] for c in group])
        out.print(table)
    if bootstrap:
        out.print("intervals: use --json (95 % bootstrap intervals for every cell)")
    out.print(
        "* best in column; ± std over "
        + ("the splits" if fraction is not None else "seeds for methods with randomness")
    )
    flagged = anomaly_lines(results)
    if flagged:
        out.print("flagged", style="bold red", end="")
        out.print(f" ({len(flagged)}): checks as in bench (docs/bench.md)")
        for line in flagged:
            out.print(f"  {term_text(line)}")
    for line in expected_lines(results):
        out.print(f"note: {term_text(line)}")
    if found["note"]:
        out.print(term_text(found["note"]))


def _on_device(split: tuple, device):
    """A split's (scores, labels), checked and on ``device``."""
    scores, labels = split
    return on_device(scores, device, "scores"), on_device(labels, device, "labels")


def column_groups(
    cells: dict[str, dict[str, str]], heads: dict[str, str], width: int
) -> list[list[str]]:
    """The columns in groups whose tables (the method column first in each) fit ``width``
    characters: one table where the terminal is wide enough, two or more beneath each other
    where it is not, so that no cell is wrapped."""
    pad = 3  # a rich column's borders and padding
    name = max(len("method"), *(len(m) for m in cells)) + pad + 1
    groups: list[list[str]] = [[]]
    used = name
    for c, head in heads.items():
        w = max(len(head), *(len(row[c]) for row in cells.values())) + pad
        if groups[-1] and used + w > width:
            groups.append([])
            used = name
        groups[-1].append(c)
        used += w
    return groups
