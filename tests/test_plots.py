"""The reliability diagram draws what the metrics say."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from calibkit import metrics as M
from calibkit.plots import bin_accuracy_band, reliability_diagram
from tests.conftest import make_logits


def test_bars_are_the_bin_accuracies_and_title_has_ece(tmp_path):
    z, y = make_logits(500, 5, 0)
    fig = reliability_diagram(z, y, n_bins=10, path=tmp_path / "r.png")
    top, bottom = fig.axes
    r = M.evaluate(z, y, n_bins=10, optimal=False, smooth=False)
    filled = r.bins.count > 0
    heights = [p.get_height() for p in top.patches[: int(filled.sum())]]
    assert np.allclose(heights, r.bins.accuracy[filled])
    assert f"ECE = {r['ece']:.4f}" in top.get_title()
    fractions = [p.get_height() for p in bottom.patches]
    assert np.allclose(fractions, r.bins.count / 500)
    assert (tmp_path / "r.png").stat().st_size > 10_000
    plt.close(fig)


def test_band_brackets_the_bin_accuracy():
    z, y = make_logits(800, 3, 1)
    band = bin_accuracy_band(z, y, n_bins=10, bootstrap=200)
    r = M.evaluate(z, y, n_bins=10, optimal=False, smooth=False)
    ok = r.bins.count > 20
    assert np.all(band[0][ok] <= r.bins.accuracy[ok]) and np.all(r.bins.accuracy[ok] <= band[1][ok])
    assert np.all(np.isnan(band[:, r.bins.count == 0]))


def test_bad_figure_format(tmp_path):
    z, y = make_logits(50, 3, 1)
    with pytest.raises(ValueError, match="format"):
        reliability_diagram(z, y, path=tmp_path / "r.gif")
