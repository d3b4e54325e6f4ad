"""Training: the trainer, schedules, batch transforms and recorders (docs/methods.md §3, §6, §7).

>>> from calibkit.training import TrainConfig
>>> TrainConfig(data="digits", model="cnn", loss="bsce-gra:gamma=2", epochs=2).check().loss
Spec(name='bsce-gra', params=(('gamma', 2),))
"""

from __future__ import annotations

from ..data.augment import crop_flip
from .augment import mixup
from .schedule import lr_at, milestones
from .trainer import TrainConfig, TrainingError, TrainResult, build, predict, train

__all__ = [
    "TrainConfig",
    "TrainResult",
    "TrainingError",
    "build",
    "crop_flip",
    "lr_at",
    "milestones",
    "mixup",
    "predict",
    "train",
]
