"""Optional per-sample records for the papers' analyses.

- :class:`LearnedEpochs` (Rethinking §5, Fig. 5): a training sample's *learned epoch* is the
  epoch since which it has been classified correctly in every epoch up to the last; here
  "classified" is the prediction made in the epoch's training pass (the sample as trained
  on, augmented), which costs nothing extra. Epochs are 1-based; a sample wrong in the last
  epoch gets E + 1 (not learned). With the final max-logit of every training sample (no
  augmentation, eval mode) this gives the max-logit histograms by learned epoch.
- :func:`grad_norms` (BSCE-GRA §5, Fig. 4): each training sample's gradient norm on the last
  linear layer, ‖∂L/∂W, ∂L/∂b‖ = ‖∂L/∂z‖ · sqrt(‖h‖² + 1) for features h, beside its Brier
  score, at chosen epochs. For a -GRA loss ∂L/∂z is the gradient training uses.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..losses.base import Loss, soft_targets


class LearnedEpochs:
    """Tracks, per training sample, the last epoch in which it was misclassified."""

    def __init__(self, n: int, device: torch.device | str = "cpu") -> None:
        self.last_wrong = torch.zeros(n, dtype=torch.int64, device=device)

    def update(self, idx: Tensor, correct: Tensor, epoch: int) -> None:
        """``epoch`` is 1-based; ``correct`` a bool per sample of ``idx``."""
        self.last_wrong[idx[~correct]] = epoch

    def learned_epoch(self) -> Tensor:
        return self.last_wrong + 1

    def state_dict(self) -> dict[str, Tensor]:
        return {"last_wrong": self.last_wrong.cpu()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.last_wrong = state["last_wrong"].to(self.last_wrong.device)


def grad_norms(model: nn.Module, loss: Loss, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """(per-sample last-layer gradient norm, per-sample Brier score) for one batch."""
    head = model.head
    if not isinstance(head, nn.Linear):
        raise ValueError("grad norms need a linear head (model.head is not nn.Linear)")
    with torch.no_grad():
        h = model.forward_features(x)
    z = head(h).detach().requires_grad_(True)
    per_sample = loss.per_sample(z, soft_targets(z, y))
    (g,) = torch.autograd.grad(per_sample.sum(), z)
    p = torch.softmax(z.detach(), 1)
    brier = ((p - nn.functional.one_hot(y, p.shape[1])) ** 2).sum(1)
    return g.norm(dim=1) * torch.sqrt(h.pow(2).sum(1) + 1), brier
