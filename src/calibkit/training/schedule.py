"""Step learning-rate schedules, with the papers' presets (docs/methods.md §7).

A schedule is a spec: ``cifar`` (× 0.1 at 150 and 250 of 350 epochs), ``tiny-imagenet``
(× 0.1 at 40 and 60 of 100), ``constant``, or ``step:milestones=[30,60],gamma=0.1``. The
presets' milestones are fractions of their paper length, so ``cifar`` over 30 epochs drops
at 13 and 21 (150/350 and 250/350 of the run, rounded).
"""

from __future__ import annotations

import math

from ..registry import parse_spec

PRESETS = {"cifar": ((150 / 350, 250 / 350), 0.1), "tiny-imagenet": ((40 / 100, 60 / 100), 0.1)}


def milestones(spec: str, epochs: int) -> tuple[list[int], float]:
    """(epochs after which the rate is multiplied by gamma, gamma) for a schedule spec."""
    parsed = parse_spec(spec)
    name, kw = parsed.name, parsed.kwargs
    if name in PRESETS:
        if kw:
            raise ValueError(f"schedule {name!r} takes no parameters; use step:milestones=...")
        fracs, gamma = PRESETS[name]
        return [round(f * epochs) for f in fracs], gamma
    if name == "constant" and not kw:
        return [], 1.0
    if name == "step":
        bad = set(kw) - {"milestones", "gamma"}
        if bad:
            raise ValueError(
                f"schedule 'step' has no parameter {sorted(bad)[0]!r}; valid: milestones, gamma"
            )
        ms = kw.get("milestones", [])
        ms = [ms] if isinstance(ms, int) else list(ms)
        gamma = kw.get("gamma", 0.1)
        if not all(isinstance(m, int) and m > 0 for m in ms) or not (
            isinstance(gamma, int | float) and math.isfinite(gamma) and gamma > 0
        ):
            raise ValueError(f"schedule {spec!r}: milestones must be positive integers, gamma > 0")
        return sorted(ms), float(gamma)
    raise ValueError(
        f"unknown schedule {spec!r}; choose one of: "
        f"{', '.join(PRESETS)}, constant, step:milestones=[A,B]"
    )


def lr_at(spec: str, base_lr: float, epoch: int, epochs: int) -> float:
    """Learning rate of (0-based) ``epoch``."""
    ms, gamma = milestones(spec, epochs)
    return base_lr * gamma ** sum(epoch >= m for m in ms)
