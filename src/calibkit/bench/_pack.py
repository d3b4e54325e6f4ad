"""Packed stage 1 for a sweep: the networks of runs that share a model, its data and its
schedule (a sweep's losses × seeds) are trained together in one process
(:func:`calibkit.training._trainer.train_packed`), before the runs themselves, which then
find their stage-1 networks trained (``root/train/<training key>``, as a run trained alone
leaves it) and go straight to stage 2, the post-hoc methods and the measurements.

Packing pays where one network leaves the device idle (a GPU); on a CPU a network's
operations already fill the cores, and packing is slower (docs/training.md, "Packed
training"), so the bench packs by default only where the runs train on CUDA.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import torch

from .._outputs import file_lock, inside, write_text
from ..training import train_packed
from ..training.internal import pack_key, pick_device, training_rate
from ._runspec import RunSpec

#: most networks in one pack: the aggregate rate grows with the members (ResNet-20 on an
#: H200: 13,577 images/s alone, 28,844 for 8 packed, 45,495 for 24; benchmarks/
#: packed_speed.py), and so does memory (24 ResNet-20s at batch 128 take a few GiB)
MAX_MEMBERS = 24


def trains_on_cuda(runs: list[RunSpec]) -> bool:
    """Whether the runs' networks train on a CUDA device (``device: auto`` with one here)."""
    devices = {str(r.train.get("device", "auto")) for r in runs if r.trained}
    return any(pick_device(d).type == "cuda" for d in devices)


def packs(runs: list[RunSpec], root: Path, limit: int = MAX_MEMBERS) -> list[list[RunSpec]]:
    """The packs of ``runs`` worth training together: runs whose stage-1 networks are not
    trained yet, one per training key, grouped by what they must share, in groups of 2 to
    ``limit`` members (in spec order)."""
    groups: dict[str, dict[str, RunSpec]] = defaultdict(dict)
    for run in runs:
        if not run.trained or (root / "train" / run.training_key / "run.json").exists():
            continue
        key = pack_key(run.train_config())
        if key is not None:
            groups[key].setdefault(run.training_key, run)
    out = []
    for members in groups.values():
        runs_ = list(members.values())
        out += [runs_[i : i + limit] for i in range(0, len(runs_), limit)]
    return [p for p in out if len(p) >= 2]


def label(runs: list[RunSpec]) -> str:
    """How progress lines name a pack."""
    return f"pack of {len(runs)} {runs[0].model.name} on {runs[0].dataset.name}"


def train_pack(
    runs: list[RunSpec], root: Path, report: Callable[[str], None] | None = None
) -> None:
    """Train the stage-1 networks of ``runs`` as one packed run into their training folders,
    holding each folder's lock (taken in a fixed order: no deadlock with a worker that trains
    one of them alone), and write each one's ``throughput.json`` (the pack's images/s)."""
    folders = [inside(root, "train", r.training_key) for r in runs]
    with ExitStack() as locks:
        for folder in sorted(folders):
            locks.enter_context(file_lock(folder.with_suffix(".lock")))
        if all((f / "run.json").exists() for f in folders):
            return  # another process trained them meanwhile
        resume = all((f / "checkpoint.pt").exists() for f in folders)
        name = label(runs)
        results = train_packed(
            [r.train_config() for r in runs], folders, resume=resume, progress=_epochs(name, report)
        )
    rate = training_rate(results[0])  # the members share the steps: one rate for all
    for key in ("train_images_per_s", "train_gflops"):
        if key in rate:
            rate[key] *= len(runs)  # the pack's steps trained every member at once
    for folder in folders:
        write_text(folder / "throughput.json", json.dumps(rate | {"packed_members": len(runs)}))
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _epochs(name: str, report: Callable[[str], None] | None):
    """A training progress callback that reports each epoch's end."""
    if report is None:
        return None

    def progress(step: int, total: int, record: dict | None) -> None:
        if record is not None:
            report(f"{name}: epoch {record['epoch']}, step {step}/{total}")

    return progress
