"""A network and its calibrator as one module, for deployment."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.modules.module import _EXTRA_STATE_KEY_SUFFIX as _EXTRA_STATE

from ._base import Calibrator


class CalibratedModel(nn.Module):
    """``calibrator(model(x))``: calibrated logits (or log-probabilities) from inputs.

    The model is put in eval mode by ``eval()`` as usual. ``state_dict()`` holds the
    network's weights and the calibrator's fitted state (``Method.get_extra_state``), so
    ``load_state_dict`` into a new network and an unfitted calibrator restores both, all or
    nothing: a state whose calibrator part is refused (another method, a forged value)
    raises a one-line ``ValueError`` before the network's weights change. Calling an
    unfitted one raises ``NotFittedError``.

    Examples
    --------
    >>> import torch
    >>> from calibkit.data import demo_network
    >>> from calibkit.metrics import ece
    >>> net, digits = demo_network()  # over-confident digits MLP: test ECE 1.46 %
    >>> from calibkit import models, posthoc
    >>> with torch.no_grad():
    ...     ts = posthoc.TemperatureScaling().fit(net(digits.val.x), digits.val.y)
    ...     deployed = posthoc.CalibratedModel(net, ts)
    ...     round(100 * ece(deployed(digits.test.x), digits.test.y), 2)  # inputs in
    1.03
    >>> path = getfixture("tmp_path") / "deploy.pt"
    >>> torch.save(deployed.state_dict(), path)
    >>> fresh = models.create("mlp", num_classes=10, input_shape=(1, 8, 8))
    >>> back = posthoc.CalibratedModel(fresh, posthoc.create("ts"))  # an unfitted calibrator
    >>> back.load_state_dict(torch.load(path, weights_only=True))
    <All keys matched successfully>
    >>> float(back.calibrator.temperature_) == float(ts.temperature_)
    True
    """

    def __init__(self, model: nn.Module, calibrator: Calibrator) -> None:
        super().__init__()
        self.model, self.calibrator = model, calibrator

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ):
        """``nn.Module.load_state_dict``, with the calibrator's state checked first on a copy
        of the calibrator, so that a refused state changes nothing."""
        key = "calibrator." + _EXTRA_STATE
        if isinstance(state_dict, Mapping) and key in state_dict:
            copy.deepcopy(self.calibrator).set_extra_state(state_dict[key])
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def forward(self, x: Tensor) -> Tensor:
        return self.calibrator(self.model(x))

    def predict_proba(self, x: Tensor) -> Tensor:
        """Calibrated probabilities (N, K)."""
        return torch.softmax(self.forward(x).double(), 1)
