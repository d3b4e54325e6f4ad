"""Neural Clamping as the paper and calibkit fit it, against NCToolkit's objective, start and
demo settings (‖δ‖ unsquared, T started at 1, λ' = 0.01, lr 0.01, batch 1,000, δ ~
N(0, 0.001²)), on the pretrained ResNet-20: 1,000 calibration and 2,000 test images of the
JPEG CIFAR-10 tree, 30 epochs, 2 seeds. Not reproduced from NCToolkit: its augmentation of
the calibration images (crop, flip, Cutout), its clipped focal probabilities, and its
optimiser on T itself (calibkit steps log T). docs/methods.md, "The papers' code".

    python benchmarks/studies/nc_toolkit.py [--out /tmp/nc-resnet20-1000]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from calibkit.metrics._resample import metric_values
from calibkit.posthoc._clamping import NeuralClamping
from calibkit.runs import run_evidence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # progress_lines.py, shared
from nc_lambda import pretrained  # the pretrained ResNet-20 as a run, beside this file
from progress_lines import epochs

SETTINGS = {
    "paper (calibkit)": {},
    "NCToolkit": {
        "penalty": "norm",
        "t_start": "one",
        "lam": 0.01,
        "lr": 0.01,
        "batch_size": 1000,
        "init_scale": 0.001,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/nc-resnet20-1000"))
    args = parser.parse_args()
    evidence, _ = run_evidence(pretrained(args.out, val_size=1000), "cpu")
    y = evidence.labels["test"]
    base = metric_values(evidence.logits["test"], y, ["accuracy", "ece"])
    print(
        f"pretrained: test ECE {base['ece'] * 100:.2f} %, accuracy {base['accuracy'] * 100:.2f} %"
    )
    for seed in (0, 1):
        for name, settings in SETTINGS.items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with epochs(f"seed {seed} {name}") as report:
                    nc = NeuralClamping(epochs=30, seed=seed, **settings)
                    nc.fit_on(evidence, progress=report)
            m = metric_values(nc.apply_on(evidence)["test"], y, ["accuracy", "ece"])
            d = nc.fit_report_.details
            print(
                f"seed {seed} {name}: T {d['temperature_start']:.3f} -> {d['temperature']:.3f}, "
                f"test ECE {m['ece'] * 100:.2f} %, accuracy {m['accuracy'] * 100:.2f} %, "
                f"converged {nc.fit_report_.converged} ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
