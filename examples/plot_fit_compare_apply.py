"""
# Fix: fit, compare and apply calibrators

Fit temperature scaling and vector scaling on the ResNet-110's 5,000 held-out
images, measure both on its 10,000 test images, and draw the test split before and after.
Its logits lie in `../shared/data` beside a clone of the repository; where they are not,
the example runs on `calibkit.data.demo_logits()` (a small network on scikit-learn's
digits) and says so.
"""

from pathlib import Path

import matplotlib.pyplot as plt

from calibkit import evaluate, posthoc
from calibkit.data import demo_logits
from calibkit.io import load_split
from calibkit.plots import reliability_diagram

SHARED = [Path(up, "shared/data/logits/resnet110_cifar10.npz") for up in ("../..", "..")]
LOGITS = next((p for p in SHARED if p.exists()), None)  # the build runs from the root
if LOGITS is None:
    print("../shared/data is not here: the digits network's logits instead")
    d = demo_logits()
    z_val, y_val, z_test, y_test = (
        d[k] for k in ("logits_val", "labels_val", "logits_test", "labels_test")
    )
else:
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
