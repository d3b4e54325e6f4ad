"""Finished runs on disk: load one back, make one from a pretrained checkpoint, and run
MaC-Cal stage 2 on it.

A run folder written by :func:`calibkit.training.train` holds ``run.json`` (its
configuration) and ``model.safetensors``; :func:`load_run` rebuilds the data and the model
from them (safetensors: no code runs on load). A stage-2 run's ``run.json`` also records
its stage-2 settings, so its masked head is rebuilt too.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import data
from ..posthoc.base import Evidence
from .maccal import MacCalConfig, MaskedHead, stage2
from .trainer import (
    TrainConfig,
    TrainingError,
    build,
    pick_device,
    predict,
    provenance,
    write_run,
)  # fmt: skip


def _read_run(path: Path) -> dict[str, Any]:
    info = path / "run.json"
    if not info.exists() or not (path / "model.safetensors").exists():
        raise TrainingError(
            f"{path} is not a finished calibkit run (run.json and model.safetensors expected)"
        )
    try:
        return json.loads(info.read_text())
    except json.JSONDecodeError as err:
        raise TrainingError(f"{info}: not valid JSON ({err})") from None


def load_run(
    path: str | os.PathLike, device: str = "auto"
) -> tuple[TrainConfig, data.DataBundle, nn.Module, dict]:
    """(configuration, data, model with its trained weights, run.json) of a finished run."""
    from safetensors.torch import load_file

    path = Path(path)
    info = _read_run(path)
    known = {f.name for f in fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in info["config"].items() if k in known})
    bundle, model, _ = build(config, pretrained=False, need_train=False)
    if "stage2" in info:
        s2 = MacCalConfig(**info["stage2"])
        model.head = MaskedHead(
            model.num_features, bundle.num_classes, head=s2.head, width=s2.width,
            restrict=s2.restrict, inference=s2.inference,
        )  # fmt: skip
    try:
        model.load_state_dict(load_file(path / "model.safetensors"))
    except (RuntimeError, OSError) as err:
        first = str(err).splitlines()[0]
        raise TrainingError(
            f"{path}/model.safetensors: does not fit the run's model ({first})"
        ) from None
    return config, bundle, model.to(pick_device(device)).eval(), info


def run_evidence(path: str | os.PathLike, device: str = "auto") -> tuple[Evidence, dict]:
    """What a finished run offers any calibration method (:class:`~calibkit.posthoc.Evidence`:
    its saved logits and labels of every split but train, its model, inputs and feasible
    input range) and its ``run.json``."""
    _, bundle, model, info = load_run(path, device)
    dev = next(model.parameters()).device
    splits = {k: v for k, v in bundle.splits().items() if k != "train"}
    with np.load(Path(path) / "logits.npz") as saved:  # written by the run: no forward pass
        logits = {k: torch.from_numpy(saved[f"logits_{k}"]) for k in splits}

    def inputs(split: str, idx: torch.Tensor | None) -> torch.Tensor:
        x = splits[split].stored() if idx is None else splits[split].x[idx]
        return data.to_inputs(x, bundle, dev)

    evidence = Evidence(
        logits=logits, labels={k: v.y for k, v in splits.items()}, model=model, inputs=inputs,
        predict=lambda module, split: predict(module, splits[split], bundle, dev),
        input_range=data.input_bounds(bundle),
    )  # fmt: skip
    return evidence, info


def run_stage2(
    source: str | os.PathLike, settings: MacCalConfig, out: str | os.PathLike, *,
    device: str = "auto", progress: Any = None,
) -> list[dict[str, float]]:  # fmt: skip
    """MaC-Cal stage 2 on the finished stage-1 run ``source``, written as a run to ``out``."""
    config, bundle, model, info = load_run(source, device)
    if "stage2" in info:
        raise TrainingError(f"{source} is already a stage-2 run; start from its stage-1 run")
    dev = pick_device(device)
    if bundle.train is None:
        raise TrainingError(f"{source}: its data has no training split for stage 2")
    model, history = stage2(model, bundle, settings, dev, progress=progress)
    record = provenance(config, dev, bundle.augment) | {
        "stage2": asdict(settings),
        "stage1": str(Path(source).resolve()),
    }
    out = Path(out)
    write_run(out, model, bundle, dev, history, record)
    return history


def pretrained_run(config: TrainConfig, out: str | os.PathLike) -> Path:
    """A run folder for ``config.checkpoint``'s pretrained network, without training: its
    logits of every split but train, its weights and a ``run.json`` naming the checkpoint.
    Everything that takes a run (``calibkit calibrate``, stage 2, ``compare``) then takes it."""
    if config.checkpoint is None:
        raise TrainingError("checkpoint: a pretrained run needs a checkpoint file")
    bundle, model, _ = build(config, need_train=False)
    dev = pick_device(config.device)
    if bundle.val is None:
        raise TrainingError(
            f"data: {config.data!r} has no validation split to calibrate on; hold one out "
            "(val_size=N in the data spec)"
        )
    record = provenance(config, dev, bundle.augment) | {
        "pretrained": str(Path(config.checkpoint).resolve())
    }
    write_run(Path(out), model.to(dev).eval(), bundle, dev, [], record)
    return Path(out)
