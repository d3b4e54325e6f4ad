"""Training: the trainer, schedules, batch transforms and recorders (docs/methods.md §3, §6, §7).

>>> from calibkit.training import TrainConfig
>>> loss = TrainConfig(data="digits", model="cnn", loss="bsce-gra:gamma=2", epochs=2).check().loss
>>> loss, loss.family
(CheckedSpec(name='bsce-gra', params=(('gamma', 2),), family='loss'), 'loss')
"""

from __future__ import annotations

from .._lazy import lazy_attributes

# imported on first use: the CLI reads TrainConfig's fields without importing PyTorch
__getattr__ = lazy_attributes(
    __name__,
    {
        "crop_flip": "..data._augment",
        "mixup": "._augment",
        "lr_at": "._schedule",
        "milestones": "._schedule",
        "TrainConfig": "._config",
        "TrainingError": "._config",
        "TrainResult": "._config",
        "build": "._trainer",
        "predict": "._trainer",
        "train": "._trainer",
        "train_packed": "._trainer",
    },
)

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
    "train_packed",
]
