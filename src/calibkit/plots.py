"""Figures: the reliability diagram (matplotlib, Agg backend; PNG, SVG or PDF by extension)."""

from __future__ import annotations

import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from .io import atomic_write
from .metrics import _stats as st
from .metrics._prepare import prepare
from .metrics.binning import BinScheme
from .metrics.evaluate import _interval, resample_chunks

FIGURE_FORMATS = (".png", ".svg", ".pdf")


def bin_accuracy_band(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
    bootstrap: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> np.ndarray:
    """(2, S) percentile interval of each equal-width bin's accuracy over bootstrap resamples.

    NaN for bins that are empty in the sample.
    """
    p = prepare(scores, labels, probs=probs, binary=binary)
    scheme = BinScheme.make(n_bins, binning, p.scores.dtype)
    accs = []
    for w, _ in resample_chunks(p.n, bootstrap, seed, p.scores.device):
        sums = st.topbin_sums(p, scheme, w)
        count = sums[:, 0]
        accs.append(torch.where(count > 0, sums[:, 2] / count.clamp_min(1), torch.nan))
    acc = torch.cat(accs)
    band = np.array([_interval(acc[:, j], ci) for j in range(acc.shape[1])]).T
    empty = st.topbin_sums(p, scheme)[0, 0].cpu().numpy() == 0
    band[:, empty] = np.nan
    return band


def reliability_diagram(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
    bootstrap: int = 0,
    seed: int = 0,
    title: str | None = None,
    path: str | os.PathLike | None = None,
    ax: Any = None,
):
    """Reliability diagram: accuracy per confidence bin over the diagonal, gaps shaded, and
    the confidence histogram beneath; ECE in the title.

    ``bootstrap=B`` draws a 95 % band of each bin's accuracy. ``path`` saves the figure
    (format from the extension: .png, .svg, .pdf). ``ax`` is an optional pair of axes
    (top, bottom) to draw into. Returns the matplotlib figure.
    """
    from .metrics import evaluate

    r = evaluate(
        scores,
        labels,
        probs=probs,
        n_bins=n_bins,
        binning=binning,
        binary=binary,
        optimal=False,
        smooth=False,
    )
    b = r.bins
    edges = np.asarray(b.edges[: n_bins + 1], dtype=float)
    lo, hi = edges[:-1], edges[1:]
    acc, conf, count = b.accuracy[:n_bins], b.confidence[:n_bins], b.count[:n_bins].astype(float)
    if len(b.count) > n_bins:  # torchmetrics' extra bin (confidence exactly 1.0) joins the last
        extra = b.count[n_bins]
        if extra:
            tot = count[-1] + extra
            acc[-1] = np.nansum([acc[-1] * count[-1], b.accuracy[n_bins] * extra]) / tot
            conf[-1] = np.nansum([conf[-1] * count[-1], b.confidence[n_bins] * extra]) / tot
            count[-1] = tot
    if ax is None:
        fig, (top, bottom) = plt.subplots(
            2, 1, figsize=(5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
        )
    else:
        top, bottom = ax
        fig = top.figure
    width = hi - lo
    filled = count > 0
    top.plot([0, 1], [0, 1], ls="--", color="0.4", lw=1, label="perfect calibration")
    top.bar(
        lo[filled],
        acc[filled],
        width=width[filled],
        align="edge",
        color="#3b75af",
        edgecolor="white",
        label="accuracy",
    )
    gap_lo = np.minimum(acc, conf)[filled]
    top.bar(
        lo[filled],
        np.abs(conf - acc)[filled],
        bottom=gap_lo,
        width=width[filled],
        align="edge",
        color="#d62728",
        alpha=0.35,
        hatch="//",
        edgecolor="#d62728",
        label="gap to confidence",
    )
    if bootstrap:
        band = bin_accuracy_band(
            scores,
            labels,
            probs=probs,
            n_bins=n_bins,
            binning=binning,
            binary=binary,
            bootstrap=bootstrap,
            seed=seed,
        )[:, :n_bins]
        mid = (lo + hi) / 2
        top.errorbar(
            mid[filled],
            acc[filled],
            yerr=[acc[filled] - band[0][filled], band[1][filled] - acc[filled]],
            fmt="none",
            ecolor="black",
            capsize=2,
            lw=0.8,
            label="95% bootstrap band",
        )
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel("accuracy")
    head = title or "Reliability diagram"
    top.set_title(f"{head}\nECE = {r['ece']:.4f} ({n_bins} bins), accuracy = {r['accuracy']:.4f}")
    top.legend(loc="upper left", fontsize=8)
    bottom.bar(
        lo, count / max(count.sum(), 1), width=width, align="edge", color="0.5", edgecolor="white"
    )
    bottom.axvline(r["mean_confidence"], color="#d62728", lw=1.2, label="mean confidence")
    bottom.axvline(r["accuracy"], color="#3b75af", lw=1.2, ls="--", label="accuracy")
    bottom.set_xlabel("confidence" if binary == "top-label" else "P(class 1)")
    bottom.set_ylabel("fraction")
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def save_figure(fig: Any, path: str | os.PathLike) -> None:
    """Save ``fig`` atomically; the format comes from the extension."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in FIGURE_FORMATS:
        raise ValueError(f"{path}: figure format must be one of {', '.join(FIGURE_FORMATS)}")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=ext[1:], dpi=150))
