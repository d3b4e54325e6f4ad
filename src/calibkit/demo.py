"""Logits made on the spot from scikit-learn's bundled digits: real data, no download.

A small MLP (64 → 128 → 10) is trained full-batch with Adam for ``epochs`` steps on a
fixed split of the 1,797 digits (train 1,000 / validation 300 / test 497, from a
permutation drawn with NumPy seed 0). Trained to zero training error without
regularisation, it is over-confident on held-out digits, which is what the demo shows.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

SPLIT = (1000, 300, 497)


def digits_splits() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The fixed train/val/test split of the digits: name -> (x float32 (n, 64), y int64)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    x = (x[order] / 16.0).astype(np.float32)
    y = y[order].astype(np.int64)
    a, b = SPLIT[0], SPLIT[0] + SPLIT[1]
    return {"train": (x[:a], y[:a]), "val": (x[a:b], y[a:b]), "test": (x[b:], y[b:])}


def digits_logits(*, seed: int = 0, epochs: int = 300) -> dict[str, np.ndarray]:
    """Train the demo MLP and return ``logits_val``, ``labels_val``, ``logits_test``,
    ``labels_test`` and, for ``calibkit evaluate``, ``logits``/``labels`` (= test)."""
    torch.manual_seed(seed)
    data = digits_splits()
    xt, yt = (torch.from_numpy(a) for a in data["train"])
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(epochs):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()
    out = {}
    with torch.no_grad():
        for split in ("val", "test"):
            x, y = data[split]
            out[f"logits_{split}"] = model(torch.from_numpy(x)).numpy()
            out[f"labels_{split}"] = y
    out["logits"], out["labels"] = out["logits_test"], out["labels_test"]
    return out
