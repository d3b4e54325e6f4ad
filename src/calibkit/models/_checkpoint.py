"""Pretrained weights from checkpoint files, in calibkit's layout or a common published one.

:func:`load_checkpoint` reads a file with ``torch.load(weights_only=True)`` (no code runs on
load) or safetensors, finds the state dict (the file itself, or its ``state_dict`` or
``model`` entry), drops a ``module.`` prefix (``DataParallel``), fills the batch-norm
counters that files older than PyTorch 0.4.1 lack and, where the names are not calibkit's,
renames them through the model's ``layout``: a map from another codebase's
module names to calibkit's. The CIFAR ResNets declare the layout of the widely used
``akamaster/pytorch_resnet_cifar10`` checkpoints (``conv1``, ``bn1``, ``layer{1,2,3}.N``,
``linear``). Every missing or unexpected key and every shape that does not fit is named in
a one-line :class:`CheckpointError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the model (one-line message)."""


def read_state_dict(path: str | os.PathLike) -> dict[str, Tensor]:
    """The tensors of a checkpoint file, ``module.`` prefixes removed."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            state: Any = load_file(path)
        except Exception as err:  # safetensors raises its own types
            raise CheckpointError(f"{path}: not a readable safetensors file ({err})") from None
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # pickle, zip and unpickler errors: one message
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise CheckpointError(
                f"{path}: not a weights-only torch checkpoint ({first[:200]})"
            ) from None
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: holds no state dict of tensors")
    return {k.removeprefix("module."): v for k, v in state.items()}


def _rename(state: dict[str, Tensor], layout: dict[str, str]) -> dict[str, Tensor]:
    """Keys renamed by the longest matching module prefix of ``layout``."""
    out = {}
    for key, value in state.items():
        parts = key.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:cut])
            if prefix in layout:
                key = ".".join([layout[prefix], *parts[cut:]])
                break
        out[key] = value
    return out


def _listed(keys: set[str]) -> str:
    shown = sorted(keys)[:4]
    return ", ".join(shown) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


def load_checkpoint(model: nn.Module, path: str | os.PathLike) -> nn.Module:
    """Load the weights of ``path`` into ``model`` (in place; returned for chaining)."""
    state = read_state_dict(path)
    own = model.state_dict()
    layout: dict[str, str] = {}
    if not set(state) <= set(own) and getattr(model, "layout", None):
        layout = model.layout
        state = _rename(state, layout)
    for key in set(own) - set(state):  # files older than PyTorch 0.4.1 lack this BN counter
        if key.endswith(".num_batches_tracked"):
            state[key] = torch.zeros_like(own[key])
    missing, extra = set(own) - set(state), set(state) - set(own)
    if layout:  # name what does not fit in the file's own layout
        back = {v: k for k, v in layout.items()}
        missing, extra = (
            set(_rename(dict.fromkeys(missing), back)),
            set(_rename(dict.fromkeys(extra), back)),
        )
    if missing or extra:
        what = [f"missing {_listed(missing)}"] if missing else []
        what += [f"unexpected {_listed(extra)}"] if extra else []
        raise CheckpointError(f"{path}: does not fit the model: {'; '.join(what)}")
    wrong = [k for k in own if own[k].shape != state[k].shape]  # in calibkit's names
    if wrong:
        k = wrong[0]
        raise CheckpointError(
            f"{path}: {k} has shape {tuple(state[k].shape)} where the model has "
            f"{tuple(own[k].shape)} ({len(wrong)} such keys; check the depth, input channels "
            "and classes)"
        )
    kinds = [k for k in own if own[k].is_floating_point() != state[k].is_floating_point()]
    if kinds:  # load_state_dict would cast integer weights to float without a word
        k = kinds[0]
        raise CheckpointError(
            f"{path}: {k} holds {state[k].dtype} values where the model has "
            f"{own[k].dtype} ({len(kinds)} such keys): not this model's weights"
        )
    model.load_state_dict(state)
    return model
