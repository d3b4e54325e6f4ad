"""What calibkit's other packages share from post-hoc calibration beyond its face (issue 67
§2): the fit checks, the method comparison, fitting on files, the logistic Newton step.
Not public API: a name here may change in any release; users import from
:mod:`calibkit.posthoc`. A test fails when another package imports a private module of
this one instead."""

from ._anomalies import SANE_TEMPERATURE, check_fit, check_method
from ._base import FitDivergedError
from ._binning import logistic_newton
from ._checks import check_fit_data
from ._compare import (
    COLUMNS,
    anomaly_lines,
    best_per_column,
    cell,
    check_logits_methods,
    compare_methods,
    compare_resplit,
    default_methods,
    expected_lines,
    stratified_split,
)
from ._maccal import mask_stopped, mask_unsettled
from ._model_level import fits_together
from ._on_files import NetworkMethodError, apply_file, fit_file

__all__ = [
    "COLUMNS",
    "SANE_TEMPERATURE",
    "FitDivergedError",
    "NetworkMethodError",
    "anomaly_lines",
    "apply_file",
    "best_per_column",
    "cell",
    "check_fit",
    "check_fit_data",
    "check_logits_methods",
    "check_method",
    "compare_methods",
    "compare_resplit",
    "default_methods",
    "expected_lines",
    "fit_file",
    "fits_together",
    "logistic_newton",
    "mask_stopped",
    "mask_unsettled",
    "stratified_split",
]
