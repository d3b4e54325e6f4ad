"""Post-hoc calibrators: fit on a held-out split, apply to new logits (docs/methods.md §2).

>>> from calibkit import posthoc
>>> posthoc.names()[:4]
['beta', 'dir-l2', 'dir-odir', 'ets']
>>> posthoc.create("ts-grid:grid=focal-calibration").grid
'focal-calibration'
"""

from __future__ import annotations

from .._docs import documented
from ..registry import Registry, Spec
from .affine import (
    DirichletL2,
    DirichletODIR,
    MatrixScaling,
    MatrixScalingODIR,
    VectorScaling,
)
from .anomalies import CalibrationWarning
from .base import POSTHOC_PARAMETERS, Calibrator, Evidence, FitReport, Method, NotFittedError
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
from .temperature import EnsembleTemperatureScaling, TemperatureGrid, TemperatureScaling

REGISTRY: Registry[Method] = Registry("calibrator")
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
    BetaCalibration,
    PlattScaling,
    ScalingBinning,
    NeuralClamping,
    MacCal,
):
    REGISTRY.register(_cls.name)(_cls)
#: the names other libraries and papers use (docs/posthoc.md): "dirichlet" is Dir-ODIR, the
#: regulariser Kull et al. 2019 recommend; scikit-learn's "sigmoid" is Platt scaling
for _name, *_others in (
    ("ts", "temperature", "temperature-scaling", "TemperatureScaling"),
    ("ts-grid", "temperature-grid"),
    ("ets", "ensemble-temperature-scaling", "mix-n-match"),
    ("vector", "vector-scaling", "VectorScaling"),
    ("matrix", "matrix-scaling", "MatrixScaling"),
    ("dir-odir", "dirichlet", "dirichlet-calibration", "DirichletCalibration"),
    ("hist-binning", "histogram", "histogram-binning", "HistogramBinning"),
    ("isotonic", "isotonic-regression", "IsotonicRegression"),
    ("beta", "beta-calibration", "BetaCalibration"),
    ("platt", "sigmoid", "platt-scaling", "PlattScaling", "logistic-calibration"),
    ("neural-clamping", "NeuralClamping"),
    ("maccal", "mac-cal-stage-2"),
):
    REGISTRY.alias(_name, *_others)


@documented(POSTHOC_PARAMETERS, "list of str: the names, sorted.")
def names(level: str | None = None) -> list[str]:
    """Names of every registered calibration method (``level``: only ``"logits"`` or
    ``"model"`` ones)."""
    return [n for n in REGISTRY.names() if level in (None, REGISTRY.factory(n).level)]


@documented(POSTHOC_PARAMETERS, "Method: the method, unfitted.")
def create(spec: str | Spec, **overrides) -> Method:
    """A method from a spec such as ``"ts"`` or ``"dir-odir:folds=5,average_folds=true"``.
    Its settings are checked once, here or where the spec was checked, and the method
    trusts that result (:meth:`Method.trust_settings`)."""
    checked = REGISTRY.check(spec, **overrides)
    method = REGISTRY.create(checked)
    if checked.settings is not None:
        method.trust_settings(checked.settings)
    return method


@documented(POSTHOC_PARAMETERS, "Method: the fitted method, ready to apply.")
def load(path, model=None) -> Method:
    """Read a file written by ``save``; a model-level method needs its ``model``."""
    return Method.load(path, model)


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
