"""Training throughput of ``calibkit.training.train`` against a minimal hand-written PyTorch
loop on the same model, data, batches and augmentation (target: within 5 % per step).

    python benchmarks/speed/train_speed.py  # CPU: an MLP on the Gaussian toy, ResNet-20/32
    python benchmarks/speed/train_speed.py --gpu       # + ResNet-110 / WRN-26-10 images/s on CUDA

Printed: the training steps alone against the hand loop (the same work: the measure of
the trainer's overhead); the per-epoch validation (a forward pass over the validation
split, then accuracy, ECE, NLL and optimal ECE) as a share of the epoch, steps and
validation (target: under 10 %); and the whole run, which adds what a run does besides
(the validations, a checkpoint per epoch, the final logits of every split) and which the
hand loop does not do. The CIFAR-shaped runs validate on 500 images after 2,500 training
images, a larger share than a real CIFAR-10 run's 5,000 after 45,000. CIFAR-shaped data
is random images written in the CIFAR-10 binary format to a temporary folder and read by
calibkit's own loader.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from calibkit import data, models
from calibkit.training import TrainConfig, crop_flip, train


def write_random_cifar(root: Path, per_batch: int) -> None:
    folder = root / "cifar-10-batches-bin"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = rng.integers(0, 10, (per_batch, 1), dtype=np.uint8)
        pixels = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        np.concatenate([labels, pixels], 1).tofile(folder / f"{name}.bin")


def hand_loop(cfg: TrainConfig, device: torch.device) -> float:
    """Seconds for cfg.epochs epochs of the plainest correct loop."""
    bundle = data.create(cfg.data)
    torch.manual_seed(cfg.seed)
    model = models.create(
        cfg.model, num_classes=bundle.num_classes, input_shape=bundle.input_shape
    ).to(device)
    opt = torch.optim.SGD(
        model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    )
    split = bundle.train
    start = time.perf_counter()
    for epoch in range(cfg.epochs):
        model.train()
        g = torch.Generator().manual_seed(epoch)
        for idx in torch.randperm(len(split), generator=g).split(cfg.batch_size):
            x, y = split.take(idx)
            x, y = data.to_inputs(x, bundle, device), y.to(device)
            if bundle.augment == "crop-flip":
                x = crop_flip(x, g)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def trainer(cfg: TrainConfig) -> tuple[float, float, float]:
    """(seconds of the training steps, of the per-epoch validations, of the whole run)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = train(cfg, Path(tmp) / "run")
        total = time.perf_counter() - start
    steps = sum(h["train_time"] for h in result.history)
    return steps, sum(h["val_time"] for h in result.history), total


def compare(label: str, cfg: TrainConfig, n_train: int, reps: int = 5) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    hands, runs = [], []
    for _ in range(reps):  # interleaved, so that drifts of the machine hit both alike
        hands.append(hand_loop(cfg, device))
        runs.append(trainer(cfg))
    t_hand = min(hands)
    best = min(runs)  # the repetition with the fastest steps, and its validation
    t_steps, t_val, t_run = best[0], best[1], min(r[2] for r in runs)
    samples = n_train * cfg.epochs
    print(
        f"{label:38s} hand loop {samples / t_hand:8.0f}/s | calibkit steps "
        f"{samples / t_steps:8.0f}/s ({100 * (t_steps / t_hand - 1):+5.1f} %) | validation "
        f"{100 * t_val / (t_steps + t_val):4.1f} % of the epoch | whole run "
        f"{samples / t_run:8.0f}/s ({100 * (t_run / t_hand - 1):+5.1f} %)"
    )


def gpu_table() -> None:
    if not torch.cuda.is_available():
        print("no CUDA device: GPU throughput not measured")
        return
    device = torch.device("cuda")
    for name in ("resnet110", "wrn-26-10"):
        model = models.create(name).to(device).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        x = torch.randint(0, 256, (128, 3, 32, 32), dtype=torch.uint8, device=device)
        y = torch.randint(0, 10, (128,), device=device)
        inputs = (x.float() / 255).contiguous(memory_format=torch.channels_last)
        for step in range(60):
            if step == 10:
                torch.cuda.synchronize()
                start = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(inputs), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        rate = 50 * 128 / (time.perf_counter() - start)
        epoch = 45_000 / rate
        print(
            f"{name:10s} {rate:8.0f} images/s (bf16, channels_last): {epoch:6.1f} s per "
            f"45,000-image epoch, {350 * epoch / 3600:5.2f} h for 350 epochs "
            "(MaC-Cal Table 4: 13,691 s for ResNet-50 on an A40)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpu", action="store_true", help="also time ResNet-110 and WRN-26-10")
    args = parser.parse_args()
    toy = TrainConfig(data="gaussian-toy", model="mlp", epochs=2, seed=0)
    compare("MLP, Gaussian toy (45,000 points)", toy, 45_000)
    with tempfile.TemporaryDirectory() as tmp:
        write_random_cifar(Path(tmp), 600)
        for name in ("resnet20", "resnet32"):
            cfg = TrainConfig(data=f"cifar10:root={tmp},val_size=500", model=name, epochs=1)
            compare(f"{name}, CIFAR-shaped (2,500 + 500 images)", cfg, 2_500, reps=2)
    if args.gpu:
        gpu_table()
    print(f"threads: {torch.get_num_threads()}; times are the best of the repetitions")


if __name__ == "__main__":
    main()
