"""benchmarks/gpu/packed_layout.py's Packed-Ensembles layout computes each member's logits and
gradients as the member alone does, and its weights go back to the members (issue 52 §2:
the layout to measure against vmap on a GPU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch.nn import functional as F

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "packed_layout.py"
spec = importlib.util.spec_from_file_location("packed_layout", SCRIPT)
layout = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layout)


def test_the_grouped_layout_is_each_member_alone():
    assert layout.check("cpu", count=3, depth=20) < 1e-4


def test_a_step_of_the_layout_goes_back_to_each_member():
    nets = layout.members(2, 20, "cpu")
    grouped = layout.grouped_resnet(nets)
    g = torch.Generator().manual_seed(3)
    xs, ys = torch.randn(2, 4, 3, 32, 32, generator=g), torch.randint(10, (2, 4), generator=g)
    x = torch.cat(list(xs), 1)
    opt = torch.optim.SGD(grouped.parameters(), 0.1, momentum=0.9)
    out = grouped(x)
    sum(F.cross_entropy(out[:, i], ys[i]) for i in range(2)).backward()
    opt.step()
    before = [n.head.weight.detach().clone() for n in nets]
    layout.members_of(grouped, nets)
    grouped.eval()
    with torch.no_grad():
        after = grouped(x)
        for i, net in enumerate(nets):
            assert not torch.equal(net.head.weight, before[i])  # the step reached the member
            net.eval()
            assert torch.allclose(net(xs[i]), after[:, i], atol=1e-5)
