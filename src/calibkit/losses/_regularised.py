"""Cross-entropy with a regulariser, and the Brier loss (docs/methods.md §3).

| name | loss for one sample |
| --- | --- |
| ``label-smoothing`` | CE against (1 − ε) t + ε / K (Müller et al. 2019) |
| ``erl`` | CE − β H(p) (Pereyra et al. 2017; Dark Side §4, β = 0.1) |
| ``logit-l1`` | CE + α ‖z‖₁ (Rethinking §3, α = 0.01) |
| ``mbls`` | CE + λ Σ_k max(0, max_j z_j − z_k − m) (Liu et al. 2022, m = 10, λ = 0.1) |
| ``brier`` | Σ_k (p_k − t_k)² |
| ``mmce`` | CE + λ MMCE_w of the batch (Kumar et al. 2018, λ = 2) |

MMCE is a statistic of the whole batch, not of one sample: with ``reduction="none"`` each
sample's value is its CE plus λ·MMCE_w, so that the mean is CE + λ·MMCE_w. Note that
focal_calibration (Mukhoti et al.'s code) *sums* CE and focal losses over a batch but
*averages* Brier and MMCE; calibkit averages every loss by default.
"""

from __future__ import annotations

import math
from typing import Annotated

import torch
from torch import Tensor

from .._settings import Bounds, OneOf, Setting, checks_declared
from ._base import Loss, Reduction, Weight


def _ce(logits: Tensor, targets: Tensor) -> Tensor:
    return -(targets * torch.log_softmax(logits, 1)).sum(1)


class LabelSmoothing(Loss):
    """CE against the target mixed with the uniform distribution: (1 − ε) t + ε / K."""

    name = "label-smoothing"

    def __init__(
        self,
        *,
        epsilon: Annotated[float, Setting("The uniform share ε", Bounds(0, 1))] = 0.05,
        reduction: Reduction = "mean",
    ) -> None:
        super().__init__(epsilon=epsilon, reduction=reduction)

    @property
    def label_smoothing(self) -> float:  # type: ignore[override]
        return self.epsilon

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        k = logits.shape[1]
        return _ce(logits, (1 - self.epsilon) * targets + self.epsilon / k)


class EntropyRegularised(Loss):
    """CE − β H(p), H the entropy of the prediction in nats (confidence penalty)."""

    name = "erl"

    def __init__(self, *, beta: Weight = 0.1, reduction: Reduction = "mean") -> None:
        super().__init__(beta=beta, reduction=reduction)

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        logp = torch.log_softmax(logits, 1)
        entropy = -(logp.exp() * logp).sum(1)
        return -(targets * logp).sum(1) - self.beta * entropy


class LogitL1(Loss):
    """CE + α ‖z‖₁, the L1 norm of the logits."""

    name = "logit-l1"

    def __init__(self, *, alpha: Weight = 0.01, reduction: Reduction = "mean") -> None:
        super().__init__(alpha=alpha, reduction=reduction)

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        return _ce(logits, targets) + self.alpha * logits.abs().sum(1)


class MarginLabelSmoothing(Loss):
    """CE + λ Σ_k max(0, max_j z_j − z_k − m): logit gaps beyond the margin m are penalised."""

    name = "mbls"

    def __init__(
        self,
        *,
        margin: Annotated[float, Setting("The margin m of the logit gaps", Bounds(0, 1e6))] = 10.0,
        lam: Weight = 0.1,
        reduction: Reduction = "mean",
    ) -> None:
        super().__init__(margin=margin, lam=lam, reduction=reduction)

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        gaps = logits.amax(1, keepdim=True) - logits - self.margin
        return _ce(logits, targets) + self.lam * gaps.clamp_min(0).sum(1)


class Brier(Loss):
    """Brier loss Σ_k (p_k − t_k)²."""

    name = "brier"

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        return ((torch.softmax(logits, 1) - targets) ** 2).sum(1)


#: how the weighted MMCE's three sums are normalised: the paper's (Kumar et al. 2018), or
#: Mukhoti et al.'s focal_calibration code (``MMCE_weighted``), which MaC-Cal builds on
MMCE_NORMALISATIONS = ("paper", "focal-calibration")


#: how MMCE's sums are normalised, declared once for the loss and the function
MMCENormalisation = Annotated[
    str,
    Setting(
        "How MMCE's sums are normalised: paper (Kumar et al. 2018) or "
        "focal-calibration (Mukhoti et al.'s code)",
        OneOf(MMCE_NORMALISATIONS),
    ),
]
Bandwidth = Annotated[
    float,
    Setting(
        "Width of the Laplacian kernel k(r, r') = exp(−|r − r'| / bandwidth)",
        Bounds(0, math.inf, low_open=True, high_open=True),
    ),
]


@checks_declared
def mmce_weighted(
    logits: Tensor,
    labels: Tensor,
    bandwidth: Bandwidth = 0.4,
    normalisation: MMCENormalisation = "paper",
) -> Tensor:
    """Weighted MMCE of a batch (Kumar et al. 2018, §4): with r the top-label confidence,
    c = 1[correct], m correct of n and k(r, r') = exp(−|r − r'| / 0.4),

    MMCE_w² = Σ_{C×C} (1−r)(1−r')k / m² + Σ_{W×W} r r' k / (n−m)² − 2 Σ_{C×W} (1−r) r' k / (m(n−m)),

    returned as sqrt(max(MMCE_w², 0) + 1e-10) (the 1e-10 keeps the gradient finite at 0). A
    batch with no correct (or no wrong) prediction drops the terms that need them.

    ``normalisation="focal-calibration"`` is the rule of focal_calibration's
    ``MMCE_weighted``: each of the three sums is first a mean over its pairs and then
    divided again by m², (n − m)² and m(n − m) (each + 1e-5): on 128-row batches of the
    ResNet-110 CIFAR-10 test logits the paper's value is 1.0 to 13.9 times theirs (median
    8.0), and theirs is 0 on a batch that is all right or all wrong (docs/methods.md, "The
    papers' code").

    Examples
    --------
    One right prediction at r = σ(2) and one wrong at r' = σ(1): MMCE_w² = (1 − r)² + r'²
    − 2 (1 − r) r' k(r, r').

    >>> import math, torch
    >>> from calibkit.losses import mmce_weighted
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    >>> r, r2 = 1 / (1 + math.exp(-2)), 1 / (1 + math.exp(-1))
    >>> k = math.exp(-abs(r - r2) / 0.4)
    >>> round(math.sqrt((1 - r) ** 2 + r2**2 - 2 * (1 - r) * r2 * k), 4)
    0.6548
    >>> round(float(mmce_weighted(logits, labels)), 4)
    0.6548
    """
    r, pred = torch.softmax(logits, 1).max(1)
    correct = (pred == labels).to(r.dtype)
    m, n = correct.sum(), torch.tensor(float(len(r)), dtype=r.dtype, device=r.device)
    kernel = torch.exp(-(r[:, None] - r[None, :]).abs() / bandwidth)
    if normalisation == "focal-calibration":
        u, w, wrong = correct * (1 - r), (1 - correct) * r, n - m
        both = ((m > 0) & (wrong > 0)).to(r.dtype)
        cc = u @ kernel @ u / m.clamp_min(1) ** 2 / (m * m + 1e-5)
        ww = w @ kernel @ w / wrong.clamp_min(1) ** 2 / (wrong * wrong + 1e-5)
        cw = u @ kernel @ w / (m * wrong).clamp_min(1) / (m * wrong + 1e-5)
        return both * torch.sqrt((cc + ww - 2 * cw).clamp_min(0) + 1e-10)
    a = correct * (1 - r) / m.clamp_min(1)  # weight of each correct sample
    b = (1 - correct) * r / (n - m).clamp_min(1)  # of each wrong one
    v = a - b
    return torch.sqrt((v @ kernel @ v).clamp_min(0) + 1e-10)


class MMCE(Loss):
    """CE + λ · MMCE_w of the batch (see :func:`mmce_weighted`); labels are argmax of t."""

    name = "mmce"

    def __init__(
        self,
        *,
        lam: Weight = 2.0,
        normalisation: MMCENormalisation = "paper",
        reduction: Reduction = "mean",
    ) -> None:
        super().__init__(lam=lam, normalisation=normalisation, reduction=reduction)

    def per_sample(self, logits: Tensor, targets: Tensor) -> Tensor:
        # the unchecked body: the loss checked its normalisation when it was built
        penalty = mmce_weighted.__wrapped__(
            logits, targets.argmax(1), normalisation=self.normalisation
        )
        return _ce(logits, targets) + self.lam * penalty
