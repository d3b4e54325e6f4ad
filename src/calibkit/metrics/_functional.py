"""Calibration metrics as plain functions (docs/methods.md §1).

Every function takes ``scores`` of shape (N, K) (or (N,) for a binary problem given as one
column) and integer ``labels`` of shape (N,), as NumPy arrays or tensors on any device.
Scores are logits unless ``probs=True``: nothing is guessed from the value range, and
scores whose every row lies in [0, 1] and sums to 1 are refused as logits (one-line error
naming ``probs=True``; :func:`calibkit._checks.refuse_probabilities`). Results
are Python floats. Binned metrics take ``n_bins`` (default 15) and ``binning`` (see
:mod:`calibkit.metrics._binning`). ``binary="positive"`` measures a K = 2 problem on
P(class 1) against 1[y = 1] instead of on the top label; ``"pooled"`` and ``"top-<r>"``
are the named reductions of :mod:`calibkit.metrics._inputs`. Every function also takes a
checked input, :func:`~calibkit.metrics._inputs.prepare`'s ``Prepared``, in place of
``scores`` (no ``labels``): it is trusted as it is, and several metrics of it share one
check and one pass over the rows.

Examples
--------
>>> import torch
>>> from calibkit.metrics import ece, accuracy
>>> probs = torch.tensor([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], dtype=torch.float64)
>>> labels = torch.tensor([0, 1, 1])
>>> accuracy(probs, labels, probs=True)
0.6666666666666666
>>> round(ece(probs, labels, probs=True, n_bins=10), 6)  # (|1-.9| + |0-.6| + |1-.7|) / 3
0.333333
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from .._docs import documented
from .._metric_settings import (
    METRIC_PARAMETERS,
    ONE_SAMPLE_BINS,
    AdaptiveNorm,
    AeceConvention,
    Bandwidth,
    Binary,
    Binning,
    Cells,
    ClasswiseBinning,
    Debias,
    KsConvention,
    MetricBins,
    NllClip,
    OneSampleBins,
    PairBinary,
    Power,
    Probs,
    ReturnTemperature,
    SelectiveConvention,
    SmoothConvention,
)
from .._settings import checks_declared
from .._threads import sized_by_first_argument
from . import _stats as st
from ._binning import BinScheme
from ._inputs import Prepared, Runs, prepare, prepare_pair, prepare_scores
from ._resample import metric_vectors
from ._smooth import smooth_ece_batch
from ._smooth_logit import smooth_ece_logit
from ._temperatures import best_temperature, check_grid


def _scheme(p: Prepared, n_bins: int, binning: str) -> BinScheme:
    return BinScheme(n_bins, binning, p.dtype)


def _f(t: Tensor) -> float:
    return float(t.reshape(-1)[0])


def _values(p: Prepared, scheme: BinScheme, *names: str) -> dict[str, float]:
    """The metric table's rows ``names`` on the prepared sample: each metric's one
    composition (:data:`~calibkit.metrics._table.METRICS_TABLE`), as ``evaluate`` computes
    it."""
    out = metric_vectors(p, scheme, None, smooth=True, only=frozenset(names))
    return {name: _f(out[name]) for name in names}


def _value(p: Prepared, scheme: BinScheme, name: str) -> float:
    return _values(p, scheme, name)[name]


def _top_bins(p: Prepared, n_bins: int, binning: str) -> Tensor:
    """(1, 3, S) the sample's top-label bin sums, the statistic of the table's binned rows
    (``Statistics.sums()``), read directly: a binned metric needs none of the table's
    resampling (issue 67 §3; tests/metrics/test_registry_agreement.py holds each function
    equal to evaluate's row)."""
    return st.topbin_sums(p, _scheme(p, n_bins, binning))


#: the bins of a metric that takes none (its row reads no bin sums)
_NO_BINS = BinScheme(15, "calibkit", torch.float64)


#: the Parameters and Returns sections of a metric that is one number
_FRACTION = documented(METRIC_PARAMETERS, "float: the metric's value (a fraction; nats for NLL).")


def _sample_metric(name: str, about: str) -> Callable[..., float]:
    """The functional form of the table's row ``name`` for a metric with no settings but
    the inputs' (``probs``); ``about``: its docstring."""

    @sized_by_first_argument
    @checks_declared
    def metric(scores: Any, labels: Any = None, *, probs: Probs = None) -> float:
        p = prepare.trusting(scores, labels, probs=probs)
        return _value(p, _NO_BINS, name)

    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = about
    return _FRACTION(metric)


accuracy = _sample_metric(
    "accuracy",
    """Fraction of samples whose argmax (ties: lowest index) equals the label.

    Examples
    --------
    >>> from calibkit.metrics import accuracy
    >>> accuracy([[2.0, 0.0], [0.5, 1.5], [3.0, 1.0]], [0, 0, 0])  # rows 1 and 3 are right
    0.6666666666666666
    """,
)

brier = _sample_metric(
    "brier",
    """Mean multi-class Brier score Σ_k (p_k − e_yk)², in [0, 2] (papers often print ×100).

    Examples
    --------
    >>> from calibkit.metrics import brier
    >>> probs = [[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]]
    >>> round(brier(probs, [0, 1, 1], probs=True), 6)  # (0.02 + 0.72 + 0.18) / 3
    0.306667
    """,
)


def _selective_area(name: str, about: str) -> Callable[..., float]:
    """The functional form of the selective-prediction row ``name`` (``aurc`` or
    ``augrc``), with TorchUncertainty's convention beside calibkit's."""

    @sized_by_first_argument
    @checks_declared
    def metric(
        scores: Any,
        labels: Any = None,
        *,
        probs: Probs = None,
        convention: SelectiveConvention = "calibkit",
    ) -> float:
        p = prepare.trusting(scores, labels, probs=probs)
        value = _value(p, _NO_BINS, name)
        if convention == "calibkit":
            return value
        return _torch_uncertainty_area(name, value, *st.run_sums(p.runs, None))

    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = about
    return documented(METRIC_PARAMETERS, "float: the area (a fraction).")(metric)


def _torch_uncertainty_area(name: str, value: float, size: Tensor, pos: Tensor) -> float:
    """TorchUncertainty's AURC or AUGRC (``AURC.compute``, ``AUGRC.compute``, 0.13) from
    calibkit's: its trapezoid over the points k = 1..N of the curve y_k, spaced 1/N, is
    (1/N)(Σ_k y_k − (y_1 + y_N)/2), and Σ_k y_k / N is calibkit's value; then / (1 − 1/N).
    y_1 is the error of the most confident sample (its expectation over a tied top run,
    where TorchUncertainty takes whichever its sort puts first), y_N the error rate (× 1
    for AUGRC's κ r(κ) at κ = 1; AUGRC's y_1 carries κ = 1/N)."""
    n = float(size.sum())
    if n < 2:
        return math.nan
    err = size - pos
    first = float(err[0, -1] / size[0, -1])  # runs rise in confidence: the last is the top
    last = float(err.sum()) / n
    if name == "augrc":
        first /= n
    return (n * value - (first + last) / 2) / (n - 1)


aurc = _selective_area(
    "aurc",
    """Area under the risk-coverage curve of selective prediction by top-label confidence
    (Geifman et al. 2019): the mean over coverages k/N of the error rate of the k most
    confident predictions, ties averaged over their orders. Lower is better; with error rate
    r, a confidence that ranks every error last reaches about r + (1 - r) ln(1 - r) (its
    optimum), one that carries no information r.

    Examples
    --------
    The one error is the least confident row: the risk is 0 at coverages 1/3 and 2/3 and
    1/3 at full coverage, a mean of 1/9.

    >>> from calibkit.metrics import aurc
    >>> round(aurc([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1], probs=True), 6)
    0.111111
    """,
)

augrc = _selective_area(
    "augrc",
    """Area under the generalized risk-coverage curve (Traub et al. 2024): the mean over
    coverages k/N of the share of all N samples that are accepted (among the k most
    confident) and wrong, ties averaged over their orders. Unlike AURC it does not divide
    by the coverage, so the few most confident samples do not dominate it. Lower is
    better; an uninformative confidence gives about r/2 at error rate r, a perfect ranking
    r²/2.

    Examples
    --------
    The one error is now the most confident row. AURC averages the risks 1, 1/2 and 1/3 of
    the three coverages; AUGRC the shares of all rows accepted and wrong, 1/3 at each.

    >>> from calibkit.metrics import augrc, aurc
    >>> probs, labels = [[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], [1, 0, 1]
    >>> round(aurc(probs, labels, probs=True), 6), round(augrc(probs, labels, probs=True), 6)
    (0.611111, 0.333333)
    """,
)


@_FRACTION
@sized_by_first_argument
@checks_declared
def ace(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: PairBinary = "top-label",
) -> float:
    """Average calibration error (Neumann et al. 2018, netcal's ``ACE``): the mean of
    |acc − conf| over the non-empty equal-width bins, each bin counting once whatever its
    size. Not the adaptive ECE (:func:`aece`), which some papers also call ACE.
    ``binning="netcal", n_bins=10`` is netcal's ``ACE(bins=10)``.

    Examples
    --------
    >>> from calibkit.metrics import ace
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(ace(logits, labels), 4)
    0.328
    """
    p = prepare_pair(scores, labels, probs=probs, binary=binary)
    return _f(st.ace_from_sums(_top_bins(p, n_bins, binning)))


@_FRACTION
@sized_by_first_argument
@checks_declared
def mce(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: PairBinary = "top-label",
) -> float:
    """Maximum calibration error: max over non-empty bins of |acc − conf|.

    Examples
    --------
    >>> from calibkit.metrics import mce
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(mce(logits, labels), 4)
    0.4573
    """
    p = prepare_pair(scores, labels, probs=probs, binary=binary)
    return _f(st.mce_from_sums(_top_bins(p, n_bins, binning)))


@_FRACTION
@sized_by_first_argument
@checks_declared
def ks_error(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    binary: PairBinary = "top-label",
    convention: KsConvention = "calibkit",
) -> float:
    """Top-label Kolmogorov–Smirnov calibration error (Gupta et al., ICLR 2021, eq. 5).

    max_t |(1/N) Σ_{i: c_i <= t} (a_i − c_i)|, taken at the ends of runs of tied
    confidences so that the result does not depend on the order of tied samples.
    ``convention="spline-calibration"`` is Gupta et al.'s code: the gap after every sample
    in the order ``numpy.argsort`` leaves them
    (:func:`~calibkit.metrics._stats.spline_calibration_ks`), and a row's r-th class picked
    by ``numpy.argpartition`` among tied probabilities. Without ties the two agree.

    Examples
    --------
    >>> from calibkit.metrics import ks_error
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(ks_error(logits, labels), 4)
    0.1143

    Two tied confidences of 0.9, the first wrong and the second right: calibkit looks at
    the run's end, where their gaps partly cancel; Gupta et al.'s code also looks between
    them, so its value depends on the order of the tied samples.

    >>> probs = [[0.6, 0.4], [0.9, 0.1], [0.9, 0.1]]
    >>> round(ks_error(probs, [1, 1, 0], probs=True), 4)  # (0.6 + 0.9 − 0.1) / 3
    0.4667
    >>> ks_error(probs, [1, 1, 0], probs=True, convention="spline-calibration")  # 1.5 / 3
    0.5
    >>> ks_error(probs, [1, 0, 1], probs=True, convention="spline-calibration")  # swapped
    0.4666666666666666
    """
    if convention == "spline-calibration":
        pair = prepare_pair(scores, labels, probs=probs, binary=binary, pick="argpartition")
        return st.spline_calibration_ks(*pair.cal_pair)
    p = prepare_pair(scores, labels, probs=probs, binary=binary)
    return _value(p, _NO_BINS, "ks_error")


@_FRACTION
@sized_by_first_argument
@checks_declared
def ece(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: PairBinary = "top-label",
    debias: Debias = False,
) -> float:
    """Expected calibration error with ``n_bins`` equal-width bins (Naeini et al. 2015).

    ECE = Σ_m |B_m|/N · |acc(B_m) − conf(B_m)|, empty bins adding 0 (Dark Side eq. 3).
    ``debias=True``: each bin's |acc − conf| is replaced by its debiased estimate, the
    gap whose expected plug-in value equals the observed one under the bin's sampling
    noise (docs/metrics.md, "Debiased binned errors"; the row ``debiased_ece``).

    Examples
    --------
    >>> from calibkit.metrics import ece
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(ece(logits, labels), 4)
    0.2848
    >>> round(ece(logits, labels, n_bins=10, binning="torchmetrics"), 4)
    0.2848
    """
    p = prepare_pair(scores, labels, probs=probs, binary=binary)
    sums = _top_bins(p, n_bins, binning)
    if debias:
        return _f(st.debiased_ece_from_sums(sums, p.n))
    return _f(st.ece_from_sums(sums, p.n))


@_FRACTION
@sized_by_first_argument
@checks_declared
def rms_ce(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: PairBinary = "top-label",
    debias: Debias = False,
    one_sample_bins: OneSampleBins = "keep",
) -> float:
    """RMS (L2) calibration error with ``n_bins`` equal-width top-label bins: sqrt(Σ_m
    |B_m|/N · (acc(B_m) − conf(B_m))²) (torchmetrics' ``norm="l2"``). ``debias=True``:
    Kumar et al. (2019, "Verified uncertainty calibration", §5)'s debiased estimator, which
    subtracts each bin's sampling variance acc(1 − acc)/(|B_m| − 1) from its squared gap
    before the root (clipped at 0; the row ``debiased_rms_ce``). A bin of one sample has no
    variance estimate: by default it keeps its plug-in squared gap, as torchmetrics'
    ``debias=True`` does; ``one_sample_bins="drop"`` counts it 0, as Kumar et al.'s code
    (``uncertainty-calibration``'s ``unbiased_square_ce``) does.

    Examples
    --------
    >>> from calibkit.metrics import rms_ce
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(rms_ce(logits, labels), 4)
    0.3144
    """
    p = prepare_pair(scores, labels, probs=probs, binary=binary)
    _check_one_sample_bins(one_sample_bins, debias, "debias=True")
    return _f(
        st.rms_from_sums(
            _top_bins(p, n_bins, binning), p.n, debias=debias, one_sample_bins=one_sample_bins
        )
    )


def _check_one_sample_bins(value: str, squared_debiased: bool, needs: str) -> None:
    """``one_sample_bins`` checked against its declaration; 'drop' is a rule of the debiased
    squared error alone, refused (naming ``needs``) where that is not what is computed."""
    ONE_SAMPLE_BINS.check("one_sample_bins", value)
    if value == "drop" and not squared_debiased:
        raise ValueError(
            f"one_sample_bins='drop' is a rule of the debiased squared error: it needs {needs}"
        )


@documented(METRIC_PARAMETERS, "float: the metric's value (a fraction).")
@sized_by_first_argument
@checks_declared
def aece(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    convention: AeceConvention = "calibkit",
    binary: PairBinary = "top-label",
    norm: AdaptiveNorm = "l1",
) -> float:
    """Adaptive (equal-mass) ECE: bins of N/M samples each (sizes differ by at most one).

    A run of tied confidences is never split: the boundary moves to the run's end. Unlike
    focal_calibration's ``AdaptiveECELoss``, no sample is dropped (its interpolated lowest
    edge equals the smallest confidence, which its (lo, hi] bins then exclude); its rule is
    ``convention="focal-calibration"`` (:func:`~calibkit.metrics._stats.focal_calibration_aece`).
    TorchUncertainty's ``AdaptiveCalibrationError`` is ``convention="torch-uncertainty"``
    (:func:`~calibkit.metrics._stats.torch_uncertainty_aece`).

    ``norm="l2"`` and ``norm="max"`` reduce the same bins' gaps to an adaptive RMS
    calibration error, sqrt(Σ_m |B_m|/N (acc_m − conf_m)²), and an adaptive MCE,
    max_m |acc_m − conf_m|, as TorchUncertainty's ``norm=`` does.

    Examples
    --------
    >>> from calibkit.metrics import aece
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(aece(logits, labels), 4)
    0.2848

    Two bins of two samples: (0.6 wrong, 0.7 right), gap |0.5 − 0.65| = 0.15, and (0.8
    right, 0.9 wrong), gap 0.35:

    >>> probs = [[0.6, 0.4], [0.9, 0.1], [0.8, 0.2], [0.7, 0.3]]
    >>> [round(aece(probs, [1, 1, 0, 0], probs=True, n_bins=2, norm=n), 4)
    ...  for n in ("l1", "l2", "max")]  # (0.15 + 0.35) / 2, √((0.15² + 0.35²) / 2), 0.35
    [0.25, 0.2693, 0.35]
    """
    st.check_adaptive(norm, convention)
    p = prepare_pair(scores, labels, probs=probs, binary=binary)
    if convention != "calibkit":
        return st.peer_aece(*p.cal_pair, n_bins, norm, convention)
    if norm != "l1":
        runs = p.runs
        return _f(st.aece_from_runs(runs, *st.run_sums(runs, None), p.n, n_bins, norm))
    return _value(p, _scheme(p, n_bins, "calibkit"), "aece")  # M bins of equal mass


@documented(METRIC_PARAMETERS, "float: the mean over classes (the sum with binning='kull').")
@sized_by_first_argument
@checks_declared
def classwise_ece(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: ClasswiseBinning = "calibkit",
    cells: Cells = "marginal",
    power: Power = 1,
    debias: Debias = False,
    one_sample_bins: OneSampleBins = "keep",
) -> float:
    """Classwise ECE (= static calibration error, SCE; Nixon et al. 2019; Kull et al. 2019).

    For each class k, equal-width bins over p_k of all N samples; acc = fraction with
    y = k, conf = mean p_k; CE_k = Σ_m |B_mk|/N · |acc − conf|; the result is mean_k CE_k
    (Σ_k CE_k with ``binning="kull"``, as Kull et al. 2019 report it).

    Named conventions (docs/metrics.md, "Conventions of published tables"), each a setting
    of this function alone (the metric table's rows are the marginal, power-1 ones):

    * ``binning="equal-mass"``: per class, ``n_bins`` bins of N/M samples each over p_k
      (a run of tied probabilities is never split, as in :func:`aece`): the equal-mass
      classwise ECE, Nixon et al. 2019's adaptive calibration error (ACE) weighted by bin
      size (their bins all hold N/M samples, so the two agree up to ties).
    * ``cells="joint"``: the cells are the joint bins of all K probabilities of a sample
      (its K bin indices together), and CE_k sums over those cells. With
      ``binning="kull"`` this is Kull et al. 2019's ECE_FULL (``full_ECE`` in their
      ``utility/evaluation.py``).
    * ``power=2``: each bin's gap is squared, Σ_m |B_mk|/N · (acc − conf)², with no square
      root at the end. With ``binning="kull"`` this is Kull et al.'s ECE_CW2 (marginal
      cells) and ECE_FULL2 (``cells="joint"``): their ``classwise_ECE(..., power=2)`` and
      ``full_ECE(..., power=2)``.
    * ``debias=True``: each class-bin cell's |acc − conf| is replaced by its debiased
      estimate (as :func:`ece`'s; docs/metrics.md, "Debiased binned errors"; the row
      ``debiased_classwise_ece``). Marginal equal-width cells only. With ``power=2``, each
      cell's squared gap less its variance acc(1 − acc)/(|B_mk| − 1), no root taken (it
      can be negative): the square root of it, clipped at 0, is Kumar et al.'s marginal
      debiased L2 error, and ``one_sample_bins="drop"`` counts a cell of one sample 0, as
      their code does (the default keeps its plug-in squared gap).

    Examples
    --------
    >>> from calibkit.metrics import classwise_ece
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(classwise_ece(logits, labels), 4)
    0.2179
    """
    if debias and (cells != "marginal" or binning == "equal-mass"):
        raise ValueError("debias=True needs equal-width marginal cells")
    _check_one_sample_bins(one_sample_bins, debias and power == 2, "debias=True and power=2")
    p = prepare.trusting(scores, labels, probs=probs)
    if binning == "equal-mass":
        if cells == "joint" or power != 1:
            raise ValueError(
                "cells='joint' and power=2 need equal-width bins; binning='equal-mass' is "
                "per class with power=1"
            )
        per_class = []
        for k in range(p.k):
            runs = Runs.from_values(p.probs[:, k], p.labels == k)
            per_class.append(st.aece_from_runs(runs, *st.run_sums(runs, None), p.n, n_bins))
        return _f(torch.stack(per_class).mean(0))
    scheme = _scheme(p, n_bins, binning)
    if cells == "joint":
        gaps = st.joint_cell_gaps(p.probs, p.labels, scheme.assign(p.probs)[0], power) / p.n
        return float(st.over_classes(gaps, scheme))
    if power == 2:
        sums = st.classwise_sums(p, scheme)
        return _f(
            st.classwise_squared_from_sums(
                sums, p.n, scheme, debias=debias, one_sample_bins=one_sample_bins
            )
        )
    return _value(p, scheme, "debiased_classwise_ece" if debias else "classwise_ece")


sce = classwise_ece


@documented(METRIC_PARAMETERS, "float: the mean NLL in nats.")
@sized_by_first_argument
@checks_declared
def nll(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    clip: NllClip = None,
) -> float:
    """Mean negative log-likelihood −log p_y (natural log), from log-softmax of the logits.

    With ``probs=True`` a true-class probability of exactly 0 gives ``inf`` (the correct
    value). ``clip`` reproduces tools that clip p_y to [ε, 1 − ε] first, with the same ε
    whatever the input's dtype (a setting of this function alone; the table's row is the
    unclipped NLL):

    * a number ε in (0, 0.5): ``clip=1e-15`` is scikit-learn's ``log_loss`` up to 1.1
      (its default ``eps=1e-15``), which Kull et al. 2019's tables use: 0.358274 for the
      uncalibrated ResNet-110 on CIFAR-10 (tested);
    * ``"sklearn-1.2"``: scikit-learn's ``log_loss`` from 1.2 on (``eps="auto"``), which
      clips at the machine epsilon of its input's dtype; calibkit fixes it at float64's,
      2.22e-16, the dtype its probabilities are scored in (float32 input would otherwise
      be clipped at 1.19e-7 and score −log 1.19e-7 = 15.9 per zero instead of 36.0).

    Without ``clip`` a calibrator that outputs exact zeros scores 708 per zero (calibkit's
    floor, −log 2.2e-308). scikit-learn also clips the other classes and renormalises the
    row; that moves the result by at most K·ε relative, below any printed digit.

    Examples
    --------
    >>> from calibkit.metrics import nll
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(nll(logits, labels), 4)
    0.446
    >>> import torch
    >>> probs = torch.softmax(torch.tensor(logits), 1)
    >>> round(nll(probs, labels, probs=True), 4)
    0.446
    """
    p = prepare.trusting(scores, labels, probs=probs)
    if clip is None:
        return _value(p, _NO_BINS, "nll")
    logp = p.label_logp.clamp(math.log(clip), math.log1p(-clip))  # checked: clip is ε
    return _f(st.mean_stat(-logp, None, p.n))


@documented(
    METRIC_PARAMETERS,
    "float: the mean entropy in nats.",
    labels=(
        "array-like or None, default None",
        "Not used; accepted so every metric takes (scores, labels).",
    ),
)
@sized_by_first_argument
@checks_declared
def entropy(scores: Any, labels: Any = None, *, probs: Probs = None) -> float:
    """Mean predictive entropy −Σ_k p_k log p_k in nats (labels are not used).

    Examples
    --------
    >>> from calibkit.metrics import entropy
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(entropy(logits, labels), 4)
    0.748
    """
    if labels is None:
        s = prepare_scores(scores, probs=probs)
        labels = torch.zeros(len(s), dtype=torch.long)
    return _value(prepare.trusting(scores, labels, probs=probs), _NO_BINS, "entropy")


@_FRACTION
@sized_by_first_argument
@checks_declared
def refinement_auroc(scores: Any, labels: Any = None, *, probs: Probs = None) -> float:
    """AUROC of the confidence separating correct (positive) from wrong predictions.

    Ties count one half (mid-ranks; Dark Side §3.3). Raises ``ValueError`` when every
    prediction is correct or every one is wrong, where AUROC is undefined.

    Examples
    --------
    >>> from calibkit.metrics import refinement_auroc
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(refinement_auroc(logits, labels), 4)
    1.0
    """
    p = prepare.trusting(scores, labels, probs=probs)
    value = _value(p, _NO_BINS, "refinement_auroc")
    if math.isnan(value):
        raise ValueError(undefined_auroc_message(p.n, int(p.correct.sum())))
    return value


def undefined_auroc_message(n: int, n_correct: int) -> str:
    """Why refinement AUROC is undefined, for ``n`` predictions of which ``n_correct`` are
    correct (all or none)."""
    state = "correct" if n_correct == n else "wrong"
    return f"refinement AUROC is undefined: all {n} predictions are {state}"


#: the rows :func:`ece_decomposition` returns, as the metric table names them
_DECOMPOSITION = ("mean_confidence", "gap", "overconfident", "underconfident")


@documented(
    METRIC_PARAMETERS,
    "dict: mean_confidence, accuracy, gap, overconfident and underconfident (fractions).",
)
@sized_by_first_argument
@checks_declared
def ece_decomposition(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: Binary = "top-label",
) -> dict[str, float]:
    """Mean confidence E[C], accuracy E[A], gap E[C] − E[A] and ECE split by bin direction.

    ``overconfident`` sums |B_m|/N (conf − acc) over bins with conf > acc, ``underconfident``
    the same over bins with acc > conf; they add up to the ECE (Dark Side eq. 5–7: when
    every bin is over-confident, ECE = E[C] − E[A]). ``accuracy`` is the mean outcome of the
    calibration pair (with ``binary="positive"``, the share of positives).

    Examples
    --------
    >>> from calibkit.metrics import ece, ece_decomposition
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> d = ece_decomposition(logits, labels)
    >>> {k: round(v, 4) for k, v in d.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'mean_confidence': 0.6939, 'accuracy': 0.75, 'gap': -0.0561,
     'overconfident': 0.1143, 'underconfident': 0.1705}
    >>> round(d["overconfident"] + d["underconfident"] - ece(logits, labels), 12)
    0.0
    """
    p = prepare.trusting(scores, labels, probs=probs, binary=binary)
    v = _values(p, _scheme(p, n_bins, binning), *_DECOMPOSITION)
    accuracy = v["mean_confidence"] - v["gap"]
    return {"mean_confidence": v["mean_confidence"], "accuracy": accuracy} | {
        k: v[k] for k in _DECOMPOSITION[1:]
    }


@documented(METRIC_PARAMETERS, "float: the smooth ECE (a fraction).")
@sized_by_first_argument
@checks_declared
def smooth_ece(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    sigma: Bandwidth = None,
    convention: SmoothConvention = "calibkit",
    binary: PairBinary = "top-label",
) -> float:
    """Smooth ECE (Błasiok & Nakkiran 2024) with the fixed-point bandwidth, or ``sigma`` (a
    setting of this function alone; the table's row takes the fixed point).

    See :mod:`calibkit.metrics._smooth` for the computation and how it relates to relplot,
    and :mod:`calibkit.metrics._smooth_logit` for TorchUncertainty's.

    Examples
    --------
    >>> from calibkit.metrics import smooth_ece
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(smooth_ece(logits, labels), 4)
    0.1585
    """
    p = prepare_pair(scores, labels, probs=probs, binary=binary)
    if convention == "torch-uncertainty":
        return float(smooth_ece_logit(*p.cal_pair, sigma=sigma))
    if sigma is None:
        return _value(p, _NO_BINS, "smooth_ece")
    return _f(smooth_ece_batch(*p.cal_pair, sigma=sigma)[0])


@documented(
    METRIC_PARAMETERS,
    "float or (float, float): the lowest ECE, and with return_temperature its temperature.",
    grid=(
        "array-like or None, default None",
        "Temperatures to search (> 0); None: 0.01, 0.02, ..., 10.",
    ),
)
@sized_by_first_argument
@checks_declared
def optimal_ece(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: Binary = "top-label",
    grid: Any = None,
    return_temperature: ReturnTemperature = False,
) -> float | tuple[float, float]:
    """ECE after temperature scaling with the temperature chosen on these samples.

    The oracle lower bound of TS-grid that the Rethinking paper (§5.1) calls *optimal ECE*:
    min over T in ``grid`` (default 0.01, 0.02, ..., 10) of ECE(z / T). Ties go to the
    smallest T. With ``return_temperature=True`` returns ``(ece, T)``.

    Examples
    --------
    >>> from calibkit.metrics import optimal_ece
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> round(optimal_ece(logits, labels), 4)
    0.1717
    """
    p = prepare.trusting(scores, labels, probs=probs, binary=binary)
    temps = check_grid(grid)
    best, value = best_temperature(p, _scheme(p, n_bins, binning), temps)
    return (value, float(temps[best])) if return_temperature else value
