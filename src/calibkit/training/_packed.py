"""The engine of a pack: several networks of one architecture stepped as one.

Small networks leave a GPU idle: one ResNet-20 step at batch 128 is bound by kernel
launches, not arithmetic (docs/training.md, "Packed training"). A pack stacks its members'
parameters and buffers (``torch.func.stack_module_state``) and runs one forward and one
backward pass for all of them with ``torch.func.vmap``, which turns each convolution into
one grouped convolution over the members (the computation of Packed-Ensembles, Laurent et
al. 2023, with independent members). One SGD optimiser steps the stacked parameters; SGD
with momentum and weight decay acts element by element, so each member's slice moves as its
own optimiser would move it, and the summed loss gives each member the gradient of its own
loss alone.

The loop that drives it is the trainer's one loop (:func:`calibkit.training._trainer.
train_packed`; a network trained alone is a pack of one, stepped without vmap). Each
member keeps everything that makes it itself there: its initialisation, its order of
samples, augmentation and mixup draws, its loss, its history, its checkpoint and its run
folder. A member equals the same network trained alone within float tolerance (tested on
CPU): the grouped convolution sums in another order.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from ._config import TrainConfig

#: what the members of one packed run may set differently; every other setting is shared
MEMBER_FIELDS = ("loss", "seed", "mixup")


def pack_key(config: TrainConfig) -> str | None:
    """The settings a packed run's members share (``config`` without :data:`MEMBER_FIELDS`),
    as text; None where ``config`` cannot be packed: pretrained weights, or a recorder of
    per-sample statistics (learned epochs, gradient norms), which trains alone."""
    config.check()
    if config.checkpoint or config.record_learned_epochs or config.record_grad_norms:
        return None
    shared = {k: v for k, v in config.as_json().items() if k not in MEMBER_FIELDS}
    return json.dumps(shared, sort_keys=True)


class Pack:
    """Members' networks stepped as one: ``forward(x)`` takes the members' input batches
    (members, batch, ...) to their logits (members, batch, K), ``opt`` steps every member's
    stacked parameters, and ``settle()`` copies each member's slice back into its own network
    and optimiser (for its validation pass, checkpoint and run folder). ``member_opts``: the
    members' own SGD optimisers, whose settings and momentum (after a resume) the pack
    takes."""

    def __init__(self, nets: Sequence[nn.Module], member_opts: Sequence[torch.optim.Optimizer]):
        self.nets, self.member_opts = list(nets), list(member_opts)
        self.params, self.buffers, self._forward = stacked(self.nets)
        self._evaluate = evaluation(self.nets[0])
        settings = {k: member_opts[0].defaults[k] for k in ("lr", "momentum", "weight_decay")}
        self.opt = torch.optim.SGD(self.params.values(), **settings)
        _stack_momentum(self.opt, self.params, self.nets, self.member_opts)

    def train(self) -> None:
        """Nothing to switch: the stacked forward runs the members in training mode."""

    def forward(self, x: Tensor) -> Tensor:
        """The members' logits (members, batch, K) for their inputs x (members, batch, ...)."""
        return self._forward(self.params, self.buffers, x)

    def evaluate(self, x: Tensor) -> Tensor:
        """Every member's logits (members, batch, K) for one batch x (batch, ...) that all of
        them read, in eval mode (batch norm on its running statistics), from the stacked
        parameters as they stand: a split's logits for the whole pack in one pass."""
        return self._evaluate(self.params, self.buffers, x)

    def clip(self, max_norm: float) -> None:
        """Each member's gradient norm clipped to ``max_norm`` on its own, as
        ``torch.nn.utils.clip_grad_norm_`` clips a network trained alone (coefficient
        max_norm / (norm + 1e-6), at most 1)."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        norms = torch.stack([g.flatten(1).double().pow(2).sum(1) for g in grads]).sum(0).sqrt()
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype).reshape(-1, *([1] * (g.ndim - 1))))

    def settle(self) -> None:
        for m, (net, opt) in enumerate(zip(self.nets, self.member_opts, strict=True)):
            _unstack(m, net, self.params, self.buffers, self.opt, opt)


def stacked(nets: Sequence[nn.Module]):
    """(parameters, buffers, forward) of networks of one architecture run as one: their
    parameters and buffers stacked along a new first axis (leaves that train), and
    ``forward(params, buffers, x)`` taking x (members, batch, ...) to (members, batch, K)."""
    params, buffers = stack_module_state(list(nets))
    base = _base(nets[0], training=True)
    forward = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), randomness="different")
    return params, buffers, forward


def evaluation(net: nn.Module):
    """``forward(params, buffers, x)`` of networks of ``net``'s architecture in eval mode,
    their parameters and buffers stacked as :func:`stacked` stacks them, on one input batch
    x (batch, ...) that every member reads, to (members, batch, K)."""
    base = _base(net, training=False)
    return vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))


def _base(net: nn.Module, training: bool) -> nn.Module:
    """A copy of ``net`` without storage (the stacked members' tensors are passed in), in
    training or eval mode, its batch norms on float32 input (:func:`_float_input`)."""
    base = copy.deepcopy(net).to("meta").train(training)
    for module in base.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.register_forward_pre_hook(_float_input)
    return base


def _float_input(module: nn.Module, args: tuple) -> tuple:
    """Batch norm on float32 input under vmap: under CUDA's bf16 autocast its input stays
    bf16 beside float32 running statistics, which vmap's backward rule refuses ("Expected
    running_mean to have type BFloat16 but got Float", measured on an H200 with PyTorch 2.11;
    pytorch/pytorch#184890). Float32 is what autocast gives batch norm on CPUs and Apple
    GPUs; the convolutions stay in bf16."""
    return (args[0].float(), *args[1:])


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
