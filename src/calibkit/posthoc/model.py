"""A network and its calibrator as one module, for deployment."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import Calibrator

__all__ = ["CalibratedModel"]


class CalibratedModel(nn.Module):
    """``calibrator(model(x))``: calibrated logits (or log-probabilities) from inputs.

    The model is put in eval mode by ``eval()`` as usual. ``state_dict()`` holds the
    network's weights and the calibrator's fitted state (``Method.get_extra_state``), so::

        torch.save(CalibratedModel(net, ts).state_dict(), "deploy.pt")
        back = CalibratedModel(make_net(), posthoc.create("ts"))  # an unfitted calibrator
        back.load_state_dict(torch.load("deploy.pt", weights_only=True))

    restores both. Calling an unfitted one raises ``NotFittedError``.
    """

    def __init__(self, model: nn.Module, calibrator: Calibrator) -> None:
        super().__init__()
        self.model, self.calibrator = model, calibrator

    def forward(self, x: Tensor) -> Tensor:
        return self.calibrator(self.model(x))

    def predict_proba(self, x: Tensor) -> Tensor:
        """Calibrated probabilities (N, K)."""
        return torch.softmax(self.forward(x).double(), 1)
