"""Neural Clamping (Tang et al. 2023, §3; METHODS.md §4): an input perturbation δ and a
temperature T learned together on the calibration split, the network frozen.

The calibrated network is f_NC(x) = f(x + δ) / T. δ (the shape of one input) and T
minimise Σᵢ FL_γ(f(xᵢ + δ)/T, yᵢ) + λ ‖δ‖² over each mini-batch (the sum, as in the
paper's Eq. 9, §3.1) by SGD (learning rate 0.001, batch 512, 100 epochs, T from 1), with λ =
0.1 × the data term at initialisation (``lam=None``: 0.1 × the mean initial focal loss ×
the batch size) and γ chosen from ``gamma_pool`` by ECE on the calibration split
(default: γ = 1 alone).
T is optimised as log T, so it stays positive. δ starts

- ``init="random"`` (the paper's default): δ ~ N(0, ``init_scale``²) elementwise;
- ``init="data"`` (Theorem 3.2): with g = Σᵢ ∇ₓ H(softmax(f(xᵢ))) the entropy gradient over
  the calibration inputs, ℓ and μ their elementwise minimum and maximum and [α, β] the
  feasible input range (``input_range``, scalars or tensors broadcastable to one input),
  δ̃ = sign(g) ⊙ η with η = ℓ − α where g < 0, β − μ where g > 0, else 0: the largest
  step towards higher entropy that keeps every calibration input feasible.

With ``fit_delta=False`` δ stays 0 and the method is temperature scaling fitted with focal
loss (tested against a direct minimisation of that loss).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..losses.weighted import Focal
from ..metrics import functional as M
from .base import FORMAT_VERSION, NotFittedError, read_checked, write_checked


class NeuralClamping(nn.Module):
    """``NeuralClamping(model, ...).fit(inputs, labels)``; then ``forward(x)`` gives
    calibrated logits f(x + δ)/T. ``model`` is frozen (eval mode, no gradients)."""

    def __init__(
        self,
        model: nn.Module,
        *,
        gamma_pool: Iterable[float] = (1.0,),
        lam: float | None = None,
        lam_scale: float = 0.1,
        lr: float = 0.001,
        batch_size: int = 512,
        epochs: int = 100,
        init: str = "random",
        init_scale: float = 0.01,
        input_range: tuple[Any, Any] | None = None,
        fit_delta: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.gamma_pool = tuple(float(g) for g in gamma_pool)
        if not self.gamma_pool or any(not 0 <= g <= 20 for g in self.gamma_pool):
            raise ValueError(f"gamma_pool: focal γ values in [0, 20], got {gamma_pool!r}")
        if init not in ("random", "data"):
            raise ValueError(f"init: expected 'random' or 'data', got {init!r}")
        if init == "data" and input_range is None:
            raise ValueError("init='data' needs input_range=(low, high), the feasible inputs")
        for name, v in (("lr", lr), ("lam_scale", lam_scale), ("init_scale", init_scale)):
            if not isinstance(v, int | float) or not v >= 0 or (name == "lr" and v == 0):
                raise ValueError(
                    f"{name}: expected a number {'> 0' if name == 'lr' else '>= 0'}, got {v!r}"
                )
        if lam is not None and not lam >= 0:
            raise ValueError(f"lam: expected a number >= 0 or None, got {lam!r}")
        for name, v in (("batch_size", batch_size), ("epochs", epochs)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        self.model = model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.lam, self.lam_scale, self.lr = lam, lam_scale, lr
        self.batch_size, self.epochs, self.init, self.init_scale = (
            batch_size,
            epochs,
            init,
            init_scale,
        )
        self.input_range, self.fit_delta, self.seed = input_range, fit_delta, seed
        self.delta_: Tensor | None = None
        self.temperature_: Tensor | None = None
        self.gamma_: float | None = None
        self.lam_: float | None = None
        self.report_: dict[str, Any] = {}

    # -- fitting ------------------------------------------------------------------------
    def fit(self, inputs: Tensor, labels: Tensor) -> NeuralClamping:
        """Learn δ and T on calibration ``inputs`` (N, *input shape) and ``labels`` (N,)."""
        if inputs.ndim < 2 or len(inputs) != len(labels) or len(inputs) == 0:
            raise ValueError(
                f"inputs and labels: expected N >= 1 matching samples, got {tuple(inputs.shape)} "
                f"and {tuple(labels.shape)}"
            )
        if not bool(torch.isfinite(inputs).all()):
            raise ValueError("inputs: NaN or inf in the calibration inputs")
        labels = labels.long()
        device = next(self.model.parameters()).device
        inputs, labels = inputs.to(device), labels.to(device)
        bounds = self._bounds(inputs)
        best = None
        for gamma in self.gamma_pool:
            delta, log_t, lam = self._fit_one(inputs, labels, gamma, bounds)
            z = self._logits(inputs, delta, log_t.exp())
            score = M.ece(z, labels)
            if best is None or score < best[0]:
                best = (score, gamma, delta, log_t, lam)
        assert best is not None
        score, self.gamma_, delta, log_t, self.lam_ = best
        self.delta_, self.temperature_ = delta.detach(), log_t.exp().detach()
        self.report_ = {"ece_calibration": score, "gamma": self.gamma_, "lam": self.lam_,
                        "temperature": float(self.temperature_)}  # fmt: skip
        return self

    def _bounds(self, x: Tensor) -> tuple[Tensor, Tensor] | None:
        if self.input_range is None:
            return None
        lo, hi = (torch.as_tensor(b, dtype=x.dtype, device=x.device) for b in self.input_range)
        lo, hi = torch.broadcast_to(lo, x.shape[1:]), torch.broadcast_to(hi, x.shape[1:])
        if bool((lo > hi).any()):
            raise ValueError("input_range: the lower bound exceeds the upper bound")
        if bool((x < lo).any()) or bool((x > hi).any()):
            raise ValueError(
                f"input_range: the calibration inputs span [{float(x.min()):.4g}, "
                f"{float(x.max()):.4g}], outside the range given"
            )
        return lo, hi

    def _logits(self, x: Tensor, delta: Tensor, t: Tensor) -> Tensor:
        with torch.no_grad():
            return torch.cat([self.model(b + delta) / t for b in x.split(1024)])

    def _init_delta(
        self, x: Tensor, bounds: tuple[Tensor, Tensor] | None, gen: torch.Generator
    ) -> Tensor:
        if not self.fit_delta:
            return torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
        if self.init == "random":
            noise = torch.randn(x.shape[1:], generator=gen, dtype=x.dtype)
            return (self.init_scale * noise).to(x.device)
        assert bounds is not None
        g = torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
        for b in x.split(1024):  # Theorem 3.2: the entropy gradient summed over the inputs
            b = b.clone().requires_grad_(True)
            logp = torch.log_softmax(self.model(b), 1)
            entropy = -(logp.exp() * logp).sum()
            (grad,) = torch.autograd.grad(entropy, b)
            g += grad.sum(0)
        low, high = x.amin(0), x.amax(0)
        eta = torch.where(g < 0, low - bounds[0], torch.where(g > 0, bounds[1] - high, 0.0))
        return torch.sign(g) * eta

    def _fit_one(self, x: Tensor, y: Tensor, gamma: float, bounds) -> tuple[Tensor, Tensor, float]:
        gen = torch.Generator().manual_seed(self.seed)
        delta = self._init_delta(x, bounds, gen).requires_grad_(self.fit_delta)
        log_t = torch.zeros((), dtype=x.dtype, device=x.device, requires_grad=True)
        focal = Focal(gamma=gamma, reduction="sum")
        with torch.no_grad():
            initial = float(
                sum(focal.compute(self.model(b + delta), yb)
                    for b, yb in zip(x.split(1024), y.split(1024), strict=True)) / len(x)
            )  # fmt: skip
        batch = min(self.batch_size, len(x))
        lam = self.lam if self.lam is not None else self.lam_scale * initial * batch
        params = [delta, log_t] if self.fit_delta else [log_t]
        opt = torch.optim.SGD(params, lr=self.lr)
        for _ in range(self.epochs):
            order = torch.randperm(len(x), generator=gen).to(x.device)
            for idx in order.split(self.batch_size):
                loss = focal.compute(self.model(x[idx] + delta) / log_t.exp(), y[idx])
                if self.fit_delta:
                    loss = loss + lam * (delta**2).sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        return delta.detach(), log_t.detach(), lam

    # -- use ----------------------------------------------------------------------------
    def forward(self, x: Tensor) -> Tensor:
        """Calibrated logits f(x + δ) / T."""
        if self.delta_ is None or self.temperature_ is None:
            raise NotFittedError("this NeuralClamping is not fitted yet; call fit(inputs, labels)")
        want, got = tuple(self.delta_.shape), tuple(x.shape[1:])
        if got != want:
            raise ValueError(f"inputs: expected samples of shape {want}, got {got}")
        return self.model(x + self.delta_.to(x.device)) / self.temperature_.to(x.device)

    def save(self, path: str | Path) -> Path:
        """δ, T and the settings (safetensors + JSON, checksummed); not the network."""
        if self.delta_ is None or self.temperature_ is None:
            raise NotFittedError("this NeuralClamping is not fitted yet; nothing to save")
        meta = {
            "format": "calibkit-neural-clamping",
            "version": FORMAT_VERSION,
            "gamma": self.gamma_,
            "lam": self.lam_,
            "report": self.report_,
        }
        tensors = {
            "delta": self.delta_.cpu().contiguous(),
            "temperature": self.temperature_.cpu().reshape(1),
        }
        return write_checked(path, tensors, meta)

    @classmethod
    def load(cls, path: str | Path, model: nn.Module) -> NeuralClamping:
        """A fitted NeuralClamping around ``model`` from a file written by :meth:`save`."""
        meta, tensors = read_checked(path, "neural clamping")
        if meta.get("format") != "calibkit-neural-clamping" or set(tensors) != {
            "delta",
            "temperature",
        }:
            raise ValueError(f"{path}: not a calibkit neural clamping file")
        obj = cls(model)
        device = next(model.parameters()).device
        obj.delta_ = tensors["delta"].to(device)
        obj.temperature_ = tensors["temperature"].reshape(()).to(device)
        obj.gamma_, obj.lam_, obj.report_ = meta["gamma"], meta["lam"], meta["report"]
        return obj
