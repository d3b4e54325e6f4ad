"""Training losses, one registry and spec strings (docs/methods.md §3).

>>> import torch
>>> from calibkit import losses
>>> loss = losses.create("focal:gamma=3")
>>> float(loss(torch.zeros(2, 4), torch.tensor([0, 3]))) > 0
True
>>> losses.create("bsce-gra:gamma=1,norm=1").norm
1.0
"""

from __future__ import annotations

from .._docs import documented
from .._registry import SPEC_PARAMETERS, Registry
from ._base import Loss
from ._regularised import (
    MMCE,
    Brier,
    EntropyRegularised,
    LabelSmoothing,
    LogitL1,
    MarginLabelSmoothing,
    mmce_weighted,
)
from ._weighted import (
    BSCE,
    BSCEGRA,
    FLSD53,
    CrossEntropy,
    DualFocal,
    DualFocalGRA,
    Focal,
    FocalGRA,
    InverseFocal,
    WeightedCE,
)

REGISTRY: Registry[Loss] = Registry("loss")
for _cls in (
    CrossEntropy,
    Focal,
    FLSD53,
    DualFocal,
    InverseFocal,
    LabelSmoothing,
    EntropyRegularised,
    LogitL1,
    MMCE,
    Brier,
    MarginLabelSmoothing,
    BSCE,
    BSCEGRA,
    FocalGRA,
    DualFocalGRA,
):
    REGISTRY.register(_cls.name)(_cls)


@documented({}, "list of str: the names, sorted.")
def names() -> list[str]:
    """Names of every registered loss.

    Examples
    --------
    >>> from calibkit import losses
    >>> losses.names()[:5]
    ['brier', 'bsce', 'bsce-gra', 'ce', 'dual-focal']
    """
    return REGISTRY.names()


@documented(SPEC_PARAMETERS, "Loss: the loss, ready to train with.")
def create(spec: str, **overrides) -> Loss:
    """A loss from a spec such as ``"ce"``, ``"focal:gamma=3"`` or ``"bsce-gra:gamma=2,norm=2"``.

    Examples
    --------
    >>> import torch
    >>> from calibkit import losses
    >>> loss = losses.create("focal:gamma=3")
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    >>> round(float(loss(logits, labels)), 4)
    0.0032
    """
    return REGISTRY.create(spec, **overrides)


__all__ = [
    "REGISTRY",
    "Loss",
    "WeightedCE",
    "create",
    "mmce_weighted",
    "names",
]
