"""Cost of the model-level methods, printed (not asserted):

- MaC-Cal stage 2 (features cached once) as a fraction of stage-1 training of the same model;
- Neural Clamping's fit against temperature scaling's on the same calibration split.

    python benchmarks/model_level_speed.py      # digits CNN and a CIFAR-shaped ResNet-32 (CPU)

On a CUDA machine the ResNet-110 rows run on the GPU. CIFAR-shaped data is random images in
the CIFAR-10 binary format, read by calibkit's own loader.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from calibkit import data, posthoc
from calibkit.posthoc.clamping import NeuralClamping
from calibkit.training import TrainConfig, predict, train
from calibkit.training.runs import calibrate_run, load_run
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


def main() -> None:
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
