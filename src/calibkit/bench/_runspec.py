"""A sweep's runs, fully resolved (:class:`RunSpec`), and the sweep (:class:`BenchSpec`):
what :mod:`calibkit.bench._spec` makes of a YAML spec, and what the runner, the executor and
the estimate take. Each run is keyed by a hash of its resolved settings.

A run carries its specs parsed and checked (:class:`~calibkit._registry.Spec`, once, by the
spec reader); :meth:`RunSpec.as_json` writes them as text where they leave Python: the
run's key and the store."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import Any

from .._registry import Spec
from ..training import TrainConfig


def _hash(settings: dict[str, Any]) -> str:
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunSpec:
    """One training run of a sweep, fully resolved."""

    #: the dataset and model specs; for a logits file, the names its file name gives
    dataset: Spec
    model: Spec
    method: str
    loss: Spec
    mixup: float
    stage2: Spec | None
    seed: int
    train: dict[str, Any]
    splits: tuple[Spec, ...]
    posthoc: tuple[Spec, ...]
    calibration_sizes: tuple[int | None, ...]
    record: bool
    #: a given network instead of a trained one: a pretrained checkpoint (stage 1 evaluates
    #: it on the dataset's splits), or a logits file split into calibration and test halves
    #: (``calibration_fraction`` of each class, drawn with the run's seed)
    checkpoint: str | None = None
    logits: str | None = None
    calibration_fraction: float | None = None

    def as_json(self) -> dict[str, Any]:
        """Every field, JSON-ready: the specs as their (canonical) text."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("dataset", "model", "loss", "stage2"):
            values[name] = None if values[name] is None else str(values[name])
        for name in ("splits", "posthoc"):
            values[name] = [str(s) for s in values[name]]
        return values | {
            "train": dict(self.train),
            "calibration_sizes": list(self.calibration_sizes),
        }

    def store_row(self) -> dict[str, Any]:
        """What the store keeps of the run beside its numbers."""
        return {
            "key": self.key,
            "spec": self.as_json() | {"key": self.key},
            "dataset": str(self.dataset),
            "model": str(self.model),
            "method": self.method,
            "seed": self.seed,
            "specs": [
                s
                for s in (self.dataset, self.loss, self.stage2, *self.splits, *self.posthoc)
                if s is not None
            ],
        }

    def _settings(self, names: tuple[str, ...] | None = None) -> dict[str, Any]:
        # the given-network fields enter the hash only when set: the keys of trained runs
        # (and so every existing store) do not change
        values = self.as_json()
        values = values if names is None else {k: values[k] for k in names}
        return {k: v for k, v in values.items() if k not in GIVEN or v is not None}

    @property
    def key(self) -> str:
        """Hash of everything that shapes the run's numbers (16 hex digits)."""
        return _hash(self._settings())

    @property
    def training_key(self) -> str:
        """Hash of what shapes the stage-1 network alone: runs that differ only in their
        name, stage 2 or post-hoc methods share one trained network."""
        names = ("dataset", "model", "loss", "mixup", "seed", "train", "splits", "record")
        return _hash(self._settings(names + GIVEN))

    @property
    def trained(self) -> bool:
        """Whether stage 1 trains a network (not a checkpoint or a logits file)."""
        return self.checkpoint is None and self.logits is None

    def train_config(self) -> TrainConfig:
        return TrainConfig(
            data=self.dataset,
            model=self.model,
            loss=self.loss,
            mixup=self.mixup,
            seed=self.seed,
            extra=list(self.splits),
            record_learned_epochs=self.record and self.trained,
            record_grad_norms=[self.train["epochs"]] if self.record and self.trained else [],
            checkpoint=self.checkpoint,
            **self.train,
        )


#: the RunSpec fields of a given (not trained) network
GIVEN = ("checkpoint", "logits", "calibration_fraction")


@dataclass
class BenchSpec:
    name: str
    runs: list[RunSpec] = field(default_factory=list)
    source: str = ""
    methods: list[str] = field(default_factory=list)  # names, in spec order
    baseline: str = ""
    about: str = ""  # one line on what the sweep runs (the spec's ``about``)
