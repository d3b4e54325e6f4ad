"""Neural Clamping (Tang et al. 2023, §3; METHODS.md §4): an input perturbation δ and a
temperature T learned together on the calibration split, the network frozen.

The calibrated network is f_NC(x) = f(x + δ) / T. δ (the shape of one input) and T
minimise the paper's Eq. 9, Σᵢ FL_γ(f(xᵢ + δ)/T, yᵢ) + λ ‖δ‖², with γ chosen from
``gamma_pool`` by ECE on the calibration split (default: γ = 1 alone).

How it is fitted, and where that departs from the paper's text (each departure fixes a
divergence seen with the literal reading; see docs/model-level.md):

- **Loss scale.** The objective is divided by n: mean FL + λ' ‖δ‖² with λ' = λ/n, the same
  minimiser as Eq. 9. λ is 0.1 × the data term at the start (``lam=None``; §4.1), so
  λ' = ``lam_scale`` × the mean initial focal loss; ``lam`` given sets λ' directly. The
  authors' code (NCToolkit) also averages over the batch. Summing instead, as Eq. 9 is
  written, multiplies the SGD step by the batch size: with lr 0.001 and a batch of 512 the
  temperature ran to 1e19 on a digits network.
- **Optimiser.** SGD, learning rate 0.001, momentum 0.9 (the authors' code), batch 512,
  100 epochs (§4.1). T is optimised as log T, so it stays positive.
- **Start of T.** T starts at the focal-loss temperature-scaling optimum for the starting
  δ (a 1-D bounded minimisation on the logits), not at 1: with the paper's step size a small
  calibration set gives too few steps for T to travel, and the result would depend on the
  set's size. With ``fit_delta=False`` that optimum is the answer (δ = 0: temperature
  scaling fitted with focal loss).
- **Divergence.** After fitting, the whole calibration objective is evaluated again. A
  non-finite value, a temperature outside ``TEMPERATURE_LIMITS`` or an objective more than 1 %
  above its start stops the fit with :class:`ClampingDivergedError` (lower ``lr``), rather
  than returning a diverged calibrator.

δ starts

- ``init="random"`` (the paper's default): δ ~ N(0, ``init_scale``²) elementwise;
- ``init="data"`` (Theorem 3.2): with g = Σᵢ ∇ₓ H(softmax(f(xᵢ))) the entropy gradient over
  the calibration inputs, ℓ and μ their elementwise minimum and maximum and [α, β] the
  feasible input range (``input_range``, scalars or tensors broadcastable to one input),
  δ̃ = sign(g) ⊙ η with η = ℓ − α where g < 0, β − μ where g > 0, else 0: the largest
  step towards higher entropy that keeps every calibration input feasible.

``fit_report_`` gives γ, λ', the start and final temperature, the objective, and ECE and
accuracy on the calibration split before (the plain network) and after: Neural Clamping
may change predictions, and how much it did is part of the result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from scipy.optimize import minimize_scalar
from torch import Tensor, nn

from ..losses.weighted import Focal
from ..metrics import functional as M
from .base import FORMAT_VERSION, NotFittedError, read_checked, write_checked

#: temperatures a fit may end at; outside it the fit is reported as diverged
TEMPERATURE_LIMITS = (1e-2, 1e2)


class ClampingDivergedError(ValueError):
    """The fit ran away (non-finite, an insane temperature, a rising objective)."""


def check_settings(
    *,
    gamma_pool: Any = (1.0,),
    lam: float | None = None,
    lam_scale: float = 0.1,
    lr: float = 0.001,
    momentum: float = 0.9,
    batch_size: int = 512,
    epochs: int = 100,
    init: str = "random",
    init_scale: float = 0.01,
    input_range: tuple[Any, Any] | None = None,
    fit_delta: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """Every Neural Clamping setting checked, with ``gamma_pool`` as a tuple of floats (a
    number, a list or a ``1/2/3`` string are accepted); a one-line ``ValueError`` naming the
    setting otherwise. Used by the class, the bench spec checker and ``calibkit clamp``."""
    if isinstance(gamma_pool, str):
        gamma_pool = [g for g in gamma_pool.replace(",", "/").split("/") if g.strip()]
    if not isinstance(gamma_pool, Iterable):
        gamma_pool = [gamma_pool]
    try:
        pool = tuple(float(g) for g in gamma_pool)
    except (TypeError, ValueError):
        raise ValueError(
            f"gamma_pool: expected focal γ values such as 1/2/3, got {gamma_pool!r}"
        ) from None
    if not pool or any(not 0 <= g <= 20 for g in pool):
        raise ValueError(f"gamma_pool: focal γ values in [0, 20], got {gamma_pool!r}")
    if init not in ("random", "data"):
        raise ValueError(f"init: expected 'random' or 'data', got {init!r}")
    if init == "data" and input_range is None:
        raise ValueError("init='data' needs input_range=(low, high), the feasible inputs")
    numbers = (("lr", lr, "> 0"), ("lam_scale", lam_scale, ">= 0"),
               ("init_scale", init_scale, ">= 0"), ("momentum", momentum, ">= 0"))  # fmt: skip
    for name, v, low in numbers:
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or v < 0 or (low == "> 0" and v == 0) or (name == "momentum" and v >= 1):
            bound = f"{low} and < 1" if name == "momentum" else low
            raise ValueError(f"{name}: expected a finite number {bound}, got {v!r}")
    if lam is not None and not (
        isinstance(lam, int | float) and not isinstance(lam, bool) and 0 <= lam < math.inf
    ):
        raise ValueError(f"lam: expected a finite number >= 0 or None, got {lam!r}")
    for name, v in (("batch_size", batch_size), ("epochs", epochs)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    if not isinstance(fit_delta, bool):
        raise ValueError(f"fit_delta: expected true or false, got {fit_delta!r}")
    return {"gamma_pool": pool, "lam": lam, "lam_scale": lam_scale, "lr": lr,
            "momentum": momentum, "batch_size": batch_size, "epochs": epochs, "init": init,
            "init_scale": init_scale, "input_range": input_range, "fit_delta": fit_delta,
            "seed": seed}  # fmt: skip


class NeuralClamping(nn.Module):
    """``NeuralClamping(model, ...).fit(inputs, labels)``; then ``forward(x)`` gives
    calibrated logits f(x + δ)/T. ``model`` is used in eval mode without gradients to its
    weights; the caller's model is not changed (its train/eval mode and ``requires_grad``
    are restored after each call)."""

    def __init__(self, model: nn.Module, **settings: Any) -> None:
        super().__init__()
        self.settings = check_settings(**settings)
        self.model = model
        self.delta_: Tensor | None = None
        self.temperature_: Tensor | None = None
        self.gamma_: float | None = None
        self.lam_: float | None = None
        self.fit_report_: dict[str, Any] = {}

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
        with _frozen(self.model):
            device = next(self.model.parameters()).device
            inputs, labels = inputs.to(device), labels.to(device)
            bounds = self._bounds(inputs)
            plain = self._logits(inputs, torch.zeros_like(inputs[0]), torch.ones(()))
            k = plain.shape[1]
            if bool((labels < 0).any()) or bool((labels >= k).any()):
                raise ValueError(f"labels: expected classes in 0..{k - 1} for a {k}-class model")
            best = None
            for gamma in self.settings["gamma_pool"]:
                fit = self._fit_one(inputs, labels, gamma, bounds)
                z = self._logits(inputs, fit["delta"], fit["log_t"].exp())
                score = M.ece(z, labels)
                if best is None or score < best[0]:
                    best = (score, gamma, fit, z)
        score, self.gamma_, fit, z = best
        self.delta_, self.temperature_, self.lam_ = fit["delta"], fit["log_t"].exp(), fit["lam"]
        self.fit_report_ = {
            "gamma": self.gamma_,
            "lam": self.lam_,
            "temperature_start": fit["t_start"],
            "temperature": float(self.temperature_),
            "objective": [fit["start"], fit["end"]],
            "ece_calibration": [M.ece(plain, labels), score],
            "accuracy_calibration": [_accuracy(plain, labels), _accuracy(z, labels)],
        }
        return self

    def _bounds(self, x: Tensor) -> tuple[Tensor, Tensor] | None:
        if self.settings["input_range"] is None:
            return None
        lo, hi = (
            torch.as_tensor(b, dtype=x.dtype, device=x.device) for b in self.settings["input_range"]
        )
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
            return torch.cat([self.model(b + delta) / t.to(x.device) for b in x.split(1024)])

    def _init_delta(
        self, x: Tensor, bounds: tuple[Tensor, Tensor] | None, gen: torch.Generator
    ) -> Tensor:
        if not self.settings["fit_delta"]:
            return torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
        if self.settings["init"] == "random":
            noise = torch.randn(x.shape[1:], generator=gen, dtype=x.dtype)
            return (self.settings["init_scale"] * noise).to(x.device)
        if bounds is None:
            raise ValueError("init='data' needs input_range=(low, high), the feasible inputs")
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

    def _objective(self, x: Tensor, y: Tensor, delta: Tensor, log_t: Tensor, focal, lam) -> float:
        """The whole calibration objective: mean FL + λ' ‖δ‖² (Eq. 9 divided by n)."""
        z = self._logits(x, delta, log_t.exp())
        return float(focal.compute(z, y)) + lam * float((delta**2).sum())

    def _fit_one(self, x: Tensor, y: Tensor, gamma: float, bounds) -> dict[str, Any]:
        s = self.settings
        gen = torch.Generator().manual_seed(s["seed"])
        delta = self._init_delta(x, bounds, gen)
        focal = Focal(gamma=gamma, reduction="mean")
        z0 = self._logits(x, delta, torch.ones((), dtype=x.dtype))
        low, high = (math.log(t) for t in TEMPERATURE_LIMITS)
        warm = minimize_scalar(
            lambda u: float(focal.compute(z0 / math.exp(u), y)), bounds=(low, high),
            method="bounded", options={"xatol": 1e-8},
        )  # fmt: skip
        log_t = torch.tensor(float(warm.x), dtype=x.dtype, device=x.device)
        lam = s["lam"] if s["lam"] is not None else s["lam_scale"] * float(warm.fun)
        start = float(warm.fun) + lam * float((delta**2).sum())
        out = {"t_start": math.exp(float(warm.x)), "lam": lam, "start": start}
        if not s["fit_delta"]:  # the warm start is the exact optimum
            return out | {"delta": delta, "log_t": log_t, "end": start}
        delta.requires_grad_(True)
        log_t.requires_grad_(True)
        opt = torch.optim.SGD([delta, log_t], lr=s["lr"], momentum=s["momentum"])
        for _ in range(s["epochs"]):
            order = torch.randperm(len(x), generator=gen).to(x.device)
            for idx in order.split(s["batch_size"]):
                loss = focal.compute(self.model(x[idx] + delta) / log_t.exp(), y[idx])
                loss = loss + lam * (delta**2).sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        delta, log_t = delta.detach(), log_t.detach()
        end = self._objective(x, y, delta, log_t, focal, lam)
        t = math.exp(float(log_t)) if math.isfinite(float(log_t)) else math.inf
        sane = TEMPERATURE_LIMITS[0] <= t <= TEMPERATURE_LIMITS[1]
        if not (math.isfinite(end) and sane and end <= start + 0.01 * abs(start)):
            if math.isfinite(end) and end <= start and not sane:
                why = (
                    f"T ran to {t:.4g}, outside {TEMPERATURE_LIMITS}, while the objective fell "
                    f"({start:.4g} → {end:.4g}): the calibration split has no finite optimum "
                    "(e.g. every sample is classified correctly); use a larger split"
                )
            else:
                why = (
                    f"the calibration objective went from {start:.4g} to {end:.4g} and T "
                    f"from {out['t_start']:.4g} to {t:.4g}; lower lr (now {s['lr']:g})"
                )
            raise ClampingDivergedError(f"neural clamping diverged (γ = {gamma:g}): {why}")
        return out | {"delta": delta, "log_t": log_t, "end": end}

    # -- use ----------------------------------------------------------------------------
    def forward(self, x: Tensor) -> Tensor:
        """Calibrated logits f(x + δ) / T."""
        if self.delta_ is None or self.temperature_ is None:
            raise NotFittedError("this NeuralClamping is not fitted yet; call fit(inputs, labels)")
        want, got = tuple(self.delta_.shape), tuple(x.shape[1:])
        if got != want:
            raise ValueError(f"inputs: expected samples of shape {want}, got {got}")
        with _frozen(self.model):
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
            # the feasible range only shaped the start; a loaded calibrator does not need it
            "settings": {k: v for k, v in self.settings.items() if k != "input_range"},
            "report": self.fit_report_,
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
        settings = dict(meta.get("settings", {}))
        if settings.get("init") == "data":
            settings["input_range"] = (-math.inf, math.inf)
        try:
            obj = cls(model, **settings)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: its settings do not check ({err})") from None
        device = next(model.parameters()).device
        obj.delta_ = tensors["delta"].to(device)
        obj.temperature_ = tensors["temperature"].reshape(()).to(device)
        obj.gamma_, obj.lam_, obj.fit_report_ = meta["gamma"], meta["lam"], meta["report"]
        return obj


def _accuracy(z: Tensor, y: Tensor) -> float:
    return float((z.argmax(1) == y).double().mean())


class _frozen:
    """Eval mode and no weight gradients for the duration; the caller's state is restored."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __enter__(self) -> None:
        self.training = self.model.training
        self.grads = [p.requires_grad for p in self.model.parameters()]
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    def __exit__(self, *exc: Any) -> None:
        self.model.train(self.training)
        for p, g in zip(self.model.parameters(), self.grads, strict=True):
            p.requires_grad_(g)
