"""The reliability diagram draws what the metrics say."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from calibkit import metrics as M
from calibkit.metrics._resample import resample_chunks
from calibkit.plots import reliability_diagram
from tests.conftest import make_logits


def test_bars_are_the_bin_accuracies_and_title_has_ece(tmp_path):
    z, y = make_logits(500, 5, 0)
    r = M.evaluate(z, y, n_bins=10, optimal=False, smooth=False)
    fig = reliability_diagram(r, path=tmp_path / "r.png")
    top, bottom = fig.axes
    filled = r.bins.count > 0
    heights = [p.get_height() for p in top.patches[: int(filled.sum())]]
    assert np.allclose(heights, r.bins.accuracy[filled])
    assert f"ECE = {100 * r['ece']:.2f} %" in top.get_title()
    counts = [p.get_height() for p in bottom.patches]
    assert np.allclose(counts, r.bins.count) and bottom.get_yscale() == "log"
    labels = [t.get_text() for t in bottom.texts]  # each filled bin's count over its bar
    assert labels == [str(int(c)) for c in r.bins.count[filled]]
    assert (tmp_path / "r.png").stat().st_size > 10_000
    plt.close(fig)


def test_band_is_the_percentile_interval_of_each_bins_resampled_accuracy():
    z, y = make_logits(800, 3, 1)
    r = M.evaluate(z, y, n_bins=10, optimal=False, smooth=False, bootstrap=200, seed=3)
    band = r.bins.band
    # by hand: the same resamples (same seed), each bin's accuracy with numpy
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    conf, pred = p.max(1), p.argmax(1)
    slot = np.minimum((conf * 10).astype(int), 9)  # equal-width bins, 1.0 in the last
    correct = pred == np.asarray(y)
    accs = []
    for w, _ in resample_chunks(800, 200, 3, "cpu"):
        for row in w.numpy():
            n = np.bincount(slot, weights=row, minlength=10)
            hits = np.bincount(slot, weights=row * correct, minlength=10)
            accs.append(np.where(n > 0, hits / np.maximum(n, 1), np.nan))
    accs = np.array(accs)
    filled = r.bins.count > 0
    for j in np.flatnonzero(filled):
        col = accs[:, j][~np.isnan(accs[:, j])]
        assert np.allclose(band[:, j], np.quantile(col, [0.025, 0.975]), atol=1e-12)
    assert np.all(np.isnan(band[:, ~filled]))
    ok = r.bins.count > 20
    assert np.all(band[0][ok] <= r.bins.accuracy[ok]) and np.all(r.bins.accuracy[ok] <= band[1][ok])
    fig = reliability_diagram(r)
    assert any(c.get_label() == "95% bootstrap band" for c in fig.axes[0].containers)
    plt.close(fig)


def test_bad_figure_format(tmp_path):
    z, y = make_logits(50, 3, 1)
    with pytest.raises(ValueError, match="format"):
        reliability_diagram(M.evaluate(z, y, optimal=False), path=tmp_path / "r.gif")


def test_a_band_that_misses_the_bins_accuracy_is_drawn_as_it_is():
    # a bin's accuracy can lie outside the percentile band of few resamples
    from calibkit.plots import draw_reliability

    bins = {"edges": [0, 0.5, 1], "count": [4, 6], "accuracy": [0.5, 0.9], "confidence": [0.4, 0.8]}
    band = np.array([[0.55, 0.6], [0.75, 0.85]])  # both bins' accuracy outside their band
    fig = draw_reliability(bins, band=band)
    (bars,) = [c for c in fig.axes[0].containers if hasattr(c, "has_yerr") and c.has_yerr]
    segments = bars.lines[2][0].get_segments()
    assert np.allclose([s[:, 1] for s in segments], band.T)
    plt.close(fig)


def test_a_diagram_straight_from_logits_and_labels(tmp_path):
    """Issue 42 §3: reliability_diagram(logits, labels), as other libraries take it, draws
    what the evaluation of those logits draws."""
    import numpy as np

    from calibkit.metrics import evaluate
    from calibkit.plots import reliability_diagram
    from tests.conftest import make_logits

    z, y = make_logits(400, 5, 0)
    fig = reliability_diagram(z, y, n_bins=10, path=tmp_path / "r.png")
    heights = [p.get_height() for p in fig.axes[0].patches]
    r = evaluate(z, y, n_bins=10, optimal=False, smooth=False)
    want = reliability_diagram(r).axes[0].patches
    assert np.allclose(heights, [p.get_height() for p in want])
    assert (tmp_path / "r.png").stat().st_size > 0
    with pytest.raises(TypeError, match="scores and their labels"):
        reliability_diagram(z)


def test_the_count_axis_reads_as_numbers_where_mathtext_is_off():
    """The bench draws its figures with mathtext off (names from a store are shown as
    written); the log axis' ticks said ``$\\mathdefault{10^{4}}$`` there (issue 64 §7)."""
    z, y = make_logits(3000, 5, 0)
    r = M.evaluate(z, y, n_bins=15, optimal=False, smooth=False)
    with plt.rc_context({"text.parse_math": False}):
        fig = reliability_diagram(r)
        fig.canvas.draw()
        ticks = [t.get_text() for t in fig.axes[1].get_yticklabels() if t.get_visible()]
    assert ticks and not any("$" in t or "mathdefault" in t for t in ticks)
    assert set(ticks) <= {"", "1", "10", "100", "1k", "10k", "100k", "1M"}
    plt.close(fig)
