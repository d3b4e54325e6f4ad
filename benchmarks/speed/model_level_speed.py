"""Cost of the model-level methods, printed (not asserted):

- MaC-Cal stage 2 (features cached once) as a fraction of stage-1 training of the same model;
- Neural Clamping's fit against temperature scaling's on the same calibration split;
- Neural Clamping's throughput (images per second of its SGD epochs) on 5,000 CIFAR-shaped
  images with ResNet-20, against one plain forward and backward pass to the inputs.

    python benchmarks/speed/model_level_speed.py  # digits CNN and a CIFAR-shaped ResNet-32 (CPU)
    python benchmarks/speed/model_level_speed.py --throughput-only   # the last item alone

On a CUDA machine the ResNet-110 rows run on the GPU. CIFAR-shaped data is random images in
the CIFAR-10 binary format, read by calibkit's own loader.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from calibkit import data, posthoc
from calibkit.posthoc._clamping import NeuralClamping
from calibkit.runs import calibrate_run, load_run
from calibkit.training import TrainConfig, predict, train
from train_speed import write_random_cifar


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def maccal_row(label: str, cfg: TrainConfig, spec: str, scale_to: int) -> None:
    """Stage 2 timed as ``calibrate_run`` runs it: features, head training, the new run's
    logits and files."""
    with tempfile.TemporaryDirectory() as tmp:
        t1, _ = timed(lambda: train(cfg, Path(tmp) / "s1"))
        t2, method = timed(lambda: calibrate_run(Path(tmp) / "s1", spec, Path(tmp) / "s2"))
    per_epoch = t1 / cfg.epochs
    print(
        f"{label:34s} stage 1 {t1:7.1f} s ({cfg.epochs} epochs)   stage 2 {t2:6.2f} s "
        f"({method.epochs} epochs) = {100 * t2 / t1:5.1f} % of stage 1; against the "
        f"paper's {scale_to}-epoch stage 1: {100 * t2 / (per_epoch * scale_to):5.2f} %"
    )


def clamping_row(label: str, run: Path) -> None:
    _, bundle, model, _ = load_run(run)
    device = next(model.parameters()).device
    xv, yv = data.to_inputs(bundle.val.x, bundle, device), bundle.val.y.to(device)
    t_nc, _ = timed(lambda: NeuralClamping().fit(model, xv, yv))
    t_logits, zv = timed(lambda: predict(model, bundle.val, bundle, device))
    t_ts, _ = timed(lambda: posthoc.create("ts").fit(zv, bundle.val.y))
    print(
        f"{label:34s} Neural Clamping {t_nc:7.2f} s   TS {1e3 * t_ts:6.1f} ms (+ {t_logits:5.2f} s "
        f"for the logits)   ratio {t_nc / (t_ts + t_logits):7.0f}x"
    )


def clamping_throughput(n: int = 5000) -> None:
    """Images per second: one epoch of plain forward + backward to the inputs (the faster of
    batches of 128 and 512),
    against Neural Clamping's SGD epochs (a pool of γ is fitted in shared steps, each image
    counted once per γ). A fit also has fixed costs whatever its epochs: the starting logits,
    the temperature warm start and the final logits of each γ, two forward passes over the
    split. They are separated by timing the fit at 1 and at 3 epochs: an epoch costs half
    the difference, the fixed part the rest; the fit's rate at its default 100 epochs
    follows from both."""
    from calibkit import models

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = models.create("resnet20").to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    x = torch.rand(n, 3, 32, 32, device=device)
    y = torch.randint(10, (n,), device=device)

    def plain(batch: int) -> None:
        for idx in torch.randperm(n, device=device).split(batch):
            xb = x[idx].requires_grad_(True)
            torch.nn.functional.cross_entropy(model(xb), y[idx]).backward()

    rates = {}
    for batch in (128, 512):
        plain(batch)  # warm-up
        rates[batch] = n / timed(lambda batch=batch: plain(batch))[0]
    best = max(rates, key=rates.get)  # the baseline: the faster batch
    t_plain = n / rates[best]
    print(
        f"ResNet-20, {n:,} images, {device}: plain forward + backward "
        + ", ".join(f"{r:5.0f} images/s in batches of {b}" for b, r in rates.items())
        + f"; the baseline is the batch of {best}"
    )
    for pool in ((1.0,), (0.0, 1.0, 2.0)):
        t1, _ = timed(lambda pool=pool: NeuralClamping(gamma_pool=pool, epochs=1).fit(model, x, y))
        t3, _ = timed(lambda pool=pool: NeuralClamping(gamma_pool=pool, epochs=3).fit(model, x, y))
        epoch = (t3 - t1) / 2
        fixed = t1 - epoch
        rate = n * len(pool) / epoch
        full = n * 100 * len(pool) / (fixed + 100 * epoch)
        print(
            f"  Neural Clamping, γ pool of {len(pool)}: an SGD epoch {epoch:5.2f} s, "
            f"{rate:6.0f} images/s = {rate * t_plain / n:4.2f} x plain; fixed {fixed:5.2f} s; "
            f"the default 100-epoch fit {full:6.0f} images/s = {full * t_plain / n:4.2f} x plain"
        )


def main() -> None:
    import sys

    if "--throughput-only" in sys.argv:
        clamping_throughput()
        return
    clamping_throughput()
    digits = TrainConfig(data="digits", model="cnn", epochs=30, seed=0)
    maccal_row("digits CNN", digits, "maccal:batch_size=16", 350)
    with tempfile.TemporaryDirectory() as tmp:
        write_random_cifar(Path(tmp), 600)
        big = "resnet110" if torch.cuda.is_available() else "resnet32"
        cifar = TrainConfig(data=f"cifar10:root={tmp},val_size=500", model=big, epochs=1)
        maccal_row(f"{big}, CIFAR-shaped (2,500 images)", cifar, "maccal", 350)
        train(cifar, Path(tmp) / "run")
        clamping_row(f"{big}, 500 calibration images", Path(tmp) / "run")
    with tempfile.TemporaryDirectory() as tmp:
        train(digits, Path(tmp) / "run")
        clamping_row("digits CNN, 300 calibration images", Path(tmp) / "run")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"device: {device}, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
