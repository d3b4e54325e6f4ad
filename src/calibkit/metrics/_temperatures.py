"""The ECE over a grid of temperatures, behind optimal ECE (Rethinking §5.1) and the
``ts-grid`` calibrator (docs/methods.md §2): the papers' grids, the full scan
(:func:`ece_over_temperatures`) and the exact search that scans only the temperatures that
can win (:func:`best_temperature`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ._binning import BinScheme
from ._inputs import Prepared

#: The temperature grids of the papers (docs/methods.md §2) as (n, d): T = k / d for k = 1..n,
#: each the nearest double to its decimal value
TEMPERATURE_GRIDS = {
    "neural-clamping": (5000, 1000),  # 0.001 ... 5, step 0.001
    "rethinking": (1000, 100),  # §5.1: 0.01 ... 10, step 0.01
    "focal-calibration": (100, 10),  # 0.1 ... 10, step 0.1
}


def preset_grid(name: str) -> Tensor:
    """The temperatures (float64) of a preset of :data:`TEMPERATURE_GRIDS`."""
    if name not in TEMPERATURE_GRIDS:
        raise ValueError(
            f"grid: unknown preset {name!r}; choose one of {', '.join(TEMPERATURE_GRIDS)} or a list"
        )
    n, d = TEMPERATURE_GRIDS[name]
    return torch.arange(1, n + 1, dtype=torch.float64) / d


RETHINKING_GRID = preset_grid("rethinking")


def check_grid(grid: Any) -> Tensor:
    """A temperature grid (float64): ``grid``, checked, or the Rethinking grid for None."""
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

    Equals the argmin of :func:`ece_over_temperatures` over the whole grid (tested against
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
        eces = ece_over_temperatures(p, scheme, temps)
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
    eces = ece_over_temperatures(p, scheme, temps[picked.cpu()])
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
    rows = max(1, min(n, (1 << 16) // k))  # blocked as in ece_over_temperatures
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
    eces, temps = eces.cpu(), temps.cpu()  # a few hundred values: decided on the host
    least = eces.min()
    ties = torch.nonzero(eces == least)[:, 0]
    i = int(ties[torch.argmin(temps[ties])])
    return i, float(eces[i])


def ece_over_temperatures(p: Prepared, scheme: BinScheme, temps: Tensor) -> Tensor:
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
