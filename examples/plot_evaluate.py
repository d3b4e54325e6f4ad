"""
# Measure: how calibrated is a real network?

The ResNet-110 of Guo et al. (2017) on CIFAR-10's test split: accuracy, ECE and its
relatives with bootstrap intervals, and the reliability diagram. Its logits lie in
`../shared/data` beside a clone of the repository; where they are not (a user's machine),
the example runs on `calibkit.data.demo_logits()`, a small network on scikit-learn's digits,
and says so.
"""

from pathlib import Path

import numpy as np

from calibkit import evaluate
from calibkit.data import demo_logits
from calibkit.plots import reliability_diagram

SHARED = [Path(up, "shared/data/logits/resnet110_cifar10.npz") for up in ("../..", "..")]
LOGITS = next((p for p in SHARED if p.exists()), None)  # the build runs from the root
if LOGITS is None:
    print("../shared/data is not here: the digits network's logits instead")
    d = demo_logits()
    logits, labels = d["logits_test"], d["labels_test"]
else:
    with np.load(LOGITS) as f:
        logits, labels = f["logits_test"], f["labels_test"]

result = evaluate(logits, labels, bootstrap=200, seed=0)
for name in ("accuracy", "ece", "classwise_ece", "nll"):
    low, high = result.intervals[name]
    print(f"{name:>14}: {result[name]:.4f}  [{low:.4f}, {high:.4f}]")

# %%
# The diagram: accuracy per confidence bin against the diagonal, the 95 % band of each
# bin from the bootstrap, and the confidence histogram beneath.

reliability_diagram(result, title="ResNet-110, CIFAR-10 test")
