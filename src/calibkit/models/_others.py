"""DenseNet-121 and VGG-16 (batch norm) for 32 x 32 inputs, and small networks for the
built-in data.

- ``densenet121``: Huang et al. 2017, growth rate 32, blocks of 6, 12, 24, 16 bottleneck
  layers, compression 0.5, with a 3x3 stem of 64 channels for CIFAR (the variant the
  calibration papers train). 7.0M parameters with 10 classes.
- ``vgg16``: Simonyan & Zisserman 2015, configuration D with batch norm after every
  convolution and one linear layer on the 512 pooled features (the CIFAR variant of the
  Dark Side paper's code). 14.7M parameters with 10 classes.
- ``mlp``: two hidden layers of 256 units (ReLU) on flattened inputs.
- ``cnn``: two 3x3 convolutions (32 and 64 channels, batch norm, ReLU) with a 2x2 max-pool
  between, global average pooling: for 8 x 8 digits and other small images.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._base import Classifier, pooled
from ._resnet import _init


class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1 (4 x growth) → BN-ReLU-conv3x3 (growth), concatenated to the input."""

    def __init__(self, cin: int, growth: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(cin),
            nn.ReLU(),
            nn.Conv2d(cin, 4 * growth, 1, bias=False),
            nn.BatchNorm2d(4 * growth),
            nn.ReLU(),
            nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False),
        )

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([x, self.body(x)], 1)


def densenet121(num_classes: int = 10, in_channels: int = 3) -> Classifier:
    """DenseNet-121 for 32 x 32 inputs (see the module docstring)."""
    growth, c = 32, 64
    layers: list[nn.Module] = [nn.Conv2d(in_channels, c, 3, padding=1, bias=False)]
    for i, blocks in enumerate((6, 12, 24, 16)):
        for _ in range(blocks):
            layers.append(DenseLayer(c, growth))
            c += growth
        if i < 3:  # transition: BN-ReLU-conv1x1 halving the channels, 2x2 average pool
            out = c // 2
            layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, out, 1, bias=False)]
            layers.append(nn.AvgPool2d(2))
            c = out
    layers += [nn.BatchNorm2d(c), nn.ReLU()]
    model = Classifier(pooled(*layers), c, num_classes)
    _init(model)
    return model


_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg16(num_classes: int = 10, in_channels: int = 3) -> Classifier:
    """VGG-16 with batch norm for 32 x 32 inputs (see the module docstring)."""
    layers: list[nn.Module] = []
    c = in_channels
    for v in _VGG16:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(c, int(v), 3, padding=1), nn.BatchNorm2d(int(v)), nn.ReLU()]
            c = int(v)
    model = Classifier(pooled(*layers), c, num_classes)
    _init(model)
    return model


def mlp(num_classes: int = 10, in_features: int = 64, hidden: int = 256) -> Classifier:
    """Two hidden ReLU layers on flattened inputs."""
    features = nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
    )
    return Classifier(features, hidden, num_classes)


def cnn(num_classes: int = 10, in_channels: int = 1) -> Classifier:
    """A small convolutional network for 8 x 8 (or larger) images."""
    layers = [
        nn.Conv2d(in_channels, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
    ]
    return Classifier(pooled(*layers), 64, num_classes)
