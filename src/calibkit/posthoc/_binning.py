"""Calibrators that remap confidences: histogram binning, isotonic regression and the
scaling-binning calibrator of Kumar et al. 2019 (docs/methods.md §2).

Top-label mode (the default) remaps only the confidence c of the predicted class to c′ and
rescales every other class by (1 − c′)/(1 − c), so rows still sum to one. The predicted
class stays the predicted class: c′ is floored just above the value at which the
runner-up p₂(1 − c′)/(1 − c) would catch up, c′ ≥ p₂/(1 − c + p₂) (strictly, by 1e-12),
which only binds where a bin's accuracy is below the runner-up's rescaled share.
One-vs-rest mode remaps each class's probability with its own map and renormalises; it
may change the argmax. ``forward`` returns log-probabilities; probabilities that the map
sets to exactly 0 are floored at the smallest normal float64 (2.2e-308, log −708), so
outputs stay finite and still sum to one to within 1e-300.
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
import torch
from torch import Tensor

from .._settings import Bounds, NBins, OneOf, Seed, Setting
from ._base import Calibrator, FitReport
from ._temperature import fit_temperature

MODES = ("top-label", "one-vs-rest")
Mode = Annotated[
    str,
    Setting(
        "top-label: one map of the top confidence; one-vs-rest: one map per class, rows "
        "renormalised",
        OneOf(MODES),
    ),
]
TINY = torch.finfo(torch.float64).tiny


def _const(like: Tensor, value: float) -> Tensor:
    """``value`` as a 0-d tensor of ``like``'s dtype. The maps below use it for constants that
    float32 cannot hold (TINY, 1e-300, 1e-12): the ONNX exporter stores a Python float as
    float32, where TINY and 1e-300 become 0; a tensor constant keeps its dtype."""
    return torch.tensor(value, dtype=like.dtype, device=like.device)


def _quantiles(n_bins: int, like: Tensor) -> Tensor:
    """The n_bins + 1 levels 0, 1/n_bins, ..., 1 (float64) on ``like``'s device."""
    return torch.linspace(0, 1, n_bins + 1, dtype=torch.float64, device=like.device)


def _top_two(p: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Top value, runner-up value, and the predicted class (argmax's first index on ties,
    the class a user's argmax names)."""
    top2 = p.topk(2, dim=1)
    return top2.values[:, 0], top2.values[:, 1], p.argmax(1)


def replace_top(p: Tensor, new_conf: Tensor) -> Tensor:
    """Log-probabilities with the top class's probability set to ``new_conf``, others rescaled,
    the predicted class kept on top (see the module docstring). A one-hot row (c = 1, the
    runner-up 0) has no floor: its other classes stay 0 (then TINY)."""
    c, p2, idx = _top_two(p)
    # 1 − c as the sum of the other probabilities: for c near 1, 1 − c would cancel (a
    # relative error of eps / (1 − c), 3.5e-4 in the rescaled classes at c = 1 − 1e-12),
    # and PyTorch and onnxruntime, whose exp differ in the last bit, would disagree by it
    others = p.scatter(1, idx[:, None], 0.0).sum(1)
    denominator = others + p2
    tiny = _const(p, 1e-300)
    floor = torch.where(denominator > 0, p2 / denominator.clamp_min(tiny), 0.0)
    c_new = torch.maximum(new_conf, floor + _const(p, 1e-12) * (1 - floor)).clamp(0, 1)
    scale = torch.where(others > 0, (1 - c_new) / others.clamp_min(tiny), torch.zeros_like(c))
    out = p * scale[:, None]
    out.scatter_(1, idx[:, None], c_new[:, None])
    return out.clamp_min(_const(out, TINY)).log()


def _nll_gain(p: Tensor, y: Tensor, logq: Tensor) -> tuple[float, float]:
    before = float(-(p.gather(1, y[:, None]).clamp_min(1e-300).log()).mean())
    after = float(-(logq.gather(1, y[:, None]).clamp_min(-690)).mean())
    return before, after


class _ConfidenceMap(Calibrator):
    """Shared parts: a monotone map fitted per column (top label, or each class)."""

    output = "log-probabilities"

    def __init__(self, *, mode: Mode = "top-label") -> None:
        super().__init__()
        self.mode = mode

    @property
    def preserves_argmax(self) -> bool:  # type: ignore[override]
        return self.mode == "top-label"

    def _pairs(self, p: Tensor, y: Tensor) -> list[tuple[Tensor, Tensor]]:
        if self.mode == "top-label":
            c, _, pred = _top_two(p)
            return [(c, (pred == y).double())]
        return [(p[:, k], (y == k).double()) for k in range(p.shape[1])]

    def _fit(self, z: Tensor, y: Tensor, w: Tensor | None = None) -> FitReport:
        p = torch.softmax(z, 1)
        if w is None:
            self._fit_maps(self._pairs(p, y))
        else:  # only a map whose fit weights (``weighted``) is handed weights
            self._fit_maps(self._pairs(p, y), w)
        before, after = _nll_gain(p, y, self._transform(z))
        return FitReport("nll", before, after, 1, True)

    def one_vs_rest_scores(self, z: Tensor) -> Tensor:
        """(N, K) float64: each class's probability from its own map, before
        ``mode="one-vs-rest"`` renormalises the rows (they need not sum to one). The
        published tables of markus93/NN_calibration scored these rows (docs/posthoc.md)."""
        if self.mode != "one-vs-rest":
            raise ValueError(f"one_vs_rest_scores needs mode='one-vs-rest', not {self.mode!r}")
        self._require_fitted()
        return self._per_class(torch.softmax(torch.as_tensor(z).double(), 1))

    def _per_class(self, p: Tensor) -> Tensor:
        return torch.stack([self._apply_map(k, p[:, k]) for k in range(p.shape[1])], 1)

    def _transform(self, z: Tensor) -> Tensor:
        p = torch.softmax(z.double(), 1)
        if self.mode == "top-label":
            return replace_top(p, self._apply_map(0, _top_two(p)[0]))
        q = self._per_class(p)
        total = q.sum(1, keepdim=True)
        q = torch.where(total > 0, q / total.clamp_min(_const(q, 1e-300)), p)  # all 0: keep p
        return q.clamp_min(_const(q, TINY)).log()

    def _fit_maps(self, pairs: list[tuple[Tensor, Tensor]]) -> None:
        raise NotImplementedError

    def _apply_map(self, column: int, values: Tensor) -> Tensor:
        raise NotImplementedError


def _map_problem(
    edges: Tensor | None, values: Tensor, *, increasing: bool, name: str
) -> str | None:
    """The invariants of a fitted confidence map: ``edges`` (rows of bin edges or
    thresholds) non-decreasing, from 0 to 1 where they are bin edges; ``values``
    probabilities in [0, 1] (NaN: an empty bin), non-decreasing where ``increasing``."""
    if edges is not None and (
        not edges.is_floating_point() or bool((edges.diff(dim=-1) < 0).any())
    ):
        return f"the {name} edges are not sorted"
    v = values.nan_to_num(0.5)
    if not values.is_floating_point() or bool(((v < 0) | (v > 1)).any()):
        return f"the {name} map gives values outside [0, 1]"
    if increasing and bool((v.diff(dim=-1) < 0).any()):
        return f"the {name} map decreases (its fit is monotone non-decreasing)"
    return None


class HistogramBinning(_ConfidenceMap):
    """Confidence → accuracy of its bin on the calibration split (Zadrozny & Elkan 2001).

    ``strategy="uniform"``: ``n_bins`` equal-width bins, (lo, hi] as in the metrics;
    ``"quantile"``: equal-mass edges from the calibration confidences.

    ``empty`` says what a bin that held no calibration sample maps to:

    * ``"keep"`` (calibkit's default): the input confidence, unchanged. Nothing was
      learned there, so nothing is changed; the prediction of a top-label map is kept.
    * ``"zero"``: probability 0, the convention of the code behind the published tables
      (Kängsepp's ``HistogramBinning`` in markus93/NN_calibration, used by Kull et al.
      2019): its empty bins return an accuracy of 0. In one-vs-rest mode a class whose
      bins are all empty for a row then loses that row, which can change the prediction.

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import HistogramBinning
    >>> d = demo_logits()
    >>> cal = HistogramBinning().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    1.01
    >>> round(cal.values_[0, -1].item(), 4)  # the top bin's accuracy on the validation rows
    0.9928
    """

    nan_means_empty = ("values_",)  # an empty bin: NaN, resolved by ``empty`` when applied

    name = "hist-binning"
    #: a bin's one probability for every confidence in it is coarse: NLL rises by design
    #: (136 of the 335 flags of the default preset's report were this, none a failure)
    expected_anomalies = frozenset({"worse-nll"})

    def __init__(
        self,
        *,
        n_bins: NBins = 15,
        strategy: Annotated[
            str,
            Setting(
                "uniform: equal-width bins; quantile: equal-count bins",
                OneOf(("uniform", "quantile")),
            ),
        ] = "uniform",
        mode: Mode = "top-label",
        empty: Annotated[
            str,
            Setting(
                "What a bin empty on the calibration split maps to: keep (the confidence "
                "as it is) or zero",
                OneOf(("keep", "zero")),
            ),
        ] = "keep",
    ) -> None:
        super().__init__(mode=mode)
        self.n_bins, self.strategy, self.empty = n_bins, strategy, empty

    def _fit_maps(self, pairs: list[tuple[Tensor, Tensor]]) -> None:
        edges, values = [], []
        for conf, hit in pairs:
            if self.strategy == "uniform":
                e = torch.linspace(0, 1, self.n_bins + 1, dtype=torch.float64, device=conf.device)
            else:
                e = torch.quantile(conf, _quantiles(self.n_bins, conf))
                e[0], e[-1] = 0.0, 1.0
            idx = torch.bucketize(conf.contiguous(), e[1:-1].contiguous())
            count = torch.bincount(idx, minlength=self.n_bins).double()
            acc = torch.bincount(idx, hit, minlength=self.n_bins) / count.clamp_min(1)
            edges.append(e)
            values.append(torch.where(count > 0, acc, torch.full_like(acc, torch.nan)))
        self.edges_, self.values_ = torch.stack(edges), torch.stack(values)

    def invariant_problem(self) -> str | None:
        e = self.edges_
        if bool((e[..., 0] != 0).any()) or bool((e[..., -1] != 1).any()):
            return "the histogram edges do not run from 0 to 1"
        return _map_problem(e, self.values_, increasing=False, name="histogram")

    def _apply_map(self, column: int, values: Tensor) -> Tensor:
        e, v = self.edges_[column].to(values.device), self.values_[column].to(values.device)
        mapped = v[torch.bucketize(values.contiguous(), e[1:-1].contiguous())]
        return torch.where(torch.isnan(mapped), 0.0 if self.empty == "zero" else values, mapped)


class IsotonicCalibration(_ConfidenceMap):
    """Isotonic regression of correctness on confidence (scikit-learn's PAV), applied by
    linear interpolation between its thresholds and clipped at the ends, exactly as
    ``IsotonicRegression(out_of_bounds="clip").predict``; stored as tensors, so it runs on
    any device and saves without pickle.

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import IsotonicCalibration
    >>> d = demo_logits()
    >>> cal = IsotonicCalibration().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    1.53
    >>> cal.y_.numpy().round(4)  # the fitted step values at the thresholds cal.x_
    array([[0.    , 0.4545, 0.4545, 0.8333, 0.8333, 1.    , 1.    ]])
    """

    name = "isotonic"
    about = "Isotonic regression of correctness on confidence (scikit-learn's PAV)."
    weighted = True

    def __init__(self, *, mode: Mode = "top-label") -> None:
        super().__init__(mode=mode)

    def _fit_maps(self, pairs: list[tuple[Tensor, Tensor]], w: Tensor | None = None) -> None:
        from sklearn.isotonic import IsotonicRegression

        xs, ys = [], []
        weights = None if w is None else w.cpu().numpy()
        for conf, hit in pairs:
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
            iso.fit(conf.cpu().numpy(), hit.cpu().numpy(), sample_weight=weights)
            xs.append(torch.from_numpy(np.asarray(iso.X_thresholds_, dtype=np.float64)))
            ys.append(torch.from_numpy(np.asarray(iso.y_thresholds_, dtype=np.float64)))
        self.sizes_ = torch.tensor([len(x) for x in xs])
        width = int(self.sizes_.max())
        pad = lambda t: torch.cat([t, t[-1:].expand(width - len(t))])  # noqa: E731
        self.x_, self.y_ = torch.stack([pad(x) for x in xs]), torch.stack([pad(y) for y in ys])

    def invariant_problem(self) -> str | None:
        return _map_problem(self.x_, self.y_, increasing=True, name="isotonic")

    def _apply_map(self, column: int, values: Tensor) -> Tensor:
        # x_ and y_ are padded by repeating the last threshold: a point at or past it lands
        # on a zero-width segment whose left end is the last threshold, so no slice to the
        # column's own length (a data-dependent size, which ONNX export cannot trace) is needed
        x, y = self.x_[column].to(values.device), self.y_[column].to(values.device)
        if len(x) == 1:
            return y[0].expand_as(values).clone()
        v = torch.minimum(torch.maximum(values, x[0]), x[-1])
        i = torch.bucketize(v.contiguous(), x, right=True).clamp(1, len(x) - 1)
        x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
        frac = torch.where(x1 > x0, (v - x0) / (x1 - x0), torch.zeros_like(v))
        return y0 + frac * (y1 - y0)


class ScalingBinning(_ConfidenceMap):
    """The scaling-binning calibrator of Kumar et al. 2019 (top-label form).

    The calibration split is halved (seeded): temperature scaling is fitted on the first
    half; the second half's scaled confidences are cut into ``n_bins`` equal-mass bins, and
    each bin outputs the mean scaled confidence of its members. A new confidence is scaled,
    binned, and replaced by its bin's mean.

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import ScalingBinning
    >>> d = demo_logits()
    >>> cal = ScalingBinning().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    0.92
    >>> round(cal.temperature_.item(), 4), len(cal.values_)  # T from one half, 15 bins
    (0.8726, 15)
    """

    nan_means_empty = ("values_",)  # an empty bin keeps the scaled confidence

    name = "scaling-binning"

    def __init__(self, *, n_bins: NBins = 15, seed: Seed = 0) -> None:
        super().__init__(mode="top-label")
        self.n_bins, self.seed = n_bins, seed

    def _fit(self, z: Tensor, y: Tensor) -> FitReport:
        gen = torch.Generator().manual_seed(self.seed)
        order = torch.randperm(len(y), generator=gen).to(z.device)
        first, second = order[: len(y) // 2], order[len(y) // 2 :]
        t, *_ = fit_temperature(z[first], y[first], 0.01, 100.0, 1e-12, 100)
        self.temperature_ = torch.tensor(t, dtype=torch.float64)
        conf = _top_two(torch.softmax(z[second] / t, 1))[0].contiguous()
        e = torch.quantile(conf, _quantiles(self.n_bins, conf))
        e[0], e[-1] = 0.0, 1.0
        idx = torch.bucketize(conf, e[1:-1].contiguous())
        count = torch.bincount(idx, minlength=self.n_bins).double()
        means = torch.bincount(idx, conf, minlength=self.n_bins) / count.clamp_min(1)
        self.edges_ = e
        self.values_ = torch.where(count > 0, means, torch.full_like(means, torch.nan))
        p = torch.softmax(z, 1)
        before, after = _nll_gain(p, y, self._transform(z))
        return FitReport("nll", before, after, 1, True, details={"temperature": round(t, 6)})

    def invariant_problem(self) -> str | None:
        from ._temperature import temperature_problem

        return temperature_problem(self.temperature_, 0.01, 100.0) or _map_problem(
            self.edges_, self.values_, increasing=False, name="scaling-binning"
        )

    def _transform(self, z: Tensor) -> Tensor:
        p_t = torch.softmax(z.double() / self.temperature_.to(z.device), 1)
        conf = _top_two(p_t)[0].contiguous()
        v = self.values_.to(z.device)[
            torch.bucketize(conf, self.edges_.to(z.device)[1:-1].contiguous())
        ]
        return replace_top(p_t, torch.where(torch.isnan(v), conf, v))


#: Beta calibration's parameterisations (Kull et al. 2017, §3): all three of a, b and the
#: midpoint m; a = b (``am``); m = 1/2 (``ab``)
BETA_PARAMETERS = ("abm", "am", "ab")
#: Newton iterations of one beta map; every fit on the shared data converged in under 15
BETA_MAX_ITER = 100
#: the largest |a|, |b| or |c| a loaded beta map may hold: a fit past it has diverged
#: (separable labels), and a forged 1e300 would make every output 0, 1 or NaN
BETA_MAX_COEF = 1e6
FLOAT64_EPS = float(torch.finfo(torch.float64).eps)
Clip = Annotated[
    float,
    Setting(
        "Confidences are clipped to [clip, 1 − clip] before the logs",
        Bounds(0, 0.5, low_open=True, high_open=True),
    ),
]


def logistic_newton(
    x: Tensor, t: Tensor, max_iter: int, rows: Tensor | None = None
) -> tuple[Tensor, int, bool]:
    """Unpenalised logistic regression of the targets ``t`` (N,) in [0, 1] (0/1 labels, or
    Platt's smoothed targets) on the columns of ``x`` (N, d), each row's loss weighted by
    ``rows`` (N,) where given: Newton's method with step halving, in ``x``'s dtype; a step
    whose loss rises by no more than the loss's rounding (4 ulp) is taken whole, since near
    the optimum the loss cannot tell steps apart while the gradient still can. Returns
    (weights (d,), iterations, converged: the largest gradient entry below 1e-10)."""
    w = x.new_zeros(x.shape[1])
    r = torch.ones_like(t) if rows is None else rows.to(t)
    r = r / r.sum()

    def loss(v: Tensor) -> Tensor:
        s = x @ v
        return ((torch.nn.functional.softplus(s) - t * s) * r).sum()

    current = loss(w)
    for it in range(1, max_iter + 1):
        prob = torch.sigmoid(x @ w)
        grad = x.T @ ((prob - t) * r)
        if float(grad.abs().max()) < 1e-10:
            return w, it, True
        hess = (x.T * (prob * (1 - prob) * r)) @ x
        step = torch.linalg.solve(
            hess + 1e-12 * torch.eye(len(w), dtype=x.dtype, device=x.device), grad
        )
        for _ in range(50):  # halve until the loss does not rise beyond its rounding
            trial = w - step
            new = loss(trial)
            if bool(new <= current + 4 * torch.finfo(x.dtype).eps * current.abs()):
                break
            step = step / 2
        w, current = trial, new
    return w, max_iter, False


def _constant_map(like: Tensor, rate: float) -> Tensor:
    """(a, b, c) of the beta map that gives ``rate`` (in (0, 1)) whatever the confidence."""
    return like.new_tensor([0.0, 0.0, math.log(rate / (1 - rate))])


def _beta_features(p: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(ln p, −ln(1 − p)) with p clipped to [``eps``, 1 − ``eps``]."""
    p = p.double().clamp(eps, 1 - eps)
    return p.log(), -torch.log1p(-p)


class BetaCalibration(_ConfidenceMap):
    """Beta calibration (Kull, Silva Filho & Flach 2017): a confidence p maps to
    σ(a ln p − b ln(1 − p) + c), fitted by maximum likelihood of correctness (top-label) or
    of class membership (one-vs-rest, the form of Kull et al.'s and markus93's tables).

    ``parameters``:

    * ``"abm"``: a, b ≥ 0 and c free. Where the unconstrained fit gives a negative a or b,
      that term is dropped and the other refitted, as the paper's own code does; where
      that one is negative too, a = b = 0 and the map is the constant base rate, the
      optimum under both bounds (netcal's bounded fit finds the same).
    * ``"am"``: a = b, logistic calibration of the log-odds.
    * ``"ab"``: midpoint m = 1/2, so c = (a − b) ln 2.

    The fit is an exact Newton solve in float64 (two or three parameters), not
    scikit-learn's ``LogisticRegression`` as in ``betacal``: that stops at its default
    tolerance, and its maps then differ from the optimum by up to 4e-3 in probability on
    the ResNet-110 logits. A class whose labels are all equal on the calibration split gets
    the constant map at that value (clipped to [1e-12, 1 − 1e-12]). ``coef_`` holds
    (a, b, c) per map.

    ``clip``: confidences are clipped to [clip, 1 − clip] before the logs. The default is
    float64's machine epsilon (2.2e-16), as ``betacal`` clips float64 input; ``betacal``
    clips at its input dtype's epsilon, so the float32 probabilities behind markus93's
    published tables were clipped at 1.1920929e-07, which moves their test log-loss by 0.004
    (docs/posthoc.md).

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import BetaCalibration
    >>> d = demo_logits()
    >>> cal = BetaCalibration().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    1.29
    >>> cal.coef_.numpy().round(4)  # (a, b, c): a < 0 was dropped, b refitted
    array([[ 0.    ,  0.9667, -0.7847]])
    """

    name = "beta"
    about = "Beta calibration: σ(a ln p − b ln(1 − p) + c) of each confidence (Kull et al. 2017)."

    def __init__(
        self,
        *,
        mode: Mode = "top-label",
        parameters: Annotated[
            str,
            Setting(
                "abm: a, b and the midpoint; am: a = b; ab: midpoint 1/2 (Kull et al. 2017, §3)",
                OneOf(BETA_PARAMETERS),
            ),
        ] = "abm",
        clip: Clip = FLOAT64_EPS,
    ) -> None:
        super().__init__(mode=mode)
        self.parameters, self.clip = parameters, clip

    def _fit(self, z: Tensor, y: Tensor) -> FitReport:
        p = torch.softmax(z, 1)
        fits = [self._fit_one(conf, hit) for conf, hit in self._pairs(p, y)]
        self.coef_ = torch.stack([f[0] for f in fits])
        before, after = _nll_gain(p, y, self._transform(z))
        return FitReport("nll", before, after, sum(f[1] for f in fits), all(f[2] for f in fits))

    def _fit_one(self, conf: Tensor, hit: Tensor) -> tuple[Tensor, int, bool]:
        """(a, b, c), Newton iterations, converged for one map."""
        t = hit.double()
        if bool(t.min() == t.max()):
            return _constant_map(t, min(max(float(t[0]), 1e-12), 1 - 1e-12)), 0, True
        lp, lq = _beta_features(conf, self.clip)
        one = torch.ones_like(lp)
        if self.parameters == "am":
            (w, c), it, ok = logistic_newton(torch.stack([lp + lq, one], 1), t, BETA_MAX_ITER)
            if w < 0:  # a decreasing map: the best monotone one is the constant base rate
                return _constant_map(t, float(t.mean())), it, ok
            return torch.stack([w, w, c]), it, ok
        if self.parameters == "ab":
            ln2 = math.log(2.0)
            (a, b), it, ok = logistic_newton(torch.stack([lp + ln2, lq - ln2], 1), t, BETA_MAX_ITER)
            return torch.stack([a, b, (a - b) * ln2]), it, ok
        (a, b, c), it, ok = logistic_newton(torch.stack([lp, lq, one], 1), t, BETA_MAX_ITER)
        if a < 0 or b < 0:  # drop the negative term, refit the other (Kull et al. 2017, §3)
            keep = lq if a < 0 else lp
            (w, c), more, ok = logistic_newton(torch.stack([keep, one], 1), t, BETA_MAX_ITER)
            a, b = (a.new_zeros(()), w) if a < 0 else (w, b.new_zeros(()))
            it += more
            if w < 0:  # both at their bound: the best map is the constant base rate
                return _constant_map(t, float(t.mean())), it, ok
        return torch.stack([a, b, c]), it, ok

    def invariant_problem(self) -> str | None:
        c = self.coef_
        if not c.is_floating_point() or c.dim() != 2 or c.shape[1] != 3:
            return "the beta map's coefficients are not rows of (a, b, c)"
        if not bool(torch.isfinite(c).all()):
            return "the beta map's coefficients are not finite"
        if bool((c.abs() > BETA_MAX_COEF).any()):
            return f"the beta map has a coefficient beyond ±{BETA_MAX_COEF:g} (a fit stops short)"
        if self.parameters in ("abm", "am") and bool((c[:, :2] < 0).any()):
            return "the beta map has a negative a or b (its fit keeps both >= 0: a monotone map)"
        if self.parameters == "am" and not torch.equal(c[:, 0], c[:, 1]):
            return "the beta map's a and b differ, where parameters='am' fits a = b"
        constant = (c[:, 0] == 0) & (c[:, 1] == 0)  # a class whose labels are all equal
        midpoint = torch.isclose(c[:, 2], (c[:, 0] - c[:, 1]) * math.log(2.0), 1e-9, 1e-12)
        if self.parameters == "ab" and not bool((constant | midpoint).all()):
            return "the beta map's c is not (a − b) ln 2, where parameters='ab' fits it so"
        return None

    def _apply_map(self, column: int, values: Tensor) -> Tensor:
        a, b, c = self.coef_[column].to(values.device)
        lp, lq = _beta_features(values, self.clip)
        return torch.sigmoid(a * lp + b * lq + c)


class PlattScaling(BetaCalibration):
    """Platt scaling (logistic calibration) of each confidence's log-odds:
    σ(a · ln(p/(1 − p)) + c), fitted by maximum likelihood, top-label or one-vs-rest. It is
    beta calibration with a = b (Kull et al. 2017, §3), the form scikit-learn's
    ``CalibratedClassifierCV(method="sigmoid")`` fits on a classifier's scores.

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import PlattScaling
    >>> d = demo_logits()
    >>> cal = PlattScaling().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    1.25
    >>> cal.coef_.numpy().round(4)  # a = b: one slope on the log-odds, and c
    array([[ 0.8503,  0.8503, -0.3091]])
    """

    name = "platt"
    about = "Platt scaling: σ(a · logit(p) + c) of each confidence (beta calibration with a = b)."

    def __init__(self, *, mode: Mode = "top-label", clip: Clip = FLOAT64_EPS) -> None:
        super().__init__(mode=mode, parameters="am", clip=clip)
