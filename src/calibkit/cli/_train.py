"""Training: ``train`` (options made from :class:`~calibkit.training.TrainConfig`), and a
calibration method fitted on the trained run with ``--stage2``."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import click

from .._settings import declarations
from ..training import TrainConfig
from ._calibrate import calibrate_and_print
from ._common import CONTEXT, cli, options_named
from ._options import data_roots, declared_option, json_option
from ._output import console, echo_json
from ._pretrained import pretrained_with_progress
from ._progress import progress


def options_from(config: type):
    """Decorator: one option per declared field of the dataclass ``config``
    (``--field-name``; :func:`~calibkit.cli._options.declared_option`: type, default, help
    and bounds from the field's declaration); a list field is a repeatable option, a bool
    field a flag. The command receives the fields as keyword arguments (lists as tuples),
    ready for :func:`config_of`, which checks them all, once, naming the options."""

    def decorate(f):
        for setting in reversed(declarations(config).values()):
            f = declared_option(setting, checked=False)(f)
        return f

    return decorate


def config_of(config: type, values: dict):
    """``config(**values)`` for the fields of ``config`` in ``values`` (tuples from repeated
    options as lists), checked, with errors naming the option."""
    names = {f.name for f in fields(config)}
    kwargs = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items() if k in names}
    with options_named():
        return config(**kwargs).check()


@cli.command(context_settings=CONTEXT)
@options_from(TrainConfig)
@click.option(
    "--stage2",
    default=None,
    help="Then calibrate the run with this method into --output (stage 1 in OUTPUT/stage1): "
    "maccal[:width=128,adaptive=decaying,gamma=0.95,...] retrains the head (MaC-Cal); any "
    "method of `calibkit methods` is accepted.",
)
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="Run folder.")
@click.option("--resume", is_flag=True, help="Continue the run in --output from its checkpoint.")
@json_option
def train(stage2, output, resume, as_json, **settings) -> None:
    """Train a model and write its logits for val, test and extra splits (the format
    `calibkit compare --file` reads), its per-epoch history and a checkpoint per epoch.

    \b
    Examples:
      calibkit train --data digits --model cnn --loss bsce-gra --epochs 30 --seed 1 -o runs/x
      calibkit train --data cifar10:root=~/data --model resnet110 --loss focal:gamma=3 \\
          --epochs 350 --extra cifar10.1:root=~/data -o runs/r110-focal
      calibkit train ... -o runs/x --resume          # after a crash: finishes the same run
      calibkit train ... --stage2 maccal -o runs/m   # + MaC-Cal (stage 1 in runs/m/stage1)
      calibkit train --data folder:root=~/cifar10-jpeg --model resnet20 \\
          --checkpoint resnet20.th --stage2 maccal -o runs/r20-maccal   # on pretrained weights
      torchrun --nproc-per-node 2 -m calibkit train ...   # data-parallel (gloo on CPU)
    """
    from .. import posthoc
    from .._outputs import check_output, check_writable
    from ..runs import stage_one

    spec = posthoc.REGISTRY.check(stage2) if stage2 else None  # before any training
    config = config_of(TrainConfig, settings)
    check_output(output, [config.checkpoint, *data_roots(config.data, *config.extra)])
    check_writable(output)  # a read-only or full folder fails now, not after an epoch
    stage1 = Path(output) / "stage1" if spec else Path(output)
    given = bool(config.checkpoint and spec)  # pretrained weights as stage 1: no training
    # under torchrun every rank trains; the main rank (RANK 0) writes the files, and only it
    # reports (progress, summary, --json) and calibrates: one summary, from the writer
    main = int(os.environ.get("RANK", "0")) == 0
    if given:
        result = None
        pretrained_with_progress(config, stage1, not as_json and main)
    else:
        with progress(1, "training", not as_json and main) as tick:
            result = stage_one(config, stage1, given=False, resume=resume, progress=tick)
    if not main:
        return
    if spec:
        calibrate_and_print(stage1, spec, output, config.torch_device, as_json, config)
        return
    if as_json:
        echo_json({"output": str(output), "history": result.history})
        return
    h = result.history[-1]
    console().print(
        f"{h['epoch']} epochs: train accuracy {100 * h['train_acc']:.2f} %; validation "
        f"accuracy {100 * h['val_acc']:.2f} %, ECE {100 * h['val_ece']:.2f} %, NLL "
        f"{h['val_nll']:.4f} nats, optimal ECE {100 * h['val_optimal_ece']:.2f} %"
        f"\nwritten to {output}/ (logits.npz, history.json, run.json, "
        "model.safetensors)"
    )
