"""
# Reproduce: a published table, cell by cell

Kull et al. (2019, "Beyond temperature scaling") report the ResNet-110 on CIFAR-10 before
and after temperature scaling; calibkit computes the same cells from the same logits under
their conventions (classwise ECE with their binning).
`benchmarks/correctness/published_resnet110.py` does this for every published column and
calibrator.

It needs those logits, `../shared/data/logits/resnet110_cifar10.npz` beside a clone of the
repository (no other logits have published cells to compare with). Where they are
missing, the site is built without this example (the build's log names the file), and
run by hand it stops at its first line with a `FileNotFoundError` naming that file.
"""

# gallery-needs: ../shared/data/logits/resnet110_cifar10.npz

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from calibkit import posthoc
from calibkit.metrics import accuracy, classwise_ece, ece, nll

LOGITS = Path("../../shared/data/logits/resnet110_cifar10.npz")
if not LOGITS.exists():
    LOGITS = Path("../shared/data/logits/resnet110_cifar10.npz")
with np.load(LOGITS) as f:
    z_val, y_val = f["logits_val"], f["labels_val"]
    z_test, y_test = f["logits_test"], f["labels_test"]

#: Kull et al.'s notebook (dirichletcal/experiments_dnn, "Final Results"), rows Uncal and TempS
PUBLISHED = {
    "uncalibrated": {
        "error %": 6.44,
        "ECE": 0.047503,
        "classwise ECE": 0.098456,
        "log-loss": 0.358274,
    },
    "ts": {"error %": 6.44, "ECE": 0.011321, "classwise ECE": 0.043437, "log-loss": 0.209261},
}
probs = {
    "uncalibrated": np.exp(z_test - z_test.max(1, keepdims=True)),
    "ts": posthoc.create("ts").fit(z_val, y_val).predict_proba(z_test),
}
probs["uncalibrated"] /= probs["uncalibrated"].sum(1, keepdims=True)
ours = {}
for row, p in probs.items():
    ours[row] = {
        "error %": 100 * (1 - accuracy(p, y_test, probs=True)),
        "ECE": ece(p, y_test, probs=True),
        "classwise ECE": classwise_ece(p, y_test, probs=True, binning="kull"),
        "log-loss": nll(p, y_test, probs=True),
    }
    for column, value in PUBLISHED[row].items():
        print(f"{row:>12} {column:>13}: published {value:.6f}, calibkit {ours[row][column]:.6f}")

# %%
# Published against computed, every cell (on the diagonal where they agree).

fig, ax = plt.subplots(figsize=(4, 4))
for row in PUBLISHED:
    cells = [c for c in PUBLISHED[row] if c != "error %"]
    ax.scatter([PUBLISHED[row][c] for c in cells], [ours[row][c] for c in cells], label=row)
ax.plot([0, 0.4], [0, 0.4], color="grey", linewidth=0.5)
ax.set_xlabel("published")
ax.set_ylabel("calibkit")
ax.legend()
fig.tight_layout()
