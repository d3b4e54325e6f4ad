"""Stage 2 of several runs fitted together: the runs of a sweep whose stage-2 method (MaC-Cal
on a study's CE networks, one per seed) differs only by its seed, on one dataset and model,
are calibrated in one call (:func:`calibkit.runs.calibrate_runs`) after their stage-1
networks are trained and before the runs themselves, which then find their calibrated run
(``root/runs/<key>``) written as one fitted alone leaves it and go on to the post-hoc
methods and the measurements. MaC-Cal trains every network's head in one stack
(:class:`calibkit.posthoc._masked_heads.HeadStack`), each head equal to the one it would be
alone within float tolerance, at about the cost of one.

The bench groups stage 2 where it packs stage 1 (:mod:`calibkit.bench._pack`: by default where
the runs train on CUDA), so a CPU sweep's numbers do not move by float rounding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from .. import posthoc
from .._outputs import inside
from ..posthoc.internal import fits_together
from ..runs import calibrate_runs
from ._runspec import RunSpec


def stage2_groups(runs: list[RunSpec], root: Path) -> list[list[RunSpec]]:
    """The groups of ``runs`` whose stage 2 can be fitted together: runs with a stage-2
    method that fits several networks in one go (MaC-Cal,
    :func:`~calibkit.posthoc._model_level.fits_together`), not fitted yet, whose stage-1
    network is trained, grouped by method spec (its seed is the run's), dataset and model,
    in groups of 2 or more (spec order). Other stage-2 methods fit alone, in their runs."""
    groups: dict[tuple[str, str, str], list[RunSpec]] = defaultdict(list)
    for run in runs:
        if run.stage2 is None or run.logits is not None:
            continue
        if not fits_together(posthoc.REGISTRY.factory(run.stage2.name)):
            continue
        if (root / "runs" / run.key / "run.json").exists():
            continue
        if not (root / "train" / run.training_key / "run.json").exists():
            continue
        groups[(str(run.stage2), str(run.dataset), str(run.model))].append(run)
    return [g for g in groups.values() if len(g) >= 2]


def label(runs: list[RunSpec]) -> str:
    """How progress lines name a group."""
    return f"stage 2 ({runs[0].stage2.name}) of {len(runs)} {runs[0].model.name} networks"


def fit_stage2_group(
    runs: list[RunSpec], root: Path, report: Callable[[str], None] | None = None
) -> None:
    """Fit the stage-2 method of every run of ``runs`` on its stage-1 network, together, into
    each run's folder ``root/runs/<key>``; the method of each run is seeded with the run's
    seed, as a run fitted alone seeds it."""
    if report is not None:
        report(label(runs))
    calibrate_runs(
        [inside(root, "train", r.training_key) for r in runs],
        [posthoc.REGISTRY.seeded(r.stage2, r.seed) for r in runs],
        [inside(root, "runs", r.key) for r in runs],
        device="auto",
    )
