"""Calibration metrics: plain functions, one-pass evaluation with bootstrap intervals, and a
streaming, mergeable, distributed meter. Definitions: docs/metrics.md and docs/methods.md §1."""

from .binning import BINNINGS, BinScheme
from .bins import Bins
from .evaluate import METRICS, OOD_METRICS, EvaluationResult, evaluate
from .functional import (
    accuracy,
    ace,
    aece,
    augrc,
    aurc,
    brier,
    classwise_ece,
    ece,
    ece_decomposition,
    entropy,
    ks_error,
    mce,
    nll,
    optimal_ece,
    refinement_auroc,
    rms_ce,
    sce,
    smooth_ece,
)
from .inputs import Prepared, prepare, trusted
from .meter import CalibrationMeter
from .ood import ood_aupr, ood_auroc, ood_fpr95, ood_score
from .paired import PairedComparison, compare_nested, compare_paired

__all__ = [
    "BINNINGS",
    "METRICS",
    "OOD_METRICS",
    "BinScheme",
    "Bins",
    "CalibrationMeter",
    "EvaluationResult",
    "PairedComparison",
    "Prepared",
    "accuracy",
    "ace",
    "aece",
    "augrc",
    "aurc",
    "brier",
    "classwise_ece",
    "compare_nested",
    "compare_paired",
    "ece",
    "ece_decomposition",
    "entropy",
    "evaluate",
    "ks_error",
    "mce",
    "nll",
    "ood_aupr",
    "ood_auroc",
    "ood_fpr95",
    "ood_score",
    "optimal_ece",
    "prepare",
    "refinement_auroc",
    "rms_ce",
    "sce",
    "smooth_ece",
    "trusted",
]
