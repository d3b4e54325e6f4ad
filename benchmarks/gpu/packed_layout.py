"""Which layout trains a pack of CIFAR ResNets fastest (issue 52 §2): calibkit's vmap over
stacked parameters, or the Packed-Ensembles layout, measured in one process on the same
members and batches.

The Packed-Ensembles layout (Laurent et al. 2023; TorchUncertainty's ``PackedConv2d``)
puts the M members' channels side by side: member m owns channel block m of every layer,
each convolution has ``groups=M``, one batch norm over M×C channels is per member by
construction, the option-A shortcut pads each member's block, and the head is a grouped
linear map. Each member still reads its own batch (its own order and augmentation): the M
batches enter as one input of M×3 channels. :func:`grouped_resnet` builds it from M
members' weights; :func:`members_of` writes the weights back. ``--check`` (and
tests/training/test_packed_layout.py) shows that it computes each member's logits and
gradients as the member alone does, within float tolerance. The convolutions are plain
``nn.Conv2d(groups=M)``, not TorchUncertainty's ``PackedConv2d``: that builds fresh
members (widened by its alpha, split by its gamma), where this takes M trained members'
weights and gives them back.

Each variant runs ``--steps`` timed steps (forward, the members' cross-entropy, backward,
SGD with momentum and weight decay) after ``--warmup`` steps, and prints aggregate
training images/s (members × batch / seconds per step) and the ratio to vmap:

- ``alone``: the members one after another (a loop of M networks);
- ``vmap``: calibkit's pack (``calibkit.training._packed.stacked``);
- ``grouped``: the Packed-Ensembles layout, NCHW;
- ``grouped-cl``: the same in channels_last;
- on CUDA also ``grouped-cl-bf16`` (bf16 autocast) and, with ``--compile``, each grouped
  variant under ``torch.compile``.

    python benchmarks/gpu/packed_layout.py --check
    python benchmarks/gpu/packed_layout.py --members 4 --batch 64 --steps 5        # CPU
    python benchmarks/gpu/packed_layout.py --device cuda --members 8 27 --compile  # a GPU
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from calibkit import models
from calibkit.models._resnet import BasicBlock
from calibkit.training._packed import stacked


def _conv(convs: Sequence[nn.Conv2d]) -> nn.Conv2d:
    c, m = convs[0], len(convs)
    out = nn.Conv2d(
        m * c.in_channels, m * c.out_channels, c.kernel_size, c.stride, c.padding, groups=m,
        bias=False, device=c.weight.device, dtype=c.weight.dtype,
    )  # fmt: skip
    out.weight.data.copy_(torch.cat([k.weight.data for k in convs]))
    return out


def _norm(norms: Sequence[nn.BatchNorm2d]) -> nn.BatchNorm2d:
    first = norms[0].weight
    out = nn.BatchNorm2d(len(norms) * norms[0].num_features, device=first.device, dtype=first.dtype)
    for name in ("weight", "bias", "running_mean", "running_var"):
        getattr(out, name).data.copy_(torch.cat([getattr(n, name).data for n in norms]))
    return out


class GroupedBlock(nn.Module):
    """M basic blocks (option-A shortcuts) as one, member m in channel block m."""

    def __init__(self, blocks: Sequence[BasicBlock]) -> None:
        super().__init__()
        b, self.members = blocks[0], len(blocks)
        self.conv1, self.bn1 = _conv([x.conv1 for x in blocks]), _norm([x.bn1 for x in blocks])
        self.conv2, self.bn2 = _conv([x.conv2 for x in blocks]), _norm([x.bn2 for x in blocks])
        self.stride, self.pad = b.stride, b.pad

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x[:, :, :: self.stride, :: self.stride] if self.stride > 1 else x
        if self.pad:
            n, c, h, w = short.shape
            short = short.reshape(n, self.members, c // self.members, h, w)
            short = F.pad(short, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
            short = short.reshape(n, -1, h, w)
        return F.relu(out + short)


class GroupedResNet(nn.Module):
    """M CIFAR ResNets of one depth as one network (the module docstring's layout): input
    (N, M×3, H, W), member m's batch in channels 3m..3m+2; output (N, M, K)."""

    def __init__(self, nets: Sequence[nn.Module]) -> None:
        super().__init__()
        self.members = len(nets)
        layers: list[nn.Module] = []
        for parts in zip(*(net.features for net in nets), strict=True):
            first = parts[0]
            if isinstance(first, nn.Conv2d):
                layers.append(_conv(parts))
            elif isinstance(first, nn.BatchNorm2d):
                layers.append(_norm(parts))
            elif isinstance(first, BasicBlock):
                layers.append(GroupedBlock(parts))
            else:  # ReLU, pooling, flatten: the same for every channel
                layers.append(first)
        self.features = nn.Sequential(*layers)
        self.weight = nn.Parameter(torch.stack([n.head.weight.data for n in nets]))  # (M, K, F)
        self.bias = nn.Parameter(torch.stack([n.head.bias.data for n in nets]))  # (M, K)

    def forward(self, x: Tensor) -> Tensor:
        f = self.features(x).reshape(len(x), self.members, -1)
        return torch.einsum("nmf,mkf->nmk", f, self.weight) + self.bias


def grouped_resnet(nets: Sequence[nn.Module]) -> GroupedResNet:
    """The Packed-Ensembles layout of ``nets`` (CIFAR ResNets of one depth), their weights
    and batch-norm statistics copied in (on their device, in their dtype)."""
    return GroupedResNet(nets)


def members_of(grouped: GroupedResNet, nets: Sequence[nn.Module]) -> None:
    """Write ``grouped``'s weights and statistics back into ``nets`` (member m's blocks)."""
    m = grouped.members
    for layer, *parts in zip(grouped.features, *(net.features for net in nets), strict=True):
        pairs = [(layer, parts)]
        if isinstance(layer, GroupedBlock):
            pairs = [
                (getattr(layer, k), [getattr(p, k) for p in parts])
                for k in ("conv1", "bn1", "conv2", "bn2")
            ]
        for g, own in pairs:
            for name, tensor in list(g.named_parameters()) + list(g.named_buffers()):
                if tensor.ndim:
                    for chunk, p in zip(tensor.data.chunk(m), own, strict=True):
                        target = dict(p.named_parameters()) | dict(p.named_buffers())
                        target[name].data.copy_(chunk)
    for i, net in enumerate(nets):
        net.head.weight.data.copy_(grouped.weight.data[i])
        net.head.bias.data.copy_(grouped.bias.data[i])


def members(count: int, depth: int, device: str) -> list[nn.Module]:
    """``count`` ResNet-``depth`` networks, each with its own seeded initialisation."""
    nets = []
    for m in range(count):
        torch.manual_seed(m)
        nets.append(models.create(f"resnet{depth}", num_classes=10).to(device))
    return nets


def _steps_alone(nets, xs, ys) -> Callable[[], None]:
    opts = [torch.optim.SGD(n.parameters(), 0.1, momentum=0.9, weight_decay=5e-4) for n in nets]

    def step() -> None:
        for net, opt, x, y in zip(nets, opts, xs, ys, strict=True):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(x), y).backward()
            opt.step()

    return step


def _steps_vmap(nets, xs, ys) -> Callable[[], None]:
    params, buffers, forward = stacked(nets)
    opt = torch.optim.SGD(params.values(), 0.1, momentum=0.9, weight_decay=5e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        out = forward(params, buffers, xs)  # (M, N, K)
        F.cross_entropy(out.flatten(0, 1), ys.flatten(), reduction="sum").div(
            ys.shape[1]
        ).backward()
        opt.step()

    return step


def _steps_grouped(nets, xs, ys, channels_last=False, bf16=False, compile=False):
    net = grouped_resnet(nets)
    x = torch.cat(list(xs), 1)  # (N, M×3, H, W)
    if channels_last:
        net, x = (
            net.to(memory_format=torch.channels_last),
            x.contiguous(memory_format=torch.channels_last),
        )
    opt = torch.optim.SGD(net.parameters(), 0.1, momentum=0.9, weight_decay=5e-4)
    run = torch.compile(net) if compile else net
    target = ys.T.reshape(-1)  # (N×M,), row-major as the output's (N, M)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, torch.bfloat16, enabled=bf16):
            out = run(x)
        loss = F.cross_entropy(out.float().reshape(-1, out.shape[-1]), target, reduction="sum")
        loss.div(ys.shape[1]).backward()
        opt.step()

    return step


def _timed(step: Callable[[], None], warmup: int, steps: int, device: str, label: str) -> float:
    """Seconds per step, after ``warmup`` untimed steps; a line every 10 s while it runs
    (a slow CPU takes seconds a step)."""
    said = time.perf_counter()

    def progress(done: int) -> None:
        nonlocal said
        if time.perf_counter() - said >= 10:
            print(f"  ({label}: step {done} of {warmup + steps})", flush=True)
            said = time.perf_counter()

    for i in range(warmup):
        step()
        progress(i + 1)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    for i in range(steps):
        step()
        progress(warmup + i + 1)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / steps


def _relative(a: Tensor, b: Tensor) -> float:
    """The largest difference of ``a`` and ``b`` relative to ``a``'s largest magnitude."""
    return float((a - b).detach().abs().max() / a.detach().abs().max().clamp_min(1e-300))


def check(device: str = "cpu", count: int = 3, depth: int = 20) -> float:
    """The largest relative difference between the grouped layout and the members alone,
    over the logits (train and eval mode) and the gradients of one step, in float64 (in
    float32 the members' own convolutions differ from float64 by up to 9e-4 in a gradient
    on 2 CPU cores, the layout by 2e-7); raises above 1e-10."""
    nets = [net.double() for net in members(count, depth, device)]
    g = torch.Generator().manual_seed(0)
    for net in nets:  # batch norms that differ between members (at initialisation they agree)
        for bn in (m for m in net.modules() if isinstance(m, nn.BatchNorm2d)):
            spans = {"weight": (0.5, 1.5), "bias": (-0.5, 0.5)}
            spans |= {"running_mean": (-0.5, 0.5), "running_var": (0.5, 2.0)}
            for name, (low, high) in spans.items():
                t = getattr(bn, name)
                t.data.copy_(torch.rand(t.shape, generator=g, dtype=t.dtype) * (high - low) + low)
    xs = torch.randn(count, 8, 3, 32, 32, generator=g, dtype=torch.float64).to(device)
    ys = torch.randint(10, (count, 8), generator=g).to(device)
    grouped = grouped_resnet(nets)
    x = torch.cat(list(xs), 1)
    worst = 0.0
    out = grouped(x)  # train mode: batch statistics, each member's own
    loss = sum(F.cross_entropy(out[:, i], ys[i]) for i in range(count))
    loss.backward()
    for i, net in enumerate(nets):
        own = net(xs[i])
        F.cross_entropy(own, ys[i]).backward()
        worst = max(worst, _relative(own, out[:, i]))
        worst = max(worst, _relative(net.head.weight.grad, grouped.weight.grad[i]))
        first = net.features[0].weight.grad
        block = grouped.features[0].weight.grad.chunk(count)[i]
        worst = max(worst, _relative(first, block))
    grouped.eval()
    for net in nets:
        net.eval()
    with torch.no_grad():
        out = grouped(x)
        for i, net in enumerate(nets):
            worst = max(worst, _relative(net(xs[i]), out[:, i]))
    if worst > 1e-10:
        raise AssertionError(f"the grouped layout differs from the members by {worst:.3g}")
    return worst


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--members", type=int, nargs="+", default=[4])
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128, help="each member's batch")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="also each grouped variant compiled")
    ap.add_argument("--check", action="store_true", help="only check the layout's equality")
    args = ap.parse_args(argv)
    if args.check:
        print(f"grouped layout = members alone within {check(args.device):.2e}")
        return
    cuda = args.device.startswith("cuda")
    print(f"device {args.device}, ResNet-{args.depth}, batch {args.batch} per member, "
          f"{args.steps} steps after {args.warmup}")  # fmt: skip
    print(f"{'members':>7}  {'variant':<24} {'images/s':>10}  vs vmap", flush=True)
    for count in args.members:
        nets = members(count, args.depth, args.device)
        g = torch.Generator().manual_seed(1)
        xs = torch.randn(count, args.batch, 3, 32, 32, generator=g).to(args.device)
        ys = torch.randint(10, (count, args.batch), generator=g).to(args.device)
        variants: dict[str, tuple[Callable, dict]] = {  # vmap first: the others' ratio
            "vmap": (_steps_vmap, {}),
            "alone": (_steps_alone, {}),
            "grouped": (_steps_grouped, {}),
            "grouped-cl": (_steps_grouped, {"channels_last": True}),
        }
        if cuda:
            variants["grouped-cl-bf16"] = (_steps_grouped, {"channels_last": True, "bf16": True})
        if args.compile:
            for name in [v for v in variants if v.startswith("grouped")]:
                variants[name + "-compiled"] = (
                    _steps_grouped,
                    variants[name][1] | {"compile": True},
                )
        rates = {}
        for name, (make, options) in variants.items():
            step = make(nets, xs, ys, **options)
            seconds = _timed(step, args.warmup, args.steps, args.device, f"{count} {name}")
            rates[name] = count * args.batch / seconds
            print(
                f"{count:>7}  {name:<24} {rates[name]:>10,.0f}  {rates[name] / rates['vmap']:.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
