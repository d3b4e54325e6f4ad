"""MaC-Cal stage 2's masked heads (§4.2, Eq. 8–11), trained one or several at a time.

:class:`MaskedHead` is one fitted head as a calibrator keeps, saves and applies it: a linear
layer, or Linear(F, width) → ReLU → Linear(width, K), deterministic at inference (the
unmasked W, or q · W, the mask's expectation).

:class:`HeadStack` trains M heads of one shape together: each weight and bias is one tensor
with a leading member axis, each step is one batched matrix product for all members, and
everything that makes a member itself stays its own (its initialisation, its mask draws from
its own generator, its rows, its momentum). One head alone is a stack of one, so stage 2 has
one training loop; the heads of several networks (a study's CE networks, one per seed) train
at about the cost of one. A member equals the head trained alone within float tolerance
(``tests/training/test_maccal.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import Tensor, nn


def layers_forward(h: Tensor, weights: Sequence[Tensor], biases: Sequence[Tensor]) -> Tensor:
    """``h`` through linear layers with a ReLU between them: h ↦ h Wᵀ + b. One head: h (B, F),
    W (out, in), b (out,); M stacked heads: h (M, B, F), W (M, out, in), b (M, 1, out)."""
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        h = h @ w.mT + b
        if i < len(weights) - 1:
            h = torch.relu(h)
    return h


class MaskedHead(nn.Module):
    """A fitted MaC-Cal head: ``head="linear"`` (F → K) or ``"bottleneck"`` (F → width → K,
    ReLU between), applied deterministically: q · W (``inference="expected"``, with q the final
    mask rate, a buffer) or the unmasked weights (``"full"``). Trained by
    :class:`HeadStack`; ``restrict`` records how (gradient restriction, Eq. 11)."""

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        head: str = "bottleneck",
        width: int = 128,
        restrict: bool = True,
        inference: str,
    ) -> None:
        super().__init__()
        sizes = (
            [in_features, width, num_classes]
            if head == "bottleneck"
            else [in_features, num_classes]
        )
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        self.restrict, self.inference = restrict, inference
        self.register_buffer("q", torch.tensor(1.0))

    def forward(self, h: Tensor) -> Tensor:
        """Logits (B, K) of features h (B, F)."""
        scale = self.q if self.inference == "expected" else 1.0
        weights = [lin.weight * scale for lin in self.layers]
        return layers_forward(h, weights, [lin.bias for lin in self.layers])


class HeadStack:
    """The heads ``heads`` (one shape, one ``restrict`` and ``inference``) stacked for
    training: ``resample`` draws each member's Bernoulli(q) masks from its own generator,
    ``__call__`` gives the members' logits (M, B, K) on their features (M, B, F) through the
    masked weights, ``step`` is SGD with momentum and weight decay where, with gradient
    restriction, a masked entry keeps its weight and momentum exactly, ``evaluate`` is the
    deterministic head of each member, and ``settle`` copies each member back into its
    :class:`MaskedHead`."""

    def __init__(self, heads: Sequence[MaskedHead]) -> None:
        self.heads = list(heads)
        self.restrict, self.inference = heads[0].restrict, heads[0].inference
        n_layers = len(heads[0].layers)

        def stack(get) -> Tensor:
            return torch.stack([get(h).detach() for h in heads]).clone().requires_grad_(True)

        self.weights = [stack(lambda h, i=i: h.layers[i].weight) for i in range(n_layers)]
        self.biases = [stack(lambda h, i=i: h.layers[i].bias[None]) for i in range(n_layers)]
        self.masks: list[Tensor] | None = None
        self.momentum: dict[int, Tensor] = {}

    def parameters(self) -> list[Tensor]:
        return [*self.weights, *self.biases]

    def resample(self, q: Sequence[float], generators: Sequence[torch.Generator]) -> None:
        """New masks: member m's entries kept with probability q[m], drawn layer by layer
        from ``generators[m]`` (the draws a head trained alone makes)."""
        device = self.weights[0].device
        per_member = [
            [torch.rand(w.shape[1:], generator=g) < qm for w in self.weights]
            for qm, g in zip(q, generators, strict=True)
        ]
        self.masks = [torch.stack(layer).to(device) for layer in zip(*per_member, strict=True)]

    def _masked(self, w: Tensor, mask: Tensor) -> Tensor:
        masked = w * mask
        return masked if self.restrict else w + (masked - w).detach()  # straight-through

    def __call__(self, h: Tensor) -> Tensor:
        """The members' logits (M, B, K) on features h (M, B, F), through masked weights."""
        assert self.masks is not None, "resample() draws the masks first"
        weights = [self._masked(w, m) for w, m in zip(self.weights, self.masks, strict=True)]
        return layers_forward(h, weights, self.biases)

    @torch.no_grad()
    def evaluate(self, h: Tensor, q: Tensor) -> Tensor:
        """Each member's deterministic head (full weights, or q[m] · W) on h (M, B, F)."""
        scale = q.reshape(-1, 1, 1) if self.inference == "expected" else 1.0
        return layers_forward(h, [w * scale for w in self.weights], self.biases)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    @torch.no_grad()
    def step(self, lr: float, momentum: float, weight_decay: float) -> None:
        """One SGD step (torch.optim.SGD's rule: buf ← momentum · buf + g + wd · p, p ← p −
        lr · buf); with gradient restriction an entry whose mask is 0 keeps its weight and
        its momentum exactly (no gradient, no decay)."""
        masks = [*(self.masks or [None] * len(self.weights)), *([None] * len(self.biases))]
        for i, (p, mask) in enumerate(zip(self.parameters(), masks, strict=True)):
            if p.grad is None:
                continue
            d = p.grad + weight_decay * p
            old = self.momentum.get(i)
            buf = d.clone() if old is None else old * momentum + d
            new = p - lr * buf
            if mask is not None and self.restrict:
                buf = torch.where(mask, buf, torch.zeros_like(p) if old is None else old)
                new = torch.where(mask, new, p)
            self.momentum[i] = buf
            p.copy_(new)

    @torch.no_grad()
    def settle(self, q: Sequence[float]) -> list[MaskedHead]:
        """Each member's weights into its own :class:`MaskedHead`, with its final rate q[m]
        (for ``inference="expected"``), in eval mode."""
        for m, head in enumerate(self.heads):
            for lin, w, b in zip(head.layers, self.weights, self.biases, strict=True):
                lin.weight.copy_(w[m])
                lin.bias.copy_(b[m, 0])
            head.q.fill_(q[m])
            head.eval()
        return self.heads
