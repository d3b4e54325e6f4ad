"""Cross-entropy weighted per sample by an uncertainty u(p) (docs/methods.md §3).

Every loss here is L = −Σ_k t_k u_k(p) log p_k for a target distribution t; with an
integer label y it is −u_y(p) log p_y. Plain losses (``focal``, ``dual-focal``, ...) let
the gradient flow through u; the "-GRA" losses (BSCE-GRA §4.2, Eq. 9–10) stop it, so that
∂L/∂z = u · ∂CE/∂z exactly: the cross-entropy gradient, rescaled by the uncertainty.

| name | u_k(p) |
| --- | --- |
| ``ce`` | 1 |
| ``focal`` / ``-gra`` | (1 − p_k)^γ (Lin et al. 2017; Mukhoti et al. 2020, γ = 3) |
| ``flsd53`` | (1 − p_k)^γ_k, γ_k = 5 if p_k < 0.2 else 3, the choice not differentiated |
| ``dual-focal`` / ``-gra`` | (1 − p_k + p_j)^γ, p_j the largest p below p_k (Tao et al. 2023) |
| ``inverse-focal`` | (1 + p_k)^γ (Wang et al. 2021; Rethinking §5.2) |
| ``bsce`` / ``-gra`` | ‖p − t‖_β^γ, the generalised Brier score (BSCE-GRA Eq. 11) |

Powers of 1 − p are taken of −expm1(log p_k), exact even when p_k rounds to 1, and
floored at the smallest normal number, so no gradient is NaN or infinite as p → 0 or 1
(also for γ < 1). The BSCE-GRA paper's Eq. 11 is garbled; calibkit implements the
authors' published code, u = ‖e_y − p‖_β^γ (torch.norm of order β, to the power γ), with
both exponents as parameters. Its default γ = β = 2 makes u the sample's Brier score.
"""

from __future__ import annotations

from typing import Annotated

import torch
from torch import Tensor

from .._settings import Bounds, Setting
from ._base import Gamma, Loss, Reduction


def _one_minus(logp: Tensor) -> Tensor:
    """1 − p from log p, in relative precision, floored away from 0."""
    return (-torch.expm1(logp)).clamp_min(torch.finfo(logp.dtype).tiny)


class WeightedCE(Loss):
    """−Σ_k t_k u_k(p) log p_k; subclasses define ``weights``; ``detach`` stops u's gradient.

    Examples
    --------
    Focal loss is one: its weights are u_k = (1 − p_k)^γ, small where the network is
    already right and sure:

    >>> import torch
    >>> from calibkit import losses
    >>> focal = losses.create("focal:gamma=2")
    >>> isinstance(focal, losses.WeightedCE)
    True
    >>> logits = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    >>> p, logp = torch.softmax(logits, 1), torch.log_softmax(logits, 1)
    >>> focal.weights(p, logp, torch.eye(2)).round(decimals=4)  # (1 - p)^2
    tensor([[0.0142, 0.7758],
            [0.5344, 0.0723]])
    """

    detach = False

    def weights(self, p: Tensor, logp: Tensor, t: Tensor) -> Tensor:
        """(N, K) or (N, 1) uncertainty weights."""
        return torch.ones_like(p[:, :1])

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        logp = torch.log_softmax(logits, 1)
        u = self.weights(logp.exp(), logp, targets)
        if self.detach:
            u = u.detach()
        return -(targets * u * logp).sum(1)


class CrossEntropy(WeightedCE):
    """Cross-entropy −Σ_k t_k log p_k."""

    name = "ce"

    def compute(self, logits: Tensor, target: Tensor) -> Tensor:
        if target.is_floating_point():
            return super().compute(logits, target)
        # integer labels: torch's fused kernel, the same value
        return torch.nn.functional.cross_entropy(logits, target, reduction=self.reduction)


class Focal(WeightedCE):
    """Focal loss −(1 − p_y)^γ log p_y (Lin et al. 2017); ∂L/∂z = g(p_y, γ) ∂CE/∂z with
    g(p, γ) = (1 − p)^γ − γ p (1 − p)^(γ−1) log p (Mukhoti et al. 2020, Eq. 5)."""

    name = "focal"

    def __init__(self, *, gamma: Gamma = 3.0, reduction: Reduction = "mean") -> None:
        super().__init__(gamma=gamma, reduction=reduction)

    def weights(self, p: Tensor, logp: Tensor, t: Tensor) -> Tensor:
        return _one_minus(logp) ** self.gamma


class FocalGRA(Focal):
    """Focal weights on the cross-entropy gradient: stopgrad((1 − p_y)^γ) · CE (BSCE-GRA §4.2)."""

    name, detach = "focal-gra", True


class FLSD53(WeightedCE):
    """Sample-dependent focal loss (Mukhoti et al. 2020): γ = 5 where p_k < 0.2, else 3."""

    name = "flsd53"

    def weights(self, p: Tensor, logp: Tensor, t: Tensor) -> Tensor:
        gamma = torch.where(p.detach() < 0.2, 5.0, 3.0).to(p.dtype)
        return _one_minus(logp) ** gamma


class DualFocal(WeightedCE):
    """Dual focal loss −(1 − p_y + p_j)^γ log p_y, p_j the largest probability smaller than
    p_y (0 if none) (Tao et al. 2023)."""

    name = "dual-focal"

    def __init__(self, *, gamma: Gamma = 5.0, reduction: Reduction = "mean") -> None:
        super().__init__(gamma=gamma, reduction=reduction)

    def weights(self, p: Tensor, logp: Tensor, t: Tensor) -> Tensor:
        below = p[:, None, :] < p[:, :, None]  # (N, K, K): [n, k, j] = p_j < p_k
        p_j = torch.where(below, p[:, None, :], torch.zeros((), dtype=p.dtype)).amax(2)
        return (_one_minus(logp) + p_j) ** self.gamma


class DualFocalGRA(DualFocal):
    """Dual focal weights on the cross-entropy gradient: stopgrad((1 − p_y + p_j)^γ) · CE."""

    name, detach = "dual-focal-gra", True


class InverseFocal(WeightedCE):
    """Inverse focal loss −(1 + p_y)^γ log p_y (Wang et al. 2021; Rethinking §5.2)."""

    name = "inverse-focal"

    def __init__(self, *, gamma: Gamma = 3.0, reduction: Reduction = "mean") -> None:
        super().__init__(gamma=gamma, reduction=reduction)

    def weights(self, p: Tensor, logp: Tensor, t: Tensor) -> Tensor:
        return (1 + p) ** self.gamma


class BSCE(WeightedCE):
    """Brier-score-weighted CE: u · CE with u = ‖p − t‖_β^γ, the gradient flowing through u
    (BSCE-GRA Eq. 11, the paper's "BSCE")."""

    name = "bsce"

    def __init__(
        self,
        *,
        gamma: Gamma = 2.0,
        norm: Annotated[float, Setting("The norm's order β", Bounds(1, 100))] = 2.0,
        reduction: Reduction = "mean",
    ) -> None:
        super().__init__(gamma=gamma, norm=norm, reduction=reduction)

    def weights(self, p: Tensor, logp: Tensor, t: Tensor) -> Tensor:
        powered = ((p - t).abs() ** self.norm).sum(1, keepdim=True)
        return powered.clamp_min(torch.finfo(p.dtype).tiny) ** (self.gamma / self.norm)


class BSCEGRA(BSCE):
    """BSCE-GRA: stopgrad(‖p − t‖_β^γ) · CE, the CE gradient scaled by the generalised Brier
    score (BSCE-GRA Eq. 14)."""

    name, detach = "bsce-gra", True
