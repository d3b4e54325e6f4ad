"""Calibration metrics as plain functions (METHODS.md §1).

Every function takes ``scores`` of shape (N, K) (or (N,) for a binary problem given as one
column) and integer ``labels`` of shape (N,), as NumPy arrays or tensors on any device.
Scores are logits unless ``probs=True``: nothing is guessed from the value range. Results
are Python floats. Binned metrics take ``n_bins`` (default 15) and ``binning`` (see
:mod:`calibkit.metrics.binning`). ``binary="positive"`` measures a K = 2 problem on
P(class 1) against 1[y = 1] instead of on the top label.

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
from typing import Any

import torch
from torch import Tensor

from .._checks import check_positive_int
from . import _stats as st
from ._prepare import Prepared, Runs, prepare, prepare_scores
from .binning import BinScheme
from .smooth import smooth_ece_batch

#: Temperatures searched by :func:`optimal_ece` by default: 0.01, 0.02, ..., 10
#: (the TS-grid of the Rethinking paper, whose §5.1 defines optimal ECE).
RETHINKING_GRID = torch.arange(1, 1001, dtype=torch.float64) / 100


def _scheme(p: Prepared, n_bins: int, binning: str) -> BinScheme:
    return BinScheme.make(n_bins, binning, p.scores.dtype)


def _f(t: Tensor) -> float:
    return float(t.reshape(-1)[0])


def accuracy(scores: Any, labels: Any, *, probs: bool = False) -> float:
    """Fraction of samples whose argmax (ties: lowest index) equals the label."""
    p = prepare(scores, labels, probs=probs)
    return _f(st.mean_stat(p.correct, None, p.n))


def ece(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
) -> float:
    """Expected calibration error with ``n_bins`` equal-width bins (Naeini et al. 2015).

    ECE = Σ_m |B_m|/N · |acc(B_m) − conf(B_m)|, empty bins adding 0 (Dark Side eq. 3).
    """
    p = prepare(scores, labels, probs=probs, binary=binary)
    return _f(st.ece_from_sums(st.topbin_sums(p, _scheme(p, n_bins, binning)), p.n))


def mce(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
) -> float:
    """Maximum calibration error: max over non-empty bins of |acc − conf|."""
    p = prepare(scores, labels, probs=probs, binary=binary)
    return _f(st.mce_from_sums(st.topbin_sums(p, _scheme(p, n_bins, binning))))


def aece(
    scores: Any, labels: Any, *, probs: bool = False, n_bins: int = 15, binary: str = "top-label"
) -> float:
    """Adaptive (equal-mass) ECE: bins of N/M samples each (sizes differ by at most one).

    A run of tied confidences is never split: the boundary moves to the run's end. Unlike
    focal_calibration's ``AdaptiveECELoss``, no sample is dropped (its interpolated lowest
    edge equals the smallest confidence, which its (lo, hi] bins then exclude).
    """
    check_positive_int(n_bins, "n_bins")
    p = prepare(scores, labels, probs=probs, binary=binary)
    size, pos = st.run_sums(p.runs, None)
    return _f(st.ece_from_sums(st.equal_mass_sums(p.runs, size, pos, p.n, n_bins), p.n))


def classwise_ece(
    scores: Any, labels: Any, *, probs: bool = False, n_bins: int = 15, binning: str = "calibkit"
) -> float:
    """Classwise ECE (= static calibration error, SCE; Nixon et al. 2019; Kull et al. 2019).

    For each class k, equal-width bins over p_k of all N samples; acc = fraction with
    y = k, conf = mean p_k; CE_k = Σ_m |B_mk|/N · |acc − conf|; the result is mean_k CE_k
    (Σ_k CE_k with ``binning="kull"``, as Kull et al. 2019 report it).
    """
    p = prepare(scores, labels, probs=probs)
    scheme = _scheme(p, n_bins, binning)
    return _f(st.classwise_ece_from_sums(st.classwise_sums(p, scheme), p.n, scheme))


sce = classwise_ece


def nll(scores: Any, labels: Any, *, probs: bool = False, clip: str | float | None = None) -> float:
    """Mean negative log-likelihood −log p_y (natural log), from log-softmax of the logits.

    With ``probs=True`` a true-class probability of exactly 0 gives ``inf`` (the correct
    value). ``clip`` reproduces tools that clip first: ``"sklearn"`` is scikit-learn's
    ``log_loss`` (p_y clipped to [eps, 1 − eps], eps of the scores' dtype; a calibrator that
    outputs exact zeros then scores −log 2.2e-16 = 36 per such sample in float64 instead of
    infinity, or 708 at calibkit's floor); a number clips p_y to [clip, 1 − clip].
    """
    p = prepare(scores, labels, probs=probs)
    logp = p.label_logp
    if clip is not None:
        if clip == "sklearn":
            eps = torch.finfo(p.scores.dtype).eps
        elif isinstance(clip, int | float) and not isinstance(clip, bool) and 0 < clip < 0.5:
            eps = float(clip)
        else:
            raise ValueError(
                f"clip: expected None, 'sklearn' or a number in (0, 0.5), got {clip!r}"
            )
        logp = logp.clamp(math.log(eps), math.log1p(-eps))
    return _f(st.mean_stat(-logp, None, p.n))


def brier(scores: Any, labels: Any, *, probs: bool = False) -> float:
    """Mean multi-class Brier score Σ_k (p_k − e_yk)², in [0, 2] (papers often print ×100)."""
    p = prepare(scores, labels, probs=probs)
    return _f(st.mean_stat(p.brier_per_sample, None, p.n))


def entropy(scores: Any, labels: Any = None, *, probs: bool = False) -> float:
    """Mean predictive entropy −Σ_k p_k log p_k in nats (labels are not used)."""
    if labels is None:
        s = prepare_scores(scores, probs=probs)
        labels = torch.zeros(len(s), dtype=torch.long)
    p = prepare(scores, labels, probs=probs)
    return _f(st.mean_stat(p.entropy_per_sample, None, p.n))


def refinement_auroc(scores: Any, labels: Any, *, probs: bool = False) -> float:
    """AUROC of the confidence separating correct (positive) from wrong predictions.

    Ties count one half (mid-ranks; Dark Side §3.3). Raises ``ValueError`` when every
    prediction is correct or every one is wrong, where AUROC is undefined.
    """
    p = prepare(scores, labels, probs=probs)
    value = _f(st.auroc_from_runs(*st.run_sums(p.runs, None)))
    if math.isnan(value):
        raise ValueError(_undefined_auroc_message(p))
    return value


def _undefined_auroc_message(p: Prepared) -> str:
    state = "correct" if bool(p.correct.all()) else "wrong"
    return f"refinement AUROC is undefined: all {p.n} predictions are {state}"


def ece_decomposition(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
) -> dict[str, float]:
    """Mean confidence E[C], accuracy E[A], gap E[C] − E[A] and ECE split by bin direction.

    ``overconfident`` sums |B_m|/N (conf − acc) over bins with conf > acc, ``underconfident``
    the same over bins with acc > conf; they add up to the ECE (Dark Side eq. 5–7: when
    every bin is over-confident, ECE = E[C] − E[A]).
    """
    p = prepare(scores, labels, probs=probs, binary=binary)
    return _decomposition(p, st.topbin_sums(p, _scheme(p, n_bins, binning)))


def _decomposition(p: Prepared, sums: Tensor) -> dict[str, float]:
    over, under = st.over_under_from_sums(sums, p.n)
    conf, acc = _f(sums[:, 1].sum(-1)) / p.n, _f(sums[:, 2].sum(-1)) / p.n
    return {
        "mean_confidence": conf,
        "accuracy": acc,
        "gap": conf - acc,
        "overconfident": _f(over),
        "underconfident": _f(under),
    }


def _msp(scores: Any, probs: bool, name: str) -> Tensor:
    s = prepare_scores(scores, probs=probs, name=name)
    return Prepared(s, torch.zeros(len(s), dtype=torch.long, device=s.device), probs).confidence


def _ood_runs(scores: Any, ood_scores: Any, probs: bool) -> Runs:
    s_in = _msp(scores, probs, "scores")
    s_out = _msp(ood_scores, probs, "ood_scores").to(s_in.device)
    is_in = torch.cat(
        [torch.ones_like(s_in, dtype=torch.bool), torch.zeros_like(s_out, dtype=torch.bool)]
    )
    return Runs.from_values(torch.cat([s_in, s_out]), is_in)


def ood_auroc(scores: Any, ood_scores: Any, *, probs: bool = False) -> float:
    """AUROC of the maximum softmax probability, in-distribution positive (MaC-Cal Table 2).

    ``scores`` (N, K) are the in-distribution samples, ``ood_scores`` (M, K) the
    out-of-distribution ones; no labels are needed. Ties count one half.
    """
    return _f(st.auroc_from_runs(*st.run_sums(_ood_runs(scores, ood_scores, probs), None)))


def ood_fpr95(scores: Any, ood_scores: Any, *, probs: bool = False) -> float:
    """False-positive rate on OOD samples at 95 % true-positive rate on in-distribution ones.

    The threshold t is the largest maximum-softmax score with P(s_in >= t) >= 0.95 (the
    ceil(0.95 N)-th largest in-distribution score); FPR = P(s_out >= t). This is
    ``fpr[tpr >= 0.95][0]`` of scikit-learn's ``roc_curve(..., drop_intermediate=False)``.
    """
    s_in = _msp(scores, probs, "scores")
    s_out = _msp(ood_scores, probs, "ood_scores").to(s_in.device)
    return _f(_fpr_at_tpr(s_in, s_out))


def _fpr_at_tpr(s_in: Tensor, s_out: Tensor, weights_in: Tensor | None = None, weights_out=None):
    """(B,) FPR at 95 % TPR; weights are bootstrap multiplicities (B, N_in) and (B, N_out)."""
    s_sorted, order = torch.sort(s_in, descending=True)
    n_in = len(s_in)
    if weights_in is None:
        k = (95 * n_in + 99) // 100  # ceil(0.95 n) in exact integer arithmetic
        t = s_sorted[k - 1 : k]
        return (s_out[None, :] >= t[:, None]).double().mean(1)
    cum = weights_in.double()[:, order].cumsum(1)
    target = torch.full((len(cum), 1), 95.0 * n_in, dtype=torch.float64, device=cum.device)
    k = torch.searchsorted(cum * 100, target)  # first position with TPR >= 95 %, exactly
    t = s_sorted[k.clamp_max(n_in - 1)[:, 0]]
    hit = (s_out[None, :] >= t[:, None]).double()
    return (hit * weights_out).sum(1) / weights_out.sum(1)


def ks_error(scores: Any, labels: Any, *, probs: bool = False, binary: str = "top-label") -> float:
    """Top-label Kolmogorov–Smirnov calibration error (Gupta et al., ICLR 2021, eq. 5).

    max_t |(1/N) Σ_{i: c_i <= t} (a_i − c_i)|, taken at the ends of runs of tied
    confidences so that the result does not depend on the order of tied samples (Gupta
    et al.'s code takes it after every sorted sample; without ties the two agree).
    """
    p = prepare(scores, labels, probs=probs, binary=binary)
    return _f(st.ks_from_runs(p.runs, *st.run_sums(p.runs, None), p.n))


def smooth_ece(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    sigma: float | None = None,
    binary: str = "top-label",
) -> float:
    """Smooth ECE (Błasiok & Nakkiran 2024) with the fixed-point bandwidth, or ``sigma``.

    See :mod:`calibkit.metrics.smooth` for the computation and how it relates to relplot.
    """
    if sigma is not None and not (isinstance(sigma, float | int) and 0 < sigma <= 1):
        raise ValueError(f"sigma: expected a bandwidth in (0, 1], got {sigma!r}")
    p = prepare(scores, labels, probs=probs, binary=binary)
    conf, outcome = p.cal_pair
    return _f(smooth_ece_batch(conf, outcome, sigma=sigma)[0])


def optimal_ece(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
    grid: Any = None,
    return_temperature: bool = False,
) -> float | tuple[float, float]:
    """ECE after temperature scaling with the temperature chosen on these samples.

    The oracle lower bound of TS-grid that the Rethinking paper (§5.1) calls *optimal ECE*:
    min over T in ``grid`` (default 0.01, 0.02, ..., 10) of ECE(z / T). Ties go to the
    smallest T. With ``return_temperature=True`` returns ``(ece, T)``.
    """
    p = prepare(scores, labels, probs=probs, binary=binary)
    temps = _check_grid(grid)
    best, value = best_temperature(p, _scheme(p, n_bins, binning), temps)
    return (value, float(temps[best])) if return_temperature else value


def _check_grid(grid: Any) -> Tensor:
    if grid is None:
        return RETHINKING_GRID
    t = torch.as_tensor(grid, dtype=torch.float64).reshape(-1)
    if t.numel() == 0:
        raise ValueError("grid: empty; pass at least one temperature")
    if not bool(torch.isfinite(t).all()) or bool((t <= 0).any()):
        raise ValueError("grid: temperatures must be finite and > 0")
    return t


def best_temperature(p: Prepared, scheme: BinScheme, temps: Tensor) -> tuple[int, float]:
    """Index in ``temps`` of the temperature of least ECE, and that ECE (ties: smallest T).

    Equals the argmin of :func:`_ece_over_temperatures` over the whole grid (tested against
    it and a brute-force loop) but scans exactly only the temperatures that can win. With
    f(β) = log Σⱼ exp(dⱼ β), β = 1/T and dⱼ = zⱼ − max z, each confidence is c = exp(−f(β)),
    increasing in β, and f is convex. Confidences are computed exactly at every
    ``_ANCHOR_STRIDE``-th temperature of the β-sorted grid (the anchors), then:

    1. between two anchors c lies between its values at both ends, which bounds the ECE
       over the whole bracket; brackets that cannot beat the best anchor are dropped;
    2. inside a kept bracket f lies above the tangents at both anchors and below their
       chord, which brackets every confidence tightly; where a bracket crosses a bin edge
       the confidence is computed exactly, so the ECE at each temperature is bracketed;
    3. only temperatures whose lower bound reaches the least upper bound are scanned exactly.

    Moving a sample's c − o between two bins changes the ECE by at most 2 |c − o| / n and
    moving c by δ changes it by at most |δ| / n; a slack of 1e-5 on each confidence covers
    the float32 rounding of the exact scan.
    """
    if p.binary == "positive" or len(temps) < 64:
        eces = _ece_over_temperatures(p, scheme, temps)
        return _argmin_smallest_t(eces, temps)
    z = p.scores.log() if p.is_probs else p.scores
    d = (z - z.amax(1, keepdim=True)).T.contiguous()  # (K, N) as in the exact scan
    dev, m, stride = d.device, len(temps), _ANCHOR_STRIDE
    order = torch.argsort(1.0 / temps).to(dev)  # ascending β, so ascending confidences
    beta = 1.0 / temps.to(dev)[order]
    anchors = torch.unique(torch.arange(0, m + stride - 1, stride, device=dev).clamp_(max=m - 1))
    f, df = _log_partition(d.float(), beta[anchors])  # (A, N) float32 each, as bounds need
    outcome = p.cal_pair[1].to(f.dtype)
    kept = torch.nonzero(_brackets_that_can_win(torch.exp(-f), outcome, scheme))[:, 0]
    est = torch.full((m,), torch.inf, dtype=torch.float64, device=dev)
    bound = torch.zeros_like(est)
    r = torch.arange(stride + 1, device=dev)
    group = max(1, (1 << 19) // (p.n * (stride + 1)))  # brackets per pass, sized for the cache
    for j in kept.split(group):
        a, b = anchors[j], anchors[j + 1]
        pos = (a[:, None] + r).clamp_(max=m - 1)  # (J, S + 1) positions in the sorted grid
        valid = ((pos < b[:, None]) | ((pos == m - 1) & (b[:, None] == m - 1))).reshape(-1)
        x = beta[pos].to(f.dtype)[..., None]
        ba, bb = x[:, :1], beta[b].to(f.dtype)[:, None, None]
        fa, fb, ga, gb = f[j, None], f[j + 1, None], df[j, None], df[j + 1, None]
        upper = fa + (fb - fa) / (bb - ba) * (x - ba)  # chord: f lies below it ...
        lower = torch.maximum(fa + ga * (x - ba), fb + gb * (x - bb)).minimum(upper)  # tangents
        c_lo = torch.exp(-upper).sub_(_CONF_SLACK)  # ... so c = exp(-f) lies in [c_lo, c_hi]
        c_hi = torch.exp(-lower).add_(_CONF_SLACK)
        e, h = _bracketed_ece(c_lo, c_hi, outcome, scheme, d, beta[pos])
        est[pos.reshape(-1)[valid]] = e[valid]
        bound[pos.reshape(-1)[valid]] = h[valid]
    cand = est - bound <= (est + bound).min() + 1e-12
    picked = order[cand]
    eces = _ece_over_temperatures(p, scheme, temps[picked.cpu()])
    i, value = _argmin_smallest_t(eces, temps[picked.cpu()])
    return int(picked[i]), value


_ANCHOR_STRIDE = 12  # exact confidences at every 12th temperature of the β-sorted grid
_CONF_SLACK = 1e-5  # covers float32 rounding of the exact scan's confidences


def _nominal_bin(scheme: BinScheme, c: Tensor) -> Tensor:
    """Bin of c from the nominal edges k / M (float). The true edges differ by ~1e-7, far
    inside the slack: equal bins at both ends of a slack-widened bracket are exact."""
    return (c * scheme.n_bins).floor_().clamp_(0, scheme.n_slots - 1)


def _binned_gaps(scheme: BinScheme, bins: Tensor, gaps: Tensor) -> Tensor:
    """Σ_b |Σ_{i in b} gapᵢ| / N over the last axis, per leading index (float64 sums)."""
    lead = bins.shape[:-1].numel()
    offsets = scheme.n_slots * torch.arange(lead, device=bins.device).reshape(*bins.shape[:-1], 1)
    sums = torch.zeros(lead * scheme.n_slots, dtype=torch.float64, device=bins.device)
    sums.index_add_(0, bins.long().add_(offsets).reshape(-1), gaps.reshape(-1).double())
    return sums.reshape(lead, scheme.n_slots).abs().sum(1) / bins.shape[-1]


def _brackets_that_can_win(c: Tensor, outcome: Tensor, scheme: BinScheme) -> Tensor:
    """(A − 1,) bool: brackets between anchors whose least possible ECE reaches the best
    anchor's greatest possible one. ``c``: (A, N) confidences at the anchors."""
    s = _CONF_SLACK
    ref = _binned_gaps(scheme, _nominal_bin(scheme, c), c - outcome)  # ECE at each anchor
    far = (c - outcome).abs() + s
    crossed = _nominal_bin(scheme, c - s) != _nominal_bin(scheme, c + s)
    at_anchor = ref + (2 * s + 2 * crossed * far).double().mean(1)
    lo, hi = c[:-1], c[1:]  # c rises across a bracket
    crossed = _nominal_bin(scheme, lo - s) != _nominal_bin(scheme, hi + s)
    spread = (hi - lo).abs() + 2 * s + 2 * crossed * torch.maximum(far[:-1], far[1:])
    return ref[:-1] - spread.double().mean(1) <= at_anchor.min() + 1e-12


def _bracketed_ece(
    c_lo: Tensor, c_hi: Tensor, outcome: Tensor, scheme: BinScheme, d: Tensor, beta: Tensor
) -> tuple[Tensor, Tensor]:
    """Estimated ECE and its error bound, flat over the leading axes of (..., N) brackets
    [c_lo, c_hi] of each confidence; ``beta`` (...) gives the exact β of each row."""
    bins = _nominal_bin(scheme, c_lo)
    straddle = bins != _nominal_bin(scheme, c_hi)
    mid, half = (c_lo + c_hi).mul_(0.5), (c_hi - c_lo).mul_(0.5)
    where = torch.nonzero(straddle, as_tuple=True)
    if len(where[0]):  # brackets across an edge: those confidences exactly (float64)
        si = where[-1]
        c = torch.exp(d[:, si].double() * beta[where[:-1]]).sum(0).reciprocal_()
        k_lo, _ = scheme.assign(c - _CONF_SLACK)
        k_hi, _ = scheme.assign(c + _CONF_SLACK)
        either = (k_lo != k_hi).double()  # within the slack of an edge: either bin
        bins[where], mid[where] = k_lo.to(bins.dtype), c.to(mid.dtype)
        spread = _CONF_SLACK + either * 2 * ((c - outcome[si].double()).abs() + _CONF_SLACK)
        half[where] = spread.to(half.dtype)
    est = _binned_gaps(scheme, bins, mid.sub_(outcome))
    return est, half.double().mean(-1).reshape(-1) + 1e-6  # + float32 rounding of mid


def _log_partition(d: Tensor, beta: Tensor) -> tuple[Tensor, Tensor]:
    """f(β) = log Σⱼ exp(dⱼ β) and f'(β) per sample, (len(β), N) float32, from (K, N) ``d``."""
    k, n = d.shape
    f = torch.empty(len(beta), n, dtype=d.dtype, device=d.device)
    df = torch.empty_like(f)
    beta = beta.to(d.dtype)
    rows = max(1, min(n, (1 << 16) // k))  # blocked as in _ece_over_temperatures
    group = max(1, (1 << 18) // (k * rows))
    for r0 in range(0, n, rows):
        block = d[:, r0 : r0 + rows]
        for t0 in range(0, len(beta), group):
            e = torch.exp(block[None] * beta[t0 : t0 + group, None, None])
            total = e.sum(1)
            f[t0 : t0 + group, r0 : r0 + rows] = total.log()
            df[t0 : t0 + group, r0 : r0 + rows] = e.mul_(block).sum(1) / total
    return f, df


def _argmin_smallest_t(eces: Tensor, temps: Tensor) -> tuple[int, float]:
    least = eces.min()
    ties = torch.nonzero(eces == least)[:, 0]
    i = int(ties[torch.argmin(temps[ties])])
    return i, float(eces[i])


def _ece_over_temperatures(p: Prepared, scheme: BinScheme, temps: Tensor) -> Tensor:
    """(T,) ECE of z / T for every temperature; the argmax (so correctness) never changes.

    The full scan, one pass over the (N, K) logits per temperature (:func:`best_temperature`
    avoids most of it); the logits are laid out (K, N) so that each sum over classes runs
    along contiguous memory. The per-temperature
    confidences are computed in the scores' precision (float32 sums of exp((z − max) / T)),
    which moves a confidence by about 1e-7: far below a bin's width.
    """
    z = p.scores.log() if p.is_probs else p.scores  # log-probabilities are valid logits
    if p.binary == "positive":
        d = (z[:, 0] - z[:, 1])[None]  # P(class 1) = 1 / (1 + exp(d / T))
    else:
        d = (z - z.amax(1, keepdim=True)).T.contiguous()  # (K, N), <= 0; c = 1 / sum exp(d / T)
    _, outcome = p.cal_pair
    outcome = outcome.double()
    k, n, s = d.shape[0], p.n, scheme.n_slots
    inv = (1.0 / temps).to(device=d.device, dtype=d.dtype)
    rows = max(1, min(n, (1 << 16) // k))  # a block of samples stays in cache ...
    group = max(1, (1 << 18) // (k * rows))  # ... for a group of temperatures at a time
    offsets = s * torch.arange(len(inv), device=d.device)[:, None]
    totals = torch.zeros(2, len(inv) * s, dtype=torch.float64, device=d.device)
    for r0 in range(0, n, rows):
        block, out_block = d[:, r0 : r0 + rows], outcome[r0 : r0 + rows]
        for t0 in range(0, len(inv), group):
            t = inv[t0 : t0 + group]
            if p.binary == "positive":
                conf = torch.sigmoid(-block * t[:, None])
            else:
                conf = torch.exp(block[None] * t[:, None, None]).sum(1).reciprocal_()
            idx, used = scheme.assign(conf)
            cell = (idx + offsets[t0 : t0 + len(t)]).reshape(-1)
            totals[0].index_add_(0, cell, used.reshape(-1))
            totals[1].index_add_(0, cell, out_block.repeat(len(t)))
    sc, so = totals.reshape(2, len(inv), s)
    return (so - sc).abs().sum(1) / n
