"""Post-hoc calibrators: fit on a held-out split, apply to new logits (docs/methods.md §2).

>>> from calibkit import posthoc
>>> posthoc.names()[:4]
['beta', 'dir-l2', 'dir-odir', 'ets']
>>> posthoc.create("ts-grid:grid=focal-calibration").grid
'focal-calibration'
"""

from __future__ import annotations

from .affine import (
    DirichletL2,
    DirichletODIR,
    MatrixScaling,
    MatrixScalingODIR,
    VectorScaling,
)
from .anomalies import CalibrationWarning
from .base import Calibrator, Evidence, FitReport, Method, NotFittedError
from .binning import (
    BetaCalibration,
    HistogramBinning,
    IsotonicCalibration,
    PlattScaling,
    ScalingBinning,
)
from .clamping import ClampingDivergedError, NeuralClamping
from .maccal import MacCal
from .model import CalibratedModel
from .model_level import ModelCalibrator
from .registered import REGISTRY, create, load, names
from .temperature import EnsembleTemperatureScaling, TemperatureGrid, TemperatureScaling

__all__ = [
    "REGISTRY",
    "BetaCalibration",
    "CalibratedModel",
    "CalibrationWarning",
    "Calibrator",
    "ClampingDivergedError",
    "DirichletL2",
    "DirichletODIR",
    "EnsembleTemperatureScaling",
    "Evidence",
    "FitReport",
    "HistogramBinning",
    "IsotonicCalibration",
    "MacCal",
    "MatrixScaling",
    "MatrixScalingODIR",
    "Method",
    "ModelCalibrator",
    "NeuralClamping",
    "NotFittedError",
    "PlattScaling",
    "ScalingBinning",
    "TemperatureGrid",
    "TemperatureScaling",
    "VectorScaling",
    "create",
    "load",
    "names",
]
