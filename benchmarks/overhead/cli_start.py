"""How long the CLI takes to start (issue 42 §5): every ``--help``, and a cold ``calibkit
fit --method ts`` on the ResNet-110 logits against ``python -c "import torch"`` alone.
Each command runs in a fresh process ``--rounds`` times; the best wall time is kept.

    python benchmarks/overhead/cli_start.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOGITS = ROOT.parent / "shared/data/logits/resnet110_cifar10.npz"
CALIBKIT = [sys.executable, "-m", "calibkit"]
HELPS = [
    [],
    ["evaluate"],
    ["fit"],
    ["apply"],
    ["calibrate"],
    ["compare"],
    ["train"],
    ["bench"],
    ["report"],
    ["methods"],
    ["demo"],
]


def best(cmd: list[str], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    print("| command | best of rounds (s) |\n| --- | --- |")
    for args in HELPS:
        seconds = best([*CALIBKIT, *args, "--help"], a.rounds)
        print(f"| calibkit {' '.join([*args, '--help'])} | {seconds:.3f} |")
    torch_alone = best([sys.executable, "-c", "import torch"], a.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        fit = [*CALIBKIT, "fit", "--method", "ts", "--val", str(LOGITS), "-o", f"{tmp}/ts.calib"]
        cold = best(fit, a.rounds)
    print(f"| python -c 'import torch' | {torch_alone:.3f} |")
    print(f"| calibkit fit --method ts (ResNet-110) | {cold:.3f} |")
    print(f"\ncold fit / import torch: {cold / torch_alone:.2f}")


if __name__ == "__main__":
    main()
