"""Training throughput, one network against packed networks (issue 40 §5).

Trains ResNet-20s on CIFAR-shaped images (random pixels in the CIFAR-10 binary format, read
by calibkit's own loader, crop-flip as for CIFAR) through calibkit's trainer: one network
alone (``calibkit.training.train``), then M networks packed (``train_packed``: losses and
seeds as a sweep's, one forward and backward pass for all). Prints each one's training
steps per epoch (the last epoch's ``train_time``: the first pays one-off costs) and the
aggregate images/s (members × images / seconds), with the ratio to the network alone.

    python benchmarks/speed/packed_speed.py                       # CPU: 1 against 4 networks
    python benchmarks/speed/packed_speed.py --device cuda --images 20000 --members 1 8 24
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from calibkit.training import TrainConfig, train
from calibkit.training._trainer import train_packed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_speed import write_random_cifar

LOSSES = [
    "ce",
    "focal:gamma=3",
    "flsd53",
    "label-smoothing:epsilon=0.05",
    "inverse-focal:gamma=3",
    "brier",
    "bsce-gra",
    "dual-focal:gamma=5",
]


def measure(root: Path, members: int, args) -> dict:
    configs = [
        TrainConfig(
            data=f"cifar10:root={root},val_size=1000",
            model=args.model,
            loss=LOSSES[m % len(LOSSES)],
            seed=m,
            epochs=args.epochs,
            batch_size=args.batch_size,
            device=args.device,
        )
        for m in range(members)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        if members == 1:
            history = train(configs[0], Path(tmp) / "alone").history
        else:
            results = train_packed(configs, [Path(tmp) / f"m{i}" for i in range(members)])
            history = results[0].history
        wall = time.perf_counter() - started
    seconds = history[-1]["train_time"]
    return {
        "members": members,
        "epoch_s": seconds,
        "images_per_s": members * args.n / seconds,
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="resnet20")
    parser.add_argument("--images", type=int, default=1000, help="training images per epoch")
    parser.add_argument("--members", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    args.n = args.images
    if args.device == "cpu":
        torch.set_num_threads(max(1, torch.get_num_threads()))
    with tempfile.TemporaryDirectory() as tmp:
        write_random_cifar(Path(tmp), (args.images + 1000) // 5)
        rows = [measure(Path(tmp), m, args) for m in args.members]
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(
        f"{args.model}, batch {args.batch_size}, {args.images} images per epoch, on {name} "
        f"({torch.get_num_threads()} CPU threads)"
    )
    print("| networks | training steps per epoch (s) | images/s (all networks) | vs one alone |")
    print("| --- | --- | --- | --- |")
    base = rows[0]["images_per_s"]
    for r in rows:
        print(
            f"| {r['members']} {'alone' if r['members'] == 1 else 'packed'} | "
            f"{r['epoch_s']:.2f} | {r['images_per_s']:,.0f} | {r['images_per_s'] / base:.2f}× |"
        )


if __name__ == "__main__":
    main()
