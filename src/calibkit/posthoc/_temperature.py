"""Temperature scaling: by NLL (``ts``), by ECE over a grid (``ts-grid``), and the ensemble
of Zhang et al. 2020 (``ets``). docs/methods.md §2; Guo et al. 2017 §4.2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import torch
from torch import Tensor

from .._settings import Bounds, NBins, OneOf, Setting
from ..metrics import BinScheme, Prepared
from ..metrics.internal import best_temperature, check_grid, ece_over_temperatures, preset_grid
from ._base import Calibrator, FitReport

#: the bounds a temperature fit keeps T within
TMin = Annotated[
    float, Setting("Lowest temperature the fit may return", Bounds(0, 1e6, low_open=True))
]
TMax = Annotated[
    float, Setting("Highest temperature the fit may return", Bounds(0, 1e6, low_open=True))
]


def grid_values(grid: Any) -> Tensor:
    """A temperature grid from a preset name or a list of temperatures (float64)."""
    if isinstance(grid, str):
        return preset_grid(grid)
    if grid is None:
        raise ValueError("grid: pass a preset name or a list of temperatures")
    return check_grid(grid)


def _nll_and_derivatives(
    z: Tensor,
    y: Tensor,
    theta: float,
    z2: Tensor | None = None,
    z_y: Tensor | None = None,
    w: Tensor | None = None,
) -> tuple[float, float, float]:
    """Mean NLL of softmax(θ z) and its first two derivatives in θ (convex in θ); with
    weights ``w`` (N,), their weighted mean Σ wᵢ ℓᵢ / Σ wᵢ.

    Rows are processed in chunks that stay in cache; ``z2`` = z² and ``z_y`` = the label's
    logit may be passed precomputed.
    """
    z2 = z * z if z2 is None else z2
    z_y = z.gather(1, y[:, None])[:, 0] if z_y is None else z_y
    rows = max(1, (1 << 15) // z.shape[1])
    nll = g = h = 0.0
    for start in range(0, len(z), rows):
        c = z[start : start + rows]
        e = c * theta
        m = e.amax(1, keepdim=True)
        e.sub_(m).exp_()
        s0 = e.sum(1)
        ez = (e * c).sum(1) / s0
        ez2 = (e * z2[start : start + rows]).sum(1) / s0
        zy = z_y[start : start + rows]
        wc = 1.0 if w is None else w[start : start + rows]
        nll += float(((m[:, 0] + s0.log() - theta * zy) * wc).sum())
        g += float(((ez - zy) * wc).sum())
        h += float(((ez2 - ez * ez) * wc).sum())
    n = len(z) if w is None else float(w.sum())
    return nll / n, g / n, h / n


def fit_temperature(
    z: Tensor,
    y: Tensor,
    t_min: float,
    t_max: float,
    tol: float,
    max_iter: int,
    w: Tensor | None = None,
):
    """T minimising the mean NLL of z / T on [t_min, t_max] (weighted by ``w`` where given):
    safeguarded Newton on θ = 1/T.

    The NLL is convex in θ, so its derivative is increasing: every evaluation narrows a
    bracket [lo, hi] around the root, and a Newton step that leaves it is replaced by the
    bound (checked once) or by bisection. An optimum beyond a bound returns that bound with
    ``converged`` False. Returns (T, iterations, converged, nll).
    """
    z2, z_y = z * z, z.gather(1, y[:, None])[:, 0]
    lo, hi = 1.0 / t_max, 1.0 / t_min
    checked = set()
    theta = min(max(1.0, lo), hi)
    nll, converged, it = math.inf, False, 0
    for it in range(1, max_iter + 1):  # noqa: B007
        nll, g, h = _nll_and_derivatives(z, y, theta, z2, z_y, w)
        if abs(g) <= tol:
            converged = True
            break
        if (theta == 1.0 / t_max and g > 0) or (theta == 1.0 / t_min and g < 0):
            break  # at a bound, and the derivative points beyond it: the optimum is outside
        if g > 0:
            hi = theta
        else:
            lo = theta
        step = theta - g / h if h > 0 else math.nan
        if lo < step < hi:
            theta = step
        elif not math.isnan(step) and (step <= lo or step >= hi):
            bound = lo if step <= lo else hi
            if bound not in checked and bound in (1.0 / t_max, 1.0 / t_min):
                checked.add(bound)
                theta = bound
            else:
                theta = (lo + hi) / 2
        else:
            theta = (lo + hi) / 2
        if hi - lo <= 1e-15 * hi:
            break
    return 1.0 / theta, it, converged, nll


def check_bounds(t_min: Any, t_max: Any) -> None:
    """0 < t_min < t_max, both finite numbers; a one-line error otherwise."""
    ok = all(isinstance(t, int | float) and not isinstance(t, bool) for t in (t_min, t_max))
    if not ok or not 0 < t_min < t_max < math.inf:
        raise ValueError(f"t_min and t_max: need 0 < t_min < t_max, got {t_min} and {t_max}")


class TemperatureScaling(Calibrator):
    """z / T with T minimising the NLL on the calibration split (Guo et al. 2017).

    T is kept in [t_min, t_max]; an optimum beyond a bound is reported as not converged
    (for example logits that carry no information about the labels, where T → ∞).

    Attributes
    ----------
    temperature_ : Tensor
        The fitted T, a float64 scalar (after ``fit``).
    beta_ : float
        1 / T, the inverse temperature, under scikit-learn's name for it (its
        ``CalibratedClassifierCV(method="temperature")`` keeps ``beta_``).
    fit_report_ : FitReport
        What the fit did: NLL before and after, iterations, converged, anomalies.
    n_classes_ : int
        The number of classes seen in ``fit``.

    Examples
    --------
    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> d = demo_logits()
    >>> ts = posthoc.TemperatureScaling().fit(d["logits_val"], d["labels_val"])
    >>> round(float(ts.temperature_), 2)
    1.49
    >>> round(ts.beta_, 3)  # 1 / T, scikit-learn's name for it
    0.672
    >>> ts.fit_report_.converged
    True
    >>> calibrated = ts(d["logits_test"])  # calibrated logits: z / T, a tensor
    >>> ece(calibrated, d["labels_test"]) < ece(d["logits_test"], d["labels_test"])
    True
    >>> probs = ts.predict_proba(d["logits_test"][:3])  # numpy in, numpy out
    >>> probs.shape, probs.sum(1).round(6)
    ((3, 10), array([1., 1., 1.]))
    >>> path = ts.save(getfixture("tmp_path") / "ts.calib")  # safetensors + JSON, no pickle
    >>> float(posthoc.load(path).temperature_) == float(ts.temperature_)
    True
    """

    name = "ts"
    preserves_argmax = True
    weighted = True

    def __init__(
        self,
        *,
        t_min: TMin = 0.01,
        t_max: TMax = 100.0,
        tol: Annotated[
            float,
            Setting(
                "Stop when the NLL's derivative in 1/T is below this", Bounds(0, 1, low_open=True)
            ),
        ] = 1e-12,
        max_iter: Annotated[
            int, Setting("Most Newton steps", Bounds(1, 1_000_000, integer=True))
        ] = 100,
    ) -> None:
        super().__init__()
        self.t_min, self.t_max, self.tol, self.max_iter = t_min, t_max, tol, max_iter

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        check_bounds(s["t_min"], s["t_max"])
        return s

    @property
    def beta_(self) -> float:
        """1 / T, scikit-learn's ``beta_`` (its temperature scaling keeps the inverse)."""
        return 1.0 / float(self.temperature_)

    def _fit(self, z: Tensor, y: Tensor, w: Tensor | None = None) -> FitReport:
        before = _nll_and_derivatives(z, y, 1.0, w=w)[0]
        t, it, ok, after = fit_temperature(z, y, self.t_min, self.t_max, self.tol, self.max_iter, w)
        self.temperature_ = torch.tensor(t, dtype=torch.float64)
        return FitReport("nll", before, after, it, ok, details={"temperature": round(t, 6)})

    def _transform(self, z: Tensor) -> Tensor:
        return z / self.temperature_.to(z.device)

    def invariant_problem(self) -> str | None:
        return temperature_problem(self.temperature_, self.t_min, self.t_max)


def temperature_problem(t: Tensor, low: float, high: float) -> str | None:
    """A fitted temperature's invariant: one float in [low, high], the bounds its fit keeps."""
    if t.dtype not in (torch.float32, torch.float64) or t.numel() != 1:
        return f"the temperature is {t.dtype} of shape {tuple(t.shape)}, not one float"
    value = float(t)
    if not low <= value <= high:
        return f"the temperature {value:.6g} lies outside the fit's bounds [{low:g}, {high:g}]"
    return None


class TemperatureGrid(Calibrator):
    """z / T with T from a grid, minimising the ECE on the calibration split.

    ``grid`` is a preset (``"rethinking"``: 0.01…10 step 0.01, the default;
    ``"neural-clamping"``: 0.001…5 step 0.001; ``"focal-calibration"``: 0.1…10 step 0.1)
    or a list of temperatures. Ties go to the smallest T. Equals a brute-force scan of
    ``calibkit.metrics.ece(z / T, y)`` (tested).

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import TemperatureGrid
    >>> d = demo_logits()
    >>> cal = TemperatureGrid().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    1.36
    >>> round(cal.temperature_.item(), 2)  # the grid's T of least validation ECE
    1.3
    """

    name = "ts-grid"
    preserves_argmax = True

    def __init__(
        self,
        *,
        grid: Annotated[
            str | Sequence[float],
            Setting(
                "A preset (rethinking, neural-clamping, focal-calibration) or a list of "
                "temperatures > 0"
            ),
        ] = "rethinking",
        n_bins: NBins = 15,
    ) -> None:
        super().__init__()
        self.grid, self.n_bins = grid, n_bins

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        return s | {"grid": grid_values(s["grid"])}

    def _fit(self, z: Tensor, y: Tensor) -> FitReport:
        temps = self.checked()["grid"]
        p = Prepared(z, y, False)
        scheme = BinScheme(self.n_bins, "calibkit", z.dtype)
        best, after = best_temperature(p, scheme, temps)
        before = float(ece_over_temperatures(p, scheme, torch.ones(1, dtype=torch.float64))[0])
        self.temperature_ = temps[best].clone()
        return FitReport(
            "ece",
            before,
            after,
            len(temps),
            True,
            details={"temperature": float(temps[best])},
        )

    def _transform(self, z: Tensor) -> Tensor:
        return z / self.temperature_.to(z.device)

    def invariant_problem(self) -> str | None:
        grid = self.checked()["grid"]
        return temperature_problem(self.temperature_, float(grid.min()), float(grid.max()))


class EnsembleTemperatureScaling(Calibrator):
    """Ensemble temperature scaling (Zhang, Kailkhura & Han 2020, "Mix-n-Match", eq. 8).

    p = w₁ softmax(z/T) + w₂ softmax(z) + w₃ / K with w on the simplex. As in the authors'
    code, T and then w minimise ``loss`` on the calibration split: ``"mse"`` (their
    default, the Brier score) or ``"nll"``. The uniform weight is capped at 1 − 1e-6, so the
    mixture ranks classes strictly like z and the argmax is kept. ``forward`` returns
    log-probabilities.

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import EnsembleTemperatureScaling
    >>> d = demo_logits()
    >>> cal = EnsembleTemperatureScaling().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    1.21
    >>> round(cal.temperature_.item(), 4), cal.weights_.numpy().round(3)  # T, (w1, w2, w3)
    (1.3538, array([0.966, 0.033, 0.   ]))
    """

    name = "ets"
    preserves_argmax = True
    output = "log-probabilities"

    def __init__(
        self,
        *,
        loss: Annotated[
            str,
            Setting(
                "What T and the weights minimise: mse (Brier score) or nll", OneOf(("mse", "nll"))
            ),
        ] = "mse",
        t_min: TMin = 0.01,
        t_max: TMax = 100.0,
    ) -> None:
        super().__init__()
        self.loss, self.t_min, self.t_max = loss, t_min, t_max

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        check_bounds(s["t_min"], s["t_max"])
        return s

    def _loss(self, p: Tensor, y: Tensor) -> float:
        if self.loss == "nll":
            return float(-(p.gather(1, y[:, None]).clamp_min(1e-300).log()).mean())
        onehot = torch.nn.functional.one_hot(y, p.shape[1]).double()
        return float(((p - onehot) ** 2).sum(1).mean())

    def _fit(self, z: Tensor, y: Tensor) -> FitReport:
        from scipy.optimize import minimize, minimize_scalar

        if self.loss == "nll":
            t = fit_temperature(z, y, self.t_min, self.t_max, 1e-12, 100)[0]
        else:
            res = minimize_scalar(
                lambda lt: self._loss(torch.softmax(z / math.exp(lt), 1), y),
                bounds=(math.log(self.t_min), math.log(self.t_max)),
                method="bounded",
                options={"xatol": 1e-8},
            )
            t = math.exp(res.x)
        comps = [torch.softmax(z / t, 1), torch.softmax(z, 1), torch.full_like(z, 1.0 / z.shape[1])]
        mix = lambda w: sum(float(wi) * c for wi, c in zip(w, comps, strict=True))  # noqa: E731
        res = minimize(
            lambda w: self._loss(mix(w), y),
            x0=np.array([1.0, 0.0, 0.0]),
            method="SLSQP",
            bounds=[(0, 1), (0, 1), (0, 1 - 1e-6)],  # some weight on z keeps the ranking strict
            constraints={"type": "eq", "fun": lambda w: w.sum() - 1},
            tol=1e-12,
        )
        w = np.clip(res.x, 0, 1)
        w[2] = min(w[2], 1 - 1e-6)
        w = w / w.sum()
        self.temperature_ = torch.tensor(t, dtype=torch.float64)
        self.weights_ = torch.from_numpy(w)
        before, after = self._loss(comps[1], y), self._loss(mix(w), y)
        return FitReport(
            self.loss,
            before,
            after,
            int(res.nit),
            bool(res.success),
            details={"temperature": round(t, 6), "weights": [round(float(v), 6) for v in w]},
        )

    def invariant_problem(self) -> str | None:
        w = self.weights_
        if w.dtype != torch.float64 or w.shape != (3,) or bool((w < 0).any()):
            return "the mixture weights are not 3 non-negative floats"
        if abs(float(w.sum()) - 1) > 1e-9:
            return f"the mixture weights sum to {float(w.sum()):.6g}, not 1"
        return temperature_problem(self.temperature_, self.t_min, self.t_max)

    def _transform(self, z: Tensor) -> Tensor:
        w = self.weights_.to(z.device)
        p = (
            w[0] * torch.softmax(z / self.temperature_.to(z.device), 1)
            + w[1] * torch.softmax(z, 1)
            + w[2] / z.shape[1]
        )
        return p.log()
