"""Post-hoc calibrators: fit on a held-out split, apply to new logits (METHODS.md §2).

>>> from calibkit import posthoc
>>> posthoc.names()[:4]
['dir-l2', 'dir-odir', 'ets', 'hist-binning']
>>> posthoc.create("ts-grid:grid=focal-calibration").grid
'focal-calibration'
"""

from __future__ import annotations

from ..registry import Registry
from .affine import (
    DirichletL2,
    DirichletODIR,
    MatrixScaling,
    MatrixScalingODIR,
    VectorScaling,
)
from .base import Calibrator, FitReport, NotFittedError
from .binning import HistogramBinning, IsotonicCalibration, ScalingBinning
from .model import CalibratedModel
from .temperature import GRIDS, EnsembleTemperatureScaling, TemperatureGrid, TemperatureScaling

REGISTRY: Registry[Calibrator] = Registry("calibrator")
for _cls in (
    TemperatureScaling,
    TemperatureGrid,
    EnsembleTemperatureScaling,
    VectorScaling,
    MatrixScaling,
    MatrixScalingODIR,
    DirichletL2,
    DirichletODIR,
    HistogramBinning,
    IsotonicCalibration,
    ScalingBinning,
):
    REGISTRY.register(_cls.name)(_cls)


def names() -> list[str]:
    """Names of every registered calibrator."""
    return REGISTRY.names()


def create(spec: str, **overrides) -> Calibrator:
    """A calibrator from a spec such as ``"ts"`` or ``"dir-odir:folds=5,average_folds=true"``."""
    return REGISTRY.create(spec, **overrides)


def load(path) -> Calibrator:
    """Read a calibrator file written by ``Calibrator.save``."""
    return Calibrator.load(path)


__all__ = [
    "GRIDS",
    "REGISTRY",
    "CalibratedModel",
    "Calibrator",
    "DirichletL2",
    "DirichletODIR",
    "EnsembleTemperatureScaling",
    "FitReport",
    "HistogramBinning",
    "IsotonicCalibration",
    "MatrixScaling",
    "MatrixScalingODIR",
    "NotFittedError",
    "ScalingBinning",
    "TemperatureGrid",
    "TemperatureScaling",
    "VectorScaling",
    "create",
    "load",
    "names",
]
