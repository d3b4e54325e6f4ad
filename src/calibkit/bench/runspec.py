"""A sweep's runs, fully resolved (:class:`RunSpec`), and the sweep (:class:`BenchSpec`):
what :mod:`calibkit.bench.spec` makes of a YAML spec, and what the runner, the executor and
the estimate take. Each run is keyed by a hash of its resolved settings."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..training.trainer import TrainConfig


def _hash(settings: dict[str, Any]) -> str:
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunSpec:
    """One training run of a sweep, fully resolved."""

    dataset: str
    model: str
    method: str
    loss: str
    mixup: float
    stage2: str | None
    seed: int
    train: dict[str, Any]
    splits: tuple[str, ...]
    posthoc: tuple[str, ...]
    calibration_sizes: tuple[int | None, ...]
    record: bool
    #: a given network instead of a trained one: a pretrained checkpoint (stage 1 evaluates
    #: it on the dataset's splits), or a logits file split into calibration and test halves
    #: (``calibration_fraction`` of each class, drawn with the run's seed)
    checkpoint: str | None = None
    logits: str | None = None
    calibration_fraction: float | None = None

    def _settings(self, fields: tuple[str, ...] | None = None) -> dict[str, Any]:
        # the given-network fields enter the hash only when set: the keys of trained runs
        # (and so every existing store) do not change
        values = asdict(self) if fields is None else {k: getattr(self, k) for k in fields}
        return {k: v for k, v in values.items() if k not in GIVEN or v is not None}

    @property
    def key(self) -> str:
        """Hash of everything that shapes the run's numbers (16 hex digits)."""
        return _hash(self._settings())

    @property
    def training_key(self) -> str:
        """Hash of what shapes the stage-1 network alone: runs that differ only in their
        name, stage 2 or post-hoc methods share one trained network."""
        fields = ("dataset", "model", "loss", "mixup", "seed", "train", "splits", "record")
        return _hash(self._settings(fields + GIVEN))

    @property
    def trained(self) -> bool:
        """Whether stage 1 trains a network (not a checkpoint or a logits file)."""
        return self.checkpoint is None and self.logits is None

    def train_config(self) -> TrainConfig:
        return TrainConfig(
            data=self.dataset, model=self.model, loss=self.loss, mixup=self.mixup, seed=self.seed,
            extra=list(self.splits), record_learned_epochs=self.record and self.trained,
            record_grad_norms=[self.train["epochs"]] if self.record and self.trained else [],
            checkpoint=self.checkpoint, **self.train,
        )  # fmt: skip


#: the RunSpec fields of a given (not trained) network
GIVEN = ("checkpoint", "logits", "calibration_fraction")


@dataclass
class BenchSpec:
    name: str
    runs: list[RunSpec] = field(default_factory=list)
    source: str = ""
    methods: list[str] = field(default_factory=list)  # names, in spec order
    baseline: str = ""
