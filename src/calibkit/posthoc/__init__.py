"""Post-hoc calibrators: fit on a held-out split, apply to new logits (docs/methods.md §2).

>>> from calibkit import posthoc
>>> "ts" in posthoc.names() and posthoc.names() == sorted(posthoc.names())  # by name
True
>>> posthoc.create("ts-grid:grid=focal-calibration").grid
'focal-calibration'
"""

from __future__ import annotations

from ._affine import (
    DirichletL2,
    DirichletODIR,
    MatrixScaling,
    MatrixScalingODIR,
    VectorScaling,
)
from ._anomalies import CalibrationWarning
from ._base import Calibrator, Evidence, FitReport, Method, NotFittedError
from ._binning import (
    BetaCalibration,
    HistogramBinning,
    IsotonicCalibration,
    PlattScaling,
    ScalingBinning,
)
from ._clamping import ClampingDivergedError, NeuralClamping
from ._maccal import ABLATIONS, MacCal
from ._model import CalibratedModel
from ._model_level import ModelCalibrator
from ._registered import REGISTRY, create, load, names
from ._temperature import EnsembleTemperatureScaling, TemperatureGrid, TemperatureScaling

__all__ = [
    "ABLATIONS",
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
