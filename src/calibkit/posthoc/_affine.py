"""Affine calibrators on logits or log-probabilities (docs/methods.md §2; Kull et al. 2019).

| name | map | penalty (added to the mean NLL) |
| --- | --- | --- |
| ``vector`` | w ⊙ z + b | none |
| ``matrix`` | W z + b | none |
| ``ms-odir`` | W z + b | λ/(K(K−1)) Σ_{j≠k} W_jk² + μ/K Σ_j b_j² |
| ``dir-l2`` | W log softmax(z) + b | λ/K² Σ_{j,k} W_jk² |
| ``dir-odir`` | W log softmax(z) + b | as ms-odir |

Fits are full batch in float64 with L-BFGS and a strong-Wolfe line search on
K-FAC-preconditioned parameters (:func:`fit_affine`), started from the identity map
(W = I, b = 0) so that an unregularised fit can only lower the NLL.
Regularised methods choose λ (and μ) from ``lambdas`` × ``mus`` (default the 7 values
1e-2 … 1e4 of the Neural Clamping paper, separately) by K-fold cross-validation on the
calibration split, scoring held-out mean NLL. A choice on an edge of the grid (the largest
value tried, or the smallest above 0) grows the grid a decade past that edge, up to
``GRID_EXTENSIONS`` times (``extend_grid=false`` keeps the grid as given); a choice still on
an edge is flagged as the ``grid-edge`` anomaly. The final map is refitted on the whole split
with the chosen values, or, with ``average_folds=True``, is the average of the fold models'
probabilities (the protocol of Kull et al. 2019). Folds are stratified and seeded.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import torch
from torch import Tensor

from .._settings import Bounds, Seed, Setting
from ._affine_fit import CV_TOL, _features, fit_affine
from ._base import Calibrator, FitReport

MaxIter = Annotated[
    int, Setting("Most L-BFGS iterations of the final fit", Bounds(1, 1_000_000, integer=True))
]
DEFAULT_GRID = (1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
#: Iteration cap of each cross-validation fit. The grid is walked from the strongest
#: penalty to the weakest, each fit starting from its neighbour's solution, so most fits
#: converge in a few iterations; the weakly regularised ones overfit slowly, and a partly
#: converged fit still ranks them (the final fit runs to ``max_iter``). On the six real
#: CIFAR-100 networks of the shared data (5,000 calibration logits each), a cap of 25
#: against 50 chose the same λ for MS-ODIR (6 of 6) and Dir-ODIR (5 of 6; μ moved where
#: the held-out NLL is flat in it, test NLL equal to 1e-5); on the sixth it chose λ = 100
#: over 1000, with a lower test NLL (0.9400 against 0.9548). See docs/posthoc.md.
CV_MAX_ITER = 25
#: An unregularised fit with fewer than this many samples per parameter is flagged: it can
#: interpolate the calibration split (matrix scaling on 5,000 CIFAR-100 logits, 10,100
#: parameters, drove the training NLL to 2.5e-8).
SAMPLES_PER_PARAMETER = 10
#: Where the cross-validated choice sits on an edge of its grid, the grid grows a decade past
#: that edge and the new points are scored, up to this many times; a choice still on an
#: edge is flagged (``grid-edge``; docs/posthoc.md gives how often it happened).
GRID_EXTENSIONS = 3
#: the largest |coefficient| a loaded affine map may hold: past it, the map makes every
#: output one-hot (a forged 1e300 does), as a fit that has diverged would
AFFINE_MAX_COEF = 1e6


def _folds(y: Tensor, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import KFold, StratifiedKFold

    labels = y.cpu().numpy()
    counts = np.bincount(labels)
    if counts[counts > 0].min() >= n_folds:
        split = StratifiedKFold(n_folds, shuffle=True, random_state=seed)
    else:  # a class too rare to appear in every fold
        split = KFold(n_folds, shuffle=True, random_state=seed)
    return list(split.split(np.zeros(len(labels)), labels))


def _same_grid(a: Any, b: Any) -> bool:
    try:
        return list(map(float, a)) == list(map(float, b))
    except (TypeError, ValueError):
        return False


class AffineCalibrator(Calibrator):
    """Shared implementation of vector, matrix and Dirichlet scaling; see the module docstring."""

    matrix: bool = True
    dirichlet: bool = False
    reg: str | None = None
    cross_validated = True  # λ (and μ) from a grid by k-fold CV

    def __init__(
        self,
        *,
        lambdas: Annotated[
            float | Sequence[float],
            Setting("The penalty λ's grid, chosen by cross-validation (values >= 0)"),
        ] = DEFAULT_GRID,
        mus: Annotated[
            float | Sequence[float],
            Setting("The bias penalty μ's grid (ODIR methods only; values >= 0)"),
        ] = DEFAULT_GRID,
        folds: Annotated[int, Setting("Cross-validation folds", Bounds(2, 1000, integer=True))] = 5,
        average_folds: Annotated[
            bool,
            Setting(
                "Average the fold models' probabilities (Kull et al. 2019's protocol) "
                "instead of refitting on the whole split"
            ),
        ] = False,
        seed: Seed = 0,
        max_iter: MaxIter = 1000,
        penalise_bias: Annotated[
            bool, Setting("Penalise the bias by λ too (dir-l2 only, as Kull et al.'s code)")
        ] = False,
        extend_grid: Annotated[
            bool,
            Setting(
                "Grow a grid whose choice lies on its edge a decade at a time, up to "
                "GRID_EXTENSIONS times"
            ),
        ] = True,
    ) -> None:
        super().__init__()
        self.lambdas, self.mus, self.folds = lambdas, mus, folds
        self.average_folds, self.seed, self.max_iter = average_folds, seed, max_iter
        self.penalise_bias, self.extend_grid = penalise_bias, extend_grid

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        if s["penalise_bias"] and cls.reg != "l2":
            raise ValueError(
                f"penalise_bias: only dir-l2 has it ({cls.name} "
                + ("penalises b through mus)" if cls.reg == "odir" else "has no penalty)")
            )
        if cls.reg != "odir" and not _same_grid(s["mus"], DEFAULT_GRID):
            raise ValueError(
                f"mus: {cls.name} has no off-diagonal penalty μ (only ODIR methods do: "
                "ms-odir, dir-odir); leave mus unset"
            )
        return s | {"lambdas": _grid(s["lambdas"], "lambdas"), "mus": _grid(s["mus"], "mus")}

    @property
    def output(self) -> str:  # type: ignore[override]
        return "log-probabilities" if self.average_folds and self.reg else "logits"

    def _candidates(self, p: dict[str, Any]) -> list[tuple[float, float]]:
        """Grid points from the strongest penalty to the weakest, neighbours adjacent (a
        snake through λ × μ), so that each cross-validation fit warm-starts well."""
        if self.reg is None:
            return [(0.0, 0.0)]
        lams = sorted(p["lambdas"], reverse=True)
        if self.reg == "odir":
            mus = sorted(p["mus"], reverse=True)
            return [(lam, mu) for i, lam in enumerate(lams) for mu in mus[:: 1 - 2 * (i % 2)]]
        return [_l2_point(lam, p) for lam in lams]

    def _fit(self, z: Tensor, y: Tensor) -> FitReport:
        x = _features(z, self.dirichlet).cpu()
        y = y.cpu()
        before = float(torch.nn.functional.cross_entropy(z.cpu(), y))
        p = self.checked()
        candidates = self._candidates(p)
        details: dict[str, Any] = {}
        lam, mu = candidates[0]
        folds = _folds(y, p["folds"], p["seed"]) if self.reg else []
        if len(candidates) > 1:
            scores = dict(zip(candidates, self._cv_scores(x, y, folds, candidates, p), strict=True))
            extended = 0
            while p["extend_grid"] and extended < GRID_EXTENSIONS:
                beyond = self._beyond(min(scores, key=scores.__getitem__), scores, p)
                if not beyond:
                    break
                scores.update(zip(beyond, self._cv_scores(x, y, folds, beyond, p), strict=True))
                extended += 1
            lam, mu = min(scores, key=scores.__getitem__)
            details["cv_nll"] = round(float(scores[(lam, mu)]), 6)
            if extended:
                details["grid_extended"] = extended
            edge = self._edge_note((lam, mu), scores, p, extended)
            if edge:
                details["grid_edge"] = edge
        if self.reg:
            details.update({"lambda": lam} | ({"mu": mu} if self.reg == "odir" else {}))
        self.lambda_, self.mu_ = (lam, mu) if self.reg else (None, None)
        if self.reg and self.average_folds:
            fits = [
                fit_affine(
                    x[tr],
                    y[tr],
                    matrix=self.matrix,
                    reg=self.reg,
                    lam=lam,
                    mu=mu,
                    max_iter=p["max_iter"],
                )
                for tr, _ in folds
            ]
            self.weight_ = torch.stack([f[0] for f in fits])
            self.bias_ = torch.stack([f[1] for f in fits])
            iters, ok = sum(f[2] for f in fits), all(f[3] for f in fits)
        else:
            w, b, iters, ok, _ = fit_affine(
                x, y, matrix=self.matrix, reg=self.reg, lam=lam, mu=mu, max_iter=p["max_iter"]
            )
            self.weight_, self.bias_ = w[None], b[None]
        after = float(torch.nn.functional.cross_entropy(self._transform(z.cpu()), y))
        n_params = self.n_parameters(z.shape[1])
        if self.reg is None and len(y) < SAMPLES_PER_PARAMETER * n_params:
            better = "dir-odir or ms-odir" if self.matrix else "ts"
            details["warning"] = (
                f"{n_params} parameters from {len(y)} samples (fewer than "
                f"{SAMPLES_PER_PARAMETER} per parameter): the fit can overfit the calibration "
                f"split; use {better}"
            )
            warnings.warn(f"{self.name}: {details['warning']}", stacklevel=3)
        return FitReport("nll", before, after, iters, ok, details=details)

    def _cv_scores(
        self, x: Tensor, y: Tensor, folds: list, candidates: list[tuple[float, float]], p: dict
    ) -> np.ndarray:
        """Held-out mean NLL of each (λ, μ) of ``candidates`` over ``folds``.

        float32: the fits only rank grid points (the same choice as float64 in the
        benchmark) and the matrix products take half the time; the final fit is float64."""
        x32 = x.float()
        scores = np.zeros(len(candidates))
        for train, test in folds:
            warm = None  # along the grid, start from the neighbouring solution
            for j, (lam_c, mu_c) in enumerate(candidates):
                w, b, *_ = fit_affine(
                    x32[train],
                    y[train],
                    matrix=self.matrix,
                    reg=self.reg,
                    lam=lam_c,
                    mu=mu_c,
                    init=warm,
                    tol=CV_TOL,
                    max_iter=min(p["max_iter"], CV_MAX_ITER),
                )
                warm = (w, b)
                held_out = self._nll(x[test], y[test], w.double(), b.double())
                scores[j] += float(held_out) * len(test)
        return scores / len(y)

    def _edges(self, best: tuple[float, float], tried: Any) -> list[tuple[int, str]]:
        """(axis, "top" or "bottom") for each grid axis whose edge ``best`` sits on: axis 0
        is λ, axis 1 μ (ODIR only; dir-l2's μ follows λ). A bottom edge at 0 (no penalty)
        is no edge: nothing lies below it."""
        found = []
        for axis in (0, 1) if self.reg == "odir" else (0,):
            values = sorted({c[axis] for c in tried})
            if len(values) < 2:
                continue
            if best[axis] == values[-1]:
                found.append((axis, "top"))
            elif best[axis] == values[0] and values[0] > 0:
                found.append((axis, "bottom"))
        return found

    def _beyond(self, best: tuple[float, float], tried: dict, p: dict) -> list[tuple[float, float]]:
        """The grid points one decade past each edge ``best`` sits on, crossed with the other
        axis's values, strongest penalty first (the order the warm starts walk)."""
        lams, mus = sorted({c[0] for c in tried}), sorted({c[1] for c in tried})
        new: set[tuple[float, float]] = set()
        for axis, side in self._edges(best, tried):
            values = lams if axis == 0 else mus
            step = values[-1] * 10 if side == "top" else values[0] / 10
            if axis == 1:
                new |= {(lam, step) for lam in lams}
            elif self.reg == "odir":
                new |= {(step, mu) for mu in mus}
            else:
                new.add(_l2_point(step, p))
        return sorted(new - set(tried), reverse=True)

    def _edge_note(
        self, best: tuple[float, float], tried: dict, p: dict, extended: int
    ) -> str | None:
        """The ``grid-edge`` anomaly's detail where the chosen value is still on an edge."""
        edges = self._edges(best, tried)
        if not edges:
            return None
        names = {0: ("λ", "lambdas"), 1: ("μ", "mus")}
        parts = [
            f"{names[axis][0]} = {best[axis]:g} is the {'largest' if side == 'top' else 'smallest'}"
            f" value tried"
            for axis, side in edges
        ]
        how = (
            f"the grid was extended {extended} times, a decade each"
            if extended
            else "extend_grid=false"
        )
        widen = " and ".join(names[axis][1] for axis, _ in edges)
        return f"{'; '.join(parts)} ({how}): the optimum may lie beyond; widen {widen}"

    @classmethod
    def n_parameters(cls, k: int) -> int:
        """Parameters of the map for K classes: K² + K (matrix) or 2K (vector)."""
        return k * k + k if cls.matrix else 2 * k

    def _nll(self, x: Tensor, y: Tensor, w: Tensor, b: Tensor) -> Tensor:
        out = x @ w.T + b if self.matrix else x * w + b
        return torch.nn.functional.cross_entropy(out, y)

    def _transform(self, z: Tensor) -> Tensor:
        x = _features(z, self.dirichlet)
        w, b = self.weight_.to(z.device), self.bias_.to(z.device)
        outs = [x @ wi.T + bi if self.matrix else x * wi + bi for wi, bi in zip(w, b, strict=True)]
        if len(outs) == 1:
            return outs[0]
        probs = torch.stack([torch.softmax(o, 1) for o in outs]).mean(0)
        return probs.log()

    def invariant_problem(self) -> str | None:
        for name in ("weight_", "bias_"):
            t = getattr(self, name)
            if t.is_floating_point() and bool((t.abs() > AFFINE_MAX_COEF).any()):
                return (
                    f"the affine map's {name.rstrip('_')} has a coefficient beyond "
                    f"±{AFFINE_MAX_COEF:g} (a fit stops short)"
                )
        return None

    def learned(self) -> dict[str, Any]:
        return {"lambda": self.lambda_, "mu": self.mu_}

    def _restore(self, learned: dict[str, Any]) -> None:
        self.lambda_, self.mu_ = learned.get("lambda"), learned.get("mu")


def _l2_point(lam: float, p: dict[str, Any]) -> tuple[float, float]:
    """dir-l2's grid point for λ: μ, the bias's penalty, is λ itself where the bias is
    penalised (``penalise_bias``), else 0."""
    return (lam, lam if p["penalise_bias"] else 0.0)


def _grid(values: Any, name: str) -> tuple[float, ...]:
    vals = tuple(float(v) for v in (values if isinstance(values, list | tuple) else [values]))
    if not vals or any(not np.isfinite(v) or v < 0 for v in vals):
        raise ValueError(f"{name}: expected one or more finite values >= 0, got {values!r}")
    return vals


class _Unregularised(AffineCalibrator):
    """Affine maps without a penalty: no grid, no folds, no randomness.

    ``max_iter`` defaults to 2,000: unregularised matrix scaling is nearly flat in some
    directions and needed 1,336 iterations on the ResNet-110 validation logits (5,000 × 10)
    to reach the gradient tolerance; at the former 500 it stopped "NOT converged" (issue
    31.3). A fit that converges stops early, so the cap costs nothing there."""

    cross_validated = False

    def __init__(self, *, max_iter: MaxIter = 2000) -> None:
        super().__init__(max_iter=max_iter)

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        return s


class VectorScaling(_Unregularised):
    """w ⊙ z + b by NLL (Guo et al. 2017). Its weights are not constrained: on logits that
    carry no information a weight of 0 or below is the optimum (tests/posthoc/test_trust.py),
    so a file with a negative weight is a possible fit, not a forgery (docs/posthoc.md).

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import VectorScaling
    >>> d = demo_logits()
    >>> cal = VectorScaling().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    4.02
    >>> tuple(cal.weight_.shape), tuple(cal.bias_.shape)  # 20 parameters overfit 300 rows
    ((1, 10), (1, 10))
    """

    name, matrix = "vector", False


class MatrixScaling(_Unregularised):
    """W z + b by NLL, unregularised (Guo et al. 2017).

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import MatrixScaling
    >>> d = demo_logits()
    >>> cal = MatrixScaling().fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    4.75
    >>> tuple(cal.weight_.shape)  # 110 parameters on 300 rows: the test ECE rises
    (1, 10, 10)
    """

    name = "matrix"


class MatrixScalingODIR(AffineCalibrator):
    """W z + b with off-diagonal and intercept regularisation, λ and μ by cross-validation.

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import MatrixScalingODIR
    >>> d = demo_logits()
    >>> grid = dict(lambdas=[0.1, 10], mus=[0.1, 10], folds=2, extend_grid=False)
    >>> cal = MatrixScalingODIR(**grid).fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    1.53
    >>> cal.lambda_, cal.mu_  # chosen by 2-fold cross-validation on the grid's edge (flagged)
    (10.0, 10.0)
    """

    name, reg = "ms-odir", "odir"


class DirichletL2(AffineCalibrator):
    """W log softmax(z) + b with an L2 penalty on W, λ by cross-validation.

    ``penalise_bias=True`` adds λ/K² Σ b_j², the same weight on b as on W: the form of Kull
    et al.'s own code (dirichletcal/experiments_dnn, ``Dirichlet_NN``: Keras
    ``bias_regularizer=l2(mu)`` with ``mu = l2`` when no μ is given). The default leaves b
    free, as METHODS.md defines Dir-L2 (docs/posthoc.md).

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import DirichletL2
    >>> d = demo_logits()
    >>> cal = DirichletL2(lambdas=[0.1, 1, 10], folds=2).fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    0.96
    >>> cal.lambda_, cal.fit_report_.converged
    (1.0, True)
    """

    name, dirichlet, reg = "dir-l2", True, "l2"


class DirichletODIR(AffineCalibrator):
    """W log softmax(z) + b with ODIR, λ and μ by cross-validation (Kull et al. 2019).

    Examples
    --------
    On the demo network's logits (``calibkit demo``; test ECE 1.60 % uncalibrated), fitted
    on its 300 validation rows:

    >>> from calibkit.data import demo_logits
    >>> from calibkit.metrics import ece
    >>> from calibkit.posthoc import DirichletODIR
    >>> d = demo_logits()
    >>> grid = dict(lambdas=[1e2, 1e3, 1e4], mus=[1e2, 1e3, 1e4], folds=2)
    >>> cal = DirichletODIR(**grid).fit(d["logits_val"], d["labels_val"])
    >>> round(100 * ece(cal(d["logits_test"]), d["labels_test"]), 2)  # test ECE, %
    2.97
    >>> cal.lambda_, cal.mu_, cal.fit_report_.converged  # 300 rows: worse than none, or TS
    (10000.0, 10000.0, True)
    """

    name, dirichlet, reg = "dir-odir", True, "odir"
