"""What a training run records besides its weights: the epoch's running totals, and optional
per-sample records for the papers' analyses.

- :class:`EpochTotals`: the training loss and accuracy of an epoch, summed on the device
  a few dozen steps at a time, so that a step adds no kernel launch and no sync.

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

from ..losses import Loss
from ..losses.internal import soft_targets


class EpochTotals:
    """Sum of the loss, number of correct predictions and number of samples of an epoch.

    :meth:`add` only keeps references to a step's loss, logits and labels; every ``every``
    steps they are reduced together (a few operations for all of them). The six small
    operations per step of a step-by-step sum cost about 5 % of an MLP's step time on the
    Gaussian toy (CPU). The held logits are ``every`` batches' worth. The loss
    total is Σ_steps mean-loss × batch size in float64, summed per group of steps (the
    order of a float64 sum, so within 1e-15 relative of a step-by-step sum). ``learned``,
    when given, is updated with every step's correctness, as a step-by-step update would.
    """

    def __init__(
        self, device: torch.device, learned: LearnedEpochs | None = None, every: int = 32
    ) -> None:
        self.sums = torch.zeros(3, dtype=torch.float64, device=device)
        self.learned, self.every = learned, every
        self._held: list[tuple[Tensor, Tensor, Tensor, Tensor]] = []

    def add(self, loss: Tensor, logits: Tensor, labels: Tensor, idx: Tensor, epoch: int) -> None:
        """One step: its mean ``loss`` (0-d), ``logits`` (B, K), ``labels`` (B,) and the
        samples' indices ``idx`` (B,) in the training split; ``epoch`` is 1-based."""
        self._held.append((loss.detach(), logits.detach(), labels, idx))
        if len(self._held) >= self.every:
            self._reduce(epoch)

    def _reduce(self, epoch: int) -> None:
        if not self._held:
            return
        losses, logits, labels, idx = zip(*self._held, strict=True)
        self._held.clear()
        y = torch.cat(labels)
        sizes = torch.tensor([len(t) for t in labels], dtype=torch.float64, device=y.device)
        with torch.no_grad():
            correct = torch.cat(logits).argmax(1) == y
            step_sums = torch.stack(losses).double() @ sizes
            self.sums += torch.stack([step_sums, correct.sum().double(), sizes.sum()])
        if self.learned is not None:
            self.learned.update(torch.cat(idx).to(y.device), correct, epoch)

    def totals(self, epoch: int) -> Tensor:
        """(3,) float64 on the device: loss sum, number correct, number of samples."""
        self._reduce(epoch)
        return self.sums


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
