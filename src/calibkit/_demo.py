"""Logits made on the spot from scikit-learn's bundled digits: real data, no download.

A small MLP (64 → 128 → 10) is trained full-batch with Adam for ``epochs`` steps on the
fixed split of the 1,797 digits that ``calibkit.data.create("digits")`` gives (train 1,000 /
validation 300 / test 497). Trained to zero training error without
regularisation, it is over-confident on held-out digits, which is what the demo shows.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .data._builtin import digits


def digits_logits(*, seed: int = 0, epochs: int = 300) -> dict[str, np.ndarray]:
    """Train the demo MLP and return ``logits_val``, ``labels_val``, ``logits_test``,
    ``labels_test`` and, for ``calibkit evaluate``, ``logits``/``labels`` (= test)."""
    torch.manual_seed(seed)
    bundle = digits()
    xt, yt = bundle.train.x.reshape(-1, 64), bundle.train.y
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(epochs):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()
    out = {}
    with torch.no_grad():
        for name in ("val", "test"):
            split = getattr(bundle, name)
            out[f"logits_{name}"] = model(split.x.reshape(-1, 64)).numpy()
            out[f"labels_{name}"] = split.y.numpy()
    out["logits"], out["labels"] = out["logits_test"], out["labels_test"]
    return out
