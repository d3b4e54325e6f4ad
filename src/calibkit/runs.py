"""Finished runs on disk: load one back, make one from a pretrained checkpoint, and
calibrate one with any registered method into a new run.

A run folder written by :func:`calibkit.training.train` holds ``run.json`` (its
configuration) and ``model.safetensors``; :func:`load_run` rebuilds the data and the model
from them (safetensors: no code runs on load). A calibrated run (:func:`calibrate_run`:
MaC-Cal stage 2, Neural Clamping, or any logits calibrator) holds its source's weights, the
method's file ``calibrator.safetensors`` and ``"calibration"`` in its ``run.json``; it loads
as the calibrated network.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from . import data, posthoc
from ._docs import documented
from ._outputs import atomic_write, save_npz, write_text
from ._registry import Spec
from .data.internal import augmentation
from .io import read_arrays
from .posthoc import Evidence
from .posthoc.internal import check_fit, fits_together
from .training import TrainConfig, TrainingError, TrainResult, build, predict, train
from .training.internal import RUN_PARAMETERS, pick_device, provenance, write_run

__all__ = [
    "calibrate_run",
    "calibrate_runs",
    "load_run",
    "pretrained_run",
    "run_evidence",
    "stage_one",
]


def _read_run(path: Path) -> dict[str, Any]:
    info = path / "run.json"
    if not info.exists() or not (path / "model.safetensors").exists():
        raise TrainingError(
            f"{path} is not a finished calibkit run (run.json and model.safetensors expected)"
        )
    try:
        return json.loads(info.read_text())
    except json.JSONDecodeError as err:
        raise TrainingError(f"{info}: not valid JSON ({err})") from None


#: ``config`` of the functions that read a run: the caller's checked copy of run.json's
HELD_CONFIG = (
    "TrainConfig or None, default None",
    "The run's configuration as the caller holds it, checked (the bench's worker, which "
    "trained the run): its specs and device are used as they are instead of being read "
    "from run.json and checked again. It must be the run's own (one that run.json does not "
    "record is refused). None: read from run.json.",
)


def _config(info: dict, held: TrainConfig | None, path: Path) -> TrainConfig:
    """The run's configuration: ``held`` where the caller holds it (refused unless run.json
    records the same), else run.json's."""
    if held is None:
        return TrainConfig.from_json(info["config"])
    mine = json.loads(json.dumps(held.check().as_json(), default=str))
    recorded = {k: v for k, v in info["config"].items() if k in mine}
    if recorded != mine:
        differ = sorted(k for k in mine if recorded.get(k) != mine[k])
        raise TrainingError(
            f"{path}/run.json: the run was trained with other settings than the "
            f"configuration given ({', '.join(differ)})"
        )
    return held


@documented(
    RUN_PARAMETERS,
    "tuple: (TrainConfig, DataBundle, nn.Module, dict): the configuration, the data, the "
    "model with its trained weights (a calibrated run's: the calibrated network) and "
    "run.json.",
    config=HELD_CONFIG,
)
def load_run(
    path: str | os.PathLike,
    device: str | torch.device = "auto",
    *,
    config: TrainConfig | None = None,
) -> tuple[TrainConfig, data.DataBundle, nn.Module, dict]:
    """(configuration, data, model with its trained weights, run.json) of a finished run; a
    calibrated run's model is the calibrated network (its method wrapped around the source
    network).

    Examples
    --------
    >>> from calibkit import runs
    >>> from calibkit.training import TrainConfig
    >>> tmp = getfixture("tmp_path")
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> _ = runs.stage_one(config, tmp / "ce", given=False)  # trains; writes the run folder
    >>> _ = runs.calibrate_run(tmp / "ce", "ts", tmp / "ce-ts")
    >>> config, digits, model, info = runs.load_run(tmp / "ce-ts", device="cpu")
    >>> str(config.model), type(model).__name__, info["calibration"]["method"]
    ('mlp', 'CalibratedModel', 'ts')
    """
    from safetensors.torch import load_file

    path = Path(path)
    info = _read_run(path)
    config = _config(info, config, path)
    bundle, model, _ = build(config, pretrained=False, need_train=False)
    try:
        weights = load_file(path / "model.safetensors")
    except Exception as err:  # safetensors raises its own error type for a bad header
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise TrainingError(
            f"{path}/model.safetensors: not a readable safetensors file ({first})"
        ) from None
    try:
        model.load_state_dict(weights)
    except (RuntimeError, OSError) as err:
        first = str(err).splitlines()[0]
        raise TrainingError(
            f"{path}/model.safetensors: does not fit the run's model ({first})"
        ) from None
    model = model.to(pick_device(device)).eval()
    if "calibration" in info:
        method = posthoc.load(path / "calibrator.safetensors", model)
        model = method if method.level == "model" else posthoc.CalibratedModel(model, method)
    return config, bundle, model.eval(), info


@documented(
    RUN_PARAMETERS,
    "tuple: (Evidence, dict): what the run offers a calibration method, and its run.json.",
    config=HELD_CONFIG,
)
def run_evidence(
    path: str | os.PathLike,
    device: str | torch.device = "auto",
    *,
    config: TrainConfig | None = None,
) -> tuple[Evidence, dict]:
    """What a finished run offers any calibration method (:class:`~calibkit.posthoc.Evidence`:
    its saved logits of every split but train, the labels of every split, its model, inputs
    and feasible input range) and its ``run.json``.

    Examples
    --------
    >>> from calibkit import runs
    >>> from calibkit.training import TrainConfig
    >>> tmp = getfixture("tmp_path")
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> _ = runs.stage_one(config, tmp / "ce", given=False)  # trains; writes the run folder
    >>> evidence, info = runs.run_evidence(tmp / "ce", device="cpu")
    >>> sorted(evidence.logits), sorted(evidence.labels), evidence.inputs("val", None).shape
    (['test', 'val'], ['test', 'train', 'val'], torch.Size([300, 1, 8, 8]))
    """
    _, bundle, model, info = load_run(path, device, config=config)
    dev = next(model.parameters()).device
    splits = bundle.splits()
    saved = read_arrays(Path(path) / "logits.npz")  # written by the run: no forward pass
    missing = [f"logits_{k}" for k in splits if k != "train" and f"logits_{k}" not in saved]
    if missing:
        raise TrainingError(f"{path}/logits.npz: no {missing[0]} array; the run is incomplete")
    logits = {k: torch.from_numpy(saved[f"logits_{k}"]) for k in splits if k != "train"}

    def inputs(split: str, idx: torch.Tensor | None) -> torch.Tensor:
        x = splits[split].stored() if idx is None else splits[split].x[idx]
        return data.to_inputs(x, bundle, dev)

    evidence = Evidence(
        logits=logits,
        labels={k: v.y for k, v in splits.items()},
        model=model,
        inputs=inputs,
        predict=lambda module, split: predict(module, splits[split], bundle, dev),
        input_range=data.input_bounds(bundle),
        augment=augmentation(bundle.augment, bundle.mean, bundle.std),
    )
    return evidence, info


@documented(
    RUN_PARAMETERS,
    "Method: the fitted method.",
    out=("str or PathLike", "The calibrated run's folder (never the source's)."),
    progress=(
        "callable or None, default None",
        "``progress(step, steps, record)`` after each epoch, for methods that train for epochs.",
    ),
    config=HELD_CONFIG,
)
def calibrate_run(
    source: str | os.PathLike,
    method: str | Spec,
    out: str | os.PathLike,
    *,
    device: str | torch.device = "auto",
    progress: Any = None,
    config: TrainConfig | None = None,
) -> posthoc.Method:
    """Fit the registered calibration ``method`` (a spec) on the finished run ``source`` (on
    its ``fit_split``: validation, or training for MaC-Cal stage 2) and write the calibrated
    network as a run in ``out``: logits of every split, the method's file, the source's
    weights, the fit's per-epoch history and ``run.json``. Returns the fitted method.

    The checks of :mod:`calibkit.posthoc._anomalies` run on the test split (the validation
    split when the test split has no labels): what they flag is in the method's
    ``fit_report_.anomalies`` and ``run.json``, and issued as one ``CalibrationWarning``.

    Examples
    --------
    >>> from calibkit import runs
    >>> from calibkit.training import TrainConfig
    >>> tmp = getfixture("tmp_path")
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> _ = runs.stage_one(config, tmp / "ce", given=False)  # trains; writes the run folder
    >>> ts = runs.calibrate_run(tmp / "ce", "ts", tmp / "ce-ts")
    >>> type(ts).__name__, round(float(ts.temperature_), 2)
    ('TemperatureScaling', 1.02)
    >>> sorted(p.name for p in (tmp / "ce-ts").iterdir())  # doctest: +NORMALIZE_WHITESPACE
    ['calibrator.safetensors', 'history.json', 'logits.npz', 'model.safetensors',
     'run.json']
    """
    return _calibrate([source], [method], [out], device, progress, [config])[0]


def calibrate_runs(
    sources: Sequence[str | os.PathLike],
    methods: Sequence[str | Spec],
    outs: Sequence[str | os.PathLike],
    *,
    device: str | torch.device = "auto",
    progress: Any = None,
) -> list[posthoc.Method]:
    """:func:`calibrate_run` of ``methods[i]`` on ``sources[i]`` into ``outs[i]``, every
    method one of a kind (one name): fitted together where the method can (MaC-Cal's stage
    2 trains every network's head in one stack, :meth:`~calibkit.posthoc._model_level.
    ModelCalibrator.fit_group`), otherwise one after another.

    Examples
    --------
    >>> from calibkit import runs
    >>> from calibkit.training import TrainConfig
    >>> tmp = getfixture("tmp_path")
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> _ = runs.stage_one(config, tmp / "ce", given=False)  # trains; writes the run folder
    >>> fitted = runs.calibrate_runs([tmp / "ce", tmp / "ce"], ["ts", "ts:t_max=10"],
    ...                              [tmp / "ts", tmp / "ts-10"], device="cpu")
    >>> [m.settings()["t_max"] for m in fitted]
    [100.0, 10]
    """
    return _calibrate(sources, methods, outs, device, progress, [None] * len(sources))


def _calibrate(
    sources: Sequence[str | os.PathLike],
    methods: Sequence[str | Spec],
    outs: Sequence[str | os.PathLike],
    device: str | torch.device,
    progress: Any,
    configs: Sequence[TrainConfig | None],
) -> list[posthoc.Method]:
    """:func:`calibrate_runs`, two frames below the caller's (its warnings point there)."""
    specs = [posthoc.REGISTRY.check(m) for m in methods]
    cals = [posthoc.create(spec) for spec in specs]
    if len({type(c) for c in cals}) > 1:
        raise ValueError("methods: calibrate_runs fits methods of one kind together")
    found = []
    for source, out, cal, config in zip(sources, outs, cals, configs, strict=True):
        if Path(out).resolve() == Path(source).resolve():  # RUN/<method> keeps the source whole
            raise TrainingError(
                f"{out}: the output folder is the source run, whose logits, history and "
                "run.json it would overwrite; choose another -o"
            )
        evidence, info = run_evidence(source, device, config=config)
        if "calibration" in info:
            raise TrainingError(
                f"{source} is already calibrated ({info['calibration']['method']}); start "
                "from its source run"
            )
        if cal.fit_split not in evidence.labels:
            raise TrainingError(
                f"{source}: the run has no {cal.fit_split} split to fit {cal.name} on"
            )
        found.append((evidence, info))
    evidences = [evidence for evidence, _ in found]
    if len(cals) > 1 and fits_together(type(cals[0])):
        type(cals[0]).fit_group_on(cals, evidences, progress)
    else:
        for cal, evidence in zip(cals, evidences, strict=True):
            cal.fit_on(evidence, progress=progress)
    for cal, spec, source, out, (evidence, info) in zip(
        cals, specs, sources, outs, found, strict=True
    ):
        _write_calibrated(cal, spec, evidence, info, Path(source), Path(out))
    return cals


def _write_calibrated(
    cal: posthoc.Method, spec: Spec, evidence: Evidence, info: dict, source: Path, out: Path
) -> None:
    """The calibrated network of ``cal`` (fitted on the run ``source``) as a run in ``out``,
    after the checks of :mod:`calibkit.posthoc._anomalies` on its test split."""
    arrays: dict[str, Any] = {}
    outputs = cal.apply_on(evidence)
    split = "test" if evidence.labels.get("test") is not None else "val"
    before, after = evidence.logits[split], outputs[split].detach().cpu()
    check_fit(cal, before, after, evidence.labels[split], split, stacklevel=5)  # the caller's
    for name, z in outputs.items():
        arrays[f"logits_{name}"] = z.detach().float().cpu().numpy()
        if not name.startswith("ood_"):
            arrays[f"labels_{name}"] = evidence.labels[name].numpy()
    save_npz(out / "logits.npz", **arrays)
    cal.save(out / "calibrator.safetensors")
    atomic_write(
        out / "model.safetensors",
        lambda tmp: shutil.copyfile(source / "model.safetensors", tmp),
    )
    write_text(out / "history.json", json.dumps(cal.history(), indent=1))
    record = info | {
        "calibration": {
            "method": str(spec),
            "source": str(source.resolve()),
            "anomalies": cal.fit_report_.anomalies,
            "seconds": cal.fit_report_.seconds,  # of fitting: a group's share each
        }
    }
    write_text(out / "run.json", json.dumps(record, indent=1, default=str))


@documented(RUN_PARAMETERS, "Path: the run's folder.")
def pretrained_run(config: TrainConfig, out: str | os.PathLike) -> Path:
    """A run folder for ``config.checkpoint``'s pretrained network, without training: its
    logits of every split but train, its weights and a ``run.json`` naming the checkpoint.
    Everything that takes a run (``calibkit calibrate``, stage 2, ``compare``) then takes it.

    Examples
    --------
    >>> from safetensors.torch import save_file
    >>> from calibkit import runs
    >>> from calibkit.data import demo_network
    >>> from calibkit.training import TrainConfig
    >>> tmp = getfixture("tmp_path")
    >>> net, _ = demo_network()
    >>> save_file(net.state_dict(), tmp / "mlp.safetensors")  # weights trained elsewhere
    >>> config = TrainConfig(data="digits", model="mlp", checkpoint=str(tmp / "mlp.safetensors"))
    >>> run = runs.pretrained_run(config, tmp / "pretrained")
    >>> sorted(p.name for p in run.iterdir())
    ['history.json', 'logits.npz', 'model.safetensors', 'run.json']
    """
    if config.checkpoint is None:
        raise TrainingError("checkpoint: a pretrained run needs a checkpoint file")
    bundle, model, loss = build(config, need_train=False)
    dev = config.torch_device
    if bundle.val is None:
        raise TrainingError(
            f"data: '{config.data}' has no validation split to calibrate on; hold one out "
            "(val_size=N in the data spec)"
        )
    record = provenance(config, dev, bundle.augment, loss) | {
        "pretrained": str(Path(config.checkpoint).resolve())
    }
    write_run(Path(out), model.to(dev).eval(), bundle, dev, [], record)
    return Path(out)


@documented(
    RUN_PARAMETERS, "TrainResult or None: the trained run's result; None for a given network."
)
def stage_one(
    config: TrainConfig,
    out: str | os.PathLike,
    *,
    given: bool,
    resume: bool = False,
    progress: Callable[[int, int, dict[str, float] | None], None] | None = None,
) -> TrainResult | None:
    """Stage 1 of a run in ``out``, which a stage-2 method then calibrates
    (:func:`calibrate_run`): a ``given`` network (``config.checkpoint``, pretrained)
    evaluated as it is (:func:`pretrained_run`; returns None), else a network trained as
    ``config`` says (from the checkpoint's weights where one is given; ``resume`` and
    ``progress`` as :func:`~calibkit.training.train` takes them). ``calibkit train`` and
    the bench harness both start here.

    Examples
    --------
    >>> from calibkit import runs
    >>> from calibkit.training import TrainConfig
    >>> tmp = getfixture("tmp_path")
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> _ = runs.stage_one(config, tmp / "ce", given=False)  # trains; writes the run folder
    >>> sorted(p.name for p in (tmp / "ce").iterdir())
    ['checkpoint.pt', 'history.json', 'logits.npz', 'model.safetensors', 'run.json']
    """
    if given:
        pretrained_run(config, out)
        return None
    return train(config, out, resume=resume, progress=progress)
