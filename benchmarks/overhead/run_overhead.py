"""What a bench run costs beside its fits: two runs of one worker on a given network (the
CIFAR JPEG tree in memory, the pretrained ResNet-20 of ../shared/data/weights), each with
TS and histogram binning, timed as the worker executes them (the second reuses what the
process kept: decoded images, the normalisation). Issue 40: the runs after a GPU pack.

    python benchmarks/overhead/run_overhead.py [--threads 2] [--test-size 4000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from calibkit.bench._execute import execute
from calibkit.bench._spec import resolve

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--test-size", type=int, default=4000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    root, weights = SHARED / "cifar10-jpeg", SHARED / "weights" / "resnet20-12fca82f.th"
    data = (
        f"folder:root={root},val_from=test,val_size=2000,test_size={args.test_size},in_memory=true"
    )
    spec = resolve(
        {
            "methods": [{"name": "Pretrained"}],
            "datasets": [
                {
                    "data": data,
                    "models": [{"model": "resnet20", "checkpoint": str(weights)}],
                    "seeds": [0, 1],
                }
            ],
            "posthoc": ["ts", "hist-binning"],
        }
    )
    with tempfile.TemporaryDirectory() as out:
        for i, run in enumerate(spec.runs):
            start = time.perf_counter()
            phases = execute(run, Path(out))["run"]["provenance"]["phases"]
            shown = ", ".join(f"{k} {v:.1f} s" for k, v in phases.items() if v >= 0.05)
            print(f"run {i + 1}: {time.perf_counter() - start:.1f} s ({shown})")


if __name__ == "__main__":
    main()
