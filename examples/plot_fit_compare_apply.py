"""
# Fix: fit, compare and apply calibrators

Fit temperature scaling and vector scaling on the ResNet-110's 5,000 held-out
images, measure both on its 10,000 test images, and draw the test split before and after.
"""

from pathlib import Path

import matplotlib.pyplot as plt

from calibkit import evaluate, posthoc
from calibkit.io import load_split
from calibkit.plots import reliability_diagram

LOGITS = Path("../../shared/data/logits/resnet110_cifar10.npz")
if not LOGITS.exists():
    LOGITS = Path("../shared/data/logits/resnet110_cifar10.npz")
z_val, y_val = load_split(LOGITS, "val")  # logits_val and labels_val, checked
z_test, y_test = load_split(LOGITS, "test")

before = evaluate(z_test, y_test)
print(f"{'uncalibrated':>14}: ECE {before['ece']:.4f}, NLL {before['nll']:.4f}")
fitted = {}
for spec in ("ts", "vector"):
    cal = posthoc.create(spec).fit(z_val, y_val)
    after = evaluate(cal.predict_proba(z_test), y_test, probs=True)
    fitted[spec] = after
    print(f"{spec:>14}: ECE {after['ece']:.4f}, NLL {after['nll']:.4f}")

# %%
# The test split before and after temperature scaling.

fig, axes = plt.subplots(2, 2, figsize=(9, 5), height_ratios=(3, 1), sharex=True)
reliability_diagram(before, title="uncalibrated", ax=axes[:, 0])
reliability_diagram(fitted["ts"], title="temperature scaling", ax=axes[:, 1])
fig.tight_layout()
