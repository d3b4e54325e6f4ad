"""Metric vectors of B weighted resamples at once, and the bootstrap built on them.

:func:`metric_vectors` computes every metric of prepared scores under B rows of sample
multiplicities (None: the sample itself) from shared statistics; :func:`resample_chunks`
draws the multiplicities; :func:`bootstrap_intervals` turns replicates into intervals
(:mod:`calibkit.metrics._intervals`), bias estimates and notes. :func:`~calibkit.metrics.
evaluate`, :func:`~calibkit.metrics.compare_paired` and the bench's stored replicates all
use them.

It is the metrics package's internal API, shared by ``evaluate``, ``paired`` and the
benchmarks: :func:`metric_vectors`, :func:`bootstrap_vectors` and
:func:`jackknife_vectors` (the values of B resamples or of jackknife groups; each takes a
:class:`~calibkit.metrics._binning.BinScheme`, which checked its settings where it was
made, and trusts it),
:func:`check_metric_names` (the names a caller asked for), :func:`percentile_interval`,
:func:`format_value` and :func:`json_float` (a value for text and for JSON). Users call
:func:`~calibkit.metrics._evaluate` instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import numpy as np
import torch
from torch import Tensor

from .._settings import Setting
from .._threads import sized_by_first_argument
from . import _stats as st
from ._binning import BinScheme
from ._display import shown
from ._inputs import Prepared, Runs, prepare
from ._intervals import interval, jackknife_groups, policy
from ._ood import fpr_at_tpr
from ._smooth import smooth_ece_batch
from ._table import COMPUTED, METRICS, OOD_METRICS, Memo


def format_value(v: float) -> str:
    """A fraction with 4 decimals for text ("n/a" for a missing value)."""
    return "n/a" if v is None or math.isnan(v) else f"{v:.4f}"


def json_float(v: float) -> float | None:
    """A value for JSON: NaN (undefined) becomes None."""
    return None if v is None or math.isnan(v) else float(v)


def metric_vectors(
    p: Prepared,
    scheme: BinScheme,
    weights: Tensor | None,
    *,
    smooth: bool,
    ood: tuple[Tensor, Tensor, Tensor | None] | None = None,
    only: frozenset[str] | None = None,
) -> dict[str, Tensor]:
    """(B,) tensor per metric for B weighted resamples (weights None: the sample itself);
    ``only``: the metrics wanted (default every one), each computed from shared statistics
    that are themselves computed only when a wanted metric needs them."""
    scheme = scheme.for_dtype(p.dtype)  # checked where it entered: trusted here

    def want(*names: str) -> bool:
        return only is None or not only.isdisjoint(names)

    # one pass over the scores serves every metric
    p.scan(full=want("brier", "entropy"), classwise=scheme if want("classwise_ece") else None)

    stats = _BatchStatistics(p, scheme, weights, scheme.n_bins)
    out = {
        m.name: m.compute(stats)
        for m in COMPUTED
        if want(m.name) and (smooth or m.name != "smooth_ece")
    }
    if ood is not None and want(*OOD_METRICS):
        s_in, s_out, w_out = ood
        out.update((k, v) for k, v in _ood_vectors(s_in, s_out, weights, w_out).items() if want(k))
    if weights is not None:  # (B, S) accuracy per bin, for the reliability diagram's band
        sums = stats.sums()
        count = sums[:, 0]
        out["bin_accuracy"] = torch.where(count > 0, sums[:, 2] / count.clamp_min(1), torch.nan)
    return out


class _BatchStatistics(Memo):
    """:class:`~calibkit.metrics._table.Statistics` of prepared scores under B weighted
    resamples (``weights`` None: the sample itself), each computed once, when asked."""

    def __init__(self, p: Prepared, scheme: BinScheme, weights: Tensor | None, n_bins: int):
        super().__init__()
        self.p, self.scheme, self.weights, self.n, self.n_bins = p, scheme, weights, p.n, n_bins

    def sums(self) -> Tensor:
        return self._once("sums", lambda: st.topbin_sums(self.p, self.scheme, self.weights))

    def mean(self, per_sample: str) -> Tensor:
        p = self.p
        values = {
            "correct": lambda: p.correct,
            "nll": lambda: -p.label_logp,
            "brier": lambda: p.brier_per_sample,
            "entropy": lambda: p.entropy_per_sample,
        }[per_sample]()
        return st.mean_stat(values, self.weights, self.n)

    def classwise(self) -> tuple[Tensor, BinScheme]:
        return st.classwise_sums(self.p, self.scheme, self.weights), self.scheme

    def runs(self) -> tuple[Runs, Tensor, Tensor]:
        return self._once("runs", lambda: (self.p.runs, *st.run_sums(self.p.runs, self.weights)))

    def correct_runs(self) -> tuple[Tensor, Tensor]:
        if self.p.binary == "top-label":
            return self.runs()[1:]
        return self._once("correct", lambda: st.run_sums(_correct_runs(self.p), self.weights))

    def smooth(self) -> Tensor:
        return smooth_ece_batch(*self.p.cal_pair, self.weights)[0]


def _correct_runs(p: Prepared) -> Runs:
    """Runs of the top-label confidence with correctness (refinement is always top-label)."""
    if p.binary == "top-label":
        return p.runs
    return Runs.from_values(p.confidence.double(), p.correct)


def _ood_vectors(s_in: Tensor, s_out: Tensor, w_in: Tensor | None, w_out: Tensor | None):
    runs = Runs.from_values(
        torch.cat([s_in, s_out]),
        torch.cat(
            [torch.ones_like(s_in, dtype=torch.bool), torch.zeros_like(s_out, dtype=torch.bool)]
        ),
    )
    w = None if w_in is None else torch.cat([w_in, w_out], 1)
    size, pos = st.run_sums(runs, w)
    return {
        "ood_auroc": st.auroc_from_runs(size, pos),
        "ood_fpr95": fpr_at_tpr(s_in, s_out, w_in, w_out),
        "ood_aupr": st.aupr_from_runs(size, pos),
    }


def _resample_weights(n: int, b: int, gen: torch.Generator, device) -> Tensor:
    """(b, n) float64 multiplicities of b resamples of n samples drawn with replacement."""
    # int32 draws are the int64 draws (tested) at half the memory
    idx = torch.randint(n, (b, n), generator=gen, device="cpu", dtype=torch.int32)
    idx += n * torch.arange(b, dtype=torch.int32)[:, None]  # one histogram over all rows
    return torch.bincount(idx.reshape(-1), minlength=b * n).reshape(b, n).to(device, torch.float64)


def _chunk(n: int) -> int:
    return max(1, min(256, 4_000_000 // max(n, 1)))  # b * n < 2**31: int32 indices


def resample_chunks(n: int, n_boot: int, seed: int, device, extra: int | None = None):
    """Bootstrap resamples of ``n`` samples as (B, n) multiplicity matrices, a chunk at a time.

    Yields ``(weights, extra_weights)``; with ``extra`` (the size of a second sample that is
    resampled independently, such as OOD scores) ``extra_weights`` is (B, extra), else None.
    The same ``seed`` gives the same resamples everywhere.
    """
    gen = torch.Generator().manual_seed(seed)
    for start in range(0, n_boot, _chunk(n)):
        b = min(_chunk(n), n_boot - start)
        w = _resample_weights(n, b, gen, device)
        yield w, (None if extra is None else _resample_weights(extra, b, gen, device))


def bootstrap_vectors(
    preps: list[Prepared],
    scheme: BinScheme,
    n_boot: int,
    seed: int,
    *,
    smooth: bool,
    ood: tuple[Tensor, Tensor] | None = None,
    progress: Callable[[int], None] | None = None,
    only: frozenset[str] | None = None,
) -> list[dict[str, Tensor]]:
    """Per-resample metric vectors for each of ``preps`` under the same resamples (``ood``:
    in- and out-of-distribution scores, resampled independently)."""
    parts: list[list[dict[str, Tensor]]] = [[] for _ in preps]
    extra = None if ood is None else len(ood[1])
    for w, w_ood in resample_chunks(preps[0].n, n_boot, seed, preps[0].device, extra):
        ood_pair = None if ood is None else (*ood, w_ood)
        for part, p in zip(parts, preps, strict=True):
            part.append(metric_vectors(p, scheme, w, smooth=smooth, ood=ood_pair, only=only))
        if progress is not None:
            progress(len(w))
    return [{k: torch.cat([c[k] for c in part]) for k in part[0]} for part in parts]


def jackknife_vectors(
    p: Prepared, scheme: BinScheme, seed: int, *, smooth: bool, only: frozenset[str]
) -> dict[str, Tensor]:
    """(G,) values of each metric in ``only`` with each of G groups of samples left out."""
    parts = []
    for group in jackknife_groups(p.n, seed):
        keep = torch.ones(p.n, dtype=torch.bool, device=p.device)
        keep[group.to(keep.device)] = False
        sub = Prepared(p.scores[keep], p.labels[keep], p.is_probs, p.binary)
        parts.append(metric_vectors(sub, scheme, None, smooth=smooth, only=only))
    return {k: torch.cat([part[k] for part in parts]) for k in parts[0]}


def bootstrap_intervals(
    estimates: dict[str, float],
    replicates: dict[str, Tensor],
    ci: float,
    method: str,
    jack: Callable[[frozenset[str]], dict[str, Tensor]] | None = None,
    plug_ins: dict[str, float] | None = None,
    reaches_zero: frozenset[str] = frozenset(),
) -> tuple[dict[str, tuple[float, float]], dict[str, float], list[str]]:
    """(intervals, bias estimates, notes) of the metrics in ``estimates`` that have
    ``replicates``. ``method``: one of :data:`~calibkit._conventions.INTERVALS`
    ("auto": each metric's own, from :mod:`calibkit.metrics._table`); ``jack(names)``: the
    delete-a-group jackknife values of those metrics, asked for only where BCa is used;
    ``plug_ins``: estimates of the plug-in metrics the debiased ones correct, where
    ``estimates`` lacks them (:func:`with_plug_ins`), for their ``two-pivot`` intervals;
    ``reaches_zero``: metrics whose interval starts at their least value (0), where the
    consistency test does not reject calibration (:mod:`calibkit.metrics._consistency`)."""
    plug_ins = {**(plug_ins or {}), **estimates}
    names = [m for m in estimates if m in replicates]
    used = {m: policy(m).method if method == "auto" else method for m in names}
    bca = frozenset(m for m, u in used.items() if u == "bca")
    jv = jack(bca) if bca and jack is not None else {}
    intervals, bias, outside = {}, {}, []
    for m in names:
        est, rep = estimates[m], replicates[m]
        rule = policy(m)
        # a plug-in metric is its own plug-in: its two-pivot interval is the basic one
        plug_in = plug_ins.get(rule.plug_in) if rule.plug_in else est
        intervals[m] = interval(
            rep,
            est,
            ci,
            used[m],
            lower_bound=rule.least,
            upper_bound=rule.most,
            jack=jv.get(m),
            plug_in=plug_in,
        )
        if m in reaches_zero:
            intervals[m] = (rule.least, max(intervals[m][1], est))
        finite = rep[~torch.isnan(rep)]
        bias[m] = float(finite.double().mean()) - est if finite.numel() else math.nan
        lo, hi = intervals[m]
        if not lo <= est <= hi and math.isfinite(est) and math.isfinite(lo):
            row = shown(m)  # in the unit a table prints (% for an error), as the rows are
            scale = 100 if row.percent else 1
            unit = f" {row.shown_unit}" if row.shown_unit else ""
            d = _telling_digits(row, est, lo, hi)
            outside.append(
                f"{m} {row.format(est, d)} [{row.format(lo, d)}, {row.format(hi, d)}]{unit}, "
                f"bias {bias[m] * scale:+.{d + 1}f}, bias-corrected "
                f"{row.format(est - bias[m], d)}"
            )
    notes = []
    if outside:
        notes.append(
            "estimate outside its interval (a plug-in estimate biased at this N; bias: the "
            "bootstrap's estimate of it; a basic interval is centred near the bias-corrected "
            "estimate, estimate − bias; docs/metrics.md, 'Do the intervals cover?'): "
            + "; ".join(outside)
        )
    return intervals, bias, notes


def _telling_digits(row: Any, est: float, lo: float, hi: float) -> int:
    """The fewest decimals (from the table's own, 2 or 4) at which an estimate outside its
    interval does not print as one of its bounds ("0.43 [0.40, 0.43]" read as inside)."""
    first = 2 if row.percent else 4
    for digits in range(first, first + 5):
        shown = row.format(est, digits)
        if shown not in (row.format(lo, digits), row.format(hi, digits)):
            return digits
    return first + 5


def percentile_interval(v: Tensor, ci: float) -> tuple[float, float]:
    return interval(v, 0.0, ci, "percentile")


def with_plug_ins(only: frozenset[str] | None) -> frozenset[str] | None:
    """``only`` and the plug-in metrics its debiased ones correct (their intervals need
    those estimates); None (every metric) stays None."""
    if only is None:
        return None
    return only | {policy(m).plug_in for m in only if m in METRICS and policy(m).plug_in}


def check_metric_names(metrics: Iterable[str] | None) -> frozenset[str] | None:
    """The metric names asked of :func:`evaluate`, checked (None: every metric)."""
    if metrics is None:
        return None
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    known = (*METRICS, *OOD_METRICS)
    unknown = [m for m in names if m not in known]
    if unknown or not names:
        raise ValueError(
            f"metrics: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(known)}"
            if unknown
            else "metrics: empty; name at least one metric, or pass None for all"
        )
    return frozenset(names)


class _MetricNames:
    """The values of ``metrics=``: names of :data:`METRICS` or :data:`OOD_METRICS` (one
    name may be given as a str); checked, a frozenset (None: every metric)."""

    def __str__(self) -> str:
        return "names of calibkit.metrics.METRICS or OOD_METRICS; None: all"

    def check(self, name: str, value: Any) -> frozenset[str] | None:
        return check_metric_names(value)


#: the ``metrics=`` of :func:`evaluate` and :func:`compare_nested`
MetricNames = Annotated[
    Iterable[str] | None,
    Setting(
        "The metrics wanted, by name; only what they need is computed, and each value "
        "equals the full evaluation's",
        _MetricNames(),
    ),
]


@sized_by_first_argument
def metric_values(
    scores: Any,
    labels: Any,
    metrics: Iterable[str],
    *,
    probs: bool | None = None,
    n_bins: int = 15,
) -> dict[str, float]:
    """The value of each of ``metrics`` (names of :data:`METRICS`, not optimal ECE) on the
    sample, from one pass over the scores and no resampling: the cheap call for a few
    metrics (the fit checks of :mod:`calibkit.posthoc._anomalies` use it).

    >>> import torch
    >>> z = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    >>> metric_values(z, torch.tensor([0, 1, 1]), ["accuracy"])
    {'accuracy': 0.6666666666666666}
    """
    only = check_metric_names(metrics)
    scheme = BinScheme(n_bins, "calibkit", torch.float64)
    p = prepare.trusting(scores, labels, probs=probs)
    smooth = only is None or "smooth_ece" in only
    values = metric_vectors(p, scheme, None, smooth=smooth, only=only)
    return {m: float(values[m].reshape(-1)[0]) for m in METRICS if m in values}


@sized_by_first_argument
def bootstrap_replicates(
    scores: Any,
    labels: Any,
    metrics: Iterable[str],
    bootstrap: int,
    *,
    seed: int = 0,
    probs: bool | None = None,
    n_bins: int = 15,
    binning: str = "calibkit",
) -> dict[str, np.ndarray]:
    """(B,) bootstrap replicates of each of ``metrics`` (not optimal ECE). The resamples
    depend only on (N, B, ``seed``): two score sets of the same N rows and seed get the
    same resamples, so their replicates are paired (what the verdicts' nested bootstrap
    over test rows uses, :func:`~calibkit.metrics._paired.compare_nested`)."""
    only = check_metric_names(metrics)
    scheme = BinScheme(n_bins, binning, torch.float64)
    p = prepare.trusting(scores, labels, probs=probs)
    smooth = only is None or "smooth_ece" in only
    boot = bootstrap_vectors([p], scheme, bootstrap, seed, smooth=smooth, only=only)[0]
    return {m: boot[m].cpu().numpy() for m in (only or METRICS) if m in boot}
