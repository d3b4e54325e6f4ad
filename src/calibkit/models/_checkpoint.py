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
import pickle
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the model (one-line message).

    Examples
    --------
    >>> from calibkit import models
    >>> path = getfixture("tmp_path") / "notes.txt"
    >>> _ = path.write_text("not weights")
    >>> models.read_state_dict(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calibkit.models._checkpoint.CheckpointError: .../notes.txt: not a checkpoint (neither ...
    """


#: the first bytes of what a checkpoint can be: torch's zip format (PyTorch 1.6 and later),
#: its legacy pickle format (a pickle's protocol marker) and safetensors (an 8-byte header
#: length, then the header's JSON)
_ZIP, _PICKLE = b"PK\x03\x04", b"\x80"


def checkpoint_file(path: str | os.PathLike) -> Path:
    """``path`` where it is a regular file whose first bytes are a checkpoint's (torch's zip
    or legacy format, or safetensors), or a one-line :class:`CheckpointError`: a spec names
    its checkpoints before any run, and a device, a pipe or ``/proc`` is never read as one."""
    path = Path(path).expanduser()
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint file")
    if not path.is_file():
        raise CheckpointError(f"{path}: not a regular file (a folder, a device or a pipe)")
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError as err:
        raise CheckpointError(f"{path}: cannot be read ({err.strerror})") from None
    safetensors = len(head) == 9 and head[8:9] == b"{"
    if not (head.startswith((_ZIP, _PICKLE)) or safetensors):
        raise CheckpointError(
            f"{path}: not a checkpoint (neither torch.save's format nor safetensors)"
        )
    return path


def _check_tensors(path: Path, state: dict[str, Tensor]) -> None:
    """Refuse, in one line, tensors that are not weights: meta or sparse tensors (no values
    to load) and NaN or inf values (the weights of a training that diverged)."""
    odd = [k for k, v in state.items() if v.is_meta or v.layout != torch.strided]
    if odd:
        v = state[odd[0]]
        kind = "a meta tensor (no values)" if v.is_meta else f"a {v.layout} tensor"
        raise CheckpointError(f"{path}: {odd[0]} is {kind}; a checkpoint holds dense weights")
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(v.isfinite().all())]
    if bad:
        raise CheckpointError(
            f"{path}: {bad[0]} holds NaN or inf values ({len(bad)} of {len(state)} tensors "
            "do): the weights of a training that diverged, not a network to calibrate"
        )


def read_state_dict(path: str | os.PathLike) -> dict[str, Tensor]:
    """The tensors of a checkpoint file, ``module.`` prefixes removed; a one-line
    :class:`CheckpointError` for a file that is not a checkpoint, holds more than tensors
    (no pickled code is ever run), or holds tensors that are not weights (meta, sparse,
    NaN or inf).

    Examples
    --------
    >>> import torch
    >>> from calibkit import models
    >>> net = models.create("mlp", num_classes=10, input_shape=(1, 8, 8))
    >>> path = getfixture("tmp_path") / "mlp.pt"
    >>> torch.save(net.state_dict(), path)
    >>> state = models.read_state_dict(path)
    >>> sorted(state)[:2], state["head.weight"].shape
    (['features.1.bias', 'features.1.weight'], torch.Size([10, 256]))
    """
    path = checkpoint_file(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            state: Any = load_file(path)
        except Exception as err:  # safetensors raises its own types
            raise CheckpointError(f"{path}: not a readable safetensors file ({err})") from None
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:  # an object beyond tensors: torch's advice is unsafe
            raise CheckpointError(
                f"{path}: holds Python objects beyond tensors (a pickled model or optimiser), "
                "which calibkit never unpickles; save the model's state_dict() instead"
            ) from None
        except Exception as err:  # zip and format errors: one message
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
    _check_tensors(path, state)
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
    """Load the weights of ``path`` into ``model`` (in place; returned for chaining).

    Examples
    --------
    >>> import torch
    >>> from calibkit import models
    >>> digits = dict(num_classes=10, input_shape=(1, 8, 8))
    >>> trained = models.create("mlp", **digits)
    >>> path = getfixture("tmp_path") / "mlp.pt"
    >>> torch.save(trained.state_dict(), path)
    >>> fresh = models.load_checkpoint(models.create("mlp", **digits), path)
    >>> torch.equal(fresh.head.weight, trained.head.weight)
    True
    >>> models.load_checkpoint(models.create("cnn", **digits), path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calibkit.models._checkpoint.CheckpointError: .../mlp.pt: does not fit the model: missing ...
    """
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
