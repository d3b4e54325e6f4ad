"""Bootstrap confidence intervals: percentile, basic and BCa, chosen per metric.

A metric's bootstrap replicates θ*_1..θ*_B (resamples of the N samples) and its estimate θ̂
give, at level 1 − 2α (Efron & Tibshirani 1993, ch. 13–14; Davison & Hinkley 1997, §5.2–5.3):

``percentile``
    [q_α, q_{1−α}], the replicates' quantiles. Right when θ̂ is unbiased; when θ̂ is biased
    upwards (every binned calibration error: resampling adds noise to each bin's gap, and
    the absolute value turns noise into error) the replicates are biased again, and the
    interval lies above θ̂, sometimes wholly.
``basic``
    [2θ̂ − q_{1−α}, 2θ̂ − q_α]: the replicates' spread around θ̂ taken as the estimate's
    spread around the truth, so it moves down by the bootstrap's estimate of the bias
    θ̄* − θ̂. Clipped to the metric's range (a calibration error is at least 0).
``two-pivot``
    for a debiased estimate θ̂_d of a binned error, whose plug-in θ̂ₚ is the binned error of
    the resampled population (the bootstrap world's truth): the hull of the basic interval
    and the plug-in pivot's [θ̂_d − (q_{1−α} − θ̂ₚ), θ̂_d − (q_α − θ̂ₚ)], that is
    [2θ̂_d − q_{1−α}, max(2θ̂_d − q_α, θ̂_d − q_α + θ̂ₚ)]. Where a model's gaps are noise
    (near calibration) the basic interval covers and the plug-in pivot lies too high; where
    they are signal, the other way round; the sample cannot tell which, so both are kept
    (docs/metrics.md, "The debiased estimators' intervals"). Clipped as basic is.
``bca``
    bias-corrected and accelerated: the quantiles at Φ(z₀ + (z₀ + z)/(1 − â(z₀ + z))), with
    z₀ = Φ⁻¹(share of replicates below θ̂, ties half) and the acceleration â from a
    jackknife over :data:`JACKKNIFE_GROUPS` groups of samples (the delete-a-group jackknife,
    Efron & Tibshirani §11.5; a leave-one-out jackknife would cost N evaluations).

Which one each metric uses (``interval="auto"``) and the range its intervals are clipped to
are its :class:`IntervalPolicy` in :data:`POLICIES` below, the methods chosen by the
coverage table of docs/metrics.md ("Do the intervals cover?"), measured on
:class:`~calibkit.metrics._synthetic.SyntheticClassifier`.

>>> policy("ece").method, policy("nll").most, policy("debiased_ece").plug_in
('basic', None, 'ece')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import torch
from torch import Tensor

#: groups of samples left out in turn to estimate BCa's acceleration
JACKKNIFE_GROUPS = 20


@dataclass(frozen=True)
class IntervalPolicy:
    """How a metric's bootstrap interval is made: ``method``, the one ``interval="auto"``
    gives it; ``least`` and ``most``, its least and greatest possible values (None:
    unbounded), to which every interval is clipped; ``plug_in``, for a debiased estimate,
    the plug-in metric it corrects (its ``two-pivot`` interval needs that estimate too)."""

    method: str = "percentile"
    least: float | None = 0.0
    most: float | None = 1.0
    plug_in: str | None = None


#: the calibration errors' default: the coverage study (docs/metrics.md, "Do the intervals
#: cover?") finds their percentile intervals biased upwards
BASIC = "basic"
#: the debiased binned errors' default: basic widened to the plug-in pivot (docs/metrics.md,
#: "The debiased estimators' intervals": it covers 90-94 % where basic covered 79 %)
TWO_PIVOT = "two-pivot"
_P = IntervalPolicy
#: every metric's policy; a metric not listed takes the percentile interval within [0, 1]
POLICIES: dict[str, IntervalPolicy] = {
    "ece": _P(BASIC),
    "aece": _P(BASIC),
    "mce": _P(BASIC),
    "classwise_ece": _P(BASIC),
    "nll": _P(most=None),
    "brier": _P(most=2.0),  # the sum over classes of squared errors: 2 with all mass wrong
    "entropy": _P(most=None),
    "ks_error": _P(BASIC),
    "rms_ce": _P(BASIC),
    "debiased_rms_ce": _P(BASIC),
    "debiased_ece": _P(TWO_PIVOT, plug_in="ece"),
    "debiased_classwise_ece": _P(TWO_PIVOT, plug_in="classwise_ece"),
    "gap": _P(least=-1.0),
    "overconfident": _P(BASIC),
    "underconfident": _P(BASIC),
}


def policy(name: str) -> IntervalPolicy:
    """The interval policy of metric ``name`` (``ood_auroc:<split>`` reads as ``ood_auroc``)."""
    return POLICIES.get(name.split(":", 1)[0], IntervalPolicy())


def describe(method: str, names) -> str:
    """One line naming the interval method of each metric in ``names``."""
    used: dict[str, list[str]] = {}
    for m in names:
        used.setdefault(policy(m).method if method == "auto" else method, []).append(m)
    if len(used) == 1:
        return f"intervals: {next(iter(used))} bootstrap"
    *rest, last = sorted(used.items(), key=lambda kv: len(kv[1]))
    parts = [f"{kind} for {', '.join(ms)}" for kind, ms in rest]
    return f"intervals: {'; '.join(parts)}; {last[0]} for the others (docs/metrics.md)"


def jackknife_groups(n: int, seed: int) -> list[Tensor]:
    """:data:`JACKKNIFE_GROUPS` (or n, if fewer) disjoint random groups of the n rows."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return [g for g in perm.tensor_split(min(JACKKNIFE_GROUPS, n)) if len(g)]


def acceleration(jack: Tensor) -> float:
    """BCa's â from the delete-a-group jackknife values (G,): Σ d³ / (6 (Σ d²)^{3/2}) with
    d = mean − θ_(g) (Efron & Tibshirani eq. 14.15); 0 where undefined."""
    jack = jack[torch.isfinite(jack)].double()
    if jack.numel() < 2:
        return 0.0
    d = jack.mean() - jack
    den = 6 * float((d * d).sum()) ** 1.5
    return float((d**3).sum()) / den if den > 0 else 0.0


def interval(
    replicates: Tensor,
    estimate: float,
    ci: float,
    method: str,
    *,
    lower_bound: float | None = None,
    upper_bound: float | None = None,
    jack: Tensor | None = None,
    plug_in: float | None = None,
) -> tuple[float, float]:
    """The ``ci`` interval of one metric by ``method`` (``percentile``, ``basic``, ``bca``)
    from its (B,) ``replicates`` (NaN replicates are dropped) and its ``estimate``;
    ``lower_bound``, ``upper_bound``: the metric's least and greatest possible values
    (None: unbounded); basic intervals, which reflect the replicates about the estimate and
    can leave the range (an MCE of [0.94, 1.80]), are clipped to them;
    ``jack``: delete-a-group jackknife values, for BCa's acceleration (None: â = 0);
    ``plug_in``: the plug-in estimate a debiased ``estimate`` corrects (``two-pivot``)."""
    if method == "two-pivot" and plug_in is None:
        raise ValueError("interval: two-pivot needs the plug-in estimate (plug_in=)")
    v = replicates[~torch.isnan(replicates)].double()
    if v.numel() == 0 or not math.isfinite(estimate):
        return (math.nan, math.nan)
    alpha = (1 - ci) / 2
    if method == "bca":
        below = float((v < estimate).sum() + 0.5 * (v == estimate).sum()) / v.numel()
        b = v.numel()
        normal = NormalDist()  # the standard library's: scipy.stats costs 0.8 s to import
        z0 = normal.inv_cdf(min(max(below, 1 / (b + 1)), b / (b + 1)))
        a = 0.0 if jack is None else acceleration(jack)
        levels = [
            normal.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
            for z in (normal.inv_cdf(alpha), normal.inv_cdf(1 - alpha))
        ]
    else:
        levels = [alpha, 1 - alpha]
    q = torch.quantile(v, torch.tensor(levels, dtype=torch.float64, device=v.device)).tolist()
    if method not in ("basic", "two-pivot"):
        return (q[0], q[1])
    lo, hi = 2 * estimate - q[1], 2 * estimate - q[0]
    if method == "two-pivot":
        hi = max(hi, estimate - q[0] + plug_in)
    if lower_bound is not None:
        lo, hi = max(lo, lower_bound), max(hi, lower_bound)
    if upper_bound is not None:
        lo, hi = min(lo, upper_bound), min(hi, upper_bound)
    return (lo, hi)
