"""The model contract (after timm; docs/architecture.md): every network splits into
features and head.

``forward_features(x)`` returns (N, num_features) pooled features, ``forward_head(f)`` the
(N, K) logits (``pre_logits=True`` returns the features unchanged), ``forward`` is their
composition, ``reset_classifier(K)`` replaces the head with a fresh linear layer of K
outputs, and ``head`` is the module that maps features to logits. Stage-2 methods (MaC-Cal)
and feature caching need nothing model-specific beyond this.
"""

from __future__ import annotations

from torch import Tensor, nn


class Classifier(nn.Module):
    """A ``features`` module producing (N, num_features), then a linear ``head``.

    Examples
    --------
    Every network of :func:`calibkit.models.create` is one; ``forward_features`` is what
    MaC-Cal's stage 2 retrains a head on:

    >>> import torch
    >>> from torch import nn
    >>> from calibkit.models import Classifier
    >>> net = Classifier(nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU()), 32, 10)
    >>> x = torch.randn(4, 1, 8, 8)
    >>> net.forward_features(x).shape, net(x).shape
    (torch.Size([4, 32]), torch.Size([4, 10]))
    """

    def __init__(self, features: nn.Module, num_features: int, num_classes: int) -> None:
        super().__init__()
        self.features = features
        self.num_features = num_features
        self.num_classes = num_classes
        self.head: nn.Module = nn.Linear(num_features, num_classes)
        #: other codebases' module names → calibkit's, for importing their checkpoints
        self.layout: dict[str, str] = {}

    def forward_features(self, x: Tensor) -> Tensor:
        """(N, num_features) features of inputs ``x``."""
        return self.features(x)

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """(N, K) logits from features (or the features themselves with ``pre_logits``)."""
        return x if pre_logits else self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))

    def reset_classifier(self, num_classes: int) -> None:
        """Replace the head with a freshly initialised linear layer of ``num_classes`` outputs."""
        self.num_classes = num_classes
        self.head = nn.Linear(self.num_features, num_classes).to(
            next(self.features.parameters()).device
        )


def pooled(*layers: nn.Module) -> nn.Sequential:
    """``layers`` then global average pooling and flattening to (N, C)."""
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
