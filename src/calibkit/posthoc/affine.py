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
calibration split, scoring held-out mean NLL; the final map is refitted on the whole split
with the chosen values, or, with ``average_folds=True``, is the average of the fold models'
probabilities (the protocol of Kull et al. 2019). Folds are stratified and seeded.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .._checks import check_positive_int
from .base import Calibrator, FitReport

DEFAULT_GRID = (1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
#: Gradient tolerance (max |∂L/∂θ|) of the cross-validation fits, which only rank grid
#: points, and of the final fit. Softmax ignores a constant added to every logit, so the
#: unregularised objective is flat along those directions and tighter tolerances only
#: burn iterations.
CV_TOL, FINAL_TOL = 1e-5, 1e-7
#: Iteration cap of each cross-validation fit. The grid is walked from the strongest
#: penalty to the weakest, each fit starting from its neighbour's solution, so most fits
#: converge in a few iterations; the weakly regularised ones overfit slowly, and a partly
#: converged fit still ranks them (the final fit runs to ``max_iter``). On the six real
#: CIFAR-100 networks of the shared data (5,000 calibration logits each), a cap of 25
#: against 50 chose the same λ for MS-ODIR (6 of 6) and Dir-ODIR (5 of 6; μ moved where
#: the held-out NLL is flat in it, test NLL equal to 1e-5); on the sixth it chose λ = 100
#: over 1000, with a lower test NLL (0.9400 against 0.9548). See docs/posthoc.md.
CV_MAX_ITER = 25
#: A fit that stops on a flat loss (a change below 1e-12 nats) before ``max_iter`` counts as
#: converged only while its gradient is within this factor of the tolerance. Dir-ODIR on
#: real CIFAR-100 logits (repvgg_a2, 5,000 samples, λ = 100, μ = 1e4) stalls at a gradient
#: of 1.9e-5 after 973 iterations with its loss flat to 1e-12; 100 × 1e-7 would call that
#: unconverged, while a stall far from the optimum (gradients of order 1) is still caught.
STALL_FACTOR = 1000.0
#: An unregularised fit with fewer than this many samples per parameter is flagged: it can
#: interpolate the calibration split (matrix scaling on 5,000 CIFAR-100 logits, 10,100
#: parameters, drove the training NLL to 2.5e-8).
SAMPLES_PER_PARAMETER = 10


def _features(z: Tensor, dirichlet: bool) -> Tensor:
    return torch.log_softmax(z, 1) if dirichlet else z


def _penalty(w: Tensor, b: Tensor, reg: str | None, lam: float, mu: float) -> Tensor:
    k = b.numel()
    if reg == "odir":
        off = w - torch.diag_embed(torch.diagonal(w))
        return lam / (k * (k - 1)) * (off**2).sum() + mu / k * (b**2).sum()
    if reg == "l2":
        return lam / (k * k) * (w**2).sum()
    return w.new_zeros(())


def nll_and_grad(
    x: Tensor, y: Tensor, onehot: Tensor, w: Tensor, c: Tensor, *, matrix: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """Mean NLL of the affine map x W^T + c (``matrix``) or x * w + c, and its closed-form
    gradient in (W or w, c): with G = (softmax − onehot) / N, G^T x (or Σ_n G x) and Σ_n G.
    Half the time of autograd's forward and backward at 5,000 x 10; tested against it.

    Probabilities below the dtype's smallest normal number (1.2e-38 in float32) are raised
    to it in G: exp with a subnormal result is about 30x slower on CPU, and the float32
    cross-validation fits on real CIFAR-100 logits spent a quarter of their time there.
    The change to G is below 1.2e-38 (2.2e-308 in float64) per entry."""
    out = torch.addmm(c, x, w.T) if matrix else torch.addcmul(c, x, w)
    logp = torch.log_softmax(out, 1)
    loss = -logp.gather(1, y[:, None]).sum() / len(x)
    tiny = math.log(torch.finfo(logp.dtype).tiny)
    g = logp.clamp_min_(tiny).exp_().sub_(onehot).div_(len(x))  # in place: one buffer
    return loss, (g.T @ x if matrix else (g * x).sum(0)), g.sum(0)


def _penalty_grad(
    w: Tensor, b: Tensor, reg: str | None, lam: float, mu: float, matrix: bool
) -> tuple[Tensor, Tensor]:
    """Gradient of :func:`_penalty` in (w, b) (w: the matrix, or the vector of a diagonal)."""
    k = b.numel()
    if reg == "odir":
        off = w - torch.diag_embed(torch.diagonal(w)) if matrix else torch.zeros_like(w)
        return 2 * lam / (k * (k - 1)) * off, 2 * mu / k * b
    if reg == "l2":
        return 2 * lam / (k * k) * w, torch.zeros_like(b)
    return torch.zeros_like(w), torch.zeros_like(b)


def fit_affine(
    x: Tensor,
    y: Tensor,
    *,
    matrix: bool,
    reg: str | None,
    lam: float = 0.0,
    mu: float = 0.0,
    init: tuple[Tensor, Tensor] | None = None,
    max_iter: int = 500,
    tol: float = FINAL_TOL,
) -> tuple[Tensor, Tensor, int, bool, float]:
    """Minimise mean NLL(x W^T + b) + penalty; returns (W or w, b, iterations, converged, loss).

    L-BFGS runs on θ, with each output row's parameters r_j = (W_j, b_j) (or (w_j, b_j))
    given by r_j = θ_j M_j, M_j from :func:`_preconditioner`: the objective is close to
    isotropic in θ. Correlated inputs (the K log-probabilities of Dirichlet calibration all
    move with log Σ exp z) made a diagonal rescaling take 1,499 iterations for Dir-ODIR on
    real CIFAR-100 logits (repvgg_a2, λ = 100, μ = 1e4); this one takes about 250.
    """
    k = x.shape[1]
    if init is None:
        w0 = torch.eye(k, dtype=x.dtype) if matrix else torch.ones(k, dtype=x.dtype)
        b0 = torch.zeros(k, dtype=x.dtype)
    else:
        w0, b0 = init
    scale, chol = _preconditioner(x, w0, b0, matrix=matrix, reg=reg, lam=lam, mu=mu)
    eye = torch.eye(chol.shape[-1], dtype=x.dtype).expand_as(chol)
    inv = torch.linalg.solve_triangular(chol, eye, upper=False)  # L^{-1}: M_j = s_j L_j^{-1}

    def times(t: Tensor, m: Tensor) -> Tensor:  # row j: t_j @ m_j (one m shared by all rows)
        return t @ m[0] if len(m) == 1 else torch.einsum("jk,jkl->jl", t, m)

    def split(r: Tensor) -> tuple[Tensor, Tensor]:
        return (r[:, :k] if matrix else r[:, 0]).contiguous(), r[:, -1].contiguous()

    start = torch.cat([w0 if matrix else w0[:, None], b0[:, None]], 1)
    theta = times(start / scale, chol).requires_grad_(True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=tol,
        tolerance_change=1e-12,  # on the loss (nats): stricter than scipy L-BFGS-B default
        history_size=20,
        line_search_fn="strong_wolfe",
    )
    onehot = torch.nn.functional.one_hot(y, k).to(x.dtype)
    true_grad = x.new_zeros(start.shape)

    def closure() -> Tensor:
        with torch.no_grad():
            w, b = split(scale * times(theta, inv))
            loss, gw, gb = nll_and_grad(x, y, onehot, w, b, matrix=matrix)
            loss = loss + _penalty(w if matrix else torch.diag(w), b, reg, lam, mu)
            pw, pb = _penalty_grad(w, b, reg, lam, mu, matrix)
            true_grad.copy_(
                torch.cat([gw + pw if matrix else (gw + pw)[:, None], (gb + pb)[:, None]], 1)
            )
            theta.grad = scale * times(true_grad, inv.mT)  # the gradient in θ: g_j M_j^T
        return loss

    opt.step(closure)
    iters = int(opt.state[opt._params[0]].get("n_iter", 0))
    ran_off = not math.isfinite(float(closure()))
    if ran_off:  # a step ran off (saturated logits): return the start, not NaN
        with torch.no_grad():
            theta.copy_(times(start / scale, chol))
    loss = closure()
    with torch.no_grad():
        w, b = split(scale * times(theta, inv))
    grad = float(true_grad.abs().max())
    # L-BFGS also stops when the loss stops changing (1e-12) or a line search fails; only
    # the first, near the tolerance, counts as converged (a stall far from it does not)
    converged = (
        not ran_off
        and math.isfinite(float(loss))
        and (grad <= tol or (iters < max_iter and grad <= STALL_FACTOR * tol))
    )
    return w.detach().clone(), b.detach().clone(), iters, converged, float(loss)


def _preconditioner(
    x: Tensor, w: Tensor, b: Tensor, *, matrix: bool, reg: str | None, lam: float, mu: float
) -> tuple[Tensor, Tensor]:
    """(s, L): row scales s (K, 1) and Cholesky factors L (B, F, F) of Kronecker-factored
    (K-FAC) approximations of the objective's Hessian H_j in each output row's parameters at
    the map (w, b), with H_j ≈ L_j L_j^T / s_j²:

    - diagonal map (B = K, F = 2, s = 1): row j's parameters (w_j, b_j) see only input j, and
      H_j = E[p_j (1 − p_j)] · E[u u^T] + D_j with u = (x_j, 1), D_j the penalty's curvature;
    - full map (B = 1, F = K + 1): H_j ≈ ρ_j H̄, H̄ = ā · E[u u^T] + D̄ with u = (x, 1),
      ā the mean of a_j = E[p_j (1 − p_j)] and ρ_j = (a_j tr E[u u^T] + tr D̄) / (ā tr E[u u^T]
      + tr D̄). One factor for every row keeps the set-up to one (K+1)² Cholesky: per-row
      factors cost 20 ms a fit at K = 100, a fifth of a cross-validation. D̄ treats W's
      diagonal as penalised, as its off-diagonal entries are (ODIR spares it).

    A jitter of 1e-3 × the largest diagonal entry keeps the factors positive definite where
    the softmax saturates (no curvature at all)."""
    k = x.shape[1]
    with torch.no_grad():
        p = torch.softmax(torch.addmm(b, x, w.T) if matrix else torch.addcmul(b, x, w), 1)
        a = (p * (1 - p)).mean(0)
        pen_w = {"odir": 2 * lam / (k * (k - 1)), "l2": 2 * lam / (k * k)}.get(reg or "", 0.0)
        pen_b = 2 * mu / k if reg == "odir" else 0.0
        if matrix:
            u = torch.cat([x, x.new_ones(len(x), 1)], 1)
            moments = u.T @ u / len(x)
            pen = torch.tensor([pen_w] * k + [pen_b], dtype=x.dtype)
            hess = (a.mean() * moments + torch.diag(pen))[None]
            spread, tr_d = float(torch.trace(moments)), float(pen.sum())
            rho = (a * spread + tr_d) / max(float(a.mean()) * spread + tr_d, 1e-12)
            scale = rho.clamp_min(1e-3).rsqrt()[:, None]
        else:
            m1, m2 = x.mean(0), (x * x).mean(0)
            moments = torch.stack(
                [torch.stack([m2, m1], 1), torch.stack([m1, torch.ones_like(m1)], 1)], 1
            )
            pen = torch.tensor([pen_w if reg == "l2" else 0.0, pen_b], dtype=x.dtype)
            hess = a[:, None, None] * moments + torch.diag(pen)  # ODIR spares w
            scale = x.new_ones(k, 1)
        f = hess.shape[-1]
        jitter = max(1e-3 * float(torch.diagonal(hess, 0, 1, 2).max()), 1e-12)
        return scale, torch.linalg.cholesky(hess + jitter * torch.eye(f, dtype=x.dtype))


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

    def __init__(
        self,
        *,
        lambdas: Any = DEFAULT_GRID,
        mus: Any = DEFAULT_GRID,
        folds: int = 5,
        average_folds: bool = False,
        seed: int = 0,
        max_iter: int = 1000,
    ) -> None:
        super().__init__()
        self.lambdas, self.mus, self.folds = lambdas, mus, folds
        self.average_folds, self.seed, self.max_iter = average_folds, seed, max_iter

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(s["average_folds"], bool):
            raise ValueError(f"average_folds: expected true or false, got {s['average_folds']!r}")
        if cls.reg != "odir" and not _same_grid(s["mus"], DEFAULT_GRID):
            raise ValueError(
                f"mus: {cls.name} has no off-diagonal penalty μ (only ODIR methods do: "
                "ms-odir, dir-odir); leave mus unset"
            )
        return s | {
            "lambdas": _grid(s["lambdas"], "lambdas"),
            "mus": _grid(s["mus"], "mus"),
            "folds": check_positive_int(s["folds"], "folds", minimum=2),
            "seed": check_positive_int(s["seed"], "seed", minimum=0),
            "max_iter": check_positive_int(s["max_iter"], "max_iter"),
        }

    @property
    def output(self) -> str:  # type: ignore[override]
        return "log-probabilities" if self.average_folds and self.reg else "logits"

    def _candidates(self, p: dict[str, Any]) -> list[tuple[float, float]]:
        """Grid points from the strongest penalty to the weakest, neighbours adjacent (a
        snake through λ × μ), so that each cross-validation fit warm-starts well."""
        lams = sorted(p["lambdas"], reverse=True)
        if self.reg == "odir":
            mus = sorted(p["mus"], reverse=True)
            return [(lam, mu) for i, lam in enumerate(lams) for mu in mus[:: 1 - 2 * (i % 2)]]
        if self.reg == "l2":
            return [(lam, 0.0) for lam in lams]
        return [(0.0, 0.0)]

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
            # float32: the fits only rank grid points (the same choice as float64 in the
            # benchmark) and the matrix products take half the time; the final fit is float64
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
            scores /= len(y)
            best = int(np.argmin(scores))
            lam, mu = candidates[best]
            details["cv_nll"] = round(float(scores[best]), 6)
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
        k = z.shape[1]
        n_params = k * k + k if self.matrix else 2 * k
        if self.reg is None and len(y) < SAMPLES_PER_PARAMETER * n_params:
            better = "dir-odir or ms-odir" if self.matrix else "ts"
            details["warning"] = (
                f"{n_params} parameters from {len(y)} samples (fewer than "
                f"{SAMPLES_PER_PARAMETER} per parameter): the fit can overfit the calibration "
                f"split; use {better}"
            )
            warnings.warn(f"{self.name}: {details['warning']}", stacklevel=3)
        return FitReport("nll", before, after, iters, ok, details=details)

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

    def learned(self) -> dict[str, Any]:
        return {"lambda": self.lambda_, "mu": self.mu_}

    def _restore(self, learned: dict[str, Any]) -> None:
        self.lambda_, self.mu_ = learned.get("lambda"), learned.get("mu")


def _grid(values: Any, name: str) -> tuple[float, ...]:
    vals = tuple(float(v) for v in (values if isinstance(values, list | tuple) else [values]))
    if not vals or any(not np.isfinite(v) or v < 0 for v in vals):
        raise ValueError(f"{name}: expected one or more finite values >= 0, got {values!r}")
    return vals


class _Unregularised(AffineCalibrator):
    """Affine maps without a penalty: no grid, no folds, no randomness."""

    def __init__(self, *, max_iter: int = 500) -> None:
        super().__init__(max_iter=max_iter)


class VectorScaling(_Unregularised):
    """w ⊙ z + b by NLL (Guo et al. 2017)."""

    name, matrix = "vector", False


class MatrixScaling(_Unregularised):
    """W z + b by NLL, unregularised (Guo et al. 2017)."""

    name = "matrix"


class MatrixScalingODIR(AffineCalibrator):
    """W z + b with off-diagonal and intercept regularisation, λ and μ by cross-validation."""

    name, reg = "ms-odir", "odir"


class DirichletL2(AffineCalibrator):
    """W log softmax(z) + b with an L2 penalty on W, λ by cross-validation."""

    name, dirichlet, reg = "dir-l2", True, "l2"


class DirichletODIR(AffineCalibrator):
    """W log softmax(z) + b with ODIR, λ and μ by cross-validation (Kull et al. 2019)."""

    name, dirichlet, reg = "dir-odir", True, "odir"
