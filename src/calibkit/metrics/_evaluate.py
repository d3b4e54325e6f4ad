"""All metrics in one pass, with bootstrap confidence intervals and paired comparisons.

:func:`evaluate` prepares the input once (one softmax, one sort of the confidences, one set
of bin statistics) and derives every metric of :mod:`calibkit.metrics._functional` from it.

Bootstrap: ``bootstrap=B`` draws B resamples of the N samples with replacement and
represents each as a row of multiplicities, so every metric of every resample comes from
the same weighted statistics in a few matrix products (no Python loop over resamples).
Intervals at level ``ci`` are percentile, basic or BCa intervals, chosen per metric
(:mod:`calibkit.metrics._intervals`). Optimal ECE is left out of the bootstrap: it needs one
pass over the logits per candidate temperature per resample.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._docs import documented
from .._metric_settings import (
    METRIC_PARAMETERS,
    Binary,
    Binning,
    Bootstrap,
    BootstrapSeed,
    Ci,
    Interval,
    MetricBins,
    Optimal,
    Probs,
    Smooth,
)
from .._settings import checks_declared
from .._threads import sized_by_first_argument
from . import _stats as st
from ._binning import BinScheme
from ._bins import Bins, bins_of
from ._consistency import calibrated_replicates, p_value
from ._display import shown, with_unit
from ._functional import undefined_auroc_message
from ._inputs import prepare, prepare_scores
from ._intervals import describe
from ._ood import OodScore
from ._ood import ood_score as score_of
from ._resample import (
    MetricNames,
    bootstrap_intervals,
    bootstrap_vectors,
    jackknife_vectors,
    json_float,
    metric_vectors,
    percentile_interval,
    with_plug_ins,
)
from ._table import METRICS, OOD_METRICS, row
from ._temperatures import best_temperature, check_grid


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns: metric values, optional intervals, per-bin data.

    Examples
    --------
    >>> from calibkit.metrics import evaluate
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> r = evaluate(logits, labels, n_bins=5, smooth=False, optimal=False)
    >>> round(r["ece"], 4), r.n_samples, r.n_classes
    (0.2848, 4, 3)
    >>> print(r.table().splitlines()[0])
    4 samples, 3 classes, 5 bins (calibkit)
    >>> r.to_dict()["metrics"]["accuracy"]  # JSON-ready, NaN as None
    0.75
    """

    metrics: dict[str, float]
    bins: Bins
    n_samples: int
    n_classes: int
    settings: dict[str, Any]
    intervals: dict[str, tuple[float, float]] | None = None
    notes: list[str] = field(default_factory=list)
    #: per metric with an interval: the bootstrap's estimate of the bias, mean(θ*) − θ̂
    bias: dict[str, float] | None = None
    #: per binned error with an interval: the p-value of "the model is calibrated" by
    #: consistency resampling (:mod:`calibkit.metrics._consistency`)
    calibration_p: dict[str, float] | None = None

    def __getitem__(self, name: str) -> float:
        return self.metrics[name]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (NaN becomes None)."""
        return {
            "n_samples": self.n_samples,
            "n_classes": self.n_classes,
            "settings": self.settings,
            "metrics": {k: json_float(v) for k, v in self.metrics.items()},
            "intervals": None
            if self.intervals is None
            else {k: [json_float(a), json_float(b)] for k, (a, b) in self.intervals.items()},
            "bias": None if self.bias is None else {k: json_float(v) for k, v in self.bias.items()},
            "calibration_p": self.calibration_p,
            "bins": self.bins.to_dict(),
            "notes": self.notes,
        }

    def rows(self) -> list[tuple[str, str, str]]:
        """(metric with its unit, value, interval) rows as printed by :meth:`table`: values
        in the unit the metric table gives each (% for calibration errors and accuracy,
        nats for NLL; docs/metrics.md), where :meth:`to_dict` keeps fractions."""
        out = []
        for name, value in self.metrics.items():
            how = shown(name)
            iv = ""
            if self.intervals and name in self.intervals:
                lo, hi = self.intervals[name]
                iv = f"[{how.display(lo)}, {how.display(hi)}]"
            out.append((with_unit(name), how.display(value), iv))
        return out

    def calibration_line(self) -> str | None:
        """One line of the consistency test's p-values (None without them)."""
        if not self.calibration_p:
            return None
        floor = 1 / (self.settings["bootstrap"] + 1)  # no draw reached the sample's error
        values = ", ".join(
            f"{m} ≤ {floor:.1g}" if v <= floor * (1 + 1e-9) else f"{m} {v:.2g}"
            for m, v in self.calibration_p.items()
        )
        return (
            "calibrated? the consistency test's p-value per error (small: not calibrated; "
            f"labels drawn {self.settings['bootstrap']} times from the model): {values}"
        )

    def table(self) -> str:
        """A readable plain-text table of every metric (and its interval)."""
        rows = self.rows()
        level = self.settings.get("ci")
        head = ("metric", "value", f"{level:.0%} CI" if self.intervals else "")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
        lines = [
            f"{self.n_samples} samples, {self.n_classes} classes, "
            f"{self.settings['n_bins']} bins ({self.settings['binning']})",
            "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(),
        ]
        lines.append("-" * len(lines[-1]))
        lines += [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
        ]
        if self.intervals:
            lines.append(describe(self.settings["interval"], self.intervals))
        if self.calibration_p:
            lines.append(self.calibration_line())
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


@documented(
    METRIC_PARAMETERS,
    "EvaluationResult: every metric's value (fractions; nats for NLL and entropy), the "
    "reliability bins, and with bootstrap the intervals, bias estimates and notes.",
    ood_scores=(
        "array-like, Tensor or None, default None",
        "Scores of out-of-distribution samples (M, K): adds OOD AUROC, FPR95 and AUPR-In.",
    ),
    progress=("callable or None, default None", "Called with k after each chunk of k resamples."),
)
@checks_declared
@sized_by_first_argument
def evaluate(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    n_bins: MetricBins = 15,
    binning: Binning = "calibkit",
    binary: Binary = "top-label",
    ood_scores: Any = None,
    ood_score: OodScore = "msp",
    optimal: Optimal = True,
    smooth: Smooth = True,
    bootstrap: Bootstrap = 0,
    seed: BootstrapSeed = 0,
    ci: Ci = 0.95,
    interval: Interval = "auto",
    progress: Callable[[int], None] | None = None,
    metrics: MetricNames = None,
) -> EvaluationResult:
    """Every calibration metric of ``scores`` (N, K) against ``labels`` (N,), in one pass.

    ``ood_scores`` (M, K) adds OOD AUROC, FPR95 and AUPR-In of the score ``ood_score``
    (:data:`~calibkit.metrics._ood.OOD_SCORES`; default the maximum softmax probability,
    in-distribution positive). ``optimal=False`` skips optimal ECE (1000 temperatures),
    ``smooth=False`` skips smooth ECE. ``bootstrap=B`` adds intervals at level ``ci`` from B
    resamples drawn with ``seed`` (OOD samples are resampled separately), by ``interval``
    (``"auto"``: each metric's own choice, see :mod:`calibkit.metrics._intervals`; or
    ``"percentile"``, ``"basic"``, ``"bca"`` for all), and each metric's bootstrap bias
    estimate; a note names every estimate that lies outside its interval;
    ``progress(k)`` is called after each chunk of k resamples. ``metrics`` names the metrics
    wanted (default: all of :data:`METRICS` and, with ``ood_scores``, :data:`OOD_METRICS`);
    only what they need is computed, and each value equals the full evaluation's.
    ``scores`` may be a checked input (:func:`calibkit.metrics._inputs.prepare`), trusted
    as it is, with ``labels`` left out.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> logits = 3 * torch.randn(500, 4, generator=g)
    >>> labels = torch.randint(4, (500,), generator=g)
    >>> r = evaluate(logits, labels, optimal=False)
    >>> round(r["accuracy"], 3), int(r.bins.count.sum())
    (0.244, 500)
    """
    # every declared setting checked where it entered (checks_declared), then trusted
    scheme = BinScheme(n_bins, binning, torch.float64)
    only = metrics  # checked where it entered: a frozenset, or None for all
    p = prepare.trusting(scores, labels, probs=probs, binary=binary)
    probs, binary = p.is_probs, p.binary  # a prepared input says what it holds
    scheme = scheme.for_dtype(p.dtype)
    ood = None
    if ood_scores is not None and (only is None or not only.isdisjoint(OOD_METRICS)):
        if p.k != prepare_scores(ood_scores, probs=probs, name="ood_scores").shape[1]:
            raise ValueError("ood_scores: must have as many classes (columns) as scores")
        s_in = score_of(p.scores, score=ood_score, probs=probs)
        s_out = score_of(ood_scores, score=ood_score, probs=probs, name="ood_scores")
        ood = (s_in, s_out.to(s_in.device))
    vec = metric_vectors(
        p,
        scheme,
        None,
        smooth=smooth,
        ood=None if ood is None else (*ood, None),
        only=with_plug_ins(only) if bootstrap else only,
    )
    values = {k: float(v[0]) for k, v in vec.items()}
    plug_ins = {k: values.pop(k) for k in list(values) if only is not None and k not in only}
    settings: dict[str, Any] = {
        "n_bins": n_bins,
        "binning": binning,
        "probs": probs,
        "binary": binary,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
        "interval": interval,
    }
    if ood is not None:
        settings["ood_score"] = ood_score
    notes = []
    if math.isnan(values.get("refinement_auroc", 0.0)):
        notes.append(undefined_auroc_message(p.n, int(p.correct.sum())))
        warnings.warn(notes[-1], RuntimeWarning, stacklevel=2)
    if optimal and (only is None or "optimal_ece" in only):
        best, values["optimal_ece"] = best_temperature(p, scheme, check_grid(None))
        settings["optimal_temperature"] = float(check_grid(None)[best])
    values = {m: values[m] for m in (*METRICS, *OOD_METRICS) if m in values}
    intervals = bias = None
    calibration_p: dict[str, float] = {}
    if bootstrap:
        boot = bootstrap_vectors(
            [p],
            scheme,
            bootstrap,
            seed,
            smooth=smooth,
            ood=ood,
            progress=progress,
            only=only,
        )[0]
        calibration_p = _calibration_test(p, scheme, values, boot, bootstrap, seed)
        # calibkit's own intervals (auto) start at 0 where the test does not reject, and
        # only where it could: its least p-value is 1 / (draws + 1)
        auto = interval == "auto"
        can_reject = 1 / (bootstrap + 1) <= 1 - ci
        reached = [m for m, v in calibration_p.items() if auto and can_reject and v > 1 - ci]
        if auto and calibration_p and not can_reject:
            notes.append(
                f"the consistency test cannot reject calibration with {bootstrap} draws (its "
                f"least p-value is 1/{bootstrap + 1} > {1 - ci:.2g}; it needs "
                f"{math.ceil(1 / (1 - ci) - 1 - 1e-9)}), so no interval is started at 0"
            )
        intervals, bias, more = bootstrap_intervals(
            values,
            boot,
            ci,
            interval,
            lambda names: jackknife_vectors(p, scheme, seed, smooth=smooth, only=names),
            plug_ins,
            frozenset(reached),
        )
        notes += more
        if reached:
            notes.append(
                f"consistent with perfect calibration (labels drawn {bootstrap} times from "
                f"the model's own probabilities; p > {1 - ci:.2g}), so these intervals "
                "start at 0: " + ", ".join(f"{m} p = {calibration_p[m]:.2f}" for m in reached)
            )
    bins = bins_of(st.topbin_sums(p, scheme), scheme)
    if bootstrap:
        acc = boot["bin_accuracy"]
        bins.band = np.array([percentile_interval(acc[:, j], ci) for j in range(acc.shape[1])]).T
        bins.band[:, bins.count == 0] = np.nan
    return EvaluationResult(
        values, bins, p.n, p.k, settings, intervals, notes, bias, calibration_p or None
    )


def _calibration_test(p, scheme, metrics, boot, draws: int, seed: int) -> dict[str, float]:
    """The consistency test's p-value of each binned error with ``null_test`` in ``metrics``
    that the bootstrap gives an interval (docs/metrics.md, "Is the model calibrated?")."""
    names = [m for m in metrics if m in boot and row(m).null_test]
    null = calibrated_replicates(p, scheme, names, draws, seed + 1) if names else {}
    return {m: p_value(metrics[m], null[m]) for m in names}
