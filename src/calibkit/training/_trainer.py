"""The trainer: deterministic, resumable, distributed when launched by torchrun.

Every random draw of epoch e (the order of the samples, crops, flips, mixup) comes from
generators seeded with (seed, e), and the model is initialised under ``torch.manual_seed
(seed)``, so a run is a function of its configuration. A checkpoint (weights, optimiser
state with momentum, history, recorders) is written atomically after every epoch; a run
resumed after a crash restarts the interrupted epoch from the last checkpoint and finishes
with exactly the weights and numbers of an uninterrupted run (tested by killing one with
SIGKILL).

A run directory holds, when the run finishes:

- ``logits.npz``: ``logits_val``, ``labels_val``, ``logits_test``, ``labels_test`` and
  ``logits_<name>``/``labels_<name>`` for every extra split (the format ``calibkit
  compare --file`` reads); an extra split with another number of classes is
  out-of-distribution (SVHN for a CIFAR-100 model): ``logits_ood_<name>``, no labels;
- ``history.json``: one record per epoch (train loss and accuracy, validation accuracy,
  ECE, NLL and optimal ECE, learning rate, seconds for the training steps, for the
  validation (its forward pass and metrics) and in all);
- ``run.json``: the resolved configuration and what shapes confidence (loss and its
  parameters, mixup, augmentation, seed, versions, device, git revision);
- ``model.safetensors``: the final weights;
- ``analysis.npz`` when a recorder is on (learned epochs, max logits, gradient norms).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .. import __version__, data, losses, models
from .._docs import documented
from .._outputs import atomic_write, save_npz, write_text
from .._registry import parse_spec
from ..data.internal import augmentation
from ..metrics import evaluate, trusted
from . import _schedule as schedules
from ._augment import mixup
from ._checkpoints import resume_state, save_checkpoint
from ._config import RUN_PARAMETERS, TrainConfig, TrainingError, TrainResult
from ._packed import MEMBER_FIELDS, Pack, pack_key
from ._recorders import EpochTotals, LearnedEpochs, grad_norms

CHECKPOINT = "checkpoint.pt"
#: an epoch's checkpoint of a member before every member's is written (see :func:`_settle`)
NEXT = CHECKPOINT + ".next"


def _generator(seed: int, epoch: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed(((seed * 1_000_003 + epoch) * 7 + stream) % (2**63))


class _Distributed:
    """Rank and world size; sums across processes under torchrun (gloo or nccl)."""

    def __init__(self, device: torch.device) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world > 1 and not torch.distributed.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            torch.distributed.init_process_group(backend)

    def shard(self, idx: Tensor) -> Tensor:
        return torch.tensor_split(idx, self.world)[self.rank] if self.world > 1 else idx

    def total(self, t: Tensor, op: str = "sum") -> Tensor:
        if self.world > 1:
            reduce_op = (
                torch.distributed.ReduceOp.MAX if op == "max" else torch.distributed.ReduceOp.SUM
            )
            torch.distributed.all_reduce(t, op=reduce_op)
        return t

    @property
    def main(self) -> bool:
        return self.rank == 0


def predict(
    model: nn.Module, split: data.Split, bundle: data.DataBundle, device: torch.device
) -> Tensor:
    """(N, K) float32 logits of a split in eval mode, on the CPU.

    Examples
    --------
    >>> import torch
    >>> from calibkit.data import demo_network
    >>> from calibkit.training import predict
    >>> net, digits = demo_network()
    >>> logits = predict(net, digits.test, digits, torch.device("cpu"))
    >>> logits.shape, logits.dtype
    (torch.Size([497, 10]), torch.float32)
    """
    model.eval()
    return predict_members(lambda x: model(_layout(x, device))[None], split, bundle, device)[0]


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """The training steps' mixed precision on ``device``: bf16 autocast on CUDA, none else
    (the trainer, packed training and the bench's rate estimate share it)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()  # a disabled autocast still costs a few µs per step


def _layout(x: Tensor, device: torch.device) -> Tensor:
    if device.type == "cuda" and x.ndim == 4:
        return x.contiguous(memory_format=torch.channels_last)
    return x


#: history field: the metric it records (each epoch, on the validation split)
VAL_METRICS = {
    "val_acc": "accuracy",
    "val_ece": "ece",
    "val_nll": "nll",
    "val_optimal_ece": "optimal_ece",
}


def _val_metrics(logits: Tensor, labels: Tensor, epoch: int) -> dict[str, float]:
    """The epoch's validation metrics, from one evaluation of the logits. The model's own
    logits and the split's labels need no check but finiteness: they enter as
    :func:`~calibkit.metrics._inputs.trusted`."""
    if not bool(torch.isfinite(logits.sum())):
        raise TrainingError(
            f"the validation logits became non-finite in epoch {epoch}; lower the learning "
            "rate or check the data"
        )
    m = evaluate(trusted(logits, labels), metrics=VAL_METRICS.values()).metrics
    return {field: m[name] for field, name in VAL_METRICS.items()}


def set_epoch_lr(
    opt: torch.optim.Optimizer, schedule: Any, config: TrainConfig, epoch: int
) -> float:
    """Give ``opt`` the learning rate of 0-based ``epoch`` under ``schedule``; return it."""
    lr = schedule.lr(config.lr, epoch, config.epochs)
    for group in opt.param_groups:
        group["lr"] = lr
    return lr


class EpochDraws:
    """Every random draw of one epoch of one run: the order of the samples, then the
    generators of its augmentations and mixup, all seeded with (seed, epoch)."""

    def __init__(self, config: TrainConfig, epoch: int, n: int, device: torch.device) -> None:
        order_gen = _generator(config.seed, epoch, 0)
        self.aug = _generator(config.seed, epoch, 1)
        self.rng = np.random.default_rng([config.seed, epoch])
        self.order = torch.randperm(n, generator=order_gen).to(device)


def step_inputs(
    configs: Sequence[TrainConfig],
    bundle: data.DataBundle,
    split: data.Split,
    idx: Tensor,
    device: torch.device,
    augment: Callable[[Tensor, Sequence[torch.Generator]], Tensor] | None,
    draws: Sequence[EpochDraws],
) -> tuple[Tensor, list[Tensor], Tensor]:
    """One step's network inputs (members, batch, ...), targets (per member: labels, or mixed
    one-hot rows under mixup) and labels (members, batch), for member m's samples ``idx[m]``
    of ``split`` ((members, batch) positions), augmented with each member's epoch ``draws``.
    Every member's images are gathered, normalised and cropped together, each with its own
    draws; mixup, which a member may or may not use, runs per member that uses it."""
    members, size = idx.shape
    x, y = split.take(idx.reshape(-1))
    x, y = data.to_inputs(x, bundle, device), y.to(device)
    if augment is not None:
        x = augment(x, [d.aug for d in draws])
    x, y = x.reshape(members, size, *x.shape[1:]), y.reshape(members, size)
    targets: list[Tensor] = list(y)
    for m, (config, d) in enumerate(zip(configs, draws, strict=True)):
        if config.mixup > 0:
            onehot = nn.functional.one_hot(y[m], bundle.num_classes).float()
            x[m], targets[m] = mixup(x[m], onehot, config.mixup, d.aug, d.rng)
    return x, targets, y


def epoch_record(epoch: int, sums: Tensor, val_logits: Tensor, labels: Tensor) -> dict[str, float]:
    """The history entry of 0-based ``epoch`` from its training ``sums`` (loss sum, number
    correct, number of samples) and the metrics of the validation logits ``val_logits``
    against ``labels`` (``val_time``: the metrics' seconds; the caller adds its pass's); a
    non-finite training loss stops the run (one-line :class:`TrainingError`)."""
    train_loss = float(sums[0] / sums[2])
    if not math.isfinite(train_loss):
        raise TrainingError(
            f"the training loss became {train_loss} in epoch {epoch + 1}; lower the learning "
            "rate or check the data"
        )
    record = {"epoch": epoch + 1, "train_loss": train_loss, "train_acc": float(sums[1] / sums[2])}
    began = time.perf_counter()
    record |= _val_metrics(val_logits, labels, epoch + 1)
    record["val_time"] = time.perf_counter() - began
    return record


def predict_members(
    evaluate: Callable[[Tensor], Tensor],
    split: data.Split,
    bundle: data.DataBundle,
    device: torch.device,
) -> Tensor:
    """(members, N, K) float32 logits of a split, on the CPU, from ``evaluate`` (inputs
    (batch, ...) to every member's logits (members, batch, K) in eval mode: a pack's, or one
    network's): one pass over the split, each batch read once for all members."""
    out = []
    with torch.no_grad(), autocast(device):
        for idx in torch.arange(len(split)).split(1024):
            x, _ = split.take(idx)
            out.append(evaluate(data.to_inputs(x, bundle, device)).float().cpu())
    return torch.cat(out, 1)


def build(
    config: TrainConfig,
    *,
    pretrained: bool = True,
    need_train: bool = True,
    bundle: data.DataBundle | None = None,
) -> tuple[data.DataBundle, nn.Module, losses.Loss]:
    """The data (with extra splits), the model and the loss of a run. The model is freshly
    initialised under ``torch.manual_seed(config.seed)``, or holds ``config.checkpoint``'s
    weights where one is given (unless ``pretrained=False``: a finished run's own weights are
    loaded instead). ``bundle``: the data already built by this function for a run with the
    same data (a packed run's members share it); it is returned as it is.

    Examples
    --------
    >>> from calibkit.training import TrainConfig, build
    >>> digits, model, loss = build(TrainConfig(model="mlp", loss="focal:gamma=3"))
    >>> len(digits.train), type(model).__name__, loss
    (1000, 'Classifier', Focal(gamma=3.0, reduction='mean'))
    """
    if bundle is None:
        bundle = _data(config, need_train)
    torch.manual_seed(config.seed)
    checkpoint = config.checkpoint if pretrained else None
    model = models.create(
        config.model, checkpoint, num_classes=bundle.num_classes, input_shape=bundle.input_shape
    )
    return bundle, model, losses.create(config.loss)


def _data(config: TrainConfig, need_train: bool) -> data.DataBundle:
    """The run's data with its extra splits, every split's labels checked."""
    bundle = data.create(config.data)
    if need_train and (bundle.train is None or bundle.val is None):
        raise ValueError(f"data: '{config.data}' has no training split; pass it as extra=")
    for spec in config.extra:
        name = parse_spec(spec).name  # a Spec after config.check(): no parsing
        extra = data.create(spec)
        if extra.input_shape != bundle.input_shape:
            raise ValueError(
                f"extra {spec!r}: inputs of shape {extra.input_shape}, the model takes "
                f"{bundle.input_shape}"
            )
        key = name.replace(".", "_").replace("-", "_")
        key = key if key not in bundle.extra else f"{key}_{len(bundle.extra)}"
        if extra.num_classes != bundle.num_classes:  # another label set: out-of-distribution
            key = f"ood_{key}"
        bundle.extra[key] = extra.test
    for name, split in bundle.splits().items():
        if name.startswith("ood_") or not len(split):
            continue
        if int(split.y.min()) < 0 or int(split.y.max()) >= bundle.num_classes:
            raise ValueError(
                f"data: labels of split {name!r} must lie in [0, {bundle.num_classes - 1}]"
            )
    return bundle


@documented(RUN_PARAMETERS, "TrainResult: the run's folder, per-epoch history and final model.")
def train(
    config: TrainConfig,
    out: str | os.PathLike,
    *,
    resume: bool = False,
    progress: Callable[[int, int, dict[str, float] | None], None] | None = None,
) -> TrainResult:
    """Train a model as ``config`` says, writing the run to ``out`` (see the module docstring):
    a pack of one (:func:`train_packed`).

    ``progress(step, total_steps, record)`` is called after every step (``record`` None)
    and after every epoch (``record`` that epoch's history entry).

    Examples
    --------
    >>> from calibkit.training import TrainConfig, train
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> seen = []
    >>> result = train(config, getfixture("tmp_path") / "run",
    ...                progress=lambda step, total, record: seen.append(record))
    >>> [r["epoch"] for r in seen if r is not None]  # one record an epoch, in history.json
    [1, 2, 3]
    >>> sorted(result.history[-1])[:5]
    ['epoch', 'lr', 'time', 'train_acc', 'train_loss']
    """
    return train_packed([config], [out], resume=resume, progress=progress)[0]


@documented(RUN_PARAMETERS, "list of TrainResult: one per member, in order.")
def train_packed(
    configs: Sequence[TrainConfig],
    outs: Sequence[str | os.PathLike],
    *,
    resume: bool = False,
    progress: Callable[[int, int, dict[str, float] | None], None] | None = None,
) -> list[TrainResult]:
    """The one training loop: train the networks ``configs`` together, member m into
    ``outs[m]``. Several members must share every setting but loss, seed and mixup
    (:func:`~calibkit.training._packed.pack_key`) and are stepped as one
    (:class:`~calibkit.training._packed.Pack`); one member is stepped as its own module (with
    DistributedDataParallel under torchrun, channels_last on CUDA, and the recorders).
    Each member keeps its own initialisation, draws, loss, history, checkpoint and run folder,
    and equals the network trained alone within float tolerance. ``progress(step,
    total_steps, record)`` as :func:`train` takes it, with every member's epoch record in
    turn.

    Examples
    --------
    Two seeds of one network trained as one pack:

    >>> from calibkit.training import TrainConfig, train
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> from dataclasses import replace
    >>> from calibkit.training import train_packed
    >>> members = [config, replace(config, seed=1)]
    >>> tmp = getfixture("tmp_path")
    >>> results = train_packed(members, [tmp / "seed0", tmp / "seed1"])
    >>> [r.out.name for r in results], [len(r.history) for r in results]
    (['seed0', 'seed1'], [3, 3])
    """
    if len(configs) != len(outs) or not configs:
        raise ValueError("train_packed: give one output folder per configuration (at least one)")
    if len(configs) > 1:
        keys = {pack_key(c) for c in configs}
        if None in keys or len(keys) != 1:
            raise ValueError(
                "train_packed: members must share every setting but "
                f"{', '.join(MEMBER_FIELDS)}, and train without pretrained weights or recorders"
            )
    first, outs = configs[0], [Path(o) for o in outs]
    device = first.torch_device  # checks the config (once: a checked one is trusted)
    dist = _Distributed(device)
    if dist.world > 1 and len(configs) > 1:
        raise TrainingError("under torchrun, train one network per run (packs run in one process)")
    bundle = None
    nets: list[nn.Module] = []
    loss_fns: list[losses.Loss] = []
    for config in configs:
        bundle, net, loss_fn = build(config, bundle=bundle)
        nets.append(net.to(device))
        loss_fns.append(loss_fn)
    if bundle is None or bundle.train is None or bundle.val is None:
        raise TrainingError(f"data: '{first.data}' needs a training and a validation split")
    if len(nets) == 1 and device.type == "cuda":
        nets[0].to(memory_format=torch.channels_last)
    opts = [_optimizer(net.parameters(), c) for net, c in zip(nets, configs, strict=True)]
    train_split = bundle.train.to(device)  # stored once where the steps run
    learned = LearnedEpochs(len(train_split), device) if first.record_learned_epochs else None
    analysis: dict[str, np.ndarray] = {}
    start, histories = _start(configs, outs, nets, opts, resume, learned, analysis)
    engine = _Alone(nets[0], opts[0], device, dist) if len(nets) == 1 else Pack(nets, opts)
    n, size = len(train_split), first.batch_size
    steps_per_epoch = -(-n // size)
    total = steps_per_epoch * first.epochs
    schedule = schedules.create(first.schedule)  # built once, asked every epoch
    augment = augmentation(bundle.augment, bundle.mean, bundle.std)
    for epoch in range(start, first.epochs):
        began = time.perf_counter()
        lr = set_epoch_lr(engine.opt, schedule, first, epoch)
        engine.train()
        draws = [EpochDraws(c, epoch, n, train_split.y.device) for c in configs]
        totals = [EpochTotals(device, learned) for _ in configs]
        for step in range(steps_per_epoch):
            idx = torch.stack([dist.shard(d.order[step * size : (step + 1) * size]) for d in draws])
            x, targets, y = step_inputs(configs, bundle, train_split, idx, device, augment, draws)
            with autocast(device):
                logits = engine.forward(x)
            # labels checked once, in build()
            terms = [
                f.compute(z.float(), t) for f, z, t in zip(loss_fns, logits, targets, strict=True)
            ]
            engine.opt.zero_grad(set_to_none=True)
            (terms[0] if len(terms) == 1 else torch.stack(terms).sum()).backward()
            if first.grad_clip > 0:
                engine.clip(first.grad_clip)
            engine.opt.step()
            for m, t in enumerate(totals):
                t.add(terms[m], logits[m], y[m], idx[m], epoch + 1)
            if progress is not None:
                progress(epoch * steps_per_epoch + step + 1, total, None)
        sums = [t.totals(epoch + 1) for t in totals]
        train_time = time.perf_counter() - began  # the steps alone (the sums sync here)
        sums = [dist.total(s) for s in sums]
        if learned is not None:  # each process saw its own shard; the last epochs only grow
            dist.total(learned.last_wrong, op="max")
        engine.settle()
        val_began = time.perf_counter()
        val_logits = predict_members(engine.evaluate, bundle.val, bundle, device)
        val_pass = time.perf_counter() - val_began  # every member's, in one pass
        for m, config in enumerate(configs):
            record = epoch_record(epoch, sums[m], val_logits[m], bundle.val.y)
            record["val_time"] += val_pass
            if epoch + 1 in config.record_grad_norms:
                analysis |= _grad_norm_record(nets[m], loss_fns[m], bundle, device, epoch + 1)
            record |= {"lr": lr, "train_time": train_time}
            record["time"] = time.perf_counter() - began
            histories[m].append(record)
        if dist.main:
            _save_epoch(configs, outs, nets, opts, epoch + 1, histories, learned, analysis)
        if progress is not None:
            for history in histories:
                progress((epoch + 1) * steps_per_epoch, total, history[-1])
    results = []
    logits = {}  # every split but train, for every member in one pass
    if dist.main:
        splits = {k: v for k, v in bundle.splits().items() if k != "train"}
        logits = {k: predict_members(engine.evaluate, v, bundle, device) for k, v in splits.items()}
    for m, config in enumerate(configs):
        info = provenance(config, device, bundle.augment, loss_fns[m])
        if len(configs) > 1:
            info["packed"] = {"members": len(configs), "member": m}
        if dist.main:
            own = {k: z[m] for k, z in logits.items()}
            finish_run(outs[m], info, nets[m], bundle, device, histories[m], learned, analysis, own)
        results.append(
            TrainResult(
                outs[m], histories[m], nets[m], tuple(bundle.input_shape), len(bundle.train)
            )
        )
    if dist.world > 1:
        torch.distributed.barrier()
    return results


def _optimizer(params, config: TrainConfig) -> torch.optim.SGD:
    return torch.optim.SGD(
        params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )


class _Alone:
    """A pack of one: the member's own module (DistributedDataParallel under torchrun) and
    optimiser step it directly, so ``settle()`` has nothing to copy."""

    def __init__(
        self, net: nn.Module, opt: torch.optim.Optimizer, device: torch.device, dist: _Distributed
    ) -> None:
        self.opt, self.device, self.net = opt, device, net
        self.module = nn.parallel.DistributedDataParallel(net) if dist.world > 1 else net

    def evaluate(self, x: Tensor) -> Tensor:
        """The member's logits (1, batch, K) for x (batch, ...) in eval mode (the next
        epoch's ``train()`` switches it back)."""
        self.net.eval()
        return self.net(_layout(x, self.device))[None]

    def train(self) -> None:
        self.module.train()

    def forward(self, x: Tensor) -> list[Tensor]:
        """The member's logits for x (1, batch, ...), as a list of one (not a stacked view:
        selecting from one would add a backward node that copies the gradient, 13 % of a
        small MLP's step)."""
        return [self.module(_layout(x[0], self.device))]

    def clip(self, max_norm: float) -> None:
        """The gradient's norm clipped to ``max_norm`` (``torch.nn.utils.clip_grad_norm_``)."""
        nn.utils.clip_grad_norm_(self.module.parameters(), max_norm)

    def settle(self) -> None:
        """The member's network and optimiser are the ones stepped."""


def _start(
    configs: Sequence[TrainConfig],
    outs: list[Path],
    nets: list[nn.Module],
    opts: list[torch.optim.Optimizer],
    resume: bool,
    learned: LearnedEpochs | None,
    analysis: dict[str, np.ndarray],
) -> tuple[int, list[list[dict[str, float]]]]:
    """The epoch to start from and each member's history so far (from its checkpoint when
    resuming; members killed together stopped at the same epoch)."""
    _settle(outs)
    if not resume:
        for out in outs:
            if (out / CHECKPOINT).exists() or (out / "history.json").exists():
                raise TrainingError(f"{out} already holds a run; pass resume=True to continue it")
        return 0, [[] for _ in outs]
    states = [
        resume_state(out / CHECKPOINT, c, net, opt, learned, analysis)
        for c, out, net, opt in zip(configs, outs, nets, opts, strict=True)
    ]
    epochs = {s for s, _ in states}
    if len(epochs) != 1:
        raise TrainingError(
            f"the members' checkpoints stopped at different epochs ({sorted(epochs)}); "
            "resume them alone"
        )
    return epochs.pop(), [h for _, h in states]


def _save_epoch(
    configs: Sequence[TrainConfig],
    outs: list[Path],
    nets: list[nn.Module],
    opts: list[torch.optim.Optimizer],
    epoch: int,
    histories: list[list[dict[str, float]]],
    learned: LearnedEpochs | None,
    analysis: dict[str, np.ndarray],
) -> None:
    """Every member's checkpoint of ``epoch``: each written to :data:`NEXT` first, then all
    renamed, so that a kill leaves every member at one epoch (:func:`_settle`)."""
    for config, out, net, opt, history in zip(configs, outs, nets, opts, histories, strict=True):
        save_checkpoint(out / NEXT, config, net, opt, epoch, history, learned, analysis)
    for out in outs:  # every member's epoch is written: now it counts
        os.replace(out / NEXT, out / CHECKPOINT)


def _settle(outs: list[Path]) -> None:
    """Finish or undo an epoch's checkpoints cut by a kill. Each epoch writes every member's
    checkpoint to ``NEXT`` first, then renames them all: where some ``NEXT`` files exist,
    the epoch counts if every other member already holds it (the kill came during the
    renames), else (during the writes) the ``NEXT`` files are dropped and every member
    resumes from the epoch before."""
    pending = [out for out in outs if (out / NEXT).exists()]
    if not pending:
        return
    target = _epoch_of(pending[0] / NEXT)
    complete = all(o in pending or _epoch_of(o / CHECKPOINT) == target for o in outs)
    for out in pending:
        if complete:
            os.replace(out / NEXT, out / CHECKPOINT)
        else:
            (out / NEXT).unlink()


def _epoch_of(path: Path) -> int | None:
    if not path.exists():
        return None
    return int(torch.load(path, map_location="cpu", weights_only=True)["epoch"])


def _grad_norm_record(
    model: nn.Module,
    loss_fn: losses.Loss,
    bundle: data.DataBundle,
    device: torch.device,
    epoch: int,
) -> dict[str, np.ndarray]:
    model.eval()
    split = bundle.train
    if split is None:
        raise TrainingError("gradient norms need the training split")
    norms, briers = [], []
    for idx in torch.arange(len(split)).split(1024):
        x, y = split.take(idx)
        g, b = grad_norms(model, loss_fn, data.to_inputs(x, bundle, device), y.to(device))
        norms.append(g.cpu())
        briers.append(b.cpu())
    return {
        f"grad_norm_epoch{epoch}": torch.cat(norms).numpy(),
        f"brier_epoch{epoch}": torch.cat(briers).numpy(),
    }


def provenance(
    config: TrainConfig, device: torch.device, augment: str | None, loss: losses.Loss
) -> dict[str, Any]:
    """What shapes the confidence of a run's model (``augment``: the data's augmentation;
    ``loss``: the run's built loss), and where it ran."""
    return {
        "config": config.as_json(),
        "loss": {"name": loss.name, "parameters": loss.settings()},
        "label_smoothing": loss.label_smoothing,
        "mixup": config.mixup,
        "augmentation": augment,
        "seed": config.seed,
        "device": str(device),
        "versions": {
            "calibkit": __version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "git_revision": _git_revision(),
    }


def _git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def finish_run(
    out: Path,
    record: dict[str, Any],
    model: nn.Module,
    bundle: data.DataBundle,
    device: torch.device,
    history: list[dict[str, float]],
    learned: LearnedEpochs | None,
    analysis: dict[str, np.ndarray],
    logits: dict[str, Tensor] | None = None,
) -> None:
    """Write a finished run's analysis (when recorded), logits, weights, history and
    run.json into ``out`` (the trainer and packed training share it); ``logits``: every
    split's, where the caller computed them (:func:`write_run`)."""
    if learned is not None and bundle.train is not None:
        analysis["learned_epoch"] = learned.learned_epoch().cpu().numpy()
        analysis["max_logit"] = predict(model, bundle.train, bundle, device).amax(1).numpy()
        analysis["train_labels"] = bundle.train.y.numpy()
    if analysis:
        save_npz(out / "analysis.npz", **analysis)
    write_run(out, model, bundle, device, history, record, logits)


def write_run(
    out: Path,
    model: nn.Module,
    bundle: data.DataBundle,
    device: torch.device,
    history: list[dict[str, float]],
    info: dict[str, Any],
    logits: dict[str, Tensor] | None = None,
) -> None:
    """Write a finished run's logits of every split but train (``logits``, by split, where
    the caller has them; else computed here), weights, history and run.json."""
    from safetensors.torch import save_file

    arrays: dict[str, Any] = {}
    for name, split in bundle.splits().items():
        if name == "train":
            continue
        z = logits[name] if logits is not None else predict(model, split, bundle, device)
        arrays[f"logits_{name}"] = z.numpy()
        if not name.startswith("ood_"):  # out-of-distribution labels mean nothing here
            arrays[f"labels_{name}"] = split.y.numpy()
    save_npz(out / "logits.npz", **arrays)
    weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    atomic_write(out / "model.safetensors", lambda tmp: save_file(weights, tmp))
    write_text(out / "history.json", json.dumps(history, indent=1))
    write_text(out / "run.json", json.dumps(info, indent=1, default=str))
