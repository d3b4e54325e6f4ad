"""Networks, one registry (docs/architecture.md: every model splits into features and head).

Every factory takes ``num_classes`` and ``input_shape`` (C, H, W), which the trainer
fills in from the data, plus the model's own settings:

>>> from calibkit import models
>>> m = models.create("resnet32", num_classes=10, input_shape=(3, 32, 32))
>>> m.num_features, sum(p.numel() for p in m.parameters())
(64, 464154)
"""

from __future__ import annotations

import math
import os
from typing import Annotated

from .._docs import documented
from .._registry import SPEC_PARAMETERS, Registry
from .._settings import Bounds, Setting
from ._base import Classifier
from ._checkpoint import CheckpointError, load_checkpoint, read_state_dict
from ._others import cnn, densenet121, mlp, vgg16
from ._resnet import cifar_resnet, resnet50, wrn

REGISTRY: Registry[Classifier] = Registry("model")
Shape = tuple[int, ...]
#: the two settings every model takes, which the trainer fills in from the data
NumClasses = Annotated[int, Setting("Classes of the output", Bounds(2, 1_000_000, integer=True))]
InputShape = Annotated[Shape, Setting("Shape of one input: (C, H, W), or (D,) for the MLP")]


def _channels(input_shape: Shape) -> int:
    if len(input_shape) != 3:
        raise ValueError(
            f"input_shape: expected (C, H, W) for a convolutional model, got {input_shape}"
        )
    return int(input_shape[0])


def _register_cifar_resnet(depth: int) -> None:
    def factory(
        *, num_classes: NumClasses = 10, input_shape: InputShape = (3, 32, 32)
    ) -> Classifier:
        return cifar_resnet(depth, num_classes, _channels(input_shape))

    factory.__doc__ = f"ResNet-{depth} for CIFAR (option-A shortcuts)."
    REGISTRY.register(f"resnet{depth}")(factory)


for _depth in (20, 32, 44, 56, 110):
    _register_cifar_resnet(_depth)


@REGISTRY.register("resnet50")
def _resnet50(*, num_classes: NumClasses = 10, input_shape: InputShape = (3, 32, 32)) -> Classifier:
    return resnet50(num_classes, _channels(input_shape))


@REGISTRY.register("wrn-26-10")
def _wrn26(*, num_classes: NumClasses = 10, input_shape: InputShape = (3, 32, 32)) -> Classifier:
    return wrn(26, 10, num_classes, _channels(input_shape))


@REGISTRY.register("wrn-40-10")
def _wrn40(*, num_classes: NumClasses = 10, input_shape: InputShape = (3, 32, 32)) -> Classifier:
    return wrn(40, 10, num_classes, _channels(input_shape))


@REGISTRY.register("densenet121")
def _densenet121(
    *, num_classes: NumClasses = 10, input_shape: InputShape = (3, 32, 32)
) -> Classifier:
    return densenet121(num_classes, _channels(input_shape))


@REGISTRY.register("vgg16")
def _vgg16(*, num_classes: NumClasses = 10, input_shape: InputShape = (3, 32, 32)) -> Classifier:
    return vgg16(num_classes, _channels(input_shape))


@REGISTRY.register("mlp")
def _mlp(
    *,
    num_classes: NumClasses = 10,
    input_shape: InputShape = (64,),
    hidden: Annotated[int, Setting("Hidden units", Bounds(1, 1_000_000, integer=True))] = 256,
) -> Classifier:
    return mlp(num_classes, math.prod(input_shape), hidden)


@REGISTRY.register("cnn")
def _cnn(*, num_classes: NumClasses = 10, input_shape: InputShape = (1, 8, 8)) -> Classifier:
    return cnn(num_classes, _channels(input_shape))


@documented({}, "list of str: the names, sorted.")
def names() -> list[str]:
    """Names of every registered model.

    Examples
    --------
    >>> from calibkit import models
    >>> models.names()[:4]
    ['cnn', 'densenet121', 'mlp', 'resnet110']
    """
    return REGISTRY.names()


@documented(
    SPEC_PARAMETERS,
    "Classifier: the model (``forward_features``, a head, ``num_classes``).",
    checkpoint=("str, PathLike or None, default None", "Weights to load (torch or safetensors)."),
)
def create(spec: str, checkpoint: str | os.PathLike | None = None, **overrides) -> Classifier:
    """A model from a spec such as ``"resnet110"`` or ``"mlp:hidden=512"``, with the weights
    of ``checkpoint`` loaded when one is given (see :func:`load_checkpoint`). A model too
    large for this machine's memory is a one-line ``ValueError``, not the allocator's.

    Examples
    --------
    >>> import torch
    >>> from calibkit import models
    >>> net = models.create("resnet20", num_classes=10)
    >>> net(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    >>> net.forward_features(torch.zeros(2, 3, 32, 32)).shape  # what the head reads
    torch.Size([2, 64])
    """
    try:
        model = REGISTRY.create(spec, **overrides)
    except (RuntimeError, MemoryError) as err:  # "DefaultCPUAllocator: not enough memory"
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise ValueError(
            f"model {spec}: cannot be built in this machine's memory ({first})"
        ) from None
    return model if checkpoint is None else load_checkpoint(model, checkpoint)


__all__ = [
    "REGISTRY",
    "CheckpointError",
    "Classifier",
    "create",
    "load_checkpoint",
    "names",
    "read_state_dict",
]
