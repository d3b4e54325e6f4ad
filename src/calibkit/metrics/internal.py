"""What calibkit's other packages share from the metrics beyond its face (issue 67 §2):
display rules, the metric settings' declarations, input preparation, bins, resampling,
the temperature grid, the row scan (its compiled switch). Not public API: a name here may
change in any release; users import from :mod:`calibkit.metrics`. A test fails when another
package imports a private module of this one instead."""

from .._metric_settings import (
    NORMS,
    AdaptiveNorm,
    AeceConvention,
    Binning,
    Debias,
    MetricBins,
    Probs,
)
from . import _scan as row_scan
from ._bins import bins_of
from ._display import (
    direction,
    display,
    in_percent,
    mean_std,
    plus_minus,
    shown,
    spread,
    with_unit,
)
from ._functional import undefined_auroc_message
from ._inputs import Runs, prepare_scores
from ._intervals import describe
from ._resample import bootstrap_replicates, metric_values
from ._smooth import smooth_ece_batch
from ._stats import (
    aece_from_runs,
    aurc_from_runs,
    auroc_from_runs,
    check_adaptive,
    classwise_ece_from_sums,
    classwise_sums,
    ece_from_sums,
    mce_from_sums,
    peer_aece,
    reduce_bins,
    rms_from_sums,
    run_sums,
    topbin_sums,
)
from ._table import SAMPLE_METRICS
from ._temperatures import best_temperature, check_grid, ece_over_temperatures, preset_grid

__all__ = [
    "NORMS",
    "SAMPLE_METRICS",
    "AdaptiveNorm",
    "AeceConvention",
    "Binning",
    "Debias",
    "MetricBins",
    "Probs",
    "Runs",
    "aece_from_runs",
    "aurc_from_runs",
    "auroc_from_runs",
    "best_temperature",
    "bins_of",
    "bootstrap_replicates",
    "check_adaptive",
    "check_grid",
    "classwise_ece_from_sums",
    "classwise_sums",
    "describe",
    "direction",
    "display",
    "ece_from_sums",
    "ece_over_temperatures",
    "in_percent",
    "mce_from_sums",
    "mean_std",
    "metric_values",
    "peer_aece",
    "plus_minus",
    "prepare_scores",
    "preset_grid",
    "reduce_bins",
    "rms_from_sums",
    "row_scan",
    "run_sums",
    "shown",
    "smooth_ece_batch",
    "spread",
    "topbin_sums",
    "undefined_auroc_message",
    "with_unit",
]
