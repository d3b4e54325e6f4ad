"""
# Train: a calibration loss in your own training loop

calibkit's losses are plain `torch.nn.Module`s: here focal loss (γ = 3) against
cross-entropy in a hand-written loop, an MLP on scikit-learn's digits, and the test ECE of
each network. On this small, easy task CE is already calibrated and focal loss makes the
network under-confident: the direction the papers report for focal loss on networks that
are not over-confident (docs/real.md).
"""

import matplotlib.pyplot as plt
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from calibkit import evaluate, losses

x, y = load_digits(return_X_y=True)
x_train, x_test, y_train, y_test = train_test_split(
    torch.tensor(x / 16, dtype=torch.float32), torch.tensor(y), test_size=0.5, random_state=0
)
results = {}
for spec in ("ce", "focal:gamma=3"):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    loss_fn = losses.create(spec)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for _ in range(30):
        for batch in torch.randperm(len(y_train)).split(64):
            opt.zero_grad()
            loss_fn(net(x_train[batch]), y_train[batch]).backward()
            opt.step()
    with torch.no_grad():
        results[spec] = evaluate(net(x_test), y_test)
    r = results[spec]
    print(f"{spec:>14}: accuracy {r['accuracy']:.4f}, ECE {r['ece']:.4f}, NLL {r['nll']:.4f}")

# %%
# Each network's test ECE.

fig, ax = plt.subplots(figsize=(4, 3))
ax.bar(list(results), [100 * r["ece"] for r in results.values()])
ax.set_ylabel("test ECE (%)")
fig.tight_layout()
