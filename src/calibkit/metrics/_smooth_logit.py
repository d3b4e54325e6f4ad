"""Smooth ECE as TorchUncertainty computes it by default (``SmoothCalibrationError()`` in
torch-uncertainty 0.13: ``kernel_type="logit"``, ``bandwidth="auto"``): a convention for
comparing with its users' numbers (``smooth_ece(..., convention="torch-uncertainty")``),
not calibkit's estimate, which is :mod:`calibkit.metrics._smooth`.

For top-label confidences c and residuals r = c − a, in float32 where TorchUncertainty
works in float32:

1. The evaluation mesh t has max(⌊10/σ⌋, 200) points on [0, 1]. Its inner points and the
   confidences, clipped to [1e-3, 1 − 1e-3], are mapped to log-odds and then affinely
   onto [0, 1] by their common range, of width S; the bandwidth there is σ' = 4σ/S.
2. Residuals and ones are spread linearly onto a grid of G points (G = max(2000,
   round(20/σ')) halved, then made odd), convolved with a Gaussian of width σ' sampled on
   G points over [−1/2, 1/2] (zeros beyond the grid), and read at the mapped mesh points
   by linear interpolation: the smoothed residual ρ and density d (+ 1e-4).
3. The density is divided by t(1 − t), the logit's Jacobian, and rescaled to sum to N
   times the mesh size; both ends of the mesh copy their neighbours.
4. smECE_σ = Σ |ρ/d| d / (Σ d + 1e-8) over the mesh points with d > 1e-8.
5. The bandwidth: 10 bisection steps on [0, 1] for the smallest σ with σ ≥ smECE_σ (any σ
   below 1e-3 counts as too small); the value is smECE there.

How it departs from the paper (docs/metrics.md, "Peers' conventions"): a density-weighted
mean over a mesh instead of the integral, a kernel in log-odds instead of the reflected
one, 10 bisection steps instead of a tolerance, and float32. Tested against
TorchUncertainty itself in ``tests/metrics/test_peer_conventions.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

#: TorchUncertainty's defaults: the clip of confidences before log-odds, the fewest mesh
#: points, the bisection steps and the smallest bandwidth
CLIP, MESH, STEPS, SIGMA_FLOOR = 1e-3, 200, 10, 1e-3


def _spread(x: Tensor, v: Tensor, size: int) -> Tensor:
    """``v`` spread linearly onto ``size`` grid points over [0, 1] at positions ``x``."""
    pos = x * (size - 1)
    left = pos.long().clamp(0, size - 2)
    frac = pos - left
    out = torch.zeros(size, dtype=torch.float32, device=x.device)
    out.index_add_(0, left, (1 - frac) * v)
    return out.index_add_(0, left + 1, frac * v)


def _read(grid: Tensor, at: Tensor) -> Tensor:
    """``grid`` (points over [0, 1]) linearly interpolated at positions ``at``."""
    size = len(grid)
    step = 1.0 / (size - 1)
    left = (at * (size - 1)).long().clamp(0, size - 2)
    w = (at - left * step) / step
    return grid[left] * (1 - w) + grid[left + 1] * w


def _gaussian_smooth(x: Tensor, v: Tensor, at: Tensor, sigma: float) -> Tensor:
    """Σ_i K(t − x_i) v_i read at ``at``: the grid convolution of step 2."""
    size = max(2000, round(20 / sigma)) // 2
    size += 1 - size % 2
    offsets = torch.linspace(0, 1, size, device=x.device) - 0.5
    window = torch.exp(-(offsets**2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    grid = _spread(x, v, size)
    smoothed = F.conv1d(grid.view(1, 1, -1), window.view(1, 1, -1), padding="same").view(-1)
    return _read(smoothed, at)


def _at_bandwidth(conf: Tensor, resid: Tensor, sigma: float) -> Tensor:
    """smECE_σ of steps 1-4."""
    mesh = torch.linspace(0, 1, max(int(10 / sigma), MESH), device=conf.device)
    inner = mesh.double()[1:-1]
    mesh_logit = torch.log(inner / (1 - inner))
    clipped = conf.clamp(CLIP, 1 - CLIP)
    conf_logit = torch.log(clipped / (1 - clipped))
    lo = min(conf_logit.min().item(), mesh_logit.min().item())
    hi = max(conf_logit.max().item(), mesh_logit.max().item())
    span = hi - lo if hi > lo else 1e-9
    x, at = (conf_logit - lo) / span, (mesh_logit - lo) / span
    width = sigma * (4 / span)
    rho = _gaussian_smooth(x, resid, at, width)
    dens = _gaussian_smooth(x, torch.ones_like(resid), at, width) + 1e-4
    ys = rho / dens
    dens = dens / (mesh[1:-1] * (1 - mesh[1:-1]))
    dens = dens * (len(conf) * len(mesh) / (dens.sum() + 1e-9))
    ys = torch.cat([ys[:1], ys, ys[-1:]]).float()
    dens = torch.cat([dens[:1], dens, dens[-1:]]).float()
    kept = dens > 1e-8
    gap = torch.where(kept, ys.abs(), torch.zeros_like(ys))
    return (gap * dens).sum() / (dens.sum() + 1e-8)


def smooth_ece_logit(conf: Tensor, outcome: Tensor, *, sigma: float | None = None) -> Tensor:
    """TorchUncertainty's default smooth ECE of (N,) confidences and (N,) outcomes (0 or 1),
    at ``sigma`` or at its bisected bandwidth; a 0-d float32 tensor."""
    c = conf.float()
    resid = c - outcome.float()
    if sigma is not None:
        return _at_bandwidth(c, resid, float(sigma))

    def too_small(s: float) -> bool:
        return s < SIGMA_FLOOR or s < float(_at_bandwidth(c, resid, s))

    hi, lo = 1.0, 0.0
    if not too_small(hi):
        for _ in range(STEPS):
            mid = (hi + lo) / 2
            if too_small(mid):
                lo = mid
            else:
                hi = mid
    return _at_bandwidth(c, resid, hi)
