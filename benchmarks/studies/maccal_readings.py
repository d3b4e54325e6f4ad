"""Both readings of MaC-Cal's Eq. 12 (issue 68 §2), each under both inference modes, over
γ, against the no-mask control (the same bottleneck head, data and schedule, q = 1: nothing
masked), on three networks:

- ``digits``: the digits CNN of the tour (``calibkit train --data digits --model cnn
  --epochs 30 --seed S``), stage 2 at its defaults (40 epochs);
- ``resnet20``: the pretrained CIFAR-10 ResNet-20 on the JPEG tree (10,000 training
  images, as benchmarks/studies/maccal_images.py), stage 2 for 20 epochs, two seeds and five γ
  (about 46 s a fit here);
- ``resnet56``: the pretrained CIFAR-10 ResNet-56 on the same images and schedule, one seed
  and four γ (the second pretrained network, issue 68 §2).

Each fit's row (q per epoch, test ECE and accuracy before and after, the fit report's
flags) is appended to ``OUT/rows.jsonl`` as it ends; a killed run resumes where it stopped
(rows already there are skipped). ``--table`` prints the Markdown tables of docs/methods.md
from the rows.

    nice python benchmarks/studies/maccal_readings.py --out /tmp/maccal-readings [--networks digits]
    python benchmarks/studies/maccal_readings.py --out /tmp/maccal-readings --table
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from calibkit.metrics._resample import metric_values
from calibkit.posthoc._maccal import MacCal, eta_at
from calibkit.runs import run_evidence, stage_one
from calibkit.training import TrainConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # progress_lines.py, shared
from nc_lambda import pretrained  # the pretrained ResNet-20 as a run, beside this file
from progress_lines import epochs

GAMMAS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
#: (reading, inference) of every arm; the control is MaC-Cal's head with nothing masked
ARMS = [(r, i) for r in ("retention", "sparsity") for i in ("full", "expected")]
CONTROL = {"adaptive": "fixed", "q0": 1.0}
NETWORKS = {
    "digits": {"seeds": (0, 1, 2, 3, 4), "epochs": 40, "gammas": GAMMAS},
    "resnet20": {"seeds": (0, 1, 2), "epochs": 20, "gammas": (0.5, 0.6, 0.7, 0.9, 0.95)},
    "resnet56": {"seeds": (0,), "epochs": 20, "gammas": (0.5, 0.7, 0.9, 0.95)},
}
#: epochs whose q the tables show
SHOWN = (1, 5, 10, 20, 40)


def network(name: str, seed: int, out: Path) -> Path:
    """The stage-1 run of ``name`` (trained or made once, then reused)."""
    if name.startswith("resnet"):
        depth = int(name.removeprefix("resnet"))
        return pretrained(out / name, augment="crop-flip", train_size=10_000, depth=depth)
    run = out / f"digits-cnn-{seed}"
    if not (run / "run.json").exists():
        config = TrainConfig(data="digits", model="cnn", epochs=30, seed=seed, device="cpu")
        with epochs(f"digits CNN seed {seed}") as report:
            stage_one(config, run, given=False, progress=report)
    return run


def fits(names: list[str]) -> list[dict]:
    """Every fit to make: network, seed, and MaC-Cal's settings."""
    out = []
    for name in names:
        for seed in NETWORKS[name]["seeds"]:
            base = {"network": name, "seed": seed, "epochs": NETWORKS[name]["epochs"]}
            out.append(base | {"arm": "control", "settings": CONTROL})
            for gamma in NETWORKS[name]["gammas"]:
                for reading, inference in ARMS:
                    settings = {"reading": reading, "inference": inference, "gamma": gamma}
                    out.append(base | {"arm": f"{reading}, {inference}", "settings": settings})
    return out


def key(fit: dict) -> str:
    return json.dumps([fit["network"], fit["seed"], fit["arm"], fit["settings"]], sort_keys=True)


def run_fit(fit: dict, evidence, base: dict) -> dict:
    """One stage-2 fit and what the tables show of it."""
    y = evidence.labels["test"]
    start = time.perf_counter()
    label = f"{fit['network']} seed {fit['seed']} {fit['arm']} {fit['settings']}"
    with warnings.catch_warnings(), epochs(label) as report:
        warnings.simplefilter("ignore")
        cal = MacCal(epochs=fit["epochs"], seed=fit["seed"], **fit["settings"])
        cal.fit_on(evidence, progress=report)
    after = metric_values(cal.apply_on(evidence)["test"], y, ["accuracy", "ece"])
    history = cal.history()
    return {
        "key": key(fit),
        **{k: fit[k] for k in ("network", "seed", "arm", "settings")},
        "q": [r["q_next"] for r in history],  # keep rate after each epoch
        "train_conf": history[-1]["train_conf"],
        "train_acc": history[-1]["train_acc"],
        "before": base,
        "after": after,
        "mask_stopped": cal.fit_report_.details.get("mask_stopped"),
        "converged": cal.fit_report_.converged,
        "seconds": time.perf_counter() - start,
    }


def path_kind(row: dict, epochs: int) -> str:
    """How q ended: "bound" (within 0.01 of 1 or of its floor for the whole second half),
    "ramp" (moved by its whole clip η_t the same way at every epoch of the second half:
    ``mask_unsettled``'s rule, read off q) or "settled" (neither: inside its clip or
    turning about Eq. 12's fixed point Conf = γ Acc, as Fig. 8 shows)."""
    s = MacCal.check_settings(epochs=epochs, **row["settings"])
    q = [s["q0"], *row["q"]]
    half = q[len(row["q"]) // 2 :]
    if all(v > 0.99 for v in half[1:]) or all(v < s["q_min"] + 0.01 for v in half[1:]):
        return "bound"
    steps = [(b - a, eta_at(s, t)) for t, (a, b) in enumerate(itertools.pairwise(q), 1)]
    second = steps[len(steps) // 2 :]
    if all(d >= e - 1e-12 for d, e in second) or all(d <= -e + 1e-12 for d, e in second):
        return "ramp"
    return "settled"


def table(rows: list[dict]) -> str:
    """Markdown, per network: each arm and γ, q per epoch (the first seed), the mean and
    spread over seeds of test ECE and accuracy, and how many seeds' q settled or stopped."""
    lines = []
    for name in NETWORKS:
        mine = [r for r in rows if r["network"] == name]
        if not mine:
            continue
        seeds = sorted({r["seed"] for r in mine})
        befores = {r["seed"]: r["before"] for r in mine}
        ece0 = np.array([b["ece"] for b in befores.values()]) * 100
        acc0 = np.array([b["accuracy"] for b in befores.values()]) * 100
        shown = [e for e in SHOWN if e <= len(mine[0]["q"])]
        lines += [
            f"\n**{name}**, seeds {seeds}: before stage 2, test ECE {ece0.mean():.2f} ± "
            f"{ece0.std():.2f} %, accuracy {acc0.mean():.2f} %.\n",
            f"| arm | γ | q after epochs {', '.join(map(str, shown))} (seed {seeds[0]}) "
            "| test ECE % | test accuracy % | q: settled / ramp / at a bound (seeds) |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        groups: dict[tuple, list[dict]] = {}
        for r in sorted(mine, key=lambda r: (r["arm"] != "control", r["settings"].get("gamma", 0))):
            groups.setdefault((r["arm"], r["settings"].get("gamma", "-")), []).append(r)
        for (arm, gamma), rs in groups.items():
            first = min(rs, key=lambda r: r["seed"])
            qs = ", ".join(f"{first['q'][e - 1]:.2f}" for e in shown)
            ece = np.array([r["after"]["ece"] for r in rs]) * 100
            acc = np.array([r["after"]["accuracy"] for r in rs]) * 100
            kinds = [path_kind(r, len(r["q"])) for r in rs if arm != "control"]
            ends = " / ".join(str(kinds.count(k)) for k in ("settled", "ramp", "bound"))
            if arm == "control":
                ends = "fixed at 1 (nothing masked)"
            lines.append(
                f"| {arm} | {gamma} | {qs} | {ece.mean():.2f} ± {ece.std():.2f} | "
                f"{acc.mean():.2f} | {ends} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/maccal-readings"))
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=NETWORKS)
    parser.add_argument("--table", action="store_true", help="print the tables and stop")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "rows.jsonl"
    rows = [json.loads(line) for line in store.read_text().splitlines()] if store.exists() else []
    if args.table:
        print(table(rows))
        return
    done = {r["key"] for r in rows}
    evidence_of: dict[tuple[str, int], tuple] = {}
    for fit in fits(args.networks):
        if key(fit) in done:
            continue
        where = (fit["network"], fit["seed"])
        if where not in evidence_of:
            evidence, _ = run_evidence(network(*where, args.out), "cpu")
            base = metric_values(
                evidence.logits["test"], evidence.labels["test"], ["accuracy", "ece"]
            )
            evidence_of = {where: (evidence, base)}  # one network's data in memory at a time
        row = run_fit(fit, *evidence_of[where])
        with store.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{row['network']} seed {row['seed']} {row['arm']} "
            f"γ={fit['settings'].get('gamma', '-')}: "
            f"test ECE {row['after']['ece'] * 100:.2f} %, accuracy "
            f"{row['after']['accuracy'] * 100:.2f} %, q {row['q'][0]:.2f} → {row['q'][-1]:.2f} "
            f"({row['seconds']:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
