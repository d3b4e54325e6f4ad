"""The papers' regime on one GPU (issue 52 §5): which CIFAR-10 protocol gives CE networks at
>= 90 % test accuracy and over-confident (TS temperature T >= 1.5, TS at least halving ECE)
in every seed, in the minutes a study can spend?

Each candidate (network depth, epochs, weight decay) trains CE for 3 seeds as one pack
(``train_packed``) on the JPEG CIFAR-10 train tree with the papers' augmentation (random crop
with 4-pixel padding and horizontal flip), SGD with momentum 0.9, batch 128, lr 0.1 divided
by 10 at half and three quarters of the epochs (``schedule: cifar``); 5,000 images held out
calibrate TS, the 10,000 test images measure. Per seed it prints test accuracy, T, test ECE
before and after TS, and the pack's seconds and images/s; then whether the premise holds in
every seed. Candidates run in order until the time left (``--budget`` seconds) cannot fit
the next one at the rate measured so far; a killed or stopped run resumes (one JSON line per
candidate in OUT/rows.jsonl).

    python benchmarks/gpu/regime_gpu.py --device cuda -o build/regime --budget 480
    # a CPU check of the same script:
    python benchmarks/gpu/regime_gpu.py -o /tmp/regime-cpu --images 512 --epochs-scale 0.05
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # progress_lines.py, shared
import progress_lines
from calibkit import posthoc
from calibkit._outputs import LinkRefused, inside
from calibkit.metrics import accuracy, ece
from calibkit.training import TrainConfig
from calibkit.training._trainer import train_packed

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
SEEDS = (1, 2, 3)
#: (name, model, epochs, weight decay): the tries, in the order they run. Deeper and longer
#: training and less weight decay make networks more over-confident (Guo et al. 2017, §3).
CANDIDATES = [
    ("resnet20, 40 epochs, wd 5e-4", "resnet20", 40, 5e-4),
    ("resnet20, 40 epochs, wd 1e-4", "resnet20", 40, 1e-4),
    ("resnet32, 40 epochs, wd 1e-4", "resnet32", 40, 1e-4),
    ("resnet20, 60 epochs, wd 1e-4", "resnet20", 60, 1e-4),
    ("resnet56, 40 epochs, wd 1e-4", "resnet56", 40, 1e-4),
]
#: the premise of the training papers (issue 52 §5)
MIN_ACCURACY, MIN_T = 0.90, 1.5


def configs(model: str, epochs: int, wd: float, args: argparse.Namespace) -> list[TrainConfig]:
    data = (
        f"folder:root={args.data},augment=crop-flip,val_from=train,val_size={args.val_size},"
        f"in_memory=true"
        + (f",train_size={args.images},test_size={args.images}" if args.images else "")
    )
    return [
        TrainConfig(
            data=data,
            model=model,
            loss="ce",
            seed=seed,
            epochs=max(1, round(epochs * args.epochs_scale)),
            batch_size=128,
            lr=0.1,
            momentum=0.9,
            weight_decay=wd,
            schedule="cifar",
            device=args.device,
        )
        for seed in SEEDS
    ]


def premise(s: dict) -> bool:
    """Whether a seed's CE network is in the papers' regime."""
    return (
        s["accuracy"] >= MIN_ACCURACY and s["T"] >= MIN_T and s["ece_after"] <= s["ece_before"] / 2
    )


def measure(out: Path) -> dict:
    """Test accuracy, T and test ECE before and after TS of one finished run."""
    z = np.load(out / "logits.npz")
    ts = posthoc.create("ts").fit(z["logits_val"], z["labels_val"])
    zt, yt = z["logits_test"], z["labels_test"]
    return {
        "accuracy": accuracy(zt, yt),
        "T": float(ts.temperature_),
        "ece_before": ece(zt, yt),
        "ece_after": ece(ts(torch.as_tensor(zt)), yt),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", required=True, type=Path)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--budget", type=float, default=math.inf, help="seconds for all tries")
    parser.add_argument("--data", default=str(SHARED / "cifar10-jpeg"))
    parser.add_argument("--val-size", type=int, default=5000)
    parser.add_argument("--images", type=int, default=0, help="train and test on N (a check)")
    parser.add_argument("--epochs-scale", type=float, default=1.0, help="(a check)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows_file = inside(args.out, "rows.jsonl")  # a link planted there is refused
    done = [json.loads(x) for x in rows_file.read_text().splitlines()] if rows_file.exists() else []
    started = time.perf_counter()
    rate = None  # ResNet-20-equivalent images per second of the last pack: the next one's time
    n_train = args.images or 50_000 - args.val_size
    for name, model, epochs, wd in CANDIDATES:
        if any(r["protocol"] == name for r in done):
            continue
        group = configs(model, epochs, wd, args)
        left = args.budget - (time.perf_counter() - started)
        work = n_train * len(group) * group[0].epochs * int(model[6:]) / 20  # ResNet-20 images
        if rate is not None:
            need = work / rate
            if need > left:
                print(f"{name}: skipped, needs about {need:.0f} s, {left:.0f} s left", flush=True)
                continue
        outs = [inside(args.out, f"{model}-e{epochs}-wd{wd:g}-s{c.seed}") for c in group]
        t0 = time.perf_counter()
        resume = all((o / "checkpoint.pt").exists() for o in outs)
        with progress_lines.epochs(f"{name}, pack of {len(group)}") as report:  # every 10 s
            train_packed(group, outs, resume=resume, progress=report)
        seconds = time.perf_counter() - t0
        rate = work / seconds
        row = {"protocol": name, "seconds": round(seconds, 1), "seeds": []}
        for config, out in zip(group, outs, strict=True):
            row["seeds"].append({"seed": config.seed} | measure(out))
        row["premise_holds"] = ok = all(map(premise, row["seeds"]))
        done.append(row)
        with rows_file.open("a") as f:
            f.write(json.dumps(row) + "\n")
        for s in row["seeds"]:
            print(
                f"{name} seed {s['seed']}: accuracy {s['accuracy'] * 100:.2f} %, T {s['T']:.2f}, "
                f"ECE {s['ece_before'] * 100:.2f} % -> {s['ece_after'] * 100:.2f} % after TS",
                flush=True,
            )
        print(
            f"{name}: {seconds:.0f} s for the pack of {len(group)}; premise in every seed: {ok}",
            flush=True,
        )


if __name__ == "__main__":
    try:
        main()
    except LinkRefused as err:  # one line, as calibkit's commands say it
        sys.exit(f"error: {err}")
