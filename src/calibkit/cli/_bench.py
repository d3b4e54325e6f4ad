"""Benchmarking: ``bench`` (a sweep into a SQLite store) and ``report`` (tables and
figures from a store)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from .._escape import term_text
from ._common import CONTEXT, cli
from ._options import OutputFile, json_option
from ._output import console, echo_json
from ._progress import progress


@cli.command(context_settings=CONTEXT)
@click.argument("spec", default="default")
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local processes, or Ray tasks (pip install 'calibkit[ray]').",
)
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(min=1),
    help="Local worker processes (default: one per GPU where the runs train on CUDA, else "
    "one per CPU core).",
)
@click.option(
    "--pack/--no-pack",
    default=None,
    help="Train the networks that share a model, data and schedule together (default: where "
    "they train on CUDA; docs/training.md).",
)
@click.option(
    "--threads",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="CPU threads per run (the same for every engine, so that numbers agree).",
)
@click.option("--address", default=None, help="Ray cluster address (default: start a local one).")
@click.option(
    "-o",
    "--out",
    default="calibkit-results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for the store, run folders and the report.",
)
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="Store path.")
@click.option(
    "--doc",
    default=None,
    type=OutputFile(),
    help="Also write the results into this Markdown file, as the section the spec names "
    "(docs/real.md); text outside calibkit's section markers is kept.",
)
@click.option(
    "--estimate",
    is_flag=True,
    help="Only say how long the sweep would take on this machine (each model's training "
    "rate and each post-hoc method's fit, measured now), then stop.",
)
@json_option
def bench(spec, engine, workers, pack, threads, address, out, db, doc, estimate, as_json) -> None:
    """Run a benchmark sweep from a YAML spec or a preset (default: `default`, on built-in
    data), store every result in SQLite, write the report and print the headline table.
    Killed and started again, it finishes only what is missing. `calibkit presets` names
    each preset with what it runs and how long it took when last run; `--estimate` says how
    long a sweep would take here. The `real`, `nc-cifar` and `train-cifar`
    presets read real networks and CIFAR-10 images from ../shared/data (docs/real.md).

    \b
    Examples:
      calibkit bench                                  # the default preset into calibkit-results/
      calibkit bench my-sweep.yaml --workers 2 -o results/
      calibkit bench paper-cifar --engine ray --address auto
      calibkit bench real -o real-results --doc docs/real.md   # real networks and images
      calibkit bench nc-cifar -o nc --doc docs/real.md   # Neural Clamping at 5,000 images
      calibkit bench train-cifar -o study/ --doc docs/real.md   # the training study
      calibkit bench train-cifar-paper --estimate     # how long it would take here
    """
    from .._outputs import check_output, check_writable, refuse_link
    from ..bench import load_spec, run_bench, write_report
    from ..bench.internal import Store

    sources = [spec] if spec and Path(spec).exists() else []
    check_output(out, sources, option="-o")
    check_output(db, sources, option="--db")
    check_output(doc, [*sources, db], option="--doc")
    plan = load_spec(spec)
    if doc:  # checked before the sweep, not after hours of it
        refuse_link(doc)
        check_writable(Path(doc).resolve().parent)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpus = _gpus_used(plan)
    workers = workers or gpus or max(1, (cores or 1) // threads)
    if engine == "local" and gpus and workers > gpus:
        click.echo(
            f"warning: {workers} workers share {gpus} GPU(s): each GPU is time-sliced "
            "between them; the default is one worker per GPU",
            err=True,
        )
    elif engine == "local" and workers * threads > (cores or 1):
        click.echo(
            f"warning: {workers} workers × {threads} threads > {cores} cores: runs will "
            "wait for each other's cores (docs/performance.md)",
            err=True,
        )
    if estimate:
        _print_estimate(plan, workers, threads, as_json)
        return
    started = time.perf_counter()
    with progress(len(plan.runs), f"bench {plan.name}", not as_json) as tick:

        def said(done: int, total: int, _run: Any, status: str | None = None) -> None:
            if status is not None:
                tick.status(status)
            tick(done, total)

        counts = run_bench(
            plan,
            out,
            engine=engine,
            workers=workers,
            address=address,
            db=db,
            threads=threads,
            progress=said if tick else None,
            pack=pack,
        )
    swept = time.perf_counter()
    store = db or Path(out) / "results.sqlite"
    summary = write_report(store, out) if counts["done"] + counts["skipped"] else None
    if summary:  # the verdicts with their premises, kept beside the numbers they rest on
        Store(store).set_meta("verdicts", summary["verdicts"])
    if summary and doc:
        from .._outputs import write_section
        from ..bench.internal import study_markdown

        write_section(doc, plan.name, study_markdown(store))
    report = str(Path(out) / "report.html") if summary else None
    failed = _failed_runs(store, plan)
    seconds = _timings(store, plan, started, swept, workers)
    if as_json:
        echo_json(
            {
                "counts": counts,
                "store": str(store),
                "report": report,
                "anomalies": summary["anomalies"] if summary else {},
                "verdicts": summary["verdicts"] if summary else [],
                "failed": [
                    {"method": r["method"], "seed": r["seed"], "error": r["error"]} for r in failed
                ],
                "seconds": seconds,
            }
        )
    else:
        _print_bench_summary(summary, counts, store, report, failed, seconds)
    if failed:
        sys.exit(1)


@cli.command(context_settings=CONTEXT)
@json_option
def presets(as_json) -> None:
    """List the bench presets that ship: what each runs, how long it took when it was last
    run (and on what), and its number of runs, or why it cannot be read here (the presets
    of real networks and images need ../shared/data beside the working folder).

    \b
    Examples:
      calibkit presets
      calibkit presets --json
      calibkit bench train-cifar --estimate   # how long a preset would take here
    """
    from ..bench.internal import presets as listed

    rows = listed()
    if as_json:
        echo_json({"presets": rows})
        return
    out = console()
    for r in rows:
        runs = f"{r['runs']} runs" if r["runs"] is not None else "not readable here"
        measured = r["measured"] or f"never run; `calibkit bench {r['name']} --estimate` says"
        out.print(f"{r['name']} ({runs}): {term_text(r['about'])}", highlight=False)
        out.print(f"    measured: {term_text(measured)}", highlight=False)
        if r["unreadable"]:
            out.print(f"    {term_text(r['unreadable'])}", highlight=False, soft_wrap=True)


def _gpus_used(plan) -> int:
    """The GPUs the sweep's runs train on here (0 where they train on the CPU)."""
    import torch

    from ..bench.internal import trains_on_cuda

    return torch.cuda.device_count() if trains_on_cuda(plan.runs) else 0


def _print_estimate(plan, workers: int, threads: int, as_json: bool) -> None:
    from ..bench.internal import estimate

    with progress(1, f"bench {plan.name} --estimate", not as_json) as tick:
        est = estimate(plan, workers, threads, report=tick.status if tick else None)
        if tick:
            tick(1)
    if as_json:
        echo_json(est)
        return
    out = console()
    where = "GPU" if est["device"] == "cuda" else "CPU"
    packed = f", packs of {est['packed_members']}" if est["packed_members"] > 1 else ""
    for model, row in est["models"].items():
        out.print(
            f"{model}: {row['networks']:.0f} networks, {row['gflop']:.3g} GFLOP of training, "
            f"{row['images_per_s']:.0f} training images/s measured here on the {where} "
            f"({threads} thread(s){packed}): {_duration(row['seconds'])} of training and "
            f"{_duration(row['after_seconds'])} after it for {row['runs']:.0f} runs, of one "
            "worker",
        )
    days = est["seconds"] / 86400
    given = est["given_runs"]
    if not est["models"]:
        out.print(
            f"{plan.name}: nothing to train; its {given} runs of given networks (logits, "
            "checkpoints) read, fit and measure, and that is not estimated"
        )
        return
    out.print(
        f"{plan.name}: about {_duration(est['seconds'])}"
        + (f" ({days:.1f} days)" if days >= 1 else "")
        + f" on {workers} worker(s) on this {where}: training "
        f"{_duration(est['training_seconds'])}, then stage 2, post-hoc fits and measuring "
        f"{_duration(est['after_seconds'])}"
        + (f"; {given} runs of given networks (logits, checkpoints) not counted" if given else ""),
    )


def _failed_runs(store: Path, plan) -> list[dict]:
    """The spec's runs recorded as failed in ``store`` (and not finished since)."""
    from ..bench.internal import Store

    keys = {r.key for r in plan.runs}
    return [r for r in Store(store, create=False).runs("failed") if r["key"] in keys]


def _timings(store, plan, started: float, swept: float, workers: int) -> dict:
    """Wall seconds of this invocation (sweep, report) and the seconds of each phase summed
    over the spec's finished runs (per worker, so they add up to about workers × sweep)."""
    from ..bench.internal import Store

    now = time.perf_counter()
    phases = Store(store, create=False).phase_seconds(r.key for r in plan.runs)
    return {
        "wall": now - started,
        "sweep": swept - started,
        "report": now - swept,
        "workers": workers,
        "phases": phases,
    }


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    if hours:
        return f"{hours} h {m} min"
    return f"{minutes} min {s} s" if minutes else f"{s} s"


def _print_bench_summary(summary, counts, store, report, failed, seconds) -> None:
    out = console()
    if summary:
        from rich.table import Table

        head, *rows = summary["headline"]
        table = Table(
            title="test ECE (%), uncalibrated: mean ± std over seeds", title_justify="left"
        )
        for h in head:
            table.add_column(h, justify="left" if h == "method" else "right")
        for row in rows:
            table.add_row(*[term_text(c.replace("**", "*")) for c in row])
        out.print(table)
        verdicts = summary["verdicts"][1:]
        for paper, claim, column, premise, verdict, numbers in verdicts:
            shown = "" if premise == "none" else f"premise {premise}; "
            out.print(
                term_text(
                    f"{verdict.strip('*'):>27}  {paper}: {claim} ({column}); {shown}{numbers}"
                ),
                highlight=False,
            )
        kinds = summary["anomalies"]
        if kinds:
            listed = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            out.print(f"anomalies flagged: {listed} (see the report's Anomalies section)")
        else:
            out.print("anomalies flagged: none")
    where = f"report {report} and report.md" if report else "no report (no finished run)"
    out.print(
        f"{counts['done']} runs done, {counts['skipped']} already in the store, "
        f"{counts['failed']} failed; store {term_text(store)}; {term_text(where)}",
    )
    phases = ", ".join(
        f"{k.replace('_', ' ')} {_duration(v)}" for k, v in seconds["phases"].items()
    )
    out.print(
        f"time: {_duration(seconds['wall'])} wall (sweep {_duration(seconds['sweep'])} on "
        f"{seconds['workers']} workers, report {_duration(seconds['report'])})"
        + (f"; summed over runs: {phases}" if phases else ""),
    )
    for r in failed:
        out.print(term_text(f"failed: {r['method']} seed {r['seed']}: {r['error']}"))


@cli.command(context_settings=CONTEXT)
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), help="Report folder.")
@json_option
def report(db, out, as_json) -> None:
    """Write report.md and a standalone report.html (tables and figures) from a results store.

    \b
    Example:
      calibkit report calibkit-results/results.sqlite -o report/
      calibkit report results.sqlite -o report/ --json   # counts, verdicts, headline table
    """
    from .._outputs import check_output
    from ..bench import write_report

    check_output(out, [db])
    info = write_report(db, out)
    paths = {"markdown": str(Path(out) / "report.md"), "html": str(Path(out) / "report.html")}
    if as_json:
        echo_json(info | paths)
        return
    console().print(
        f"{info['runs']} runs: {info['tables']} tables, {info['figures']} figures written to "
        f"{paths['markdown']} and {paths['html']}",
        soft_wrap=True,
    )
