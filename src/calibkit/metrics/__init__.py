"""Calibration metrics: plain functions, one-pass evaluation with bootstrap intervals, and a
streaming, mergeable, distributed meter. Definitions: docs/metrics.md and METHODS.md §1."""

from .binning import BINNINGS, BinScheme
from .evaluate import (
    METRICS,
    OOD_METRICS,
    Bins,
    EvaluationResult,
    PairedComparison,
    compare_paired,
    evaluate,
)
from .functional import (
    accuracy,
    aece,
    brier,
    classwise_ece,
    ece,
    ece_decomposition,
    entropy,
    ks_error,
    mce,
    nll,
    ood_auroc,
    ood_fpr95,
    optimal_ece,
    refinement_auroc,
    rms_ce,
    sce,
    smooth_ece,
)
from .meter import CalibrationMeter

__all__ = [
    "BINNINGS",
    "METRICS",
    "OOD_METRICS",
    "BinScheme",
    "Bins",
    "CalibrationMeter",
    "EvaluationResult",
    "PairedComparison",
    "accuracy",
    "aece",
    "brier",
    "classwise_ece",
    "compare_paired",
    "ece",
    "ece_decomposition",
    "entropy",
    "evaluate",
    "ks_error",
    "mce",
    "nll",
    "ood_auroc",
    "ood_fpr95",
    "optimal_ece",
    "refinement_auroc",
    "rms_ce",
    "sce",
    "smooth_ece",
]
