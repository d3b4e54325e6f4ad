"""Step learning-rate schedules, one registry like the other families, with the papers'
presets (docs/methods.md §7).

A schedule is a spec: ``cifar`` (× 0.1 at 150 and 250 of 350 epochs), ``tiny-imagenet``
(× 0.1 at 40 and 60 of 100), ``constant``, or ``step:milestones=[30,60],gamma=0.1``. The
presets' milestones are fractions of their paper length, so ``cifar`` over 30 epochs drops
at 13 and 21 (150/350 and 250/350 of the run, rounded). A run builds its schedule once
(:func:`create`) and asks it for each epoch's rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from .._registry import Registry
from .._settings import Bounds, Setting


@dataclass(frozen=True)
class Schedule:
    """The rate is multiplied by ``gamma`` after each milestone: epochs given as such
    (``fractions=False``) or as fractions of the run's length."""

    points: tuple[float, ...]
    gamma: float
    fractions: bool = False

    def milestones(self, epochs: int) -> list[int]:
        """The epochs after which the rate drops, for a run of ``epochs``."""
        if self.fractions:
            return [round(f * epochs) for f in self.points]
        return sorted(int(p) for p in self.points)

    def lr(self, base_lr: float, epoch: int, epochs: int) -> float:
        """Learning rate of (0-based) ``epoch`` of a run of ``epochs``."""
        return base_lr * self.gamma ** sum(epoch >= m for m in self.milestones(epochs))


REGISTRY: Registry[Schedule] = Registry("schedule")
#: the name the other packages know it by (:mod:`calibkit.training.internal`)
SCHEDULES = REGISTRY


@REGISTRY.register("cifar")
def _cifar() -> Schedule:
    return Schedule((150 / 350, 250 / 350), 0.1, fractions=True)


@REGISTRY.register("tiny-imagenet")
def _tiny_imagenet() -> Schedule:
    return Schedule((40 / 100, 60 / 100), 0.1, fractions=True)


@REGISTRY.register("constant")
def _constant() -> Schedule:
    return Schedule((), 1.0)


@dataclass(frozen=True)
class _Milestones:
    """Epochs after which the rate drops: positive integers, increasing, each once (a number
    alone is one)."""

    def __str__(self) -> str:
        return "positive integers, increasing"

    def check(self, name: str, value: Any) -> tuple[int, ...]:
        ms = [value] if isinstance(value, int) else value
        if isinstance(ms, str) or not all(
            isinstance(m, int) and not isinstance(m, bool) and m > 0 for m in ms
        ):
            raise ValueError(f"{name} must be positive integers, got {value!r}")
        if list(ms) != sorted(set(ms)):  # [5, 2] is a typo more often than an intent
            raise ValueError(f"{name} must increase (epochs in order, each once), got {value!r}")
        return tuple(ms)


@REGISTRY.register("step")
def _step(
    *,
    milestones: Annotated[
        int | Sequence[int], Setting("Epochs after which the rate drops", _Milestones())
    ] = (),
    gamma: Annotated[
        float, Setting("What the rate is multiplied by at each", Bounds(0, 1e6, low_open=True))
    ] = 0.1,
) -> Schedule:
    """Checked by the registry against the declarations (its only caller)."""
    return Schedule((milestones,) if isinstance(milestones, int) else tuple(milestones), gamma)


def create(spec: str) -> Schedule:
    """The schedule a spec names; one-line errors (ValueError) for unknown names and bad
    values."""
    return REGISTRY.create(spec)


def milestones(spec: str, epochs: int) -> tuple[list[int], float]:
    """(epochs after which the rate is multiplied by gamma, gamma) for a schedule spec.

    Examples
    --------
    >>> from calibkit.training import milestones
    >>> milestones("cifar", 200), milestones("step:milestones=[5,8],gamma=0.5", 10)
    (([86, 143], 0.1), ([5, 8], 0.5))
    """
    schedule = create(spec)
    return schedule.milestones(epochs), schedule.gamma


def lr_at(spec: str, base_lr: float, epoch: int, epochs: int) -> float:
    """Learning rate of (0-based) ``epoch`` (builds the schedule; a run builds it once).

    Examples
    --------
    >>> from calibkit.training import lr_at
    >>> [round(lr_at("cifar", 0.1, epoch, 200), 6) for epoch in (0, 85, 86, 143)]
    [0.1, 0.1, 0.01, 0.001]
    """
    return create(spec).lr(base_lr, epoch, epochs)
