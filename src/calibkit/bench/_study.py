"""The tables of a training study (the ``train-cifar`` presets; docs/real.md, "Training
study"), from the results store alone:

- **calibratability** (Rethinking §4, Table 2): per training method, ECE, classwise ECE and
  NLL before temperature scaling, after it and after histogram binning, the fitted
  temperature and accuracy;
- **refinement** (Dark Side §4, Tables 1–3): refinement AUROC before and after TS and
  histogram binning;
- **per network**: the same numbers for every (method, seed), and CE's T per seed;
- **training rate**: seconds per trained network, images per second and the achieved
  training GFLOP/s against a dense float32 matrix product's GFLOP/s measured in the same
  worker (:mod:`calibkit.training._throughput`).

Values are in % except NLL, T and seconds; a cell is the mean over seeds with its 95 %
t-interval (Student's t with n − 1 degrees of freedom: wide at 2 seeds, and honest about it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from pathlib import Path

from scipy import stats

from .._escape import md_text
from ..metrics.internal import shown
from ._given import given_by, given_sections
from ._report import anomaly_table, markdown_table
from ._results import Results
from ._store import ALL, Store
from ._verdicts import verdict_table

Table = list[list[str]]
#: (calibrator label, calibrator name in the store) of the calibratability columns
STAGES = (("before", "uncalibrated"), ("TS", "ts"), ("HB", "hist-binning"))


def interval(values: Iterable[float], scale: float = 1.0, digits: int = 2) -> str:
    """'mean [low, high]' with the 95 % t-interval over ``values`` × ``scale``; the mean
    alone for one value, '—' for none."""
    vals = [v * scale for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return "—"
    mean = statistics.mean(vals)
    if len(vals) == 1:
        return f"{mean:.{digits}f}"
    half = stats.t.ppf(0.975, len(vals) - 1) * statistics.stdev(vals) / math.sqrt(len(vals))
    return f"{mean:.{digits}f} [{mean - half:.{digits}f}, {mean + half:.{digits}f}]"


def _scale(metric: str) -> float:
    return 100.0 if metric != "temperature" and shown(metric).percent else 1.0


def calibratability_table(res: Results, column: tuple[str, str]) -> Table:
    """Rethinking Table 2 for one (dataset, model): every method's accuracy, fitted T and
    ECE / classwise ECE / NLL before TS, after TS and after histogram binning."""
    stages = [(label, res.calibrator(cal) or cal) for label, cal in STAGES]
    head = ["method", "accuracy", "T"] + [
        f"{shown(m).label} {label}" for m in ("ece", "classwise_ece", "nll") for label, _ in stages
    ]
    rows = [head]
    for method in res.methods:
        cells = [
            interval(res.seeds(method, column, "test", "uncalibrated", ALL, "accuracy"), 100),
            interval(res.seeds(method, column, "test", stages[1][1], ALL, "temperature")),
        ]
        for m in ("ece", "classwise_ece", "nll"):
            for _, cal in stages:
                cells.append(interval(res.seeds(method, column, "test", cal, ALL, m), _scale(m)))
        rows.append([method, *cells])
    return rows


def refinement_table(res: Results, column: tuple[str, str]) -> Table:
    """Dark Side: refinement AUROC (%) of every method before and after each calibrator."""
    stages = [(label, res.calibrator(cal) or cal) for label, cal in STAGES]
    rows = [["method", *[f"refinement AUROC {label}" for label, _ in stages]]]
    for method in res.methods:
        rows.append(
            [method]
            + [
                interval(res.seeds(method, column, "test", cal, ALL, "refinement_auroc"), 100)
                for _, cal in stages
            ]
        )
    return rows


def network_table(res: Results, column: tuple[str, str]) -> Table:
    """One row per trained network: accuracy, T, ECE before / after TS / after HB (%)."""
    ts, hb = res.calibrator("ts") or "ts", res.calibrator("hist-binning") or "hist-binning"
    rows = [
        [
            "method",
            "seed",
            "accuracy",
            "T",
            "ECE before",
            "ECE TS",
            "ECE HB",
            "NLL before",
            "NLL TS",
            "refinement AUROC",
        ]
    ]
    for method in res.methods:
        cells = {
            (cal, m): res.by_seed(method, column, "test", cal, ALL, m)
            for cal, m in [
                ("uncalibrated", "accuracy"),
                (ts, "temperature"),
                ("uncalibrated", "ece"),
                (ts, "ece"),
                (hb, "ece"),
                ("uncalibrated", "nll"),
                (ts, "nll"),
                ("uncalibrated", "refinement_auroc"),
            ]
        }
        for seed in sorted(cells["uncalibrated", "accuracy"]):
            row = [method, str(seed)]
            for (_, m), values in cells.items():
                v = values.get(seed)
                row.append("—" if v is None else f"{v * _scale(m):.2f}")
            rows.append(row)
    return rows


def rate_table(store: Store, res: Results) -> Table:
    """Per method: seconds per trained network (stage 1: its epochs, validation included;
    a packed member's share is the pack's seconds over its members), images per second
    (a pack's: every member's images), achieved GFLOP/s, the matrix product's GFLOP/s on the
    same device and their ratio, and how many networks trained in one pack. Runs that share
    a stage 1 (MaC-Cal on CE) count it once, under the method that trains it."""
    rows = [
        [
            "method",
            "networks",
            "seconds per network",
            "images/s",
            "training GFLOP/s",
            "matmul GFLOP/s",
            "ratio",
            "packed",
        ]
    ]
    provenance = store.provenance()
    for method in res.methods:
        keys = [
            k for k, r in res.runs.items() if r["method"] == method and not r["spec"].get("stage2")
        ]
        if not keys:
            continue
        members = [provenance[k].get("packed_members", 1) for k in keys]
        seconds = [
            sum(h.get("time", 0.0) for h in store.history(k)) / m
            for k, m in zip(keys, members, strict=True)
        ]
        rates = [provenance[k] for k in keys if "train_gflops" in provenance[k]]
        rows.append(
            [
                method,
                str(len(keys)),
                interval(seconds, digits=0),
                interval([r["train_images_per_s"] for r in rates], digits=0),
                interval([r["train_gflops"] for r in rates], digits=1),
                interval([r["matmul_gflops"] for r in rates], digits=1),
                interval([r["train_gflops"] / r["matmul_gflops"] for r in rates]),
                "alone" if max(members) == 1 else f"packs of {max(members)}",
            ]
        )
    return rows


def study_markdown(db: str | Path) -> str:
    """The sweep's tables and verdicts as Markdown (a section of docs/real.md): for networks
    the sweep trained, per (dataset, model) the tables above; for networks given by logits
    files or checkpoints, the tables of :mod:`calibkit.bench._given`; the anomalies."""
    store = Store(db, create=False)
    res = Results(store)
    if not res.runs:
        raise ValueError(f"{db}: the store holds no finished run yet; nothing to report")
    md = []
    verdicts = verdict_table(res)
    trained = [c for c in res.columns if given_by(res, c) is None]
    titles = {f"{res.short(c[0])} / {c[1]}" for c in trained}
    others = [r for r in verdicts[1:] if r[2] not in titles]
    if others:
        md += ["### Verdicts", "", markdown_table([verdicts[0], *others]), ""]
    for column in trained:
        title = f"{res.short(column[0])} / {column[1]}"
        mine = [r[:2] + r[3:] for r in verdicts if r[2] in (title, "dataset / model")]
        md += [
            f"### Verdicts ({md_text(title)})",
            "",
            markdown_table(mine),
            "",
            f"### Calibratability ({md_text(title)}; Rethinking Table 2)",
            "",
            "Mean over seeds [95 % t-interval]; ECE and classwise ECE in %, NLL in nats.",
            "",
            markdown_table(calibratability_table(res, column)),
            "",
            f"### Refinement ({md_text(title)}; Dark Side)",
            "",
            markdown_table(refinement_table(res, column)),
            "",
            f"### Every network ({md_text(title)})",
            "",
            markdown_table(network_table(res, column)),
            "",
        ]
    for title, table in given_sections(res):
        md += [f"### {md_text(title)}", "", markdown_table(table), ""]
    if trained:
        md += ["### Training rate", "", markdown_table(rate_table(store, res)), ""]
    anomalies = anomaly_table(res)
    md += ["### Anomalies", "", f"{len(anomalies) - 1} flagged by the checks of docs/bench.md.", ""]
    if len(anomalies) > 1:
        md += [markdown_table(anomalies), ""]
    return "\n".join(md)
