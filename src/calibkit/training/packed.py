"""Train several networks at once: the members of a packed run share a model, its data and
its schedule, and may differ in loss, seed and mixup (a sweep's losses × seeds).

Small networks leave a GPU idle: one ResNet-20 step at batch 128 is bound by kernel
launches, not arithmetic (docs/training.md, "Packed training"). A packed run stacks its
members' parameters and buffers (``torch.func.stack_module_state``) and runs one forward and
one backward pass for all of them with ``torch.func.vmap``, which turns each convolution into
one grouped convolution over the members (the computation of Packed-Ensembles, Laurent et
al. 2023, with independent members). One SGD optimiser steps the stacked parameters; SGD
with momentum and weight decay acts element by element, so each member's slice moves as its
own optimiser would move it, and the summed loss gives each member the gradient of its own
loss alone.

Each member keeps everything that makes it itself: its initialisation (``torch.manual_seed
(seed)`` as :func:`~calibkit.training.train` does), its order of samples, augmentation and
mixup draws (:class:`~calibkit.training.trainer.EpochDraws`, seeded as alone), its loss, its
history, its checkpoint after every epoch and its run folder, written as a run trained alone
writes them (``run.json`` adds ``"packed"``: the members' number and the shared step time).
A member equals the same network trained alone within float tolerance (tested on CPU): the
grouped convolution sums in another order. Killed, a packed run resumes from its members'
checkpoints like any run.
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from .._docs import documented
from ..data.augment import augmentation
from . import schedule as schedules
from .checkpoints import resume_state, save_checkpoint
from .config import RUN_PARAMETERS, TrainConfig, TrainingError, TrainResult
from .recorders import EpochTotals
from .trainer import (
    CHECKPOINT,
    EpochDraws,
    autocast,
    build,
    epoch_record,
    finish_run,
    provenance,
    set_epoch_lr,
    step_inputs,
)

__all__ = ["MEMBER_FIELDS", "NEXT", "pack_key", "stacked", "train_packed"]

#: what the members of one packed run may set differently; every other setting is shared
MEMBER_FIELDS = ("loss", "seed", "mixup")
#: an epoch's checkpoint of a member before every member's is written (see :func:`_settle`)
NEXT = CHECKPOINT + ".next"


def pack_key(config: TrainConfig) -> str | None:
    """The settings a packed run's members share (``config`` without :data:`MEMBER_FIELDS`),
    as text; None where ``config`` cannot be packed: pretrained weights, or a recorder of
    per-sample statistics (learned epochs, gradient norms), which trains alone."""
    config.check()
    if config.checkpoint or config.record_learned_epochs or config.record_grad_norms:
        return None
    shared = {k: v for k, v in config.as_json().items() if k not in MEMBER_FIELDS}
    return json.dumps(shared, sort_keys=True)


def _optimizer(params, config: TrainConfig) -> torch.optim.SGD:
    return torch.optim.SGD(
        params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )


@documented(RUN_PARAMETERS, "list of TrainResult: one per member, in order.")
def train_packed(
    configs: Sequence[TrainConfig],
    outs: Sequence[str | os.PathLike],
    *,
    resume: bool = False,
    progress: Callable[[int, int, dict[str, float] | None], None] | None = None,
) -> list[TrainResult]:
    """Train the networks ``configs`` together, member m into ``outs[m]`` (see the module
    docstring); they must share every setting but loss, seed and mixup (:func:`pack_key`).
    ``progress(step, total_steps, record)`` as :func:`~calibkit.training.train` takes it,
    with every member's epoch record in turn. Returns one result per member."""
    if len(configs) != len(outs) or not configs:
        raise ValueError("train_packed: give one output folder per configuration (at least one)")
    keys = {pack_key(c) for c in configs}
    if None in keys or len(keys) != 1:
        raise ValueError(
            "train_packed: members must share every setting but "
            f"{', '.join(MEMBER_FIELDS)}, and train without pretrained weights or recorders"
        )
    first, outs = configs[0], [Path(o) for o in outs]
    device = first.torch_device
    bundle = None
    nets: list[nn.Module] = []
    loss_fns = []
    for config in configs:
        bundle, net, loss_fn = build(config, bundle=bundle)
        nets.append(net.to(device))
        loss_fns.append(loss_fn)
    if bundle is None or bundle.train is None or bundle.val is None:
        raise TrainingError(f"data: '{first.data}' needs a training and a validation split")
    member_opts = [_optimizer(net.parameters(), c) for net, c in zip(nets, configs, strict=True)]
    start, histories = _start(configs, outs, nets, member_opts, resume)
    params, buffers, forward = stacked(nets)
    opt = _optimizer(params.values(), first)
    _stack_momentum(opt, params, nets, member_opts)
    train_split = bundle.train.to(device)
    n, size = len(train_split), first.batch_size
    steps_per_epoch = -(-n // size)
    total = steps_per_epoch * first.epochs
    schedule = schedules.create(first.schedule)
    augment = augmentation(bundle.augment)
    for epoch in range(start, first.epochs):
        began = time.perf_counter()
        lr = set_epoch_lr(opt, schedule, first, epoch)
        draws = [EpochDraws(c, epoch, n, train_split.y.device) for c in configs]
        totals = [EpochTotals(device) for _ in configs]
        for step in range(steps_per_epoch):
            idx = [d.order[step * size : (step + 1) * size] for d in draws]
            batch = [
                step_inputs(c, bundle, train_split, i, device, augment, d)
                for c, i, d in zip(configs, idx, draws, strict=True)
            ]
            with autocast(device):
                logits = forward(params, buffers, torch.stack([b[0] for b in batch]))
            terms = [
                f.compute(z.float(), b[1]) for f, z, b in zip(loss_fns, logits, batch, strict=True)
            ]
            opt.zero_grad(set_to_none=True)
            torch.stack(terms).sum().backward()
            opt.step()
            for m, t in enumerate(totals):
                t.add(terms[m], logits[m], batch[m][2], idx[m], epoch + 1)
            if progress is not None:
                progress(epoch * steps_per_epoch + step + 1, total, None)
        sums = [t.totals(epoch + 1) for t in totals]
        train_time = time.perf_counter() - began  # the packed steps, shared by every member
        for m, config in enumerate(configs):
            _unstack(m, nets[m], params, buffers, opt, member_opts[m])
            record = epoch_record(epoch, sums[m], nets[m], bundle, device)
            record |= {"lr": lr, "train_time": train_time}
            record["time"] = time.perf_counter() - began
            histories[m].append(record)
            save_checkpoint(
                outs[m] / NEXT, config, nets[m], member_opts[m], epoch + 1, histories[m], None, {}
            )
        for out in outs:  # every member's epoch is written: now it counts
            os.replace(out / NEXT, out / CHECKPOINT)
        if progress is not None:
            for history in histories:
                progress((epoch + 1) * steps_per_epoch, total, history[-1])
    results = []
    for m, config in enumerate(configs):
        _unstack(m, nets[m], params, buffers, opt, member_opts[m])
        info = provenance(config, device, bundle.augment, loss_fns[m])
        info["packed"] = {"members": len(configs), "member": m}
        finish_run(outs[m], info, nets[m], bundle, device, histories[m], None, {})
        results.append(
            TrainResult(
                outs[m], histories[m], nets[m], tuple(bundle.input_shape), len(bundle.train)
            )
        )
    return results


def stacked(nets: Sequence[nn.Module]):
    """(parameters, buffers, forward) of networks of one architecture run as one: their
    parameters and buffers stacked along a new first axis (leaves that train), and
    ``forward(params, buffers, x)`` taking x (members, batch, ...) to (members, batch, K)."""
    params, buffers = stack_module_state(list(nets))
    base = copy.deepcopy(nets[0]).to("meta")
    for module in base.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.register_forward_pre_hook(_float_input)
    forward = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), randomness="different")
    return params, buffers, forward


def _float_input(module: nn.Module, args: tuple) -> tuple:
    """Batch norm on float32 input under vmap: under CUDA's bf16 autocast its input stays
    bf16 beside float32 running statistics, which vmap's backward rule refuses ("Expected
    running_mean to have type BFloat16 but got Float", measured on an H200 with PyTorch 2.11;
    pytorch/pytorch#184890). Float32 is what autocast gives batch norm on CPUs and Apple
    GPUs; the convolutions stay in bf16."""
    return (args[0].float(), *args[1:])


def _start(
    configs: Sequence[TrainConfig],
    outs: list[Path],
    nets: list[nn.Module],
    opts: list[torch.optim.Optimizer],
    resume: bool,
) -> tuple[int, list[list[dict[str, float]]]]:
    """The epoch to start from and each member's history so far (from its checkpoint when
    resuming; members killed together stopped at the same epoch)."""
    _settle(outs)
    if not resume:
        for out in outs:
            if (out / CHECKPOINT).exists() or (out / "history.json").exists():
                raise TrainingError(f"{out} already holds a run; pass --resume to continue it")
        return 0, [[] for _ in outs]
    states = [
        resume_state(out / CHECKPOINT, c, net, opt, None, {})
        for c, out, net, opt in zip(configs, outs, nets, opts, strict=True)
    ]
    epochs = {s for s, _ in states}
    if len(epochs) != 1:
        raise TrainingError(
            f"the members' checkpoints stopped at different epochs ({sorted(epochs)}); "
            "resume them alone"
        )
    return epochs.pop(), [h for _, h in states]


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


def _stack_momentum(
    opt: torch.optim.Optimizer,
    params: dict[str, Tensor],
    nets: list[nn.Module],
    member_opts: list[torch.optim.Optimizer],
) -> None:
    """Give the packed optimiser the members' momentum buffers (from their checkpoints)."""
    for name, stacked in params.items():
        found = [
            o.state.get(dict(net.named_parameters())[name], {}).get("momentum_buffer")
            for net, o in zip(nets, member_opts, strict=True)
        ]
        if all(b is not None for b in found):
            opt.state[stacked]["momentum_buffer"] = torch.stack(found).to(stacked)


@torch.no_grad()
def _unstack(
    m: int,
    net: nn.Module,
    params: dict[str, Tensor],
    buffers: dict[str, Tensor],
    opt: torch.optim.Optimizer,
    member_opt: torch.optim.Optimizer,
) -> None:
    """Member ``m``'s slice of the packed state into its own network and optimiser (for its
    validation pass, checkpoint and run folder)."""
    for name, p in net.named_parameters():
        p.copy_(params[name][m])
        buffer = opt.state.get(params[name], {}).get("momentum_buffer")
        if buffer is not None:
            member_opt.state[p]["momentum_buffer"] = buffer[m].clone()
    for name, b in net.named_buffers():
        b.copy_(buffers[name][m])
    for group, packed in zip(member_opt.param_groups, opt.param_groups, strict=True):
        group["lr"] = packed["lr"]
