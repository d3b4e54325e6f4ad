"""All metrics in one pass, with bootstrap confidence intervals and paired comparisons.

:func:`evaluate` prepares the input once (one softmax, one sort of the confidences, one set
of bin statistics) and derives every metric of :mod:`calibkit.metrics.functional` from it.

Bootstrap: ``bootstrap=B`` draws B resamples of the N samples with replacement and
represents each as a row of multiplicities, so every metric of every resample comes from
the same weighted statistics in a few matrix products (no Python loop over resamples).
Intervals at level ``ci`` are percentile, basic or BCa intervals, chosen per metric
(:mod:`calibkit.metrics.intervals`). Optimal ECE is left out of the bootstrap: it needs one
pass over the logits per candidate temperature per resample.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .._checks import check_n_bins
from . import stats as st
from .binning import BinScheme
from .bins import Bins, bins_of
from .functional import undefined_auroc_message
from .inputs import Prepared, Runs, prepare, prepare_scores
from .intervals import check_interval, describe, interval, jackknife_groups
from .ood import _fpr_at_tpr
from .ood import ood_score as score_of
from .smooth import smooth_ece_batch
from .table import COMPUTED, METRICS, OOD_METRICS, Memo, info
from .temperatures import best_temperature, check_grid


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns: metric values, optional intervals, per-bin data."""

    metrics: dict[str, float]
    bins: Bins
    n_samples: int
    n_classes: int
    settings: dict[str, Any]
    intervals: dict[str, tuple[float, float]] | None = None
    notes: list[str] = field(default_factory=list)
    #: per metric with an interval: the bootstrap's estimate of the bias, mean(θ*) − θ̂
    bias: dict[str, float] | None = None

    def __getitem__(self, name: str) -> float:
        return self.metrics[name]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (NaN becomes None)."""
        return {
            "n_samples": self.n_samples,
            "n_classes": self.n_classes,
            "settings": self.settings,
            "metrics": {k: _json_float(v) for k, v in self.metrics.items()},
            "intervals": None
            if self.intervals is None
            else {k: [_json_float(a), _json_float(b)] for k, (a, b) in self.intervals.items()},
            "bias": None
            if self.bias is None
            else {k: _json_float(v) for k, v in self.bias.items()},
            "bins": self.bins.to_dict(),
            "notes": self.notes,
        }

    def rows(self) -> list[tuple[str, str, str]]:
        """(metric, value, interval) rows as printed by :meth:`table`."""
        out = []
        for name, value in self.metrics.items():
            iv = ""
            if self.intervals and name in self.intervals:
                lo, hi = self.intervals[name]
                iv = f"[{_fmt(lo)}, {_fmt(hi)}]"
            out.append((name, _fmt(value), iv))
        return out

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
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _fmt(v: float) -> str:
    return "n/a" if v is None or math.isnan(v) else f"{v:.4f}"


def _json_float(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def _metric_vectors(
    p: Prepared,
    binning: str,
    n_bins: int,
    weights: Tensor | None,
    *,
    smooth: bool,
    ood: tuple[Tensor, Tensor, Tensor | None] | None = None,
    only: frozenset[str] | None = None,
) -> dict[str, Tensor]:
    """(B,) tensor per metric for B weighted resamples (weights None: the sample itself);
    ``only``: the metrics wanted (default every one), each computed from shared statistics
    that are themselves computed only when a wanted metric needs them."""
    scheme = BinScheme.make(n_bins, binning, p.scores.dtype)

    def want(*names: str) -> bool:
        return only is None or not only.isdisjoint(names)

    # one pass over the scores serves every metric
    p.scan(full=want("brier", "entropy"), classwise=scheme if want("classwise_ece") else None)

    stats = _BatchStatistics(p, scheme, weights, n_bins)
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
    """:class:`~calibkit.metrics.table.Statistics` of prepared scores under B weighted
    resamples (``weights`` None: the sample itself), each computed once, when asked."""

    def __init__(self, p: Prepared, scheme: BinScheme, weights: Tensor | None, n_bins: int):
        super().__init__()
        self.p, self.scheme, self.weights, self.n, self.n_bins = p, scheme, weights, p.n, n_bins

    def sums(self) -> Tensor:
        return self._once("sums", lambda: st.topbin_sums(self.p, self.scheme, self.weights))

    def mean(self, per_sample: str) -> Tensor:
        p = self.p
        values = {"correct": lambda: p.correct, "nll": lambda: -p.label_logp,
                  "brier": lambda: p.brier_per_sample,
                  "entropy": lambda: p.entropy_per_sample}[per_sample]()  # fmt: skip
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
        "ood_fpr95": _fpr_at_tpr(s_in, s_out, w_in, w_out),
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


def _bootstrap_vectors(
    preps: list[Prepared],
    binning: str,
    n_bins: int,
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
    for w, w_ood in resample_chunks(preps[0].n, n_boot, seed, preps[0].scores.device, extra):
        ood_pair = None if ood is None else (*ood, w_ood)
        for part, p in zip(parts, preps, strict=True):
            part.append(
                _metric_vectors(p, binning, n_bins, w, smooth=smooth, ood=ood_pair, only=only)
            )
        if progress is not None:
            progress(len(w))
    return [{k: torch.cat([c[k] for c in part]) for k in part[0]} for part in parts]


def _jackknife_vectors(
    p: Prepared, binning: str, n_bins: int, seed: int, *, smooth: bool, only: frozenset[str]
) -> dict[str, Tensor]:
    """(G,) values of each metric in ``only`` with each of G groups of samples left out."""
    parts = []
    for group in jackknife_groups(p.n, seed):
        keep = torch.ones(p.n, dtype=torch.bool, device=p.scores.device)
        keep[group.to(keep.device)] = False
        sub = Prepared(p.scores[keep], p.labels[keep], p.is_probs, p.binary)
        parts.append(_metric_vectors(sub, binning, n_bins, None, smooth=smooth, only=only))
    return {k: torch.cat([part[k] for part in parts]) for k in parts[0]}


def bootstrap_intervals(
    estimates: dict[str, float],
    replicates: dict[str, Tensor],
    ci: float,
    method: str,
    jack: Callable[[frozenset[str]], dict[str, Tensor]] | None = None,
) -> tuple[dict[str, tuple[float, float]], dict[str, float], list[str]]:
    """(intervals, bias estimates, notes) of the metrics in ``estimates`` that have
    ``replicates``. ``method``: one of :data:`~calibkit.metrics.intervals.INTERVALS`
    ("auto": each metric's own, from :mod:`calibkit.metrics.table`); ``jack(names)``: the
    delete-a-group jackknife values of those metrics, asked for only where BCa is used."""
    names = [m for m in estimates if m in replicates]
    used = {m: info(m).interval if method == "auto" else method for m in names}
    bca = frozenset(m for m, u in used.items() if u == "bca")
    jv = jack(bca) if bca and jack is not None else {}
    intervals, bias, outside = {}, {}, []
    for m in names:
        est, rep = estimates[m], replicates[m]
        intervals[m] = interval(rep, est, ci, used[m], lower_bound=info(m).least, jack=jv.get(m))
        finite = rep[~torch.isnan(rep)]
        bias[m] = float(finite.double().mean()) - est if finite.numel() else math.nan
        lo, hi = intervals[m]
        if not lo <= est <= hi and math.isfinite(est) and math.isfinite(lo):
            outside.append(f"{m} {_fmt(est)} [{_fmt(lo)}, {_fmt(hi)}], bias {bias[m]:+.5f}")
    notes = []
    if outside:
        notes.append(
            "estimate outside its interval (a plug-in estimate biased at this N; bias: the "
            "bootstrap's estimate of it; docs/metrics.md, 'Do the intervals cover?'): "
            + "; ".join(outside)
        )
    return intervals, bias, notes


def _percentile(v: Tensor, ci: float) -> tuple[float, float]:
    return interval(v, 0.0, ci, "percentile")


def _check_metrics(metrics: Iterable[str] | None) -> frozenset[str] | None:
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


def bootstrap_replicates(
    scores: Any,
    labels: Any,
    metrics: Iterable[str],
    bootstrap: int,
    *,
    seed: int = 0,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    validate: bool = True,
) -> dict[str, np.ndarray]:
    """(B,) bootstrap replicates of each of ``metrics`` (not optimal ECE). The resamples
    depend only on (N, B, ``seed``): two score sets of the same N rows and seed get the
    same resamples, so their replicates are paired (what the verdicts' nested bootstrap
    over test rows uses, :func:`~calibkit.metrics.paired.compare_nested`)."""
    only = _check_metrics(metrics)
    check_n_bins(n_bins)
    p = prepare(scores, labels, probs=probs, validate=validate)
    smooth = only is None or "smooth_ece" in only
    boot = _bootstrap_vectors([p], binning, n_bins, bootstrap, seed, smooth=smooth, only=only)[0]
    return {m: boot[m].cpu().numpy() for m in (only or METRICS) if m in boot}


def _check_ci(ci: float) -> float:
    if not isinstance(ci, float | int) or not 0 < ci < 1:
        raise ValueError(f"ci: expected a level in (0, 1) such as 0.95, got {ci!r}")
    return float(ci)


def evaluate(
    scores: Any,
    labels: Any,
    *,
    probs: bool = False,
    n_bins: int = 15,
    binning: str = "calibkit",
    binary: str = "top-label",
    ood_scores: Any = None,
    ood_score: str = "msp",
    optimal: bool = True,
    smooth: bool = True,
    bootstrap: int = 0,
    seed: int = 0,
    ci: float = 0.95,
    interval: str = "auto",
    progress: Callable[[int], None] | None = None,
    metrics: Iterable[str] | None = None,
    validate: bool = True,
) -> EvaluationResult:
    """Every calibration metric of ``scores`` (N, K) against ``labels`` (N,), in one pass.

    ``ood_scores`` (M, K) adds OOD AUROC, FPR95 and AUPR-In of the score ``ood_score``
    (:data:`~calibkit.metrics.ood.OOD_SCORES`; default the maximum softmax probability,
    in-distribution positive). ``optimal=False`` skips optimal ECE (1000 temperatures),
    ``smooth=False`` skips smooth ECE. ``bootstrap=B`` adds intervals at level ``ci`` from B
    resamples drawn with ``seed`` (OOD samples are resampled separately), by ``interval``
    (``"auto"``: each metric's own choice, see :mod:`calibkit.metrics.intervals`; or
    ``"percentile"``, ``"basic"``, ``"bca"`` for all), and each metric's bootstrap bias
    estimate; a note names every estimate that lies outside its interval;
    ``progress(k)`` is called after each chunk of k resamples. ``metrics`` names the metrics
    wanted (default: all of :data:`METRICS` and, with ``ood_scores``, :data:`OOD_METRICS`);
    only what they need is computed, and each value equals the full evaluation's.
    ``validate=False`` trusts the input (see :func:`calibkit.metrics.inputs.prepare`).

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> logits = 3 * torch.randn(500, 4, generator=g)
    >>> labels = torch.randint(4, (500,), generator=g)
    >>> r = evaluate(logits, labels, optimal=False)
    >>> round(r["accuracy"], 3), int(r.bins.count.sum())
    (0.244, 500)
    """
    check_n_bins(n_bins)
    if not isinstance(bootstrap, int) or isinstance(bootstrap, bool) or bootstrap < 0:
        raise ValueError(f"bootstrap: expected a number of resamples >= 0, got {bootstrap!r}")
    ci = _check_ci(ci)
    interval_method = check_interval(interval)
    only = _check_metrics(metrics)
    p = prepare(scores, labels, probs=probs, binary=binary, validate=validate)
    scheme = BinScheme.make(n_bins, binning, p.scores.dtype)
    ood = None
    if ood_scores is not None and (only is None or not only.isdisjoint(OOD_METRICS)):
        if p.k != prepare_scores(ood_scores, probs=probs, name="ood_scores").shape[1]:
            raise ValueError("ood_scores: must have as many classes (columns) as scores")
        s_in = score_of(scores, score=ood_score, probs=probs)
        s_out = score_of(ood_scores, score=ood_score, probs=probs, name="ood_scores")
        ood = (s_in, s_out.to(s_in.device))
    vec = _metric_vectors(
        p,
        binning,
        n_bins,
        None,
        smooth=smooth,
        ood=None if ood is None else (*ood, None),
        only=only,
    )
    metrics = {k: float(v[0]) for k, v in vec.items()}
    settings: dict[str, Any] = {
        "n_bins": n_bins,
        "binning": binning,
        "probs": probs,
        "binary": binary,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
        "interval": interval_method,
    }
    if ood is not None:
        settings["ood_score"] = ood_score
    notes = []
    if math.isnan(metrics.get("refinement_auroc", 0.0)):
        notes.append(undefined_auroc_message(p.n, int(p.correct.sum())))
        warnings.warn(notes[-1], RuntimeWarning, stacklevel=2)
    if optimal and (only is None or "optimal_ece" in only):
        best, metrics["optimal_ece"] = best_temperature(p, scheme, check_grid(None))
        settings["optimal_temperature"] = float(check_grid(None)[best])
    order = [m for m in (*METRICS, *OOD_METRICS) if m in metrics]
    metrics = {m: metrics[m] for m in order}
    intervals = bias = None
    if bootstrap:
        boot = _bootstrap_vectors(
            [p], binning, n_bins, bootstrap, seed, smooth=smooth, ood=ood, progress=progress,
            only=only,
        )[0]  # fmt: skip
        intervals, bias, more = bootstrap_intervals(
            metrics, boot, ci, interval_method,
            lambda names: _jackknife_vectors(p, binning, n_bins, seed, smooth=smooth, only=names),
        )  # fmt: skip
        notes += more
    bins = bins_of(st.topbin_sums(p, scheme), scheme)
    if bootstrap:
        acc = boot["bin_accuracy"]
        bins.band = np.array([_percentile(acc[:, j], ci) for j in range(acc.shape[1])]).T
        bins.band[:, bins.count == 0] = np.nan
    return EvaluationResult(metrics, bins, p.n, p.k, settings, intervals, notes, bias)
