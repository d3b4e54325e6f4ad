"""A pretrained network given on the command line (``--model``, ``--checkpoint``,
``--data``) instead of a finished run: its options, and the run made for it."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import options_named
from ._progress import progress


def pretrained_options(f):
    """--model, --checkpoint and --data: a pretrained network instead of a run folder."""
    data = click.option(
        "--data", "data_spec", default=None, help="Dataset spec (with --checkpoint)."
    )
    f = data(f)
    f = click.option(
        "--checkpoint",
        default=None,
        type=click.Path(dir_okay=False),
        help="Pretrained weights (torch or safetensors; the common CIFAR-ResNet layout too).",
    )(f)
    return click.option("--model", default=None, help="Model spec (with --checkpoint).")(f)


def pretrained_or_run(run_dir, model, checkpoint, data_spec, device, output, as_json) -> Path:
    """RUN_DIR, or the run folder written for --model/--checkpoint/--data under OUTPUT (with a
    progress line while it reads the data and predicts every split: half a minute for the
    CIFAR JPEG tree on 2 cores)."""
    given = [
        o
        for o, v in (("--model", model), ("--checkpoint", checkpoint), ("--data", data_spec))
        if v is not None
    ]
    if run_dir is not None:
        if given:
            raise click.UsageError(f"give RUN_DIR or {', '.join(given)}, not both")
        return Path(run_dir)
    if len(given) < 3 or output is None:
        raise click.UsageError(
            "give a finished RUN_DIR, or a pretrained network: --model, --checkpoint, --data "
            "and -o OUTPUT"
        )
    from ..training import TrainConfig

    with options_named():
        config = TrainConfig(
            data=data_spec, model=model, checkpoint=checkpoint, device=str(device)
        )  # the option's resolved device, as the field's text (resolved again: no "auto")
        config.check()
    return pretrained_with_progress(config, Path(output) / "pretrained", not as_json)


def pretrained_with_progress(config, out: Path, enabled: bool) -> Path:
    """:func:`calibkit.runs.pretrained_run` with a progress line while it reads the data and
    predicts every split (half a minute for the CIFAR JPEG tree on 2 cores): what
    ``calibrate --checkpoint`` and ``train --checkpoint --stage2`` both do first."""
    from ..runs import pretrained_run

    with progress(1, "pretrained run", enabled) as tick:
        if tick:
            tick.status(f"reading {config.data.name} and predicting its splits with the network")
        pretrained_run(config, out)
        if tick:
            tick(1)
    return out
