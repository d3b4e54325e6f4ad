"""MaC-Cal stage 2: retrain a masked classifier head on frozen features (MaC-Cal §4.2,
Algorithm 1, Eq. 8–13; docs/methods.md §5).

The feature extractor of a stage-1 model is frozen in eval mode and its features are
computed once (``images="plain"``, the default: the plain training images, so they never
change, as the paper says stage 2 trains "on original (non-augmented) data", §4.3); a new,
randomly initialised head is trained on them with cross-entropy and SGD.
``images="augmented"`` recomputes them every epoch from the training images augmented as
the run's training was: the paper builds on focal_calibration's code, whose training
loader augments every epoch, so its code may have fed stage 2 augmented images
(docs/methods.md, "The papers' code"). Each head weight matrix W
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
- Adaptive sparsity (Eq. 12): after epoch t, with Acc_t and Conf_t the accuracy and mean
  top-label confidence of the deterministic (inference) head on the training set (from the
  cached features), the step clip(Conf_t − γ Acc_t, −η_t, η_t) moves the drop rate 1 − q,
  as §4.2's "sparsity parameter" and Fig. 8's "sparsity" read it (``reading="sparsity"``,
  the default): q_t = q_{t−1} − clip(...). ``reading="retention"`` is Eq. 8's literal q,
  the keep rate, which takes the step the other way. q is clamped to [q_min, 1] and the
  history always records the keep rate. The paper clamps to [0, 1]; calibkit floors q at
  ``q_min`` = 0.05 so that some weights are always kept. The default was chosen by
  measurement (docs/methods.md, "Both readings of Eq. 12"): on the pretrained CIFAR-10
  ResNet-20 and ResNet-56 it is the only reading whose q settles as Fig. 8 shows and it
  calibrates best (γ = 0.95, with q_T · W at inference); under the retention reading a
  head that fits its training features gains about 1 − γ an epoch and q climbs to 1
  (nothing masked). The fit report flags a mask that stopped acting (``mask-inactive``)
  or never settled (``mask-unsettled``).
- The bottleneck head is Linear(F, width) → ReLU → Linear(width, K) (the paper says "a
  lightweight two-layer bottleneck" and gives no width; ``width`` defaults to 128, which
  over the digits CNN's 64 features is an expansion: a true bottleneck of 32 lost more
  accuracy there, measured in the same search).
- Inference is deterministic: ``inference="expected"`` (the default) uses q_T · W, the
  mask's expectation, ``"full"`` the unmasked W. The paper does not say which. Under the
  sparsity reading, q·W is what lets the controller settle: a head more confident than γ
  times its accuracy is masked more, and its expected weights shrink its logits; with the
  unmasked W more masking inflates the kept weights instead and q runs to its floor. On the
  digits CNN no combination both settles and calibrates (the retention reading with full
  W calibrates best there, 1.27 % at γ = 0.9 against the control's 1.50 %, and never
  settles); docs/methods.md has the whole measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import torch
from torch import Tensor, nn

from .. import metrics as M
from .._settings import COUNT, Bounds, Epochs, LearningRate, Momentum, OneOf, Seed, Setting
from ..metrics import trusted
from ._base import Evidence, FitDivergedError, FitReport
from ._clamping import frozen
from ._masked_heads import HeadStack, MaskedHead
from ._model_level import ModelCalibrator, Problem, settled

ADAPTIVE = ("fixed", "static", "decaying")
#: the two readings of Eq. 12's q (issue 68 §2): the keep rate (Eq. 8 defines q so: each
#: weight is dropped with probability 1 − q) or the sparsity, the drop rate (§4.2 calls q
#: "the sparsity parameter"; Fig. 8 plots "sparsity" over epochs). The update is the same
#: expression; read as sparsity, it moves the drop rate, so the keep rate moves the other way
READINGS = ("retention", "sparsity")
#: what stage 2 trains the head on: the cached features of the plain training images
#: (calibkit's default), or each epoch's features of the images augmented as the run's
#: training was (the paper's training loader)
IMAGES = ("plain", "augmented")
#: stage 2's learning-rate schedules: the paper's constant rate (0.1), or cosine decay to 0
#: over the epochs (each epoch at its start's rate)
SCHEDULES = ("constant", "cosine")
#: a mask's keep rate
_RATE = Bounds(0, 1, low_open=True)
#: a step size of the mask rate's adaptation (Eq. 13)
_ETA = Bounds(0, 1, low_open=True)
#: every row of MaC-Cal Table 5 as settings of :class:`MacCal`
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
#: features are computed in chunks of this many inputs (eval mode, no gradients)
CHUNK = 1024


class MacCal(ModelCalibrator):
    """``MacCal(**settings).fit(model, train_inputs, train_labels, val=(x, y))`` trains a new
    masked head on ``model.forward_features`` of the training inputs (Algorithm 1); then
    ``forward(x)`` gives ``head_(model_.forward_features(x))``. ``model`` needs
    ``forward_features`` and ``num_features`` (every :mod:`calibkit.models` network) and is
    not changed. ``val`` (optional) adds validation accuracy and ECE to each epoch's record
    in ``history_``; ``progress(epoch, epochs, record)`` is called after each epoch.

    Examples
    --------
    Stage 2 on the training inputs. Its fit report says what the mask did: here q, read as
    the sparsity's complement (the default), settled near 0.46 (docs/methods.md, "Both
    readings of Eq. 12"). On this small MLP the head it leaves is under-confident, so its
    test ECE is higher than the network's own 1.46 % (about 2.8 %; the last digits depend on
    the CPU, as a stochastic mask's training does):

    >>> import torch
    >>> from calibkit.data import demo_network
    >>> from calibkit.metrics import ece
    >>> net, digits = demo_network()  # over-confident digits MLP: test ECE 1.46 %
    >>> from calibkit.posthoc import MacCal
    >>> mc = MacCal().fit(net, digits.train.x, digits.train.y)
    >>> [a["kind"] for a in mc.fit_report_.anomalies]  # no mask-inactive, no mask-unsettled
    []
    >>> 0.3 < mc.fit_report_.details["q"] < 0.6  # the keep rate it settled at
    True
    >>> with torch.no_grad():
    ...     z = mc(digits.test.x)  # the new head on the network's features
    ...     before = ece(net(digits.test.x), digits.test.y)
    >>> ece(z, digits.test.y) > before  # under-confident: see the text above
    True
    """

    name = "maccal"
    about = (
        "MaC-Cal stage 2: a masked head retrained on the network's frozen features, with "
        "the gradient restriction and adaptive mask of the paper (Algorithm 1)."
    )
    fit_split = "train"
    incidental_settings = frozenset({"batch_size", "epochs", "lr", "schedule", "seed"})

    def __init__(
        self,
        *,
        head: Annotated[
            str,
            Setting(
                "linear, or bottleneck: Linear(F, width) → ReLU → Linear(width, K)",
                OneOf(("linear", "bottleneck")),
            ),
        ] = "bottleneck",
        width: Annotated[
            int, Setting("The bottleneck's hidden units", Bounds(1, 1_000_000, integer=True))
        ] = 128,
        restrict: Annotated[
            bool, Setting("Gradient restriction (Eq. 11): a masked weight is left unchanged")
        ] = True,
        adaptive: Annotated[
            str,
            Setting(
                "The keep rate q: fixed (q0), static (η_t = eta_init) or decaying (Eq. 13)",
                OneOf(ADAPTIVE),
            ),
        ] = "decaying",
        q0: Annotated[float, Setting("The first keep rate of the mask", _RATE)] = 0.5,
        gamma: Annotated[
            float,
            Setting(
                "γ of Eq. 12: q moves by Conf − γ Acc", Bounds(0, 1, low_open=True, high_open=True)
            ),
        ] = 0.95,
        eta_init: Annotated[float, Setting("η at the first epoch (Eq. 13)", _ETA)] = 0.1,
        eta_final: Annotated[float, Setting("η at the last epoch (Eq. 13)", _ETA)] = 0.001,
        q_min: Annotated[float, Setting("The floor of q (the paper's is 0)", _RATE)] = 0.05,
        reading: Annotated[
            str,
            Setting(
                "What Eq. 12's q is: retention (Eq. 8: the keep rate rises when Conf > γ Acc) "
                "or sparsity (§4.2, Fig. 8: the drop rate rises, so the keep rate falls)",
                OneOf(READINGS),
            ),
        ] = "sparsity",
        resample: Annotated[
            str,
            Setting("Draw the mask every batch or every epoch", OneOf(("batch", "epoch"))),
        ] = "batch",
        inference: Annotated[
            str,
            Setting(
                "The head at inference: full (unmasked W) or expected (q_T · W)",
                OneOf(("full", "expected")),
            ),
        ] = "expected",
        epochs: Epochs = 40,
        lr: LearningRate = 0.1,
        schedule: Annotated[
            str, Setting("The learning rate's schedule", OneOf(SCHEDULES))
        ] = "constant",
        images: Annotated[
            str,
            Setting(
                "Train on the plain training images' cached features or on augmented ones "
                "each epoch",
                OneOf(IMAGES),
            ),
        ] = "plain",
        momentum: Momentum = 0.9,
        weight_decay: Annotated[float, Setting("L2 weight decay", Bounds(0, 1))] = 5e-4,
        batch_size: Annotated[
            int | str,
            Setting("Mini-batch size, or auto (auto_batch: 64 to 128 by the training rows)"),
        ] = "auto",
        seed: Seed = 0,
    ) -> None:
        super().__init__()
        self.head, self.width, self.restrict, self.adaptive = head, width, restrict, adaptive
        self.q0, self.gamma, self.eta_init, self.eta_final = q0, gamma, eta_init, eta_final
        self.q_min, self.resample, self.inference, self.epochs = q_min, resample, inference, epochs
        self.reading = reading
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.schedule, self.batch_size, self.seed = schedule, batch_size, seed
        self.images = images

    @classmethod
    def _check(cls, s: dict[str, Any]) -> dict[str, Any]:
        """``batch_size``: an integer in COUNT's range, or auto."""
        if s["batch_size"] != "auto":
            try:
                COUNT.check("batch_size", s["batch_size"])
            except ValueError:
                raise ValueError(
                    f"batch_size: expected {COUNT} or auto, got {s['batch_size']!r}"
                ) from None
        return s

    def _from_evidence(self, evidence: Evidence) -> dict[str, Any]:
        """The run's validation split, to monitor each epoch (``history()``), and its
        training augmentation (``images="augmented"``)."""
        out: dict[str, Any] = {"augment": evidence.augment}
        if evidence.labels.get("val") is not None:
            out["val"] = (evidence.inputs("val", None), evidence.labels["val"])
        return out

    @classmethod
    def _fit_group(cls, methods: Sequence[MacCal], problems: Sequence[Problem]) -> list[FitReport]:
        """Stage 2 for every (network, training inputs, labels, data) of ``problems``, each
        with its method of ``methods``: their heads in one :class:`HeadStack`, trained by
        one loop (:func:`train_heads`). The methods' settings must agree except ``seed``,
        and the networks must give features of one width for as many training rows."""
        settings = [m.checked() for m in methods]
        shared = [{k: v for k, v in s.items() if k != "seed"} for s in settings]
        if any(x != shared[0] for x in shared[1:]):
            raise ValueError("maccal: methods fitted together must agree in every setting but seed")
        s = settings[0]
        seen: dict[tuple[int, int], tuple[Tensor, Tensor | None]] = {}  # one network's once
        data = [
            _Stage2Data.of(model, x, y, t, seen, **extra)
            for (model, x, y, extra), t in zip(problems, settings, strict=True)
        ]
        if len({(d.h_train.shape, d.val is None) for d in data}) > 1:
            raise ValueError(
                "maccal: networks fitted together need features of one width for as many "
                "training rows, each with or without a validation split"
            )
        batch = auto_batch(len(data[0].y)) if s["batch_size"] == "auto" else s["batch_size"]
        heads = []
        for seed in (t["seed"] for t in settings):
            torch.manual_seed(seed)  # each head starts where it would alone
            heads.append(
                MaskedHead(
                    data[0].h_train.shape[1],
                    data[0].k,
                    head=s["head"],
                    width=s["width"],
                    restrict=s["restrict"],
                    inference=s["inference"],
                ).to(data[0].h_train.device)
            )
        befores = [_train_loss(h, d.h_train, d.y) for h, d in zip(heads, data, strict=True)]
        stack = HeadStack(heads)
        histories = train_heads(
            stack,
            data,
            s | {"batch_size": batch},
            [t["seed"] for t in settings],
            problems[0][3].get("progress"),
        )
        stack.settle([h[-1]["q"] for h in histories])  # q_T of each member, for expected weights
        reports = []
        for method, head, d, history, before in zip(
            methods, heads, data, histories, befores, strict=True
        ):
            method.head_, method.history_, method.n_classes_ = head, history, d.k
            reports.append(_report(history, s | {"batch_size": batch}, before, head, d))
        return reports

    def forward(self, x: Tensor) -> Tensor:
        """Logits of the retrained head on ``model_``'s features of ``x``."""
        self._require_fitted()
        with frozen(self.model_):
            return self.head_(self.model_.forward_features(x))

    def history(self) -> list[dict[str, Any]]:
        return self.history_

    def state_tensors(self) -> dict[str, Tensor]:
        return {f"head_.{k}": v for k, v in self.head_.state_dict().items()}

    def learned(self) -> dict[str, Any]:
        first = self.head_.layers[0]
        return {"history": self.history_, "in_features": first.in_features}

    def _load(self, tensors: dict[str, Tensor], learned: dict[str, Any]) -> None:
        s = self.checked()
        head = MaskedHead(
            learned["in_features"],
            self.n_classes_,
            head=s["head"],
            width=s["width"],
            restrict=s["restrict"],
            inference=s["inference"],
        )
        head.load_state_dict({k.removeprefix("head_."): v for k, v in tensors.items()})
        self.head_ = head.to(next(self.model_.parameters()).device).eval()
        self.history_ = learned["history"]


def _train_loss(head: MaskedHead, h: Tensor, y: Tensor) -> float:
    """Mean cross-entropy of the deterministic (eval-mode) head on features ``h``."""
    with torch.no_grad():
        return float(nn.functional.cross_entropy(head.eval()(h), y))


#: ``batch_size=auto``: the largest of these that gives at least ``MIN_STEPS`` steps an epoch
AUTO_BATCHES = (128, 64, 32, 16)
MIN_STEPS = 15


def auto_batch(n: int) -> int:
    """The stage-2 batch for ``n`` training rows (``batch_size=auto``, the default): the
    largest of :data:`AUTO_BATCHES` that gives at least ``MIN_STEPS`` steps an epoch, so
    128 (the usual CIFAR batch; the paper gives none) on CIFAR's 45,000 rows and 64 on the
    1,000-odd of digits. Chosen by ``python benchmarks/studies/maccal_defaults.py``
    (docs/methods.md, "MaC-Cal's defaults"): on digits, over 3 seeds, 64 kept test accuracy
    (worst −0.40 points) with the mask still acting (final q 0.95); 16 kept it too but drove
    q to 1 by mid-training in 3 of 3 seeds (nothing masked), and 128 left the head under-trained
    (accuracy −25 to −31 points, q at its floor). On the pretrained CIFAR ResNet-20's 45,000
    JPEG training rows, 128 kept accuracy in 3 of 3 seeds (+1.80 points at worst), with the
    mask inactive, as in every setting tried there (docs/methods.md).

    >>> auto_batch(45_000), auto_batch(4_500), auto_batch(1_000), auto_batch(300)
    (128, 128, 64, 16)
    """
    return next((b for b in AUTO_BATCHES if n // b >= MIN_STEPS), AUTO_BATCHES[-1])


def features(model: nn.Module, x: Tensor) -> Tensor:
    """(N, F) ``model.forward_features`` of inputs ``x`` in chunks of :data:`CHUNK`, as float."""
    with torch.no_grad():
        return torch.cat([model.forward_features(c).float() for c in x.split(CHUNK)])


class _Stage2Data:
    """One network's stage-2 data: its frozen features of the training rows (N, F) (computed
    once for members that share a network and its inputs, ``seen``), their labels, the
    validation features and split where given, the number of classes, and
    ``epoch_features()`` (features of each epoch's augmented images) for
    ``images="augmented"``."""

    def __init__(self, h_train, y, k, h_val, val, epoch_features) -> None:
        self.h_train, self.y, self.k = h_train, y, k
        self.h_val, self.val, self.epoch_features = h_val, val, epoch_features

    @classmethod
    def of(
        cls,
        model: nn.Module,
        x: Tensor,
        y: Tensor,
        s: dict[str, Any],
        seen: dict[tuple[int, int], tuple[Tensor, Tensor | None]],
        *,
        val: tuple[Tensor, Tensor] | None = None,
        augment: Any = None,
        progress: Any = None,
    ) -> _Stage2Data:
        if s["images"] == "augmented" and augment is None:
            raise ValueError(
                "images: 'augmented' needs the run's training augmentation, and this data "
                "has none (augment=none, or digits); use images=plain"
            )
        if not all(hasattr(model, a) for a in ("forward_features", "num_features", "num_classes")):
            raise ValueError(
                "maccal needs a model split into forward_features and head (calibkit.models)"
            )
        key = (id(model), id(x))  # the same network and inputs (seeds of one network)
        if key not in seen:
            with frozen(model):
                seen[key] = features(model, x), None if val is None else features(model, val[0])
        h_train, h_val = seen[key]
        if h_train.shape[1] != model.num_features:
            raise ValueError(
                f"the features have width {h_train.shape[1]} but the model says num_features = "
                f"{model.num_features}"
            )
        k = model.num_classes
        if bool((y < 0).any()) or bool((y >= k).any()):
            raise ValueError(f"labels: expected classes in 0..{k - 1} for a {k}-class model")
        epoch_features = None
        if s["images"] == "augmented":
            # the augmentation's own stream, so the order of rows is the plain fit's
            gen = torch.Generator().manual_seed(s["seed"] + 1)

            def epoch_features() -> Tensor:
                with frozen(model):
                    return torch.cat([features(model, augment(c, gen)) for c in x.split(CHUNK)])

        return cls(h_train, y.to(h_train.device), k, h_val, val, epoch_features)


def _report(
    history: list[dict[str, Any]],
    s: dict[str, Any],
    before: float,
    head: MaskedHead,
    d: _Stage2Data,
) -> FitReport:
    """A member's fit report: the loss before and after, whether it settled, q's path."""
    last = history[-1]
    qs = [r["q"] for r in history]
    details = {
        "q": last["q"],
        "q_range": (min(qs), max(qs)),
        "train_acc": last["train_acc"],
        "batch_size": s["batch_size"],
    }
    if "val_ece" in last:
        details |= {"val_acc": last["val_acc"], "val_ece": last["val_ece"]}
    for key, why in (("mask_stopped", mask_stopped), ("mask_unsettled", mask_unsettled)):
        found = why(history, s)
        if found:
            details[key] = found
    return FitReport(
        "cross-entropy of the inference head (train)",
        before,
        _train_loss(head, d.h_train, d.y),
        len(history),
        converged(history),
        0.0,
        details,
    )


def train_heads(
    stack: HeadStack,
    data: Sequence[_Stage2Data],
    s: dict[str, Any],
    seeds: Sequence[int],
    progress: Any = None,
) -> list[list[dict[str, float]]]:
    """Algorithm 1 for the M heads of ``stack``, member m on ``data[m]`` (its cached
    features) with its own generator seeded ``seeds[m]`` (its order of rows and its masks):
    one record per epoch and member (q used, η, training accuracy, confidence and loss,
    validation accuracy and ECE where given). With ``images="augmented"`` each epoch trains
    on that epoch's features of augmented images; Acc_t and Conf_t are still measured on
    the plain features. ``progress(epoch, epochs, record)`` gets the first member's record."""
    gens = [torch.Generator().manual_seed(seed) for seed in seeds]
    m_count, n = len(data), len(data[0].y)
    q = [float(s["q0"])] * m_count
    histories: list[list[dict[str, float]]] = [[] for _ in data]
    h_train = torch.stack([d.h_train for d in data])  # (M, N, F)
    y = torch.stack([d.y for d in data])  # (M, N)
    device = h_train.device
    rows = torch.arange(m_count, device=device)[:, None]
    h_val = None if data[0].h_val is None else torch.stack([d.h_val for d in data])
    sizes = torch.tensor([len(b) for b in torch.arange(n).split(s["batch_size"])])
    for epoch in range(1, s["epochs"] + 1):
        lr = lr_at(s, epoch)
        h_epoch = h_train
        if s["images"] == "augmented":
            h_epoch = torch.stack([d.epoch_features() for d in data])
        order = torch.stack([torch.randperm(n, generator=g) for g in gens]).to(device)
        step_losses = []  # summed after the epoch: no operation per step
        if s["resample"] == "epoch":
            stack.resample(q, gens)
        for idx in order.split(s["batch_size"], dim=1):
            if s["resample"] == "batch":
                stack.resample(q, gens)
            logits = stack(h_epoch[rows, idx])  # (M, B, K)
            losses = nn.functional.cross_entropy(
                logits.flatten(0, 1), y[rows, idx].flatten(), reduction="none"
            )
            loss = losses.view(m_count, -1).mean(1)  # each member's own mean
            stack.zero_grad()
            loss.sum().backward()  # each member's gradient is that of its own loss
            stack.step(lr, s["momentum"], s["weight_decay"])
            step_losses.append(loss.detach())
        mean_losses = (torch.stack(step_losses, 1).double() @ sizes.to(device).double()) / n
        for member, mean_loss in enumerate(mean_losses.tolist()):
            if not math.isfinite(mean_loss):
                raise FitDivergedError(
                    f"maccal diverged: the loss became {mean_loss} in epoch {epoch}"
                    + (f" (network {member + 1} of {m_count})" if m_count > 1 else "")
                    + "; lower its lr"
                )
        with torch.no_grad():  # Acc_t and Conf_t of the deterministic heads on the training set
            q_now = torch.tensor(q, device=device)  # on the heads' device (expected weights)
            conf, pred = torch.softmax(stack.evaluate(h_train, q_now), -1).max(-1)
            accs = (pred == y).double().mean(1).tolist()
            confs = conf.mean(1).tolist()
            val_logits = None if h_val is None else stack.evaluate(h_val, q_now).cpu()
        for member, d in enumerate(data):
            acc, mean_conf = accs[member], confs[member]
            record = {
                "epoch": epoch,
                "q": q[member],
                "train_acc": acc,
                "train_conf": mean_conf,
                "train_loss": mean_losses[member].item(),
            }
            if val_logits is not None:  # the heads' own logits: checked once, one pass
                v = trusted(val_logits[member], d.val[1])
                record |= {"val_acc": M.accuracy(v), "val_ece": M.ece(v)}
            record["lr"] = lr
            if s["adaptive"] != "fixed":
                eta = eta_at(s, epoch)
                step = float(np.clip(mean_conf - s["gamma"] * acc, -eta, eta))
                if s["reading"] == "sparsity":  # the drop rate 1 − q takes the step
                    step = -step
                q[member] = min(1.0, max(s["q_min"], q[member] + step))
                record["eta"] = eta
            record["q_next"] = q[member]
            histories[member].append(record)
        if progress is not None:
            progress(epoch, s["epochs"], histories[0][-1])
    return histories


#: how much the last epochs' training loss (relative, or 0.01 nats) and accuracy (absolute)
#: may move for stage 2 to count as converged (:func:`converged`)
LOSS_SPREAD, LOSS_FLOOR, ACCURACY_SPREAD = 0.10, 0.01, 0.01


def converged(history: list[dict[str, float]]) -> bool:
    """Whether stage 2 settled: over its last :data:`~.model_level.SETTLE_EPOCHS` epochs the
    mean masked training loss moved by at most :data:`LOSS_SPREAD` of its value (or
    :data:`LOSS_FLOOR` nats) and the
    inference head's training accuracy by at most :data:`ACCURACY_SPREAD` (1 point)."""
    return settled([r["train_loss"] for r in history], LOSS_SPREAD, floor=LOSS_FLOOR) and settled(
        [r["train_acc"] for r in history], ACCURACY_SPREAD, relative=False
    )


def mask_stopped(history: list[dict[str, float]], s: dict[str, Any]) -> str | None:
    """Why the adaptive mask stopped acting, or None: q stayed at 1 (nothing masked) or at
    its floor ``q_min`` for the whole second half of training (Eq. 12 saturated)."""
    if s["adaptive"] == "fixed" or len(history) < 2:
        return None
    half = [r["q"] for r in history[len(history) // 2 :]]
    for bound, what in ((1.0, "1: nothing was masked"), (s["q_min"], "its floor q_min")):
        if all(abs(q - bound) < 1e-12 for q in half):
            since = next(r["epoch"] for r in history if abs(r["q"] - bound) < 1e-12)
            return f"q reached {what} from epoch {since} of {len(history)}"
    return None


def mask_unsettled(history: list[dict[str, float]], s: dict[str, Any]) -> str | None:
    """Why the adaptive mask never settled, or None: at every epoch of the second half of
    training Eq. 12's step was its whole clip η_t, the same way (Conf_t − γ Acc_t ≥ η_t at
    each, or ≤ −η_t at each), so q only followed the clip's schedule, at whatever value it
    reached (issue 68 §3). Clipped steps that change direction are q oscillating about
    Eq. 12's fixed point within the decaying clip: settled. A mask that stopped at a bound
    is :func:`mask_stopped`'s."""
    if s["adaptive"] == "fixed" or len(history) < 2 or mask_stopped(history, s):
        return None
    half = history[len(history) // 2 :]
    gaps = [r["train_conf"] - s["gamma"] * r["train_acc"] for r in half]
    if all(g >= r["eta"] for g, r in zip(gaps, half, strict=True)) or all(
        g <= -r["eta"] for g, r in zip(gaps, half, strict=True)
    ):
        return (
            f"q moved by its whole clip η_t at every epoch from {half[0]['epoch']} of "
            f"{len(history)} ({half[0]['q']:.2f} → {half[-1]['q_next']:.2f}): Eq. 12 never "
            "reached Conf = γ Acc"
        )
    return None


def lr_at(s: dict[str, Any], t: int) -> float:
    """The learning rate of epoch t = 1..T: ``lr``, or ``lr`` · (1 + cos(π (t − 1)/T)) / 2.

    >>> lr_at({"lr": 0.1, "schedule": "cosine", "epochs": 4}, 3)
    0.05
    """
    if s["schedule"] == "constant":
        return s["lr"]
    return s["lr"] * (1 + math.cos(math.pi * (t - 1) / s["epochs"])) / 2


def eta_at(s: dict[str, Any], t: int) -> float:
    """η_t of Eq. 13 (decaying) or η_init (static), t = 1..T, for settings ``s``."""
    if s["adaptive"] == "static":
        return s["eta_init"]
    ratio = math.log(s["eta_final"] / s["eta_init"])
    return s["eta_init"] * math.exp(ratio * t / s["epochs"])


def masked_inference(
    head: nn.Linear,
    features: Tensor,
    labels: Tensor,
    rates: list[float],
    n_masks: int = 10,
    seed: int = 0,
) -> list[dict[str, float]]:
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
