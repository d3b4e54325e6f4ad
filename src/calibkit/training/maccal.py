"""MaC-Cal stage 2: retrain a masked classifier head on frozen features (MaC-Cal §4.2,
Algorithm 1, Eq. 8–13; METHODS.md §5).

The feature extractor of a stage-1 model is frozen in eval mode and its features are
computed once (stage 2 uses no augmentation, so they never change); a new, randomly
initialised head is trained on them with cross-entropy and SGD. Each head weight matrix W
is used as M ⊙ W with M ~ Bernoulli(q) drawn per mini-batch (Algorithm 1; ``resample=
"epoch"`` draws one per epoch, as the text of §4.2 says).

Switches reach every row of the paper's Table 5 (``ABLATIONS``):

| row | ``head`` | ``restrict`` | ``adaptive`` |
| --- | --- | --- | --- |
| masked retraining | ``linear`` | False | ``fixed`` (q = q₀) |
| + gradient restriction | ``linear`` | True | ``fixed`` |
| + bottleneck head | ``bottleneck`` | True | ``fixed`` |
| + static adaptive sparsity | ``bottleneck`` | True | ``static`` (η_t = η_init) |
| + decaying adaptive sparsity (MaC-Cal) | ``bottleneck`` | True | ``decaying`` (Eq. 13) |

- Without restriction the gradient reaches every weight (straight-through: the forward pass
  uses M ⊙ W, the backward pass treats the mask as the identity). With it (Eq. 11) a weight
  where M = 0 is left bit-identical by the step: no gradient, no weight decay, and its
  momentum is neither used nor decayed.
- Adaptive sparsity (Eq. 12): after epoch t, q_t = q_{t−1} + clip(Conf_t − γ Acc_t, −η_t,
  η_t), clamped to [q_min, 1], with Acc_t and Conf_t the accuracy and mean top-label
  confidence of the deterministic (inference) head on the training set, from the cached
  features. (Measured on the masked training passes instead, the rule runs away: a fresh
  head's masked outputs are unconfident, q falls, and q reaches q_min within a few epochs
  on digits.) The paper clamps to [0, 1]; calibkit
  floors q at ``q_min`` = 0.05 so that some weights are always kept. q_t is recorded.
- The bottleneck head is Linear(F, width) → ReLU → Linear(width, K) (the paper says "a
  lightweight two-layer bottleneck" and gives no width; ``width`` defaults to 128).
- Inference is deterministic: ``inference="full"`` uses the unmasked W, ``"expected"``
  uses q_T · W, the mask's expectation. The paper does not say which; calibkit measures
  both (docs/model-level.md) and defaults to ``full``: at γ = 0.9 the two are within the
  spread over seeds on digits (test ECE 1.12 ± 0.17 % full, 1.06 ± 0.34 % expected), but
  expected weights are fragile: where adaptive sparsity drives q low (γ = 0.5) they shrink
  the logits by q and the ECE over the γ sweep spreads by 20 points, against 0.3 with full
  weights.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .. import data
from ..metrics import functional as M
from ..models import Classifier
from ..registry import Registry
from .trainer import TrainingError

ADAPTIVE = ("fixed", "static", "decaying")


@dataclass(kw_only=True)
class MacCalConfig:
    """Settings of stage 2 (defaults: the full method with the paper's schedule)."""

    head: str = "bottleneck"
    width: int = 128
    restrict: bool = True
    adaptive: str = "decaying"
    q0: float = 0.5
    gamma: float = 0.9
    eta_init: float = 0.1
    eta_final: float = 0.001
    q_min: float = 0.05
    resample: str = "batch"
    inference: str = "full"
    epochs: int = 40
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 128
    seed: int = 0

    @classmethod
    def check_settings(cls, **settings: Any) -> dict[str, Any]:
        """The settings checked (one-line ``ValueError``), for the registry."""
        return asdict(cls(**settings).check())

    def check(self) -> MacCalConfig:
        choices = {
            "head": ("linear", "bottleneck"),
            "adaptive": ADAPTIVE,
            "resample": ("batch", "epoch"),
            "inference": ("full", "expected"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name}: expected one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        for name in ("q0", "q_min"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not 0 < v <= 1:
                raise ValueError(f"{name}: a mask rate must lie in (0, 1], got {v!r}")
        if not isinstance(self.gamma, int | float) or not 0 < self.gamma < 1:
            raise ValueError(
                f"gamma: expected a value in (0, 1) (MaC-Cal Eq. 12), got {self.gamma!r}"
            )
        for name in ("eta_init", "eta_final", "lr"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name}: expected a number > 0, got {v!r}")
        for name in ("width", "epochs", "batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        return self


ABLATIONS: dict[str, dict[str, Any]] = {
    "masked retraining": {"head": "linear", "restrict": False, "adaptive": "fixed"},
    "+ gradient restriction": {"head": "linear", "restrict": True, "adaptive": "fixed"},
    "+ bottleneck head": {"head": "bottleneck", "restrict": True, "adaptive": "fixed"},
    "+ static adaptive sparsity": {"head": "bottleneck", "restrict": True, "adaptive": "static"},
    "+ decaying adaptive sparsity": {
        "head": "bottleneck",
        "restrict": True,
        "adaptive": "decaying",
    },
}

STAGE2: Registry[MacCalConfig] = Registry("stage-2 method")
STAGE2.register("maccal")(MacCalConfig)


def stage2_config(spec: str) -> MacCalConfig:
    """A checked stage-2 configuration from a spec such as ``maccal:width=256,gamma=0.8``."""
    return STAGE2.create(spec).check()


class MaskedHead(nn.Module):
    """A linear or bottleneck head whose weight matrices are masked while training."""

    def __init__(
        self, in_features: int, num_classes: int, *, head: str = "bottleneck", width: int = 128,
        restrict: bool = True, inference: str = "full",
    ) -> None:  # fmt: skip
        super().__init__()
        sizes = (
            [in_features, width, num_classes]
            if head == "bottleneck"
            else [in_features, num_classes]
        )
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        self.restrict, self.inference = restrict, inference
        self.register_buffer("q", torch.tensor(1.0))
        self.masks: list[Tensor] | None = None

    def resample(self, q: float, generator: torch.Generator) -> None:
        """Draw a new Bernoulli(q) mask for every weight matrix."""
        self.q.fill_(q)
        self.masks = [
            (torch.rand(lin.weight.shape, generator=generator) < q).to(lin.weight.device)
            for lin in self.layers
        ]

    def weight(self, i: int) -> Tensor:
        w = self.layers[i].weight
        if self.training and self.masks is not None:
            masked = w * self.masks[i]
            return masked if self.restrict else w + (masked - w).detach()  # straight-through
        if not self.training and self.inference == "expected":
            return w * self.q
        return w

    def forward(self, h: Tensor) -> Tensor:
        for i, lin in enumerate(self.layers):
            h = nn.functional.linear(h, self.weight(i), lin.bias)
            if i < len(self.layers) - 1:
                h = torch.relu(h)
        return h


def masked_sgd_step(head: MaskedHead, state: dict[int, Tensor], lr: float, momentum: float,
                    weight_decay: float) -> None:  # fmt: skip
    """SGD with momentum and weight decay (torch's update rule) in which, with gradient
    restriction, the entries where the mask is 0 keep their weight and momentum exactly."""
    with torch.no_grad():
        for i, p in enumerate(head.parameters()):
            if p.grad is None:
                continue
            d = p.grad + weight_decay * p
            buf = state.get(i)
            buf = d.clone() if buf is None else buf * momentum + d
            new = p - lr * buf
            mask = _mask_of(head, p)
            if mask is not None and head.restrict:
                old = state.get(i, torch.zeros_like(p))
                buf = torch.where(mask, buf, old)
                new = torch.where(mask, new, p)
            state[i] = buf
            p.copy_(new)


def _mask_of(head: MaskedHead, p: Tensor) -> Tensor | None:
    if head.masks is None:
        return None
    for lin, m in zip(head.layers, head.masks, strict=True):
        if p is lin.weight:
            return m
    return None


def eta_at(config: MacCalConfig, t: int) -> float:
    """η_t of Eq. 13 (decaying) or η_init (static), t = 1..T."""
    if config.adaptive == "static":
        return config.eta_init
    ratio = math.log(config.eta_final / config.eta_init)
    return config.eta_init * math.exp(ratio * t / config.epochs)


def features_of(
    model: Classifier, split: data.Split, bundle: data.DataBundle, device: torch.device
) -> Tensor:
    """(N, F) features of a split, eval mode, no augmentation, on ``device``."""
    model.eval()
    out = []
    with torch.no_grad():
        for idx in torch.arange(len(split)).split(1024):
            x, _ = split.take(idx)
            out.append(model.forward_features(data.to_inputs(x, bundle, device)).float())
    return torch.cat(out)


def stage2(
    model: Classifier,
    bundle: data.DataBundle,
    config: MacCalConfig,
    device: torch.device,
    progress: Any = None,
) -> tuple[Classifier, list[dict[str, float]]]:
    """Replace ``model``'s head by a MaC-Cal head trained on cached features.

    Returns the model (features unchanged, ``head`` a :class:`MaskedHead` in eval mode)
    and one history record per epoch (q used, η, training accuracy and confidence, loss,
    validation accuracy and ECE).
    """
    if not hasattr(model, "forward_features") or not hasattr(model, "head"):
        raise ValueError(
            "stage 2 needs a model split into forward_features and head (calibkit.models)"
        )
    config.check()
    if bundle.train is None or bundle.val is None:
        raise ValueError("stage 2 needs data with a training and a validation split")
    model = model.to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    h_train = features_of(model, bundle.train, bundle, device)
    if h_train.shape[1] != model.num_features:
        raise ValueError(
            f"the features have width {h_train.shape[1]} but the model says num_features = "
            f"{model.num_features}"
        )
    y_train = bundle.train.y.to(device)
    h_val, y_val = features_of(model, bundle.val, bundle, device), bundle.val.y
    torch.manual_seed(config.seed)
    head = MaskedHead(
        model.num_features, bundle.num_classes, head=config.head, width=config.width,
        restrict=config.restrict, inference=config.inference,
    ).to(device)  # fmt: skip
    gen = torch.Generator().manual_seed(config.seed)
    q, state, history = config.q0, {}, []
    for epoch in range(1, config.epochs + 1):
        head.train()
        lr = config.lr  # the paper trains stage 2 at a constant 0.1
        order = torch.randperm(len(y_train), generator=gen).to(device)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        if config.resample == "epoch":
            head.resample(q, gen)
        for idx in order.split(config.batch_size):
            if config.resample == "batch":
                head.resample(q, gen)
            logits = head(h_train[idx])
            loss = nn.functional.cross_entropy(logits, y_train[idx])
            head.zero_grad(set_to_none=True)
            loss.backward()
            masked_sgd_step(head, state, lr, config.momentum, config.weight_decay)
            loss_sum += loss.detach().double() * len(idx)
        mean_loss = float(loss_sum) / len(y_train)
        if not math.isfinite(mean_loss):
            raise TrainingError(
                f"stage 2 diverged: the loss became {mean_loss} in epoch {epoch}; lower maccal's lr"
            )
        head.eval()  # Acc_t and Conf_t of the deterministic head on the training set
        with torch.no_grad():
            conf, pred = torch.softmax(head(h_train), 1).max(1)
            acc, mean_conf = float((pred == y_train).double().mean()), float(conf.mean())
            val_logits = head(h_val).cpu()
        record = {
            "epoch": epoch, "q": q, "train_acc": acc, "train_conf": mean_conf,
            "train_loss": mean_loss, "val_acc": M.accuracy(val_logits, y_val),
            "val_ece": M.ece(val_logits, y_val), "lr": lr,
        }  # fmt: skip
        if config.adaptive != "fixed":
            eta = eta_at(config, epoch)
            q = min(
                1.0,
                max(config.q_min, q + float(np.clip(mean_conf - config.gamma * acc, -eta, eta))),
            )
            record["eta"] = eta
        record["q_next"] = q
        history.append(record)
        if progress is not None:
            progress(epoch, config.epochs, record)
    head.q.fill_(history[-1]["q"])  # the rate of the last epoch: q_T for expected weights
    head.masks = None
    model.head = head.eval()
    return model, history


def masked_inference(
    head: nn.Linear, features: Tensor, labels: Tensor, rates: list[float], n_masks: int = 10,
    seed: int = 0,
) -> list[dict[str, float]]:  # fmt: skip
    """MaC-Cal Fig. 1: accuracy and mean confidence of a trained linear head when a random
    fraction r of its weights is masked at test time (mean over ``n_masks`` masks)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    with torch.no_grad():
        for r in rates:
            if not 0 <= r < 1:
                raise ValueError(f"rates: a mask rate must lie in [0, 1), got {r!r}")
            accs, confs = [], []
            for _ in range(n_masks):
                keep = (torch.rand(head.weight.shape, generator=gen) >= r).to(head.weight.device)
                p = torch.softmax(nn.functional.linear(features, head.weight * keep, head.bias), 1)
                conf, pred = p.max(1)
                accs.append(float((pred.cpu() == labels).double().mean()))
                confs.append(float(conf.mean()))
            out.append(
                {"rate": r, "accuracy": float(np.mean(accs)), "confidence": float(np.mean(confs))}
            )
    return out
