"""CIFAR-style residual networks for 32 x 32 inputs.

- ``resnet20``, ``resnet32``, ``resnet44``, ``resnet56``, ``resnet110``: He et al. 2016
  (§4.2): a 3x3 stem of 16 channels, three stages of n basic blocks (16, 32, 64 channels,
  depth 6n + 2), identity shortcuts with stride-2 subsampling and zero-padded channels where
  the shape changes (option A). 0.27M, 0.46M, 0.66M, 0.86M and 1.7M parameters. Their
  ``layout`` maps the module names of the common published checkpoints (``conv1``, ``bn1``,
  ``layer{1,2,3}.N``, ``linear``) to calibkit's, for :func:`~calibkit.models.load_checkpoint`.
- ``resnet50``: the bottleneck ResNet-50 (stages of 3, 4, 6, 3 blocks, 64…512 channels,
  expansion 4) with a 3x3 stride-1 stem and no max-pool, as trained on CIFAR by the
  focal-loss calibration papers (Mukhoti et al. 2020, whose code MaC-Cal and BSCE-GRA
  follow). 23.5M parameters with 10 classes.
- ``wrn``: wide residual networks WRN-d-k (Zagoruyko & Komodakis 2016): pre-activation
  blocks, widths 16k, 32k, 64k, n = (d − 4) // 6 blocks per stage (so WRN-26-10 has 3, as
  in Mukhoti et al.'s code, whose WRN-26-10 this is).
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn import functional as F

from ._base import Classifier, pooled


def _conv3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride, 1, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm; option-A shortcut (He et al. 2016, §4.2)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv3(cin, cout, stride), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = _conv3(cout, cout), nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, cout - cin

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x[:, :, :: self.stride, :: self.stride] if self.stride > 1 else x
        if self.pad:
            short = F.pad(short, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(out + short)


def cifar_resnet(depth: int, num_classes: int = 10, in_channels: int = 3) -> Classifier:
    """ResNet-depth for CIFAR (depth = 6n + 2)."""
    if (depth - 2) % 6:
        raise ValueError(f"depth: a CIFAR ResNet has depth 6n + 2, got {depth}")
    n = (depth - 2) // 6
    layers: list[nn.Module] = [_conv3(in_channels, 16), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for i, width in enumerate((16, 32, 64)):
        for j in range(n):
            layers.append(BasicBlock(cin, width, 2 if i and not j else 1))
            cin = width
    model = Classifier(pooled(*layers), 64, num_classes)
    model.layout = {"conv1": "features.0", "bn1": "features.1", "linear": "head"} | {
        f"layer{i + 1}.{j}": f"features.{3 + i * n + j}" for i in range(3) for j in range(n)
    }
    _init(model)
    return model


class Bottleneck(nn.Module):
    """1x1 → 3x3 → 1x1 (expansion 4) with a projection shortcut where the shape changes."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            _conv3(width, width, stride),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.short = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.body(x) + self.short(x))


def resnet50(num_classes: int = 10, in_channels: int = 3) -> Classifier:
    """Bottleneck ResNet-50 for 32 x 32 inputs (see the module docstring)."""
    layers: list[nn.Module] = [_conv3(in_channels, 64), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for i, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True)):
        for j in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if i and not j else 1))
            cin = 4 * width
    model = Classifier(pooled(*layers), cin, num_classes)
    _init(model)
    return model


class WideBlock(nn.Module):
    """Pre-activation wide block: BN-ReLU-conv3x3, BN-ReLU-conv3x3, 1x1 projection shortcut
    where the shape changes (Zagoruyko & Komodakis 2016, no dropout)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), _conv3(cin, cout, stride)
        self.bn2, self.conv2 = nn.BatchNorm2d(cout), _conv3(cout, cout)
        self.short = (
            nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None
        )

    def forward(self, x: Tensor) -> Tensor:
        o = F.relu(self.bn1(x))
        y = self.conv1(o)
        y = self.conv2(F.relu(self.bn2(y)))
        return y + (self.short(o) if self.short is not None else x)


def wrn(depth: int, widen: int, num_classes: int = 10, in_channels: int = 3) -> Classifier:
    """WRN-depth-widen for 32 x 32 inputs (see the module docstring)."""
    n = (depth - 4) // 6
    if n < 1:
        raise ValueError(f"depth: a wide ResNet needs depth >= 10, got {depth}")
    layers: list[nn.Module] = [_conv3(in_channels, 16)]
    cin = 16
    for i, width in enumerate((16 * widen, 32 * widen, 64 * widen)):
        for j in range(n):
            layers.append(WideBlock(cin, width, 2 if i and not j else 1))
            cin = width
    layers += [nn.BatchNorm2d(cin), nn.ReLU()]
    model = Classifier(pooled(*layers), cin, num_classes)
    _init(model)
    return model


def _init(model: nn.Module) -> None:
    """He (fan-out) initialisation for convolutions, unit batch-norm scales."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
