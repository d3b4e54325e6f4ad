"""Figures: the reliability diagram (matplotlib, Agg backend; PNG, SVG or PDF by extension)."""

from __future__ import annotations

import os
from typing import Any

import matplotlib

__all__ = ["FIGURE_FORMATS", "draw_reliability", "reliability_diagram", "save_figure"]

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, NullFormatter

from ._docs import documented
from ._outputs import atomic_write
from .metrics import EvaluationResult

FIGURE_FORMATS = (".png", ".svg", ".pdf")


@documented(
    {},
    "Figure: the matplotlib figure.",
    result=(
        "EvaluationResult, or array-like scores",
        "An :func:`~calibkit.metrics._evaluate` "
        "result, or scores (N, K) to evaluate with ``labels``.",
    ),
    labels=("array-like or None, default None", "The labels of ``result`` given as scores."),
    title=("str or None, default None", "The title; None: the ECE and sample count."),
    path=("str, PathLike or None, default None", "Save the figure there (.png, .svg, .pdf)."),
    ax=("pair of Axes or None, default None", "(top, bottom) axes to draw into."),
    evaluate_options=(
        "keyword arguments",
        "Options of :func:`~calibkit.metrics._evaluate` for "
        "scores given directly (``probs``, ``n_bins``, ``bootstrap``).",
    ),
)
def reliability_diagram(
    result: EvaluationResult | Any,
    labels: Any = None,
    *,
    title: str | None = None,
    path: str | os.PathLike | None = None,
    ax: Any = None,
    **evaluate_options: Any,
):
    """Reliability diagram of an :func:`~calibkit.metrics._evaluate` result: accuracy per
    confidence bin over the diagonal, gaps shaded, and the confidence histogram beneath; ECE
    in the title; the 95 % band of each bin's accuracy where the result was bootstrapped.
    Nothing is computed again.

    Or of scores and ``labels`` directly, as other libraries take them
    (``reliability_diagram(logits, labels)``): they are evaluated first, with
    ``evaluate_options`` (``probs=True``, ``n_bins``, ``bootstrap`` for the band, ...).

    ``path`` saves the figure (format from the extension: .png, .svg, .pdf). ``ax`` is an
    optional pair of axes (top, bottom) to draw into. Returns the matplotlib figure.

    Examples
    --------
    >>> from calibkit.data import demo_logits
    >>> from calibkit.plots import reliability_diagram, save_figure
    >>> d = demo_logits()
    >>> fig = reliability_diagram(d["logits_test"], d["labels_test"])
    >>> path = getfixture("tmp_path") / "reliability.png"
    >>> save_figure(fig, path)
    >>> path.stat().st_size > 10_000
    True
    """
    if not isinstance(result, EvaluationResult):
        if labels is None:
            raise TypeError(
                "reliability_diagram: pass an evaluate() result, or scores and their labels"
            )
        from .metrics import evaluate

        result = evaluate(result, labels, optimal=False, smooth=False, **evaluate_options)
    elif labels is not None or evaluate_options:
        raise TypeError("reliability_diagram: an evaluate() result takes no labels or options")
    s = result.settings
    n_bins = s["n_bins"]
    band = None if result.bins.band is None else result.bins.band[:, :n_bins]
    fig = draw_reliability(
        result.bins,
        n_bins=n_bins,
        title=title,
        ax=ax,
        band=band,
        xlabel="confidence" if s["binary"] == "top-label" else "P(class 1)",
    )
    if path is not None:
        save_figure(fig, path)
    return fig


def draw_reliability(
    bins: Any,
    *,
    n_bins: int | None = None,
    title: str | None = None,
    ax: Any = None,
    band: np.ndarray | None = None,
    xlabel: str = "confidence",
):
    """Draw a reliability diagram from per-bin data (a :class:`~calibkit.metrics.Bins` or
    its ``to_dict()``: edges, count, accuracy, confidence), as :func:`reliability_diagram`
    does: accuracy bars over the diagonal, the gap to confidence shaded, the confidence
    histogram beneath (samples per bin, log scale), each bin's count over its bar; ECE,
    accuracy and mean confidence, all computed from the bins, in the
    title. ``band`` (2, M) draws a 95 % interval on each bin's accuracy.

    Examples
    --------
    Side by side, before and after temperature scaling, on axes of one's own:

    >>> import matplotlib.pyplot as plt
    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import evaluate
    >>> from calibkit.plots import draw_reliability
    >>> d = demo_logits()
    >>> ts = posthoc.TemperatureScaling().fit(d["logits_val"], d["labels_val"])
    >>> fig, axes = plt.subplots(2, 2, figsize=(10, 6), height_ratios=[3, 1], sharex=True)
    >>> for column, (title, z) in enumerate([("uncalibrated", d["logits_test"]),
    ...                                      ("TS", ts(d["logits_test"]))]):
    ...     bins = evaluate(z, d["labels_test"], smooth=False, optimal=False).bins
    ...     _ = draw_reliability(bins, title=title, ax=(axes[0, column], axes[1, column]))
    >>> axes[0, 1].get_title().splitlines()[1]
    'ECE = 1.19 % (15 bins), accuracy = 97.59 %'
    >>> plt.close(fig)
    """
    get = bins.get if isinstance(bins, dict) else lambda k: getattr(bins, k)
    count_all = np.asarray(get("count"), dtype=float)
    n_bins = n_bins or len(np.asarray(get("edges"))) - 1
    edges = np.asarray(get("edges"), dtype=float)[: n_bins + 1]
    lo, hi = edges[:-1], edges[1:]
    acc_all = np.asarray(get("accuracy"), dtype=float)
    conf_all = np.asarray(get("confidence"), dtype=float)
    acc, conf, count = acc_all[:n_bins].copy(), conf_all[:n_bins].copy(), count_all[:n_bins].copy()
    if len(count_all) > n_bins:  # torchmetrics' extra bin (confidence exactly 1.0) joins the last
        extra = count_all[n_bins]
        if extra:
            tot = count[-1] + extra
            acc[-1] = np.nansum([acc[-1] * count[-1], acc_all[n_bins] * extra]) / tot
            conf[-1] = np.nansum([conf[-1] * count[-1], conf_all[n_bins] * extra]) / tot
            count[-1] = tot
    filled = count > 0
    n = max(count.sum(), 1)
    accuracy = float(np.sum(count[filled] * acc[filled]) / n)
    mean_conf = float(np.sum(count[filled] * conf[filled]) / n)
    ece = float(np.sum(count[filled] * np.abs(acc[filled] - conf[filled])) / n)
    if ax is None:
        fig, (top, bottom) = plt.subplots(
            2, 1, figsize=(5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
        )
    else:
        top, bottom = ax
        fig = top.figure
    width = hi - lo

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
    if band is not None:
        mid = (lo + hi) / 2
        # drawn about the band's centre: a bin's accuracy need not lie inside the percentile
        # band of its resamples (a small bin, few resamples), and errorbar refuses a
        # negative error
        low, high = band[0][filled], band[1][filled]
        top.errorbar(
            mid[filled],
            (low + high) / 2,
            yerr=(high - low) / 2,
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
    top.set_title(  # a title is shown as written, never parsed as mathtext
        f"{head}\nECE = {100 * ece:.2f} % ({n_bins} bins), accuracy = {100 * accuracy:.2f} %",
        parse_math=False,
    )
    top.legend(loc="upper left", fontsize=8)
    bottom.bar(lo, count, width=width, align="edge", color="0.5", edgecolor="white")
    if filled.any():  # a log scale: bins of 1-5 samples stay visible beside bins of thousands
        bottom.set_yscale("log")
        bottom.set_ylim(0.5, count.max() * 8)
        # decades written as the counts over the bars are (1, 10, 1k): matplotlib's own
        # labels are mathtext, shown raw where a caller turns mathtext off for its titles
        bottom.yaxis.set_major_formatter(FuncFormatter(_decade_label))
        bottom.yaxis.set_minor_formatter(NullFormatter())
    for x, c in zip(lo[filled] + width[filled] / 2, count[filled], strict=True):
        # each bin's count over its bar: a bar of 3 samples is not read as a bar of 3,000
        bottom.annotate(
            count_label(c),
            (x, c),
            xytext=(0, 1),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=6,
            color="0.2",
        )
    bottom.axvline(mean_conf, color="#d62728", lw=1.2, label="mean confidence")
    bottom.axvline(accuracy, color="#3b75af", lw=1.2, ls="--", label="accuracy")
    bottom.set_xlabel(xlabel)
    if not top.get_shared_x_axes().joined(top, bottom):  # axes of one's own: both labelled
        top.set_xlabel(xlabel)
    bottom.set_ylabel("samples (log)")
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def count_label(count: float) -> str:
    """A bin's sample count in at most four characters: 7, 312, 8.9k, 12k, 1.2M.

    >>> [count_label(c) for c in (7, 312, 8876, 12_400, 1_234_567)]
    ['7', '312', '8.9k', '12k', '1.2M']
    """
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if count >= size:
            v = count / size
            return f"{v:.1f}{unit}" if v < 10 else f"{v:.0f}{unit}"
    return f"{count:.0f}"


def _decade_label(value: float, _position: Any = None) -> str:
    """A log axis' tick as the bars' counts are written (1, 10, 1k, 1M); none below 1.

    >>> [_decade_label(v) for v in (0.1, 1, 100, 1000, 1e6)]
    ['', '1', '100', '1k', '1M']
    """
    return "" if value < 1 else count_label(value).replace(".0", "")


def save_figure(fig: Any, path: str | os.PathLike) -> None:
    """Save ``fig`` atomically; the format comes from the extension.

    Examples
    --------
    >>> from calibkit.data import demo_logits
    >>> from calibkit.plots import reliability_diagram, save_figure
    >>> d = demo_logits()
    >>> fig = reliability_diagram(d["logits_test"], d["labels_test"])
    >>> save_figure(fig, getfixture("tmp_path") / "reliability.svg")  # PNG, SVG or PDF
    >>> save_figure(fig, getfixture("tmp_path") / "reliability.gif")
    Traceback (most recent call last):
    ...
    ValueError: ...reliability.gif: figure format must be one of .png, .svg, .pdf
    """
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in FIGURE_FORMATS:
        raise ValueError(f"{path}: figure format must be one of {', '.join(FIGURE_FORMATS)}")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=ext[1:], dpi=150))
