"""Calibrating: ``fit`` and ``apply`` (logits files), ``methods`` (the registry) and
``calibrate`` (any method on a run); ``compare`` is in :mod:`.compare`."""

from __future__ import annotations

import re
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    import torch

from ._common import CONTEXT, cli
from ._options import (
    OutputFile,
    data_roots,
    device_choice,
    device_option,
    json_option,
    key_options,
    split_option,
)
from ._output import console, echo_json, print_before_after
from ._pretrained import pretrained_options, pretrained_or_run
from ._progress import progress


@cli.command(context_settings=CONTEXT)
@click.option(
    "--method", "method", required=True, help="Calibrator spec, e.g. ts or dir-odir:folds=5."
)
@click.option(
    "--val", "val", required=True, type=click.Path(dir_okay=False), help="Calibration split file."
)
@key_options
@click.option(
    "-o",
    "--output",
    required=True,
    type=OutputFile(),
    help="Calibrator file to write.",
)
@click.option(
    "--logits",
    "probs",
    flag_value=False,
    default=None,
    help="The file's scores are logits even where every row lies in [0, 1] and sums to 1 "
    "(refused as probabilities otherwise).",
)
@device_option
@json_option
def fit(method, val, logits_key, labels_key, output, probs, device, as_json) -> None:
    """Fit a post-hoc calibrator on a calibration split and save it (safetensors + JSON,
    never pickle). Prints the fit report and the metrics before and after on that split.

    \b
    Examples:
      calibkit fit --method ts --val run.npz -o ts.calib
      calibkit fit --method dir-odir:folds=5 --val resnet110_cifar10.npz -o dir.calib
    """
    from .._outputs import check_output
    from ..posthoc.internal import NetworkMethodError, fit_file

    check_output(output, [val])
    try:
        cal, before, after, path, n = fit_file(
            method,
            val,
            output,
            logits_key=logits_key,
            labels_key=labels_key,
            device=device,
            probs=probs,
        )
    except NetworkMethodError as err:  # the library's words for a Python caller: ours here
        raise click.UsageError(
            f"{err.method} calibrates a network, not logits: use calibkit calibrate {method} "
            "RUN_DIR (or --model, --checkpoint, --data)"
        ) from None
    if as_json:
        echo_json(
            {
                "method": method,
                "file": str(path),
                "fit": cal.fit_report_.__dict__,
                "before": before,
                "after": after,
            }
        )
        return

    out = console()
    out.print(f"{method}: {cal.fit_report_}")
    print_before_after(out, f"fit split ({n} samples)", before, after)
    out.print(f"calibrator written to {path}")


@cli.command(context_settings=CONTEXT)
@click.argument("calibrator", type=click.Path())
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@key_options
@split_option
@click.option("-o", "--output", type=OutputFile(), help=".npz to write (with FILE).")
@click.option(
    "--onnx",
    "onnx_path",
    type=OutputFile(),
    help="Also write the calibrator (or a run's calibrated network) as an ONNX graph.",
)
@click.option(
    "--onnx-output",
    type=click.Choice(["logits", "probs"]),
    default="logits",
    show_default=True,
    help="What the ONNX graph returns.",
)
@device_option
@json_option
def apply(
    calibrator,
    file,
    logits_key,
    labels_key,
    split,
    output,
    onnx_path,
    onnx_output,
    device,
    as_json,
) -> None:
    """Apply a saved calibrator to logits and write calibrated logits (key logits; they are
    log-probabilities for binning and isotonic maps), probabilities (probs) and the labels;
    and/or export it to ONNX. CALIBRATOR is a calibrator file, or (with --onnx only) a run
    folder, whose network (with its calibrator, for a calibrated run) becomes one graph.
    The written graph is run in onnxruntime and checked against PyTorch's output.

    \b
    Example:
      calibkit apply ts.calib test.npz -o test_calibrated.npz
      calibkit apply ts.calib --onnx ts.onnx                 # logits -> calibrated logits
      calibkit calibrate ts runs/x -o runs/x-ts && calibkit apply runs/x-ts --onnx net.onnx
    """
    from .. import posthoc

    if file is None and onnx_path is None:
        raise click.UsageError("give FILE and -o to apply the calibrator, or --onnx to export it")
    if (file is None) != (output is None):
        raise click.UsageError("FILE and -o go together: the logits to read and the .npz to write")
    from .._outputs import check_output

    check_output(output, [calibrator, file])
    check_output(onnx_path, [calibrator, file, output], option="--onnx")
    if output is not None and Path(output).suffix.lower() != ".npz":
        raise click.BadParameter(
            f"{output}: apply writes a .npz (logits, probs, labels); name the file *.npz",
            param_hint="-o",
        )
    report: dict = {}
    if Path(calibrator).is_dir():
        if file is not None:
            raise click.UsageError(
                f"{calibrator} is a run folder: it can only be exported (--onnx)"
            )
        method, example = _run_network(calibrator)
    else:
        method = posthoc.load(calibrator)
        example = None
    if file is not None:
        from ..posthoc.internal import apply_file

        report["apply"] = apply_file(
            method,
            file,
            output,
            split=split,
            logits_key=logits_key,
            labels_key=labels_key,
            device=device,
        )
    if onnx_path is not None:
        from ..export import to_onnx

        path = to_onnx(method, onnx_path, example=example, output=onnx_output)
        report["onnx"] = {"path": str(path), "output": onnx_output, "checked": True}
    if as_json:
        echo_json(report)
        return
    out = console()
    if "apply" in report:
        r = report["apply"]
        out.print(f"{r['n_samples']} samples calibrated with {r['method']}; written to {r['path']}")
        if "before" in r:
            title = f"{split} split ({r['n_samples']} samples)"
            print_before_after(out, title, r["before"], r["after"])
    if "onnx" in report:
        out.print(
            f"ONNX graph written to {report['onnx']['path']} (returns {onnx_output}; "
            "onnxruntime reproduces PyTorch's output)"
        )


def _run_network(run_dir: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """A run's network (calibrated, for a calibrated run) and two test inputs to trace it."""
    import torch

    from ..runs import run_evidence

    evidence, _ = run_evidence(run_dir, device="cpu")
    return evidence.model, evidence.inputs("test", torch.arange(2))


def _about(factory) -> str:
    """A method's one line: the first paragraph of its class docstring, up to the first
    sentence end that is no abbreviation ("et al.", "eq.")."""
    if getattr(factory, "about", ""):
        return factory.about
    paragraph = " ".join((factory.__doc__ or "").strip().split("\n\n")[0].split())
    match = re.search(r"(?<!\bal)(?<!\beq)\.(\s|$)", paragraph)
    return paragraph[: match.end()].strip() if match else paragraph


@cli.command(context_settings=CONTEXT)
@click.argument("names", nargs=-1)
@json_option
def methods(names, as_json) -> None:
    """List every calibration method (or the NAMES given) with what it fits on (logits, or
    a network and its inputs) and its settings with their defaults (spec syntax:
    ts:t_max=50); given NAMES, each setting with what it means and the values it takes.

    \b
    Examples:
      calibkit methods
      calibkit methods ts maccal
      calibkit methods --json
    """
    from .. import posthoc

    chosen = [posthoc.REGISTRY.canonical(n) for n in names] if names else posthoc.names()
    rows = [
        {
            "name": n,
            "level": posthoc.REGISTRY.factory(n).level,
            "about": _about(posthoc.REGISTRY.factory(n)),
            "aliases": posthoc.REGISTRY.aliases(n),
            "settings": posthoc.REGISTRY.parameters(n),
            "defaults": posthoc.REGISTRY.defaults(n),
            "help": posthoc.REGISTRY.help(n),
        }
        for n in chosen
    ]
    if as_json:
        echo_json({"methods": rows})
        return
    for r in rows:
        click.echo(f"{r['name']:<16} {r['level']:<7} {r['about']}")
        if not names:
            shown = ", ".join(f"{k}={v}" for k, v in r["defaults"].items()) or "-"
            click.echo(f"{'':<24} settings: {shown}")
            continue
        for key, default in r["defaults"].items():
            click.echo(f"  {key}={default}")
            click.echo(
                textwrap.fill(r["help"][key], 88, initial_indent=" " * 6, subsequent_indent=" " * 6)
            )


@cli.command(context_settings=CONTEXT)
@click.argument("method")
@click.argument("run_dir", type=click.Path(file_okay=False), required=False)
@pretrained_options
@device_choice("auto")
@click.option(
    "-o",
    "--output",
    default=None,
    type=click.Path(file_okay=False),
    help="Folder for the calibrated logits and the method's file (default RUN_DIR-<method>, "
    "beside the source run).",
)
@json_option
def calibrate(method, run_dir, model, checkpoint, data_spec, device, output, as_json):
    """Fit any calibration method (METHOD: a spec; `calibkit methods` lists them) on a
    finished run, or on a pretrained network (--model, --checkpoint, --data), and write the
    calibrated network as a new run: logits of every split (the format `calibkit compare
    --file` reads), the fitted method (calibrator.safetensors), the source's weights and
    run.json. Methods on logits fit on the run's saved validation logits; neural-clamping
    fits on the network and its validation inputs; maccal retrains the head on the training
    split. A pretrained network's uncalibrated run is written to OUTPUT/pretrained first.

    \b
    Examples:
      calibkit calibrate ts runs/x                   # writes the run runs/x-ts
      calibkit calibrate "neural-clamping:gamma_pool=[0,1,2]" runs/x -o runs/x-nc
      calibkit calibrate maccal:adaptive=static runs/x -o runs/x-maccal   # MaC-Cal stage 2
      calibkit calibrate neural-clamping --model resnet20 --checkpoint resnet20.th \\
          --data "folder:root=cifar10-jpeg,mean=[0.485,0.456,0.406],std=[0.229,0.224,0.225]" -o nc
    """
    from .. import posthoc
    from .._outputs import check_output

    spec = posthoc.REGISTRY.check(method)  # a bad spec fails before anything is read
    if output is None and run_dir is not None:
        output = f"{str(run_dir).rstrip('/')}-{spec.name}"
    check_output(output, [run_dir, checkpoint, *data_roots(data_spec)])
    run_dir = pretrained_or_run(run_dir, model, checkpoint, data_spec, device, output, as_json)
    out = Path(output)
    calibrate_and_print(run_dir, spec, out, device, as_json)


def calibrate_and_print(source, spec, output, device, as_json: bool, config=None) -> None:
    """Calibrate the run ``source`` with ``spec`` into the run ``output`` (a progress bar
    for methods that train for epochs), then print what the fit did. ``config``: the run's
    checked :class:`~calibkit.training.TrainConfig` where the caller trained it (not read
    from run.json and checked again)."""
    from ..runs import calibrate_run

    with progress(1, str(spec), not as_json) as tick:
        cal = calibrate_run(source, spec, output, device=device, progress=tick, config=config)
    test = _test_effect(source, output)
    if as_json:
        echo_json(
            {
                "output": str(output),
                "method": str(spec),
                "fit": asdict(cal.fit_report_),
                "history": cal.history(),
            }
            | ({"test": test} if test else {})
        )
        return
    out = console()
    out.print(
        f"{spec}: {cal.fit_report_}\nwritten to {output}/ (a run: logits.npz, "
        "calibrator.safetensors, model.safetensors, run.json)"
    )
    if test:
        title = f"test split ({test['n_samples']} samples)"
        print_before_after(out, title, test["before"], test["after"])


def _test_effect(source, output) -> dict | None:
    """The metrics of the run's test split before (the source run's logits) and after (the
    calibrated run's), or None where the test split has no labels."""
    import warnings

    from ..io import load_split
    from ..metrics import evaluate, trusted

    try:
        z0, y = load_split(str(Path(source) / "logits.npz"), "test")
        z1, _ = load_split(str(Path(output) / "logits.npz"), "test")
    except (OSError, KeyError, ValueError):  # no labelled test split: nothing to show
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an undefined AUROC is a NaN
        before = evaluate(trusted(z0, y), optimal=False, smooth=False).metrics
        after = evaluate(trusted(z1, y), optimal=False, smooth=False).metrics
    return {"n_samples": len(y), "before": before, "after": after}
