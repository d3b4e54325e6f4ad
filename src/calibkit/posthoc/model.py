"""A network and its calibrator as one module, for deployment."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import Calibrator


class CalibratedModel(nn.Module):
    """``calibrator(model(x))``: calibrated logits (or log-probabilities) from inputs.

    The model is put in eval mode by ``eval()`` as usual; the calibrator must be fitted.
    """

    def __init__(self, model: nn.Module, calibrator: Calibrator) -> None:
        super().__init__()
        if calibrator.n_classes_ is None:
            calibrator._check_apply(torch.zeros(1, 1))  # raises the not-fitted error
        self.model, self.calibrator = model, calibrator

    def forward(self, x: Tensor) -> Tensor:
        return self.calibrator(self.model(x))

    def predict_proba(self, x: Tensor) -> Tensor:
        """Calibrated probabilities (N, K)."""
        return torch.softmax(self.forward(x).double(), 1)
