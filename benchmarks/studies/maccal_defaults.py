"""The search for MaC-Cal stage 2's defaults (issue 55 §1): batch, learning rate, schedule
and head width, on the digits protocol (the tour's CNN trained 30 epochs, one stage-1
network per seed), scored by what stage 2 does to test accuracy (non-inferiority at 1
point, as the bench's verdicts use) and ECE, with the final mask rate q and whether the
mask stopped acting (q at 1 or at its floor for the second half of training).

Resumable: each stage-1 network and each fit's row are kept under ``--out``; a killed run
starts where it stopped. A progress line per fit.

    python benchmarks/studies/maccal_defaults.py --out /tmp/maccal-search
    # 2 seeds, 4 settings:
    python benchmarks/studies/maccal_defaults.py --out /tmp/maccal-search --quick
    python benchmarks/studies/maccal_defaults.py --out /tmp/maccal-cifar \
        --network resnet20 --grid cifar

``--network resnet<depth>`` takes the pretrained CIFAR ResNet of that depth (../shared/data/
weights) as stage 1 instead, on the JPEG tree's 45,000 training images (the features stage 2
trains on, cached once), 500 validation and 2,000 test images; the seeds then vary stage 2
alone (its head's initialisation and order of rows).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

from calibkit._outputs import LinkRefused, inside
from calibkit.metrics._resample import metric_values
from calibkit.posthoc._maccal import MacCal, mask_stopped
from calibkit.runs import run_evidence
from calibkit.training import TrainConfig, train

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # progress_lines.py, shared
from nc_lambda import pretrained  # a pretrained CIFAR ResNet as a run, beside this file
from progress_lines import epochs

GRID = {
    "batch_size": [16, 64, 128],
    "lr": [0.1, 0.01],
    "schedule": ["constant", "cosine"],
    "width": [32, 128],
}
QUICK = {"batch_size": [16], "lr": [0.1, 0.01], "schedule": ["constant"], "width": [32, 128]}
#: the CIFAR search: the digits search's constant schedule (cosine was no better there), a
#: bottleneck of 32 under the ResNets' 64 features against the expansion of 128
CIFAR = {
    "batch_size": [128, 64, 256],
    "lr": [0.1, 0.01],
    "schedule": ["constant"],
    "width": [32, 128],
}
GRIDS = {"digits": GRID, "quick": QUICK, "cifar": CIFAR}


def stage1(out: Path, seed: int, network: str) -> Path:
    """The digits CNN of seed ``seed`` after 30 epochs (trained once, then reused), or the
    pretrained CIFAR ResNet ``network`` (one for every seed)."""
    if network != "digits":
        return pretrained(
            inside(out, f"stage1-{network}"), train_size=45_000, depth=int(network[6:])
        )
    run = inside(out, f"stage1-seed{seed}")
    if not (run / "run.json").exists():
        with epochs(f"stage 1, seed {seed}") as report:
            train(
                TrainConfig(data="digits", model="cnn", epochs=30, seed=seed), run, progress=report
            )
    return run


def fit_rows(evidences: list, settings: dict, seeds: list[int]) -> list[dict]:
    """Stage 2 of ``settings`` for each seed on its stage-1 network (``evidences[i]`` for
    ``seeds[i]``), every seed's head in one stack (``MacCal.fit_group_on``: each equal to its
    fit alone); a row per seed, its seconds the seed's share."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with epochs(f"{settings} seeds {seeds}") as report:
            cals = MacCal.fit_group_on(
                [MacCal(**settings, seed=seed) for seed in seeds], evidences, report
            )
    seconds = (time.perf_counter() - start) / len(seeds)
    rows = []
    for cal, evidence, seed in zip(cals, evidences, seeds, strict=True):
        y = evidence.labels["test"]
        plain = metric_values(evidence.logits["test"], y, ["accuracy", "ece"])
        after = metric_values(cal.apply_on(evidence)["test"], y, ["accuracy", "ece"])
        rows.append(
            {
                "settings": settings,
                "seed": seed,
                "d_acc": after["accuracy"] - plain["accuracy"],
                "d_ece": after["ece"] - plain["ece"],
                "ece": after["ece"],
                "q": cal.fit_report_.details["q"],
                "converged": cal.fit_report_.converged,
                "mask_stopped": mask_stopped(cal.history_, cal.checked()) or "",
                "seconds": seconds,
            }
        )
    return rows


def read_rows(path: Path) -> list[dict]:
    """The rows written so far; a last line cut short by a kill is dropped (refitted)."""
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="--grid quick and 2 seeds")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="digits")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--network",
        choices=["digits", "resnet20", "resnet32", "resnet44", "resnet56"],
        default="digits",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    grid = QUICK if args.quick else GRIDS[args.grid]
    seeds = range(2 if args.quick else args.seeds)
    rows_file = inside(args.out, "rows.jsonl")  # a link planted there is refused
    done = read_rows(rows_file)
    seen = {(json.dumps(r["settings"], sort_keys=True), r["seed"]) for r in done}
    settings_list = [
        dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())
    ]
    total = len(settings_list) * len(seeds)
    runs = {seed: stage1(args.out, seed, args.network) for seed in seeds}
    loaded = {run: run_evidence(run, "cpu")[0] for run in set(runs.values())}  # read once
    for settings in settings_list:
        todo = [s for s in seeds if (json.dumps(settings, sort_keys=True), s) not in seen]
        if not todo:
            continue
        for row in fit_rows([loaded[runs[s]] for s in todo], settings, todo):
            with rows_file.open("a") as f:
                f.write(json.dumps(row) + "\n")
            done.append(row)
            print(
                f"[{len(done)}/{total}] {settings} seed {row['seed']}: accuracy "
                f"{row['d_acc'] * 100:+.2f} points, ECE {row['d_ece'] * 100:+.2f} points, "
                f"q {row['q']:.2f} ({row['seconds']:.1f} s)",
                flush=True,
            )
    print(
        f"\n{'setting':58s} {'Δ accuracy (points)':>28s} {'Δ ECE (points)':>14s} "
        f"{'final q':>12s}  mask stopped"
    )
    for settings in settings_list:
        rows = [r for r in done if r["settings"] == settings]
        if rows:
            print(summary(settings, rows))


def summary(settings: dict, rows: list[dict]) -> str:
    """One setting's row: mean ± std over seeds of each change, the worst accuracy change."""

    def ms(key: str, scale: float = 100.0) -> str:
        vals = [r[key] * scale for r in rows]
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        return f"{statistics.mean(vals):+.2f} ± {sd:.2f}"

    stopped = sum(bool(r["mask_stopped"]) for r in rows)
    worst = min(r["d_acc"] for r in rows) * 100
    label = ", ".join(f"{k}={v}" for k, v in settings.items())
    return (
        f"{label:58s} {ms('d_acc'):>14s} (worst {worst:+.2f}) {ms('d_ece'):>14s} "
        f"{ms('q', 1.0):>12s}  {stopped}/{len(rows)}"
    )


if __name__ == "__main__":
    try:
        main()
    except LinkRefused as err:  # one line, as calibkit's commands say it
        sys.exit(f"error: {err}")
