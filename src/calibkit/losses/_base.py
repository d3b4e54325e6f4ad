"""The loss contract: logits (N, K) and integer labels (N,) or soft targets (N, K) in, a
scalar (``reduction="mean"``, the default, or ``"sum"``) or per-sample losses
(``"none"``) out. Every loss is an ``nn.Module`` built from a spec (``calibkit.losses``)."""

from __future__ import annotations

from typing import Annotated, Any

import torch
from torch import Tensor, nn

from .._docs import documented_settings
from .._settings import Bounds, OneOf, Setting, check_declared

REDUCTIONS = ("mean", "sum", "none")


#: how per-sample losses are reduced
Reduction = Annotated[
    str, Setting("mean or sum of the per-sample losses, or none: them all", OneOf(REDUCTIONS))
]
#: a loss's exponent γ, as the paper of each loss has it
Gamma = Annotated[float, Setting("The exponent γ", Bounds(0, 100))]
#: a weight of an added penalty
Weight = Annotated[float, Setting("The penalty's weight", Bounds(0, 1e6))]


def check_labels(logits: Tensor, labels: Tensor) -> None:
    """Integer labels that fit (N, K) logits; else a one-line error."""
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"logits: expected shape (N, K) with K >= 2, got {tuple(logits.shape)}")
    n, k = logits.shape
    if labels.shape != (n,):
        raise ValueError(f"labels: expected shape ({n},), got {tuple(labels.shape)}")
    lo, hi = labels.aminmax() if n else (labels.new_zeros(()), labels.new_zeros(()))
    if int(lo) < 0 or int(hi) >= k:
        raise ValueError(
            f"labels: values must lie in [0, {k - 1}] for {k} classes, "
            f"got min {int(lo)} and max {int(hi)}"
        )


def soft_targets(logits: Tensor, target: Tensor) -> Tensor:
    """(N, K) target distribution from integer labels (one-hot) or soft targets, checked."""
    if not target.is_floating_point():
        check_labels(logits, target)
        return torch.nn.functional.one_hot(target.long(), logits.shape[1]).to(logits.dtype)
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"logits: expected shape (N, K) with K >= 2, got {tuple(logits.shape)}")
    n, k = logits.shape
    if target.shape != (n, k):
        raise ValueError(f"soft targets: expected shape ({n}, {k}), got {tuple(target.shape)}")
    if n and (bool((target < 0).any()) or float((target.sum(1) - 1).abs().max()) > 1e-4):
        raise ValueError("soft targets: each row must be >= 0 and sum to 1")
    return target.to(logits.dtype)


class Loss(nn.Module):
    """Base class: subclasses define ``per_sample(logits, targets) -> (N,)`` and declare their
    settings on ``__init__`` (:mod:`calibkit._settings`), passing them all to this one.

    Examples
    --------
    A loss of one's own: ``per_sample`` gets (N, K) logits and (N, K) targets (labels
    arrive one-hot, so label smoothing and mixup reach every loss), ``reduction`` comes from
    the base:

    >>> import torch
    >>> from calibkit.losses import Loss
    >>> class Hinge(Loss):
    ...     "Multi-class hinge: max(0, 1 + max over k != y of z_k - z_y)."
    ...     name = "hinge"
    ...     def per_sample(self, logits, targets):
    ...         other = (logits - 1e9 * targets).amax(1)
    ...         return (1 + other - (logits * targets).sum(1)).clamp_min(0)
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    >>> Hinge()(logits, labels), Hinge(reduction="none")(logits, labels)
    (tensor(1.), tensor([0., 2.]))
    """

    name = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each loss's docstring gets the Parameters section of its declared settings."""
        super().__init_subclass__(**kwargs)
        if cls.__doc__:  # its own docstring (one it inherits would be documented twice)
            documented_settings(cls)

    def __init__(self, *, reduction: Reduction = "mean", **settings: Any) -> None:
        """Keep ``reduction`` and the subclass's ``settings``, each checked against its
        declaration (one-line ``ValueError`` naming the setting)."""
        super().__init__()
        given = settings | {"reduction": reduction}
        for key, value in check_declared(type(self), given, who=type(self).__name__).items():
            setattr(self, key, value)

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        """Loss of ``logits`` (N, K) against labels (N,) or soft targets (N, K)."""
        if target.is_floating_point():
            soft_targets(logits, target)
        else:
            check_labels(logits, target)
        return self.compute(logits, target)

    def compute(self, logits: Tensor, target: Tensor) -> Tensor:
        """As ``forward`` without checking the target (the trainer checks labels once)."""
        if not target.is_floating_point():
            target = torch.nn.functional.one_hot(target.long(), logits.shape[1]).to(logits.dtype)
        losses = self.per_sample(logits, target.to(logits.dtype))
        if self.reduction == "mean":
            return losses.mean()
        return losses.sum() if self.reduction == "sum" else losses

    #: the label smoothing ε the loss applies (recorded in a run's provenance; 0 for all
    #: but :class:`~calibkit.losses._regularised.LabelSmoothing`)
    label_smoothing: float = 0.0

    def settings(self) -> dict[str, Any]:
        """The loss's settings by name (its constructor's, defaults included)."""
        skip = {"training", "name"}
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and k not in skip}

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.settings().items())
