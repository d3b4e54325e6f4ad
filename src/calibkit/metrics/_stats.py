"""Sufficient statistics of every metric, for one sample or a batch of weighted resamples.

Each function takes an optional ``weights`` tensor of shape (B, N): row b gives the
multiplicity of each sample in resample b (bootstrap). ``weights=None`` means one
resample with unit weights, computed by the cheaper unweighted route. Results always
carry a leading dimension B (1 when unweighted), so the formulas below serve the plain
metrics, the bootstrap and the streaming meter alike.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings

import numpy as np
import torch
from torch import Tensor

from ._binning import BinScheme
from ._inputs import Prepared, Runs


def _wsum(values: Tensor, weights: Tensor | None) -> Tensor:
    """(B,) weighted sums of a per-sample vector (float64)."""
    v = values.double()
    if weights is None:
        return v.sum()[None]
    return weights @ v


def mean_stat(values: Tensor, weights: Tensor | None, n: int) -> Tensor:
    """(B,) weighted mean of a per-sample vector; every resample has total weight n."""
    return _wsum(values, weights) / n


def binned_sums(idx: Tensor, conf: Tensor, outcome: Tensor, n_slots: int) -> Tensor:
    """(1, 3, S) per-bin count, sum of confidence and sum of outcome."""
    return torch.stack(
        [
            torch.bincount(idx, minlength=n_slots).double(),
            torch.bincount(idx, conf.double(), minlength=n_slots),
            torch.bincount(idx, outcome.double(), minlength=n_slots),
        ]
    )[None]


def _bin_features(idx: Tensor, conf: Tensor, outcome: Tensor, n_slots: int) -> Tensor:
    """(N, 3S) per-sample contributions to (count, Σ conf, Σ outcome) of each bin."""
    onehot = torch.zeros(len(idx), n_slots, dtype=torch.float64, device=idx.device)
    onehot.scatter_(1, idx[:, None], 1.0)
    return torch.cat(
        [onehot, onehot * conf.double()[:, None], onehot * outcome.double()[:, None]], 1
    )


def topbin_sums(p: Prepared, scheme: BinScheme, weights: Tensor | None = None) -> Tensor:
    """(B, 3, S) equal-width bin sums of the top-label calibration pair (unweighted: cached)."""
    key = ("topbin", scheme)
    if weights is None and key in p.cache:
        return p.cache[key]
    if weights is not None and ("topbin-features", scheme) in p.cache:
        feats = p.cache["topbin-features", scheme]
        return (weights.double() @ feats).reshape(len(weights), 3, scheme.n_slots)
    conf, outcome = p.cal_pair
    idx, used = scheme.assign(conf)
    if weights is None:
        p.cache[key] = binned_sums(idx, used, outcome, scheme.n_slots)
        return p.cache[key]
    p.cache["topbin-features", scheme] = _bin_features(idx, used, outcome, scheme.n_slots)
    return topbin_sums(p, scheme, weights)


def classwise_sums(p: Prepared, scheme: BinScheme, weights: Tensor | None = None) -> Tensor:
    """(B, 3, K, S) per-class bin count, sum of p_k and count of y = k.

    Only entries outside the first bin are binned one by one (the scan collects them); the
    first bin's count and sum are the class totals minus the rest, which saves a pass over
    the (mostly tiny) probabilities of many-class problems. Under ``binning="netcal"`` the
    first bin's sum is not clipped at eps (netcal has no classwise metric to match).
    """
    r = p.scan(classwise=scheme)
    n, k, s = p.n, p.k, scheme.n_slots
    key = ("classwise-matrix", scheme)
    if weights is None or key not in p.cache:
        idx, used = scheme.assign(r.big_vals)
        cell = r.big_cols * s + idx
        cell_y = p.labels * s + scheme.assign(r.label_vals)[0]
    if weights is None:
        count = torch.bincount(cell, minlength=k * s).double().reshape(k, s)
        sump = torch.bincount(cell, used, minlength=k * s).reshape(k, s)
        sumy = torch.bincount(cell_y, minlength=k * s).double().reshape(k, s)
        count[:, 0] = n - count[:, 1:].sum(1)
        sump[:, 0] = r.col_sum - sump[:, 1:].sum(1)
        return torch.stack([count, sump, sumy])[None]
    if key not in p.cache:
        p.cache[key] = _classwise_matrix(r.big_rows, cell, used, cell_y, n, k * s)
    w = weights.double()
    count, sump, sumy = (p.cache[key] @ w.T).T.reshape(len(w), 3, k, s).unbind(1)
    count[:, :, 0] = n - count[:, :, 1:].sum(2)
    if "probs64" not in p.cache:
        p.cache["probs64"] = p.probs.double()
    sump[:, :, 0] = w @ p.cache["probs64"] - sump[:, :, 1:].sum(2)
    return torch.stack([count, sump, sumy], 1)


def _classwise_matrix(
    rows: Tensor, cell: Tensor, used: Tensor, cell_y: Tensor, n: int, cells: int
) -> Tensor:
    """(3 C, N) sparse CSR matrix whose product with (N, B) weights gives, per cell (class,
    bin), the weighted count and Σ p of the binned entries and the weighted count of labels.

    One sparse product replaces three scatters of (E, B) gathered weight rows: about 2.5x
    faster at N = 1e5. Each output row adds its samples in ascending order, as the scatters
    did.
    """
    dev = cell.device
    ones = torch.ones(len(cell), dtype=torch.float64, device=dev)
    index = torch.stack(
        [
            torch.cat([cell, cell + cells, cell_y + 2 * cells]),
            torch.cat([rows, rows, torch.arange(n, device=dev)]),
        ]
    )
    values = torch.cat([ones, used, torch.ones(n, dtype=torch.float64, device=dev)])
    coo = torch.sparse_coo_tensor(index, values, (3 * cells, n), check_invariants=False)
    with warnings.catch_warnings():  # "sparse CSR support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        return coo.coalesce().to_sparse_csr()


def run_sums(runs: Runs, weights: Tensor | None) -> tuple[Tensor, Tensor]:
    """(B, R) weighted size and number of positive outcomes of each tie run."""
    if weights is None:
        return runs.sizes[None], runs.positives[None]
    w = weights.double()
    w = w.gather(1, runs.order.expand(len(w), -1))  # 2-3x faster than w[:, order]
    if runs.n_runs == len(runs.order):  # no ties: every run is one sample
        return w, w * runs.outcome_sorted
    size = torch.zeros(len(w), runs.n_runs, dtype=torch.float64, device=w.device)
    size.index_add_(1, runs.run_of, w)
    pos = torch.zeros_like(size).index_add_(1, runs.run_of, w * runs.outcome_sorted.double())
    return size, pos


def equal_mass_sums(runs: Runs, size: Tensor, pos: Tensor, n: int, n_bins: int) -> Tensor:
    """(B, 3, M) equal-mass bin sums from per-run weighted sizes and positives.

    Bin m (0-based) starts at the first run with at least floor(m N / M) samples before it
    (:func:`~calibkit.metrics._binning.equal_mass_bins`: bins differ in size by at most one
    and a run of ties joins the lower bin). The sums are differences of cumulative sums at
    those starts, found by binary search: sizes are whole numbers, so the comparison is
    exact, and each sum is within 1e-16 × N of a direct one.
    """
    # three (B, R) cumulative sums, not one stacked (3, B, R): each stays under glibc's
    # largest mmap threshold at the bootstrap's chunk size (see calibkit._allocator)
    cums = [t.cumsum(1) for t in (size, size * runs.values, pos)]
    before = cums[0] - size
    b, r = size.shape
    firsts = torch.tensor(
        [(m * n) // n_bins for m in range(1, n_bins)], dtype=before.dtype, device=before.device
    )
    starts = torch.searchsorted(before, firsts.expand(b, n_bins - 1).contiguous())  # (B, M-1)
    edges = torch.cat([starts, torch.full((b, 1), r, device=starts.device)], 1)  # (B, M)
    ends = (edges - 1).clamp_(min=0)
    at = torch.stack([c.gather(1, ends) for c in cums])  # (3, B, M) sums up to each end
    at = torch.where(edges > 0, at, 0.0)
    return torch.diff(at, dim=2, prepend=torch.zeros_like(at[..., :1])).transpose(0, 1)


# ----------------------------------------------------------------------------- formulas


def ece_from_sums(sums: Tensor, n: int) -> Tensor:
    """(B,) sum_m |B_m|/N |acc_m - conf_m| = sum_m |sum_{i in m} (a_i - c_i)| / N."""
    return (sums[:, 2] - sums[:, 1]).abs().sum(-1) / n


def aece_from_runs(
    runs: Runs, size: Tensor, pos: Tensor, n: int, n_bins: int, norm: str = "l1"
) -> Tensor:
    """(B,) adaptive calibration error of ``n_bins`` equal-mass bins over the tie runs: the
    ECE of those bins (``norm="l1"``), their RMS error (``"l2"``) or their MCE (``"max"``)."""
    return reduce_bins(equal_mass_sums(runs, size, pos, n, n_bins), n, norm)


def reduce_bins(sums: Tensor, n: int, norm: str) -> Tensor:
    """(B,) the gaps of (B, 3, M) bin sums reduced by ``norm``: 'l1' (ECE), 'l2' (RMS
    calibration error) or 'max' (MCE)."""
    if norm == "l2":
        return rms_from_sums(sums, n)
    if norm == "max":
        return mce_from_sums(sums)
    return ece_from_sums(sums, n)


def rms_from_sums(
    sums: Tensor, n: int, *, debias: bool = False, one_sample_bins: str = "keep"
) -> Tensor:
    """(B,) RMS (L2) calibration error sqrt(sum_m |B_m|/N (acc_m - conf_m)^2); with
    ``debias``, Kumar et al. (2019, §5)'s estimator: each bin's squared gap less the
    variance of its accuracy, acc_m (1 - acc_m) / (|B_m| - 1), and the sum clipped at 0
    before the root (a sample at calibration can come out negative). A bin of one sample has
    no variance estimate: ``one_sample_bins="keep"`` keeps its plug-in squared gap
    (torchmetrics' reading, the default), ``"drop"`` counts it 0, as Kumar et al.'s
    ``unbiased_square_ce`` does."""
    per_bin = squared_cells(*sums.unbind(1), debias=debias, one_sample_bins=one_sample_bins)
    return (per_bin.sum(-1) / n).clamp_min(0).sqrt()


def squared_cells(
    count: Tensor, sump: Tensor, sumy: Tensor, *, debias: bool, one_sample_bins: str = "keep"
) -> Tensor:
    """Each cell's |B| (acc − conf)², with ``debias`` less |B| acc (1 − acc) / (|B| − 1)
    (Kumar et al. 2019, §5): 0 variance for a cell of one sample, which keeps its plug-in
    squared gap (``one_sample_bins="keep"``) or counts 0 (``"drop"``, Kumar et al.'s code)."""
    safe = count.clamp_min(1e-300)
    cells = (sumy - sump) ** 2 / safe
    if not debias:
        return cells
    acc = sumy / safe
    var = torch.where(count > 1, acc * (1 - acc) / (count - 1).clamp_min(1e-300), 0.0)
    cells = cells - count * var
    return torch.where(count == 1, 0.0, cells) if one_sample_bins == "drop" else cells


#: bisection halvings, then Newton steps, of :func:`debiased_l1_cells`: 24 halvings bracket
#: the root within 6e-8 of |d|; from the bracket's right end Newton's method on the convex,
#: rising m(g) − |d| descends monotonically onto the root, and 3 steps reach float64's
#: resolution (tests/metrics/test_debiased.py: 1e-12 against the closed form)
DEBIAS_HALVINGS, DEBIAS_NEWTON = 24, 3


def debiased_l1_cells(count: Tensor, sump: Tensor, sumy: Tensor) -> Tensor:
    """|B_c| · ĝ_c for each cell c, from its count, sum of probability and sum of outcome
    (tensors of one shape). Divide by N for the cell's share of a debiased binned L1
    error (docs/metrics.md, "Debiased binned errors").

    A cell's observed gap d = acc − conf is its true gap g plus the noise of its accuracy,
    approximately normal with variance σ² = acc(1 − acc)/(|B| − 1) (Kumar et al.'s
    estimate; 0 for a cell of one sample). The plug-in |d| then has mean
    m(g) = σ√(2/π) exp(−g²/2σ²) + g erf(g/(σ√2)) (the folded normal), above g by up to
    σ√(2/π) at g = 0. ĝ solves m(ĝ) = |d| (bisection, then Newton; m rises in g and
    m(g) ≥ g, so the root lies in [0, |d|]), and is 0 where |d| ≤ m(0): a method-of-moments
    estimate of |g|."""
    safe = count.clamp_min(1e-300)
    d = ((sumy - sump) / safe).abs()
    acc = sumy / safe
    sigma = torch.where(count > 1, acc * (1 - acc) / (count - 1).clamp_min(1e-300), 0.0).sqrt()
    root2 = math.sqrt(2.0)

    def folded_mean(g: Tensor) -> Tensor:
        z = g / sigma.clamp_min(1e-300)
        noise = sigma * math.sqrt(2 / math.pi) * torch.exp(-z * z / 2)
        return torch.where(sigma > 0, noise + g * torch.erf(z / root2), g)

    lo, hi = torch.zeros_like(d), d.clone()
    for _ in range(DEBIAS_HALVINGS):
        mid = (lo + hi) / 2
        above = folded_mean(mid) > d
        hi, lo = torch.where(above, mid, hi), torch.where(above, lo, mid)
    g = hi  # right of the root: Newton's steps on a convex rising function stay right of it
    for _ in range(DEBIAS_NEWTON):
        slope = torch.erf(g / (sigma.clamp_min(1e-300) * root2))
        step = (folded_mean(g) - d) / slope.clamp_min(1e-300)
        g = torch.where(sigma > 0, (g - step).clamp(lo, hi), g)
    g = torch.where(folded_mean(torch.zeros_like(d)) >= d, torch.zeros_like(d), g)
    return count * g


def debiased_ece_from_sums(sums: Tensor, n: int) -> Tensor:
    """(B,) Σ_m |B_m|/N · ĝ_m over top-label bins (:func:`debiased_l1_cells`)."""
    return debiased_l1_cells(*sums.unbind(1)).sum(-1) / n


def mce_from_sums(sums: Tensor) -> Tensor:
    """(B,) max over non-empty bins of |acc_m - conf_m|."""
    count = sums[:, 0]
    gap = (sums[:, 2] - sums[:, 1]).abs() / count.clamp_min(1e-300)
    return torch.where(count > 0, gap, torch.zeros_like(gap)).amax(-1)


def ace_from_sums(sums: Tensor) -> Tensor:
    """(B,) average calibration error (Neumann et al. 2018; netcal's ``ACE``): the plain mean
    of |acc_m - conf_m| over the non-empty bins, every bin counting once whatever its size;
    0 when every bin is empty (a resample of no sample)."""
    count = sums[:, 0]
    full = count > 0
    gap = (sums[:, 2] - sums[:, 1]).abs() / count.clamp_min(1e-300)
    total = torch.where(full, gap, torch.zeros_like(gap)).sum(-1)
    return total / full.sum(-1).clamp_min(1)


def over_under_from_sums(sums: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """(B,) ECE parts from over-confident (conf > acc) and under-confident bins."""
    d = (sums[:, 1] - sums[:, 2]) / n
    return d.clamp_min(0).sum(-1), (-d).clamp_min(0).sum(-1)


def classwise_ece_from_sums(sums: Tensor, n: int, scheme: BinScheme | None = None) -> Tensor:
    """(B,) mean over classes of sum_m |B_mk|/N |acc_mk - conf_mk| (sums: (B, 3, K, S));
    the sum over classes under Kull et al.'s convention."""
    return over_classes((sums[:, 2] - sums[:, 1]).abs().sum(-1) / n, scheme)


def classwise_squared_from_sums(
    sums: Tensor,
    n: int,
    scheme: BinScheme | None = None,
    *,
    debias: bool = False,
    one_sample_bins: str = "keep",
) -> Tensor:
    """(B,) over classes of sum_m |B_mk|/N (acc_mk − conf_mk)²: the ``power=2`` form of
    :func:`classwise_ece_from_sums` (Kull et al.'s ECE_CW2), no square root taken; with
    ``debias``, each cell's squared gap less its variance (:func:`squared_cells`), whose
    root (clipped at 0) is Kumar et al.'s marginal debiased L2 calibration error."""
    cells = squared_cells(*sums.unbind(1), debias=debias, one_sample_bins=one_sample_bins)
    return over_classes(cells.sum(-1) / n, scheme)


def debiased_classwise_from_sums(sums: Tensor, n: int, scheme: BinScheme | None = None) -> Tensor:
    """(B,) :func:`classwise_ece_from_sums` with each class-bin cell's |gap| replaced by its
    debiased estimate (:func:`debiased_l1_cells`)."""
    return over_classes(debiased_l1_cells(*sums.unbind(1)).sum(-1) / n, scheme)


def over_classes(per_class: Tensor, scheme: BinScheme | None) -> Tensor:
    """Per-class errors (..., K) reduced over classes: the mean, or the sum under Kull et
    al.'s convention (``binning="kull"``), as they report classwise ECE and ECE_FULL."""
    kull = scheme is not None and scheme.convention == "kull"
    return per_class.sum(-1) if kull else per_class.mean(-1)


def auroc_from_runs(size: Tensor, pos: Tensor) -> Tensor:
    """(B,) AUROC of the score for positive vs negative outcomes; ties count one half.

    NaN where a resample has no positive or no negative outcome (undefined).
    """
    neg = size - pos
    neg_before = neg.cumsum(1) - neg
    num = (pos * (neg_before + 0.5 * neg)).sum(1)
    den = pos.sum(1) * neg.sum(1)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.full_like(num, float("nan")))


def aupr_from_runs(size: Tensor, pos: Tensor) -> Tensor:
    """(B,) average precision of the score for positive outcomes (area under the
    precision-recall curve as scikit-learn's ``average_precision_score``: Σ over thresholds,
    from the highest score down, of the recall gained × the precision there; a run of tied
    scores is one threshold)."""
    s, p = size.flip(1), pos.flip(1)
    precision = p.cumsum(1) / s.cumsum(1).clamp_min(1e-300)
    total = p.sum(1)
    ap = (p * precision).sum(1) / total.clamp_min(1e-300)
    return torch.where(total > 0, ap, torch.full_like(ap, float("nan")))


def aurc_from_runs(size: Tensor, pos: Tensor) -> Tensor:
    """(B,) area under the risk-coverage curve (Geifman et al. 2019): the mean, over the
    coverages k = 1..N, of the error rate of the k most confident samples. Within a run of
    tied confidences the error rate is its expectation over the run's orders, so the value
    does not depend on how ties are sorted. Every row must hold the same total N (one
    sample, or resamples of it).

    With x_t the error of the t-th most confident sample, AURC = (1/N) Σ_k (1/k) Σ_{t<=k}
    x_t = (1/N) Σ_t x_t T(t), T(t) = Σ_{k=t..N} 1/k. Under a random order of a run of s
    samples with e errors after K more confident ones, each of its places has E[x_t] = e/s,
    so the run adds (e/s)(C(K + s) − C(K)), with C(j) = Σ_{t<=j} T(t) from a table: two
    look-ups per run and no pass in reverse order.
    """
    n = round(float(size[0].sum()))
    table = _tail_harmonic_sums(n, size.device)  # table[j] = C(N − j)
    after = size.cumsum(1)  # samples at or below each run's confidence: K = N − after
    hi = after.long()
    lo = hi - size.long()
    rate = (size - pos) / size.clamp_min(1e-300)
    return (rate * (table[lo] - table[hi])).sum(1) / n


def focal_calibration_aece(conf: Tensor, correct: Tensor, n_bins: int) -> float:
    """Adaptive ECE as Mukhoti et al.'s focal_calibration code computes it
    (``AdaptiveECELoss``; the code MaC-Cal builds on): edge j is the sorted confidences
    linearly interpolated at position j·N/M (0-based, so one sample later than an
    equal-mass split) and clamped to the largest; bins are (lo, hi], so the sample at the
    lowest edge, the smallest confidence, is in no bin. ECE = Σ_bins n_b/N |conf − acc|."""
    c = conf.double().cpu().numpy()
    a = correct.double().cpu().numpy()
    n = len(c)
    edges = np.interp(np.linspace(0, n, n_bins + 1), np.arange(n), np.sort(c))
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        inside = (c > lo) & (c <= hi)
        if inside.any():
            total += abs(c[inside].mean() - a[inside].mean()) * inside.mean()
    return total


def spline_calibration_ks(conf: Tensor, correct: Tensor) -> float:
    """Top-label KS error as Gupta et al.'s code computes it (kartikgupta-at-anu/
    spline-calibration, ``ks_error``): the samples sorted by ``numpy.argsort`` of the
    confidences (its default sort, which leaves tied samples in an order of its own), then
    the largest |Σ (c_i − a_i)| / N over every prefix, tie runs split included."""
    c = conf.double().cpu().numpy()
    a = correct.double().cpu().numpy()
    order = c.argsort()
    return float(np.abs(np.cumsum(c[order] - a[order])).max() / len(c))


def check_adaptive(norm: str, convention: str) -> None:
    """Refuses in one line a norm that the adaptive convention's peer does not have:
    focal_calibration's ``AdaptiveECELoss`` has the l1 norm only."""
    if convention == "focal-calibration" and norm != "l1":
        raise ValueError(
            f"norm={norm!r}: convention='focal-calibration' (AdaptiveECELoss) has the l1 norm "
            "only; use convention='calibkit' or 'torch-uncertainty'"
        )


def peer_aece(conf: Tensor, correct: Tensor, n_bins: int, norm: str, convention: str) -> float:
    """The adaptive calibration error under a peer's convention ('focal-calibration' or
    'torch-uncertainty', :data:`~calibkit._metric_settings.AECE_CONVENTIONS`)."""
    if convention == "focal-calibration":
        return focal_calibration_aece(conf, correct, n_bins)
    return torch_uncertainty_aece(conf, correct, n_bins, norm)


def torch_uncertainty_aece(conf: Tensor, correct: Tensor, n_bins: int, norm: str) -> float:
    """Adaptive calibration error as TorchUncertainty's ``AdaptiveCalibrationError``
    computes it (``_equal_binning_bucketize``): the confidences sorted by ``torch.sort``,
    cut by ``tensor_split`` into ``n_bins`` runs of consecutive samples (the first N mod M
    one sample larger, tied confidences split across bins where a cut falls among them),
    each gap weighted by its bin's share, then reduced by ``norm`` (:func:`reduce_bins`)."""
    conf, order = torch.sort(conf.double())
    hit = correct.double()[order]
    bins = [
        torch.stack([torch.tensor(float(len(c)), dtype=torch.float64), c.sum(), h.sum()])
        for c, h in zip(
            conf.cpu().tensor_split(n_bins), hit.cpu().tensor_split(n_bins), strict=True
        )
    ]
    return float(reduce_bins(torch.stack(bins, 1)[None], len(conf), norm)[0])


def augrc_from_runs(size: Tensor, pos: Tensor) -> Tensor:
    """(B,) area under the generalized risk-coverage curve (Traub et al. 2024, eq. 4): the
    mean over the coverages k = 1..N of the share of all N samples that are accepted and
    wrong, (1/N) Σ_{t<=k} x_t, with x_t the error of the t-th most confident sample.

    Summed by samples, AUGRC = (1/N²) Σ_t x_t (N − t + 1). The places of a run of s tied
    samples with e errors after K more confident ones have the mean weight N − K − (s − 1)/2,
    so the run adds e (N − K − (s − 1)/2) / N² whatever the order of its samples. Rows
    sorted by rising confidence, as :func:`aurc_from_runs` takes them."""
    n = size.sum(1)
    after = size.cumsum(1)  # N − K: samples at or below each run's confidence
    errors = size - pos
    return (errors * (after - (size - 1) / 2)).sum(1) / (n * n).clamp_min(1e-300)


@functools.lru_cache(maxsize=4)
def _tail_harmonic_sums(n: int, device: torch.device) -> Tensor:
    """C(N − j) for j = 0..N (float64), C(j) = Σ_{t=1..j} Σ_{k=t..N} 1/k: both sums are
    accumulated from their small terms up, and C(j) <= N."""
    inv = 1.0 / torch.arange(1, n + 1, dtype=torch.float64)
    tail = inv.flip(0).cumsum(0).flip(0)  # T(t) = Σ_{k=t..N} 1/k, smallest terms first
    c = torch.cat([torch.zeros(1, dtype=torch.float64), tail.cumsum(0)])  # C(0..N)
    return c.flip(0).contiguous().to(device)


def ks_from_runs(runs: Runs, size: Tensor, pos: Tensor, n: int) -> Tensor:
    """(B,) max over tie-run ends of |sum_{c_i <= t} (a_i - c_i)| / N (Gupta et al. 2021)."""
    cum = (pos - size * runs.values).cumsum(1) / n
    return cum.abs().amax(1)


def joint_cell_gaps(prob: Tensor, labels: Tensor, index: Tensor, power: int = 1) -> Tensor:
    """(K,) Σ_cells |Σ_{i∈cell} (1[y_i = k] − p_ik)| for cells that are the joint bin of
    all K probabilities (``index`` (N, K): each probability's bin): Kull et al.'s
    ``full_ECE`` before the division by N and the sum over k. ``power=2``: Σ_cells
    |cell| (mean gap)², their ``full_ECE(..., power=2)`` (ECE_FULL2) before the same."""
    _, cell = torch.unique(index, dim=0, return_inverse=True)
    n_cells = int(cell.max()) + 1
    gap = torch.nn.functional.one_hot(labels, prob.shape[1]).double() - prob.double()
    sums = gap.new_zeros(n_cells, prob.shape[1]).index_add_(0, cell, gap)
    if power == 2:
        size = torch.bincount(cell, minlength=n_cells).double()
        return (sums * sums / size[:, None]).sum(0)
    return sums.abs().sum(0)
