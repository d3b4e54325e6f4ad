"""Neural Clamping's λ taken at the warm-started temperature (calibkit's default) or at
T = 1 (the paper's §4.1, ``lam_at=one``), on the pretrained ResNet-20 and the JPEG CIFAR-10
tree: 500 calibration and 2,000 test images, as `bench real`, 2 seeds; or on finished runs
given with ``--run`` (one seed each, the default 100 epochs). Prints λ', the temperature,
test ECE and accuracy of each fit (docs/model-level.md).

    python benchmarks/studies/nc_lambda.py [--epochs 30] [--out /tmp/nc-resnet20]
    python benchmarks/studies/nc_lambda.py --run /tmp/maccal-search/stage1-seed0 --run ...
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from calibkit.cli._pretrained import pretrained_with_progress
from calibkit.metrics._resample import metric_values
from calibkit.posthoc._clamping import NeuralClamping
from calibkit.runs import run_evidence
from calibkit.training import TrainConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # progress_lines.py, shared
from progress_lines import epochs

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def pretrained(
    out: Path,
    augment: str = "none",
    train_size: int = 1000,
    val_size: int = 500,
    depth: int = 20,
) -> Path:
    """The pretrained CIFAR ResNet of ``depth`` layers (20, 32, 44 or 56) as a run on the
    JPEG tree (made once, then reused)."""
    data = (
        f"folder:root={SHARED / 'cifar10-jpeg'},mean=[0.485,0.456,0.406],"
        f"std=[0.229,0.224,0.225],val_from=test,val_size={val_size},test_size=2000,"
        f"train_size={train_size},augment={augment},in_memory=true"
    )
    if not (out / "run.json").exists():
        (weights,) = (SHARED / "weights").glob(f"resnet{depth}-*.th")
        config = TrainConfig(data=data, model=f"resnet{depth}", checkpoint=str(weights)).check()
        pretrained_with_progress(config, out, True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("/tmp/nc-resnet20"))
    parser.add_argument("--run", type=Path, action="append", help="a finished run instead")
    args = parser.parse_args()
    if args.run:  # one seed each, the default epochs and batch
        for seed, run in enumerate(args.run):
            compare(run, {"seed": seed})
        return
    for seed in (0, 1):
        compare(pretrained(args.out), {"seed": seed, "epochs": args.epochs, "batch_size": 100})


def compare(run: Path, settings: dict) -> None:
    """Neural Clamping on ``run`` with λ from the loss at the warm T and at T = 1."""
    evidence, _ = run_evidence(run, "cpu")
    y = evidence.labels["test"]
    base = metric_values(evidence.logits["test"], y, ["accuracy", "ece"])
    print(f"{run}: test ECE {base['ece'] * 100:.2f} %, accuracy {base['accuracy'] * 100:.2f} %")
    for at in ("warm", "one"):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with epochs(f"seed {settings['seed']} lam_at={at}") as report:
                nc = NeuralClamping(lam_at=at, **settings).fit_on(evidence, progress=report)
        m = metric_values(nc.apply_on(evidence)["test"], y, ["accuracy", "ece"])
        d = nc.fit_report_.details
        print(
            f"seed {settings['seed']} lam_at={at}: λ' {d['lam']:.4g}, T "
            f"{d['temperature_start']:.3f} -> {d['temperature']:.3f}, test ECE "
            f"{m['ece'] * 100:.2f} %, accuracy {m['accuracy'] * 100:.2f} %, converged "
            f"{nc.fit_report_.converged} ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
