"""A training run's checkpoint: written atomically after every epoch (weights, optimiser
state with momentum, history, recorders), and read back on resume, where it must be
calibkit's and fit the run (one-line errors otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .._outputs import atomic_write
from ._config import TrainConfig, TrainingError
from ._recorders import LearnedEpochs


def save_checkpoint(
    path: Path,
    config: TrainConfig,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    epoch: int,
    history: list[dict[str, float]],
    learned: LearnedEpochs | None,
    analysis: dict[str, np.ndarray],
) -> None:
    state = {
        "config": json.dumps(config.as_json(), sort_keys=True),
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "history": json.dumps(history),
        "learned": learned.state_dict() if learned is not None else {},
        "analysis": {k: torch.from_numpy(v) for k, v in analysis.items()},
    }
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def _same_config(stored: str, config: TrainConfig) -> bool:
    """Whether a checkpoint's configuration is ``config``, specs compared as parsed (a
    checkpoint of an older version kept them as the user typed them)."""
    try:
        return TrainConfig.from_json(json.loads(stored)).as_json() == config.as_json()
    except (TypeError, ValueError):  # not a configuration this version can read
        return False


def resume_state(
    path: Path,
    config: TrainConfig,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    learned: LearnedEpochs | None,
    analysis: dict[str, np.ndarray],
) -> tuple[int, list[dict[str, float]]]:
    if not path.exists():
        return 0, []  # killed before the first epoch ended: start over
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # any unreadable checkpoint gets the same message
        raise TrainingError(f"{path}: not a readable calibkit checkpoint ({err})") from None
    keys = ("config", "epoch", "model", "optimizer", "history", "learned", "analysis")
    if not isinstance(state, dict) or any(k not in state for k in keys):
        raise TrainingError(
            f"{path}: not a calibkit checkpoint (expected a mapping of {', '.join(keys)})"
        )
    if not _same_config(state["config"], config):
        raise TrainingError(
            f"{path} was written by a run with another configuration; resume with the same "
            "options or start a new output folder"
        )
    try:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        if learned is not None:
            learned.load_state_dict(state["learned"])
        analysis.update({k: v.numpy() for k, v in state["analysis"].items()})
        return int(state["epoch"]), json.loads(state["history"])
    except (RuntimeError, ValueError, TypeError, KeyError, AttributeError) as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise TrainingError(
            f"{path}: the checkpoint does not fit this run ({first}); delete it to start over"
        ) from None
