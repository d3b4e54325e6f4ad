"""How long a sweep's training would take here, before running it (``calibkit bench SPEC
--estimate``): the papers' protocols on a CPU take days, and a user should learn that in
seconds, not after the first epoch.

For each model of the spec the training rate is measured now: a few SGD steps at the spec's
batch size on random inputs of the dataset's shape, with the sweep's threads per run. Each
distinct network (runs that share a stage 1 count once) costs ``epochs`` × (training images /
rate + validation images / (3 × rate)): a forward pass is about a third of a training step.
Post-hoc fits, stage 2 and measuring are not counted; on the ``train-cifar`` preset they
were about a fifth of the whole (docs/real.md). The sum is divided by the workers. The rate
is measured on the machine as it is now: beside other work it is lower, and so is the
estimate's optimism.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from .. import data, models
from .._registry import Spec, parse_spec
from ..training.internal import flops_per_image
from ._runspec import BenchSpec

#: settings that only skip work an estimate does not need (decoding, channel statistics)
_LIGHT = {"in_memory": False, "mean": 0.5, "std": 0.25}


def _sizes(dataset: str | Spec) -> tuple[int, int, tuple[int, ...], int]:
    """(training images, validation images, input shape, classes) of a dataset spec."""
    spec = parse_spec(dataset)
    known = data.REGISTRY.parameters(spec.name)
    light = {k: v for k, v in _LIGHT.items() if k in known and k not in spec.kwargs}
    bundle = data.create(spec.with_params(**light))
    n_train = len(bundle.train) if bundle.train is not None else 0
    n_val = len(bundle.val) if bundle.val is not None else 0
    return n_train, n_val, tuple(bundle.input_shape), bundle.num_classes


def images_per_second(
    model: str | Spec,
    shape: tuple[int, ...],
    classes: int,
    batch: int,
    threads: int,
    steps: int = 3,
    device: str = "cpu",
    members: int = 1,
) -> float:
    """Training images per second of ``model`` here, on ``device`` (best of ``steps`` timed
    steps, under the trainer's bf16 autocast on CUDA); with ``members`` > 1, of that many
    networks trained as one pack (:mod:`calibkit.training._packed`), counted over them all."""
    from ..training.internal import autocast, stacked

    dev = torch.device(device)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        nets = [
            models.create(model, num_classes=classes, input_shape=shape).to(dev)
            for _ in range(members)
        ]
        x = torch.randn(members, batch, *shape, device=dev)
        y = torch.randint(0, classes, (members * batch,), device=dev)
        params, buffers, forward = stacked(nets)
        opt = torch.optim.SGD(params.values(), lr=0.01, momentum=0.9)
        best = float("inf")
        for i in range(steps + 1):
            start = time.perf_counter()
            with autocast(dev):
                z = forward(params, buffers, x)
            loss = torch.nn.functional.cross_entropy(z.reshape(-1, classes).float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if i:  # the first step warms up
                best = min(best, time.perf_counter() - start)
        return members * batch / best
    finally:
        torch.set_num_threads(before)


def estimate(
    spec: BenchSpec, workers: int, threads: int, report: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Seconds of training the sweep would take here, by model and in all (see the module
    docstring), with the measured rates and the work in GFLOP. Where the runs train on
    CUDA, the rate is measured there, for packs of as many networks as the bench packs.
    ``report``: told what is being measured (a dataset's size, a model's rate), for the
    progress line of a measurement that takes a minute on a CPU (a ResNet-110's steps)."""
    from ._pack import MAX_MEMBERS, trains_on_cuda

    cuda = trains_on_cuda(spec.runs)
    device = "cuda" if cuda else "cpu"
    distinct = len({r.training_key for r in spec.runs if r.trained})
    members = max(1, min(MAX_MEMBERS, distinct // max(1, workers))) if cuda else 1
    sizes: dict[Spec, tuple[int, int, tuple[int, ...], int]] = {}
    rates: dict[tuple[Spec, Spec], float] = {}
    flops: dict[tuple[Spec, Spec], float] = {}
    by_model: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    for run in spec.runs:
        if run.training_key in seen:
            continue
        seen.add(run.training_key)
        if run.dataset not in sizes:
            if report:
                report(f"reading {run.dataset.name}'s size")
            sizes[run.dataset] = _sizes(run.dataset)
        n_train, n_val, shape, classes = sizes[run.dataset]
        key = (run.model, run.dataset)
        if key not in rates:
            if report:
                report(f"timing {run.model.name}'s training steps on {device}")
            rates[key] = images_per_second(
                run.model,
                shape,
                classes,
                run.train["batch_size"],
                threads,
                device=device,
                members=members,
            )
            net = models.create(run.model, num_classes=classes, input_shape=shape)
            flops[key] = flops_per_image(net, shape)
        epochs = run.train["epochs"]
        seconds = epochs * (n_train / rates[key] + n_val / (3 * rates[key]))
        row = by_model.setdefault(str(run.model), {"networks": 0, "seconds": 0.0, "gflop": 0.0})
        row["networks"] += 1
        row["seconds"] += seconds
        row["gflop"] += epochs * n_train * flops[key] / 1e9
        row["images_per_s"] = rates[key]
    total = sum(r["seconds"] for r in by_model.values())
    return {
        "models": by_model,
        "seconds": total / workers,
        "workers": workers,
        "threads": threads,
        "device": device,
        "packed_members": members,
    }
