"""Neural Clamping (Tang et al. 2023, §3; docs/methods.md §4): an input perturbation δ and a
temperature T learned together on the calibration split, the network frozen.

The calibrated network is f_NC(x) = f(x + δ) / T. δ (the shape of one input) and T
minimise the paper's Eq. 9, Σᵢ FL_γ(f(xᵢ + δ)/T, yᵢ) + λ ‖δ‖², with γ chosen from
``gamma_pool`` by ECE on the calibration split (default: γ = 1 alone), and λ too where
``lam_scale`` lists several (§4.1: "λ and γ ... are determined by the best parameter
minimizing the ECE on the calibration dataset"; default: 0.1 alone, the paper's default).

How it is fitted, and where that departs from the paper's text (each departure fixes a
divergence seen with the literal reading; see docs/model-level.md):

- **Loss scale.** The objective is divided by n: mean FL + λ' ‖δ‖² with λ' = λ/n, the same
  minimiser as Eq. 9. λ is 0.1 × the data term at the start (``lam=None``; §4.1), so
  λ' = ``lam_scale`` × the mean initial focal loss; ``lam`` given sets λ' directly. The
  paper's start is the network as it is (T = 1, ``lam_at="one"``); calibkit's default
  takes the loss at the warm-started T (``lam_at="warm"``), which is smaller, so λ is
  smaller (docs/model-level.md gives the effect measured). The
  authors' code (NCToolkit) also averages over the batch. Summing instead, as Eq. 9 is
  written, multiplies the SGD step by the batch size: with lr 0.001 and a batch of 512 the
  temperature ran to 1e19 on a digits network.
- **Optimiser.** SGD, learning rate 0.001, momentum 0.9 (the authors' code), batch 512,
  100 epochs (§4.1). T is optimised as log T, so it stays positive.
- **Penalty.** ``penalty="squared"`` is Eq. 9's λ‖δ‖²; ``penalty="norm"`` is the unsquared
  ‖δ‖ of the authors' code (NCToolkit's ``NCWrapper.train_NC``).
- **Start of T.** T starts at the focal-loss temperature-scaling optimum for the starting
  δ (a 1-D bounded minimisation on the logits), not at 1 (``t_start="one"`` starts at 1,
  as NCToolkit does): with the paper's step size a small
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
from collections.abc import Sequence
from typing import Annotated, Any

import torch
from torch import Tensor, nn

from .. import metrics as M
from .._checks import check_number
from .._settings import BatchSize, Bounds, Epochs, LearningRate, Momentum, OneOf, Seed, Setting
from ..losses.internal import Focal
from ..metrics import trusted
from ._base import FitDivergedError, FitReport
from ._model_level import ModelCalibrator, settled

#: where λ's "initial loss" is taken: at the warm-started temperature (calibkit's default)
#: or at T = 1, the network as it is (the paper's §4.1)
LAM_AT = ("warm", "one")

#: the penalty on δ: ‖δ‖² (the paper's Eq. 9) or ‖δ‖ (NCToolkit's code)
PENALTIES = ("squared", "norm")
#: where T starts: the focal-loss TS optimum (calibkit) or 1 (NCToolkit's ``init_temp``)
T_STARTS = ("warm", "one")

#: temperatures a fit may end at; outside it the fit is reported as diverged
TEMPERATURE_LIMITS = (1e-2, 1e2)


class ClampingDivergedError(FitDivergedError):
    """The fit ran away (non-finite, an insane temperature, a rising objective).

    Examples
    --------
    It is a ``ValueError``, so one ``except ValueError`` catches every refused fit:

    >>> from calibkit.posthoc import ClampingDivergedError
    >>> issubclass(ClampingDivergedError, ValueError)
    True
    """


class NeuralClamping(ModelCalibrator):
    """``NeuralClamping(**settings).fit(model, inputs, labels)``; then ``forward(x)`` gives
    calibrated logits f(x + δ)/T of ``model_``. The network is used in eval mode without
    gradients to its weights and is not changed (its train/eval mode and ``requires_grad``
    are restored after each call). ``fit(..., input_range=(low, high))`` gives the feasible
    inputs that ``init="data"`` needs (scalars or tensors broadcastable to one input).

    Examples
    --------
    γ chosen from a pool by calibration ECE, as the paper's §4.1 does (γ = 1 alone fits a
    temperature too large for this small network):

    >>> import torch
    >>> from calibkit.data import demo_network
    >>> from calibkit.metrics import ece
    >>> net, digits = demo_network()  # over-confident digits MLP: test ECE 1.46 %
    >>> from calibkit.posthoc import NeuralClamping
    >>> nc = NeuralClamping(gamma_pool=[0, 1, 2]).fit(net, digits.val.x, digits.val.y)
    >>> nc.gamma_, round(float(nc.temperature_), 2), tuple(nc.delta_.shape)  # δ: one input
    (0.0, 2.03, (1, 8, 8))
    >>> with torch.no_grad():
    ...     calibrated = nc(digits.test.x)  # f(x + δ) / T
    >>> round(100 * ece(calibrated, digits.test.y), 2)
    1.15
    """

    name = "neural-clamping"
    about = (
        "Neural Clamping: a learned input perturbation δ and temperature T, f(x + δ) / T, "
        "fitted on the calibration inputs through the network."
    )

    def __init__(
        self,
        *,
        gamma_pool: Annotated[
            float | Sequence[float],
            Setting(
                "Focal γ values fitted together; the one of least ECE on the calibration "
                "split is kept (values in [0, 20])"
            ),
        ] = (1.0,),
        lam: Annotated[
            float | None,
            Setting("λ' of the penalty on δ; none: lam_scale × the initial loss", Bounds(0, 1e6)),
        ] = None,
        lam_scale: Annotated[
            float | Sequence[float],
            Setting(
                "λ' as a multiple of the initial loss (§4.1); several: each fitted with each γ, "
                "the pair of least ECE on the calibration split kept, as the paper chooses λ "
                "(values in [0, 1e6])"
            ),
        ] = 0.1,
        lam_at: Annotated[
            str,
            Setting(
                "Where the initial loss is taken: warm (the warm-started T) or one (T = 1, "
                "the paper's)",
                OneOf(LAM_AT),
            ),
        ] = "warm",
        penalty: Annotated[
            str,
            Setting("squared: λ‖δ‖² (Eq. 9); norm: λ‖δ‖ (NCToolkit's code)", OneOf(PENALTIES)),
        ] = "squared",
        t_start: Annotated[
            str,
            Setting(
                "Where T starts: warm (the focal-loss TS optimum) or one (NCToolkit's)",
                OneOf(T_STARTS),
            ),
        ] = "warm",
        lr: LearningRate = 0.001,
        momentum: Momentum = 0.9,
        batch_size: BatchSize = 512,
        epochs: Epochs = 100,
        init: Annotated[
            str,
            Setting(
                "How δ starts: random (N(0, init_scale²)) or data (Theorem 3.2; needs input_range)",
                OneOf(("random", "data")),
            ),
        ] = "random",
        init_scale: Annotated[
            float, Setting("Standard deviation of the random start of δ", Bounds(0, 1e6))
        ] = 0.01,
        fit_delta: Annotated[
            bool, Setting("Learn δ; false: temperature scaling fitted with focal loss")
        ] = True,
        seed: Seed = 0,
    ) -> None:
        super().__init__()
        self.gamma_pool, self.lam, self.lam_scale, self.lr = gamma_pool, lam, lam_scale, lr
        self.lam_at, self.penalty, self.t_start = lam_at, penalty, t_start
        self.momentum, self.batch_size, self.epochs, self.init = momentum, batch_size, epochs, init
        self.init_scale, self.fit_delta, self.seed = init_scale, fit_delta, seed

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        """``gamma_pool`` and ``lam_scale`` as tuples of floats (a number or a list), and
        ``t_start`` against ``fit_delta``."""
        pools = {
            "gamma_pool": _pool(s["gamma_pool"], "gamma_pool", "focal γ values", 20.0),
            "lam_scale": _pool(s["lam_scale"], "lam_scale", "multiples of the initial loss", 1e6),
        }
        if s["t_start"] == "one" and not s["fit_delta"]:
            raise ValueError(
                "t_start: 'one' needs fit_delta=true (without δ the fit is the warm start, "
                "temperature scaling by focal loss)"
            )
        return s | pools

    # -- fitting ------------------------------------------------------------------------
    def _fit(
        self,
        model: nn.Module,
        x: Tensor,
        y: Tensor,
        *,
        input_range: Any = None,
        progress: Any = None,
    ) -> FitReport:
        """``progress(i, n, record)`` is called after each of the n epochs (the whole pool
        of γ is fitted in the same epochs; the record is the first γ's)."""
        s = self.checked()
        if s["init"] == "data" and input_range is None:
            raise ValueError("init='data' needs input_range=(low, high), the feasible inputs")
        with frozen(model):
            device = next(model.parameters()).device
            x, y = x.to(device), y.to(device)
            bounds = _bounds(x, input_range)
            plain = _logits(model, x, torch.zeros_like(x[0]), torch.ones(()))
            k = plain.shape[1]
            if bool((y < 0).any()) or bool((y >= k).any()):
                raise ValueError(f"labels: expected classes in 0..{k - 1} for a {k}-class model")
            best = None
            fits = _fit_pool(model, x, y, bounds, s, progress)
            for (gamma, scale), fit in zip(members(s), fits, strict=True):
                score = M.ece(trusted(fit["z"], y))
                if best is None or score < best[0]:
                    best = (score, gamma, scale, fit, fit["z"])
        score, gamma, scale, fit, z = best
        self.delta_, self.temperature_ = fit["delta"], fit["log_t"].exp()
        self.gamma_, self.lam_ = gamma, fit["lam"]
        self.history_ = fit.get("history", [])
        details = {
            "gamma": gamma,
            "lam": fit["lam"],
            "lam_scale": None if s["lam"] is not None else scale,
            "temperature_start": fit["t_start"],
            "temperature": float(self.temperature_),
            "ece_calibration_before": M.ece(plain, y),
            "ece_calibration_after": score,
            "accuracy_calibration_before": _accuracy(plain, y),
            "accuracy_calibration_after": _accuracy(z, y),
        }
        iterations = s["epochs"] * math.ceil(len(y) / s["batch_size"]) if s["fit_delta"] else 0
        return FitReport(
            "focal + λ'‖δ‖²" if s["penalty"] == "squared" else "focal + λ'‖δ‖",
            fit["start"],
            fit["end"],
            iterations,
            converged(self.history_) if s["fit_delta"] else True,  # no δ: the exact optimum
            0.0,
            details,
        )

    def history(self) -> list[dict[str, Any]]:
        """Per epoch of the chosen γ's fit: its objective (focal loss + λ'‖δ‖², the mean over
        the epoch's batches as δ and T moved) and T at the epoch's end; empty without δ."""
        return list(getattr(self, "history_", []))

    def learned(self) -> dict[str, Any]:
        return {"gamma": self.gamma_, "lam": self.lam_}

    def _restore(self, learned: dict[str, Any]) -> None:
        self.gamma_, self.lam_ = learned["gamma"], learned["lam"]
        self.temperature_ = self.temperature_.reshape(())

    # -- use ----------------------------------------------------------------------------
    def forward(self, x: Tensor) -> Tensor:
        """Calibrated logits f(x + δ) / T."""
        self._require_fitted()
        want, got = tuple(self.delta_.shape), tuple(x.shape[1:])
        if got != want:
            raise ValueError(f"inputs: expected samples of shape {want}, got {got}")
        with frozen(self.model_):
            return self.model_(x + self.delta_.to(x.device)) / self.temperature_.to(x.device)


def _bounds(x: Tensor, input_range: Any) -> tuple[Tensor, Tensor] | None:
    if input_range is None:
        return None
    lo, hi = (torch.as_tensor(b, dtype=x.dtype, device=x.device) for b in input_range)
    lo, hi = torch.broadcast_to(lo, x.shape[1:]), torch.broadcast_to(hi, x.shape[1:])
    if bool((lo > hi).any()):
        raise ValueError("input_range: the lower bound exceeds the upper bound")
    if bool((x < lo).any()) or bool((x > hi).any()):
        raise ValueError(
            f"input_range: the calibration inputs span [{float(x.min()):.4g}, "
            f"{float(x.max()):.4g}], outside the range given"
        )
    return lo, hi


#: Input values per network call on CPU (128 CIFAR-sized images): ResNet-20 runs its
#: forward and backward 1.6x faster on 5,000 CIFAR-sized images in batches of 128 than of
#: 512, and its forward 2.5x faster than in batches of 1024 (the activations stay in
#: cache). A step's batch (``batch_size``) is passed in pieces of this size with the
#: gradients summed: the same step. Small inputs (digits) keep whole batches; on a GPU a
#: step's batch always goes in whole.
CPU_INPUT_VALUES = 128 * 3 * 32 * 32


def _pieces(n: int, x: Tensor, ways: int = 1) -> int:
    """Samples per network call for a batch of ``n`` of ``x``'s inputs fitted ``ways`` times
    at once."""
    if x.device.type == "cuda":
        return n
    return max(1, min(n, CPU_INPUT_VALUES // (ways * x[0].numel())))


def _logits(model: nn.Module, x: Tensor, delta: Tensor, t: Tensor) -> Tensor:
    with torch.no_grad():
        return torch.cat([model(b + delta) / t.to(x.device) for b in x.split(_pieces(1024, x))])


def init_delta(
    model: nn.Module,
    x: Tensor,
    bounds: tuple[Tensor, Tensor] | None,
    gen: torch.Generator,
    settings: dict[str, Any],
) -> Tensor:
    """The starting δ (see the module docstring) for checked ``settings``."""
    if not settings["fit_delta"]:
        return torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
    if settings["init"] == "random":
        noise = torch.randn(x.shape[1:], generator=gen, dtype=x.dtype)
        return (settings["init_scale"] * noise).to(x.device)
    if bounds is None:
        raise ValueError("init='data' needs input_range=(low, high), the feasible inputs")
    g = torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
    for b in x.split(1024):  # Theorem 3.2: the entropy gradient summed over the inputs
        b = b.clone().requires_grad_(True)
        logp = torch.log_softmax(model(b), 1)
        entropy = -(logp.exp() * logp).sum()
        (grad,) = torch.autograd.grad(entropy, b)
        g += grad.sum(0)
    low, high = x.amin(0), x.amax(0)
    eta = torch.where(g < 0, low - bounds[0], torch.where(g > 0, bounds[1] - high, 0.0))
    return torch.sign(g) * eta


def _fit_pool(
    model, x: Tensor, y: Tensor, bounds, s: dict, progress: Any = None
) -> list[dict[str, Any]]:
    """One fit per γ of the pool, all in the same steps.

    Every γ starts from the same δ and sees the same batches in the same order (one seeded
    generator), so the fits share each step: the pool's inputs x + δ_γ go through the network
    together, and the summed objective gives each (δ_γ, log T_γ) its own gradient
    (SGD with momentum updates each element on its own). On CPU a step's batch goes through
    in pieces of :data:`CPU_INPUT_VALUES` input values, its gradient summed. The result
    equals separate fits in whole batches up to float summation order (tested). Each fit's
    calibration-split logits ``z`` come with it, for the choice of γ, and its per-epoch
    ``history``; ``progress(e, n, record)`` is called after each epoch with the first γ's
    record.
    """
    from scipy.optimize import minimize_scalar  # 0.4 s to import: only where it is used

    gen = torch.Generator().manual_seed(s["seed"])
    delta0 = init_delta(model, x, bounds, gen, s)
    z0 = _logits(model, x, delta0, torch.ones((), dtype=x.dtype))
    pairs = members(s)
    focals = [Focal(gamma=gamma, reduction="mean") for gamma, _ in pairs]
    low, high = (math.log(t) for t in TEMPERATURE_LIMITS)
    outs = []
    starts: dict[float, tuple[Any, float]] = {}  # each γ's warm start, once
    for focal, (gamma, scale) in zip(focals, pairs, strict=True):
        if gamma not in starts:
            warm = minimize_scalar(
                lambda u, focal=focal: float(focal.compute(z0 / math.exp(u), y)),
                bounds=(low, high),
                method="bounded",
                options={"xatol": 1e-8},
            )
            starts[gamma] = (warm, float(focal.compute(z0, y)))
        warm, at_one = starts[gamma]
        initial = float(warm.fun) if s["lam_at"] == "warm" else at_one
        lam = s["lam"] if s["lam"] is not None else scale * initial
        log_t0 = float(warm.x) if s["t_start"] == "warm" else 0.0
        data_term = float(warm.fun) if s["t_start"] == "warm" else at_one
        start = data_term + lam * float(_penalty(delta0[None], s["penalty"]))
        outs.append({"t_start": math.exp(log_t0), "lam": lam, "start": start, "log_t": log_t0})
    g = len(focals)
    if not s["fit_delta"]:  # the warm start is the exact optimum
        log_t = torch.tensor([o["log_t"] for o in outs], dtype=x.dtype, device=x.device)
        return [_checked(model, x, y, delta0, log_t[j], focals[j], s, outs[j]) for j in range(g)]
    delta = delta0.expand(g, *delta0.shape).clone().requires_grad_(True)
    log_t = torch.tensor([o["log_t"] for o in outs], dtype=x.dtype, device=x.device)
    log_t.requires_grad_(True)
    lams = torch.tensor([o["lam"] for o in outs], dtype=x.dtype, device=x.device)
    opt = torch.optim.SGD([delta, log_t], lr=s["lr"], momentum=s["momentum"])
    history: list[list[dict[str, float]]] = [[] for _ in range(g)]
    for epoch in range(s["epochs"]):
        order = torch.randperm(len(x), generator=gen).to(x.device)
        seen = torch.zeros(g, dtype=torch.float64)  # each γ's objective summed over samples
        for idx in order.split(s["batch_size"]):
            opt.zero_grad(set_to_none=True)
            penalty = lams * _penalty(delta, s["penalty"])
            penalty.sum().backward()
            seen += penalty.detach().double().cpu() * len(idx)
            for part in idx.split(_pieces(len(idx), x, g)):  # gradients summed
                xb = x[part]
                inputs = (xb[None] + delta[:, None]).reshape(g * len(part), *xb.shape[1:])
                z = model(inputs).reshape(g, len(part), -1) / log_t.exp()[:, None, None]
                share = len(part) / len(idx)  # the batch mean, in pieces
                losses = torch.stack([f.compute(z[j], y[part]) for j, f in enumerate(focals)])
                (losses.sum() * share).backward()
                seen += losses.detach().double().cpu() * len(part)
            opt.step()
        for j in range(g):
            history[j].append(
                {
                    "epoch": epoch + 1,
                    "objective": float(seen[j]) / len(x),
                    "temperature": math.exp(float(log_t[j].detach())),
                }
            )
        if progress is not None:
            progress(epoch + 1, s["epochs"], history[0][-1])
    delta, log_t = delta.detach(), log_t.detach()
    return [
        _checked(model, x, y, delta[j], log_t[j], focals[j], s, outs[j] | {"history": history[j]})
        for j in range(g)
    ]


#: how much the last epochs' objective and temperature may move (relative) for a fit of δ
#: and T to count as converged (:func:`converged`)
OBJECTIVE_SPREAD, TEMPERATURE_SPREAD = 0.02, 0.01
#: a series that moved the same way at every one of the last epochs by more than this share
#: of its value in all is still descending (or rising), however small each step (issue 68)
DRIFT = 1e-3


def converged(history: list[dict[str, float]]) -> bool:
    """Whether the fit of δ and T settled: over its last
    :data:`~.model_level.SETTLE_EPOCHS` epochs the objective moved by at most
    :data:`OBJECTIVE_SPREAD` of its value and T by at most :data:`TEMPERATURE_SPREAD`, and
    neither moved the same way at every epoch by more than :data:`DRIFT` of its value in
    all: a steady descent of small steps is not converged (issue 68). A temperature still
    rising at the end (NCToolkit's own demo, docs/methods.md) is not either.

    >>> steady = [{"objective": 1.0 - 0.003 * e, "temperature": 1.5} for e in range(10)]
    >>> converged(steady)  # within 2 % over the last 5 epochs, but falling at every one
    False
    >>> flat = [{"objective": 0.7 + 0.0001 * (-1) ** e, "temperature": 1.5} for e in range(10)]
    >>> converged(flat)
    True
    """
    return settled([r["objective"] for r in history], OBJECTIVE_SPREAD, drift=DRIFT) and settled(
        [r["temperature"] for r in history], TEMPERATURE_SPREAD, drift=DRIFT
    )


def _pool(value: Any, name: str, what: str, top: float) -> tuple[float, ...]:
    """A setting given as one number or a list of them, as a tuple of floats in [0, top]."""
    pool = tuple(value) if isinstance(value, list | tuple) else (value,)
    try:
        pool = tuple(check_number(v, name) for v in pool)
    except ValueError:
        raise ValueError(f"{name}: expected {what} such as [1,2,3], got {value!r}") from None
    if not pool or any(not 0 <= v <= top for v in pool):
        raise ValueError(f"{name}: {what} in [0, {top:g}], got {value!r}")
    return pool


def members(s: dict[str, Any]) -> list[tuple[float, float]]:
    """The (γ, λ scale) pairs fitted together, γ-major; the λ scale is unused where ``lam``
    is given (one pair per γ then)."""
    scales = s["lam_scale"] if s["lam"] is None else s["lam_scale"][:1]
    return [(gamma, scale) for gamma in s["gamma_pool"] for scale in scales]


def _penalty(delta: Tensor, kind: str) -> Tensor:
    """(G,) ‖δ‖² or ‖δ‖ of each of the G perturbations ``delta`` (G, *input shape); the norm
    by ``vector_norm``, whose gradient at δ = 0 is 0 (a square root's would be NaN)."""
    flat = delta.flatten(1)
    return (flat**2).sum(1) if kind == "squared" else torch.linalg.vector_norm(flat, dim=1)


def _checked(model, x: Tensor, y: Tensor, delta: Tensor, log_t: Tensor, focal, s, out) -> dict:
    """A finished fit with its calibration logits and objective, or ClampingDivergedError."""
    z = _logits(model, x, delta, log_t.exp())
    start, lam = out["start"], out["lam"]
    end = float(focal.compute(z, y)) + lam * float(_penalty(delta[None], s["penalty"]))
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
        raise ClampingDivergedError(f"neural clamping diverged (γ = {focal.gamma:g}): {why}")
    return out | {"delta": delta, "log_t": log_t, "end": end, "z": z}


def _accuracy(z: Tensor, y: Tensor) -> float:
    return float((z.argmax(1) == y).double().mean())


class frozen:
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
