"""The bootstrap's faster statistics agree with the direct formulas they replaced: the
resample weights bit for bit, the AURC's table of tail-harmonic sums to 1e-12 of the
per-run digamma closed form it replaced, the equal-mass bin sums to 1e-12 (differences of
cumulative sums instead of scattered sums)."""

from __future__ import annotations

import importlib

import torch

from calibkit.metrics import _stats as st
from calibkit.metrics._inputs import Runs

resample_module = importlib.import_module("calibkit.metrics._resample")


def _runs_and_weights(n: int = 3000, b: int = 7, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    conf = (torch.rand(n, generator=g) * 50).round() / 50  # many ties
    outcome = torch.rand(n, generator=g) < conf
    runs = Runs.from_values(conf.double(), outcome)
    w = resample_module._resample_weights(n, b, g, "cpu")
    return runs, w, n


def test_resample_weights_are_the_multiplicities_of_int64_draws():
    n, b = 1000, 9
    got = resample_module._resample_weights(n, b, torch.Generator().manual_seed(4), "cpu")
    idx = torch.randint(n, (b, n), generator=torch.Generator().manual_seed(4))
    want = torch.zeros(b, n, dtype=torch.float64).scatter_add_(
        1, idx, torch.ones(b, n, dtype=torch.float64)
    )
    assert torch.equal(got, want)


def _equal_mass_direct(runs, size, pos, n, n_bins):
    """The previous implementation: each run's bin ceil((before + 1) M / N) − 1, scattered."""
    before = size.cumsum(1) - size
    bins = ((before + 1) * n_bins / n).ceil().sub(1).clamp(0, n_bins - 1).long()
    out = torch.zeros(3, len(size), n_bins, dtype=torch.float64)
    for j, src in enumerate((size, size * runs.values, pos)):
        out[j].scatter_add_(1, bins, src)
    return out.transpose(0, 1)


def test_equal_mass_sums_equal_the_scattered_sums():
    for seed in range(3):
        runs, w, n = _runs_and_weights(seed=seed)
        for weights in (None, w):
            size, pos = st.run_sums(runs, weights)
            for n_bins in (1, 2, 15, 40, 5000):  # more bins than samples too
                got = st.equal_mass_sums(runs, size, pos, n, n_bins)
                want = _equal_mass_direct(runs, size, pos, n, n_bins)
                torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
                assert torch.equal(got[:, 0], want[:, 0])  # the counts exactly


def _aurc_digamma(size, pos):
    """The previous closed form: per run, in descending order, Σ_{j=1..s} (E + j e/s)/(K + j)
    = e + (E − K e/s)(ψ(K + s + 1) − ψ(K + 1))."""
    s, e = size.flip(1), (size - pos).flip(1)
    k, eb = s.cumsum(1) - s, e.cumsum(1) - e
    harmonic = torch.where(s == 1, 1 / (k + 1), torch.digamma(k + s + 1) - torch.digamma(k + 1))
    return (e + (eb - k * (e / s.clamp_min(1e-300))) * harmonic).sum(1) / s.sum(1)


def test_aurc_table_agrees_with_the_digamma_closed_form():
    for seed, n in ((5, 3000), (6, 100_000)):
        runs, w, _ = _runs_and_weights(n=n, b=4, seed=seed)
        untied = Runs.from_values(
            torch.rand(n, generator=torch.Generator().manual_seed(seed)).double(),
            runs.outcome_sorted,
        )
        for r in (runs, untied):
            for weights in (None, w):
                size, pos = st.run_sums(r, weights)
                got, want = st.aurc_from_runs(size, pos), _aurc_digamma(size, pos)
                torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def _classwise_scattered(p, scheme, w):
    """The previous weighted classwise sums: gathered weight rows added into each cell."""
    r = p.scan(classwise=scheme)
    n, k, s = p.n, p.k, scheme.n_slots
    idx, used = scheme.assign(r.big_vals)
    cell, cell_y = r.big_cols * s + idx, p.labels * s + scheme.assign(r.label_vals)[0]
    wt = w.T.contiguous()
    wr = wt[r.big_rows]
    count = torch.zeros(k * s, len(w), dtype=torch.float64).index_add_(0, cell, wr)
    sump = torch.zeros_like(count).index_add_(0, cell, wr * used[:, None])
    sumy = torch.zeros_like(count).index_add_(0, cell_y, wt)
    count, sump, sumy = (t.T.reshape(len(w), k, s) for t in (count, sump, sumy))
    count[:, :, 0] = n - count[:, :, 1:].sum(2)
    sump[:, :, 0] = w @ p.probs.double() - sump[:, :, 1:].sum(2)
    return torch.stack([count, sump, sumy], 1)


def test_classwise_sums_by_a_sparse_product_equal_the_scattered_sums():
    from calibkit.metrics._binning import BinScheme
    from calibkit.metrics._inputs import prepare

    for seed, (n, k) in enumerate([(500, 3), (2000, 10), (1500, 40)]):
        g = torch.Generator().manual_seed(seed)
        z, y = 4 * torch.randn(n, k, generator=g), torch.randint(k, (n,), generator=g)
        w = resample_module._resample_weights(n, 6, g, "cpu")
        for binning in ("calibkit", "torchmetrics", "kull"):
            p = prepare(z, y)
            scheme = BinScheme(15, binning, p.scores.dtype)
            got = st.classwise_sums(p, scheme, w)
            want = _classwise_scattered(p, scheme, w)
            assert torch.equal(got[:, 0], want[:, 0]) and torch.equal(got[:, 2], want[:, 2])
            torch.testing.assert_close(got[:, 1], want[:, 1], rtol=0, atol=1e-12)
