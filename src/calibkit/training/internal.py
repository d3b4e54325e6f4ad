"""What calibkit's other packages share from training beyond its face (issue 67 §2): the
run parameters and device choice, the schedules' registry, the packed layout, throughput,
the run record. Not public API: a name here may change in any release; users import from
:mod:`calibkit.training`. Imported on first use, as the face is: the CLI reads the run
parameters without importing PyTorch. A test fails when another package imports a
private module of this one instead."""

from __future__ import annotations

from .._lazy import lazy_attributes

__getattr__ = lazy_attributes(
    __name__,
    {
        "RUN_PARAMETERS": "calibkit.training._config",
        "SCHEDULES": "calibkit.training._schedule",
        "pick_device": "calibkit.training._config",
        "pack_key": "calibkit.training._packed",
        "stacked": "calibkit.training._packed",
        "flops_per_image": "calibkit.training._throughput",
        "training_rate": "calibkit.training._throughput",
        "autocast": "calibkit.training._trainer",
        "provenance": "calibkit.training._trainer",
        "write_run": "calibkit.training._trainer",
    },
)

__all__ = [
    "RUN_PARAMETERS",
    "SCHEDULES",
    "autocast",
    "flops_per_image",
    "pack_key",
    "pick_device",
    "provenance",
    "stacked",
    "training_rate",
    "write_run",
]
