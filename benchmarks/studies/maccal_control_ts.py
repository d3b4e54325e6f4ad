"""MaC-Cal against its no-mask control, and against that control followed by temperature
scaling (issue 68: a verdict that separates the method's claim from what its
implementation happened to do).

The bench's control is the same head retrained without a mask; it is left uncalibrated.
MaC-Cal's inference head (q·W by default) also changes the head's confidence, so a
reviewer asks whether the mask does more than a temperature would. This reads a bench
store, and for each seed of "MaC-Cal" and "MaC-Cal: no mask" fits TS on the run's own
validation split (the calibration images the bench gave stage 2) and measures both on
its test split.

    python benchmarks/studies/maccal_control_ts.py /work/runs/real/results.sqlite

Last run (docs/real.md, "What the run shows", commit 68e7f08's store of ``calibkit bench
real``): on the pretrained ResNet-20, MaC-Cal 2.29 / 2.52 % test ECE (seeds 0 / 1), the
control 5.60 / 4.91 %, the control after TS 1.57 / 1.65 % (T = 1.40 / 1.35). On the
default bench's store (``calibkit bench``, digits / mlp, seeds 1–5): MaC-Cal 7.54 % on
average, the control 14.46 %, the control after TS 9.39 % (T 2.6–5.4), its accuracy 80.4
against MaC-Cal's 86.3 %.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from calibkit.bench._store import Store, StoreError
from calibkit.metrics import accuracy, ece
from calibkit.posthoc import TemperatureScaling

ARMS = ("MaC-Cal", "MaC-Cal: no mask")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", help="a bench store (results.sqlite) with both arms")
    args = parser.parse_args()
    try:
        runs = Store(args.store, create=False).runs()
    except StoreError as err:
        parser.exit(2, f"error: {err}\n")
    runs = [r for r in runs if r["method"] in ARMS and "logits" in r["artefacts"]]
    if not runs:
        parser.exit(2, f"error: {args.store}: no finished runs of {' or '.join(ARMS)}\n")
    print("arm | model | seed | test ECE % | after TS % | T | accuracy %")
    for r in sorted(runs, key=lambda r: (r["model"], r["method"], r["seed"])):
        z = np.load(r["artefacts"]["logits"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a fit's anomalies are not this table's subject
            ts = TemperatureScaling().fit(z["logits_val"], z["labels_val"])
        zt, yt = z["logits_test"], z["labels_test"]
        print(
            f"{r['method']} | {r['model']} | {r['seed']} | {100 * ece(zt, yt):.2f} | "
            f"{100 * ece(ts(zt), yt):.2f} | {ts.temperature_:.3f} | "
            f"{100 * accuracy(zt, yt):.2f}"
        )


if __name__ == "__main__":
    main()
