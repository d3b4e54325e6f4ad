"""How long a sweep would take here, before running it (``calibkit bench SPEC --estimate``):
the papers' protocols on a CPU take days, and a user should learn that in seconds, not
after the first epoch.

Everything is measured now, on this machine, with the sweep's threads per run:

- **Training.** For each model of the spec, a few SGD steps at the spec's batch size on
  random inputs of the dataset's shape give its training rate. Each distinct network (runs
  that share a stage 1 count once) costs ``epochs`` × (training images / rate + validation
  images / (3 × rate)): a forward pass is about a third of a training step.
- **After training, per run.** Measuring: the validation and test images once, at a
  forward pass each. Each post-hoc method, at each calibration size: a method on logits is
  fitted once, now, on random logits of the calibration set's shape (rows × classes), and
  timed; a method that calibrates a network (Neural Clamping, MaC-Cal's stage 2) is fitted
  on a fresh network of the run's model and random inputs, for one epoch on at most
  :data:`PILOT_ROWS` rows, and scaled linearly to its epochs and rows.

The sum is divided by the workers. Networks given as logits files or checkpoints are not
counted (their runs read, fit and measure; the output says how many). On the default preset
the estimate said 8 min 7 s on 2 workers for a sweep that took 8 min 54 s (docs/bench.md).
The rate is measured on the machine as it is now: beside other work it is lower, and so is
the estimate's optimism.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from .. import data, models, posthoc
from .._registry import Spec, parse_spec
from .._threads import torch_threads
from ..training.internal import flops_per_image
from ._runspec import BenchSpec

#: settings that only skip work an estimate does not need (decoding, channel statistics)
_LIGHT = {"in_memory": False, "mean": 0.5, "std": 0.25}


#: the most rows a model-level method's pilot fit uses (the time is scaled to the rest)
PILOT_ROWS = 256


def _sizes(dataset: str | Spec) -> tuple[int, int, int, tuple[int, ...], int]:
    """(training, validation and test images, input shape, classes) of a dataset spec."""
    spec = parse_spec(dataset)
    known = data.REGISTRY.parameters(spec.name)
    light = {k: v for k, v in _LIGHT.items() if k in known and k not in spec.kwargs}
    bundle = data.create(spec.with_params(**light))
    n_train = len(bundle.train) if bundle.train is not None else 0
    n_val = len(bundle.val) if bundle.val is not None else 0
    n_test = len(bundle.test) if bundle.test is not None else 0
    return n_train, n_val, n_test, tuple(bundle.input_shape), bundle.num_classes


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
    with torch_threads(threads):
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


def _noisy_labels(z: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Labels a calibrator can fit to ``z``: its argmax, a fifth of them replaced at random
    (a finite optimum, as a real calibration split has)."""
    y = z.argmax(1)
    noisy = torch.rand(len(y), generator=g) < 0.2
    y[noisy] = torch.randint(0, z.shape[1], (int(noisy.sum()),), generator=g)
    return y


def _time_fit(spec: Spec, rows: int, sizes: tuple, model: Spec) -> tuple[float, float]:
    """(seconds, scale) of one fit of post-hoc ``spec`` here: a method on logits fitted on
    ``rows`` random logits (scale 1); a model-level one fitted for one epoch on at most
    :data:`PILOT_ROWS` random inputs of a fresh ``model`` (scale: its epochs × rows over
    the rows used). A fit that fails on random data is timed up to its failure."""
    *_, shape, classes = sizes
    g = torch.Generator().manual_seed(0)
    method = posthoc.create(spec)
    if method.level == "model":
        used = min(rows, PILOT_ROWS)
        net = models.create(model, num_classes=classes, input_shape=shape)
        x = torch.rand(used, *shape, generator=g)
        with torch.no_grad():
            y = _noisy_labels(net(x), g)
        pilot, args = posthoc.create(spec.with_params(epochs=1)), (net, x, y)
        scale = method.checked().get("epochs", 1) * rows / used
    else:
        z = 3 * torch.randn(rows, classes, generator=g)
        pilot, args, scale = method, (z, _noisy_labels(z, g)), 1.0
    start = time.perf_counter()
    with warnings.catch_warnings():  # a fit to random data may warn; only its time counts
        warnings.simplefilter("ignore")
        with contextlib.suppress(ValueError):  # diverged on random data: its time counts
            pilot.fit(*args)
    return time.perf_counter() - start, scale


def _fit_seconds(
    spec: Spec, rows: int, sizes: tuple, model: Spec, threads: int, cache: dict
) -> float:
    """Seconds of one fit of post-hoc ``spec`` on ``rows`` rows here (:func:`_time_fit`,
    scaled), measured once per (method, rows, model, data shape) with ``threads``."""
    key = (spec, rows, model, *sizes[-2:])
    if key not in cache:
        with torch_threads(threads):
            seconds, scale = _time_fit(spec, rows, sizes, model)
        cache[key] = seconds * scale
    return cache[key]


def _after_training(run: Any, sizes: tuple, rate: float, threads: int, cache: dict) -> float:
    """Seconds of a run's work after its network is trained: stage 2, its post-hoc fits at
    each calibration size, and measuring (see the module docstring)."""
    n_train, n_val, n_test, *_ = sizes
    seconds = (n_val + n_test) / (3 * rate)
    if run.stage2 is not None:
        seconds += _fit_seconds(run.stage2, n_train, sizes, run.model, threads, cache)
    for spec in run.posthoc:
        split = posthoc.REGISTRY.factory(spec.name).fit_split
        available = n_train if split == "train" else n_val
        for size in run.calibration_sizes:
            rows = available if size is None else min(size, available)
            seconds += _fit_seconds(spec, rows, sizes, run.model, threads, cache)
    return seconds


def estimate(
    spec: BenchSpec, workers: int, threads: int, report: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Seconds the sweep would take here, by model and in all (see the module docstring):
    training, and the work after it, with the measured rates and the training's work in
    GFLOP. Where the runs train on CUDA, the rate is measured there, for packs of as many
    networks as the bench packs. ``report``: told what is being measured (a dataset's size,
    a model's rate, a method's fit), for the progress line of a measurement that takes a
    minute on a CPU (a ResNet-110's steps)."""
    from ._pack import MAX_MEMBERS, trains_on_cuda

    cuda = trains_on_cuda(spec.runs)
    device = "cuda" if cuda else "cpu"
    distinct = len({r.training_key for r in spec.runs if r.trained})
    members = max(1, min(MAX_MEMBERS, distinct // max(1, workers))) if cuda else 1
    sizes: dict[Spec, tuple] = {}
    rates: dict[tuple[Spec, Spec], float] = {}
    flops: dict[tuple[Spec, Spec], float] = {}
    fits: dict[tuple, float] = {}
    by_model: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    trained = [r for r in spec.runs if r.trained]
    for run in trained:
        if run.dataset not in sizes:
            if report:
                report(f"reading {run.dataset.name}'s size")
            sizes[run.dataset] = _sizes(run.dataset)
        n_train, n_val, _, shape, classes = sizes[run.dataset]
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
        row = by_model.setdefault(
            str(run.model),
            {"networks": 0, "runs": 0, "seconds": 0.0, "after_seconds": 0.0, "gflop": 0.0},
        )
        row["images_per_s"] = rates[key]
        row["runs"] += 1
        if report and (run.posthoc or run.stage2):
            report(f"timing the fits after training of {run.method} ({run.model.name})")
        row["after_seconds"] += _after_training(run, sizes[run.dataset], rates[key], threads, fits)
        if run.training_key in seen:
            continue
        seen.add(run.training_key)
        epochs = run.train["epochs"]
        row["networks"] += 1
        row["seconds"] += epochs * (n_train / rates[key] + n_val / (3 * rates[key]))
        row["gflop"] += epochs * n_train * flops[key] / 1e9
    training = sum(r["seconds"] for r in by_model.values())
    after = sum(r["after_seconds"] for r in by_model.values())
    return {
        "models": by_model,
        "seconds": (training + after) / workers,
        "training_seconds": training / workers,
        "after_seconds": after / workers,
        "given_runs": len(spec.runs) - len(trained),
        "workers": workers,
        "threads": threads,
        "device": device,
        "packed_members": members,
    }
