"""The bootstrap's faster statistics agree with the direct formulas they replaced: the
resample weights bit for bit, the AURC's harmonic sums bit for bit, the equal-mass bin sums
to 1e-12 (differences of cumulative sums instead of scattered sums)."""

from __future__ import annotations

import importlib

import torch

from calibkit.metrics import stats as st
from calibkit.metrics.inputs import Runs

evaluate_module = importlib.import_module("calibkit.metrics.evaluate")


def _runs_and_weights(n: int = 3000, b: int = 7, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    conf = (torch.rand(n, generator=g) * 50).round() / 50  # many ties
    outcome = torch.rand(n, generator=g) < conf
    runs = Runs.from_values(conf.double(), outcome)
    w = evaluate_module._resample_weights(n, b, g, "cpu")
    return runs, w, n


def test_resample_weights_are_the_multiplicities_of_int64_draws():
    n, b = 1000, 9
    got = evaluate_module._resample_weights(n, b, torch.Generator().manual_seed(4), "cpu")
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


def test_aurc_harmonic_table_equals_digamma():
    runs, w, _ = _runs_and_weights(seed=5)
    for weights in (None, w):
        size, pos = st.run_sums(runs, weights)
        s, e = size.flip(1), (size - pos).flip(1)
        k, eb = s.cumsum(1) - s, e.cumsum(1) - e
        harmonic = torch.where(s == 1, 1 / (k + 1), torch.digamma(k + s + 1) - torch.digamma(k + 1))
        want = (e + (eb - k * (e / s.clamp_min(1e-300))) * harmonic).sum(1) / s.sum(1)
        assert torch.equal(st.aurc_from_runs(size, pos), want)
