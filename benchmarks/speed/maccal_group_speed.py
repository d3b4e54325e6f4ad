"""MaC-Cal stage 2 for several networks: one after another against together (issue 52 §4).

Trains M digits CNNs (one per seed, 2 epochs: the speed of stage 2 does not depend on how
good stage 1 is), then fits MaC-Cal's stage 2 (its defaults: 40 epochs, batch auto) on each
network alone, one after another, and on all of them together
(``MacCal.fit_group_on``: the heads in one stack), in the same process on the same
networks. Prints the seconds of each, the ratio, and the largest difference between a
head's test logits fitted alone and together.

    python benchmarks/speed/maccal_group_speed.py                    # 3 networks on this CPU
    python benchmarks/speed/maccal_group_speed.py --device cuda --members 3 9
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import torch

from calibkit.posthoc._maccal import MacCal
from calibkit.runs import run_evidence
from calibkit.training import TrainConfig, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[3])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=40, help="stage 2's epochs")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("| networks | one after another (s) | together (s) | speed-up | max logit difference |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for seed in range(max(args.members)):
            run = Path(tmp) / f"stage1-{seed}"
            train(TrainConfig(epochs=2, seed=seed, device="cpu"), run)
            runs.append(run)
        evidences = [run_evidence(r, args.device)[0] for r in runs]
        for m in args.members:
            sync = torch.cuda.synchronize if args.device.startswith("cuda") else lambda: None
            start = time.perf_counter()
            alone = [
                MacCal(epochs=args.epochs, seed=s).fit_on(e) for s, e in enumerate(evidences[:m])
            ]
            sync()
            t_alone = time.perf_counter() - start
            start = time.perf_counter()
            together = MacCal.fit_group_on(
                [MacCal(epochs=args.epochs, seed=s) for s in range(m)], evidences[:m]
            )
            sync()
            t_together = time.perf_counter() - start
            diff = max(
                float((a(x) - b(x)).abs().max())
                for a, b, e in zip(alone, together, evidences, strict=False)
                for x in [e.inputs("test", None)]
            )
            print(
                f"| {m} | {t_alone:.2f} | {t_together:.2f} | {t_alone / t_together:.2f}× "
                f"| {diff:.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
