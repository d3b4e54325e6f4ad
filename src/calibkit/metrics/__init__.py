"""Calibration metrics: plain functions, one-pass evaluation with bootstrap intervals, and a
streaming, mergeable, distributed meter. Definitions: docs/metrics.md and docs/methods.md §1."""

from .._conventions import BINNINGS
from ._binning import BinScheme
from ._bins import Bins
from ._evaluate import METRICS, OOD_METRICS, EvaluationResult, evaluate
from ._functional import (
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
from ._inputs import Prepared, prepare, trusted
from ._meter import CalibrationMeter
from ._ood import ood_aupr, ood_auroc, ood_fpr95, ood_score
from ._paired import PairedComparison, compare_nested, compare_paired
from ._pipelines import kull_probabilities

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
    "kull_probabilities",
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
