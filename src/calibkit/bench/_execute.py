"""One run of a sweep: train (stage 1, then stage 2 if any), then every post-hoc method at
every calibration-set size, measured on every evaluation split. Returns the rows the store
keeps; the run folder (logits, checkpoints) stays on disk as the run's artefacts.
"""

from __future__ import annotations

import json
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import posthoc
from .._outputs import file_lock, inside, write_text
from ..io import load_split
from ..metrics import EvaluationResult, evaluate, ood_auroc, ood_fpr95, trusted
from ..metrics.internal import bootstrap_replicates
from ..posthoc import CalibrationWarning, Evidence
from ..posthoc.internal import FitDivergedError, check_fit_data, check_method, stratified_split
from ..runs import calibrate_run, run_evidence, stage_one
from ..training.internal import training_rate
from ._runspec import RunSpec
from ._store import ALL
from ._verdicts import NESTED_METRICS

#: bootstrap replicates of the test split kept per run and calibrator, for the verdicts'
#: nested bootstrap over test rows (resample seed 0 for every run: paired across runs)
REPLICATES = 200


def _subset(n: int, size: int | None, seed: int) -> torch.Tensor:
    if size is None or size >= n:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:size]


#: what a bench run stores per split and calibrator: the metrics its report and verdicts read
STORED = (
    "accuracy",
    "ece",
    "aece",
    "mce",
    "classwise_ece",
    "nll",
    "brier",
    "entropy",
    "refinement_auroc",
)


def _measure(
    z: torch.Tensor, y: torch.Tensor, ood: dict[str, torch.Tensor], optimal: bool
) -> tuple[dict[str, float], EvaluationResult]:
    """The harness's metrics of one split from one evaluation (with optimal ECE where asked),
    OOD AUROC and FPR95 against each OOD split's scores, and the evaluation itself."""
    r = evaluate(z, y, optimal=optimal, smooth=False)
    out = {m: r.metrics[m] for m in STORED}
    for name, z_out in ood.items():
        out[f"ood_auroc:{name}"] = ood_auroc(z, z_out)
        out[f"ood_fpr95:{name}"] = ood_fpr95(z, z_out)
    if optimal:
        out["optimal_ece"] = r.metrics["optimal_ece"]
    return out, r


#: The phases a run's time is split into (``provenance["phases"]``, seconds): stage 1
#: (training, or evaluating a given network), a stage-2 method (MaC-Cal), model-level fits
#: (Neural Clamping), every other post-hoc fit, and measuring every split of every calibrator
PHASES = ("train", "stage2", "model_fit", "posthoc", "measure")


@contextmanager
def _phase(phases: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        phases[name] += time.perf_counter() - start


def execute(
    run: RunSpec, root: Path, report: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Train and evaluate ``run``; the store's rows for it (:func:`_execute`). ``report``
    receives a phrase at each phase of the run and at the end of each training epoch (the
    bench's progress lines show it). The run checks each calibrator on its test split and
    stores what it finds; the :class:`~calibkit.posthoc._anomalies.CalibrationWarning` of each
    fit's calibration-split checks and of stage 2 (kept in its run.json) is not printed from
    the workers."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return _execute(run, root, report or (lambda text: None))


def _training_progress(name: str, report: Callable[[str], None]):
    """A trainer's progress callback that reports each epoch's end."""

    def progress(step: int, total: int, record: dict | None) -> None:
        if record is not None:
            report(f"{name}: training, epoch {record['epoch']}, step {step}/{total}")

    return progress


def _execute(run: RunSpec, root: Path, report: Callable[[str], None]) -> dict[str, Any]:
    """Train and evaluate ``run``; the store's rows for it.

    Stage 1 is trained in ``root/train/<training key>``, shared by every run with the same
    training settings (CE and MaC-Cal on CE's networks train one network per seed, not two;
    a file lock makes a second worker wait for the first); a pretrained checkpoint is
    evaluated there instead of trained. A stage-2 method writes its calibrated run to
    ``root/runs/<key>``. A logits file needs no folder: its rows are split into calibration
    and test halves in memory. Every calibrator's fit time (fit and apply, seconds) is kept as
    the metric ``fit_seconds``, and a post-hoc method's per-epoch history (Neural Clamping's
    objective) as the curve ``fit_history``."""
    started = time.time()
    name = f"{run.method} seed {run.seed}"
    phases: dict[str, float] = defaultdict(float)
    if run.logits is not None:
        evidence, info = _file_evidence(run.logits, run.calibration_fraction or 0.5, run.seed)
        history: list = []
        throughput: dict[str, Any] = {}
        artefacts = {"logits": run.logits}
    else:
        stage1 = inside(root, "train", run.training_key)  # no link planted in the folder
        out = inside(root, "runs", run.key) if run.stage2 else stage1
        rate = stage1 / "throughput.json"  # measured by the process that trains the network
        # checked once here (specs, device); the run's folders are then read with it
        config = run.train_config().check()
        device = config.torch_device
        with file_lock(stage1.with_suffix(".lock")):
            if not (stage1 / "run.json").exists():
                report(f"{name}: training")
                with _phase(phases, "train"):
                    result = stage_one(
                        config,
                        stage1,
                        given=run.checkpoint is not None,
                        resume=(stage1 / "checkpoint.pt").exists(),
                        progress=_training_progress(name, report),
                    )
                if result is not None:
                    write_text(rate, json.dumps(training_rate(result)))
        throughput = json.loads(rate.read_text()) if rate.exists() else {}
        history = [(1, i + 1, h) for i, h in enumerate(_json(stage1 / "history.json"))]
        if run.stage2:  # any registered method, fitted on the stage-1 run into a new run
            if not (out / "run.json").exists():
                report(f"{name}: stage 2 ({run.stage2.name})")
                with _phase(phases, "stage2"):
                    method = posthoc.REGISTRY.seeded(run.stage2, run.seed)
                    calibrate_run(stage1, method, out, device=device, config=config)
            else:  # fitted with others (calibkit.bench._stage2): its share of their time
                phases["stage2"] += _json(out / "run.json")["calibration"].get("seconds", 0.0)
            history += [(2, i + 1, h) for i, h in enumerate(_json(out / "history.json"))]
        evidence, info = run_evidence(out, device, config=config)
        artefacts = {"folder": str(out), "logits": str(out / "logits.npz")}
    logits, labels = evidence.logits, evidence.labels
    yv = labels["val"]
    ood_names = [k for k in logits if k.startswith("ood_")]
    metrics: list[tuple[str, str, int, str, float]] = []
    curves: list[tuple[str, str, str, Any]] = []
    anomalies: list[tuple[str, int, str, str]] = []

    def record(calibrator: str, size: int | None, outputs: dict[str, torch.Tensor]) -> dict:
        """Measure every split, each evaluated once; the test split's metrics."""
        with _phase(phases, "measure"):
            return _record(calibrator, size, outputs)

    def _record(calibrator: str, size: int | None, outputs: dict[str, torch.Tensor]) -> dict:
        ood = {k: outputs[k] for k in ood_names}
        test: dict[str, float] = {}
        for split, z in outputs.items():
            if split.startswith("ood_") or split == "val":
                continue
            first = size is None and split == "test"  # the bins and curves of the full fit
            values, r = _measure(
                z,
                labels[split],
                ood if split == "test" else {},
                optimal=first and calibrator == "uncalibrated",
            )
            for m, v in values.items():
                metrics.append((split, calibrator, size or ALL, m, float(v)))
                if split == "test" and m != "optimal_ece":
                    test[m] = float(v)
            if first:
                curves.append(("test", calibrator, "bins", r.bins.to_dict()))
                reps = bootstrap_replicates(
                    trusted(z, labels[split]), None, NESTED_METRICS, REPLICATES
                )
                curves.append(
                    ("test", calibrator, "bootstrap", {m: v.tolist() for m, v in reps.items()})
                )
                if calibrator == "uncalibrated":
                    curves.append(("test", calibrator, "confidence", _densities(z, labels[split])))
        return test

    plain = record("uncalibrated", None, logits)
    # a size at least the calibration split's is the whole split, stored as such (once)
    sizes = list(
        dict.fromkeys(s if s is not None and s < len(yv) else None for s in run.calibration_sizes)
    )
    for parsed in run.posthoc:
        spec = str(parsed)  # the store's name of the calibrator: its text, as the spec gave it
        method = posthoc.REGISTRY.seeded(parsed, run.seed)
        for size in sizes:
            idx = _subset(len(yv), size, run.seed)
            on_model = posthoc.REGISTRY.factory(method.name).level == "model"
            fitting = "model_fit" if on_model else "posthoc"
            fit_started = time.perf_counter()
            report(f"{name}: fitting {method.name}" + (f" on {size}" if size else ""))
            try:
                with _phase(phases, fitting):
                    cal = posthoc.create(method).fit_on(evidence, idx)
                    outputs = cal.apply_on(evidence)
            except FitDivergedError as err:
                anomalies.append((spec, size or ALL, "diverged", str(err)))
                continue
            fit_seconds = time.perf_counter() - fit_started
            calibrated = record(spec, size, outputs)
            metrics.append(("test", spec, size or ALL, "fit_seconds", fit_seconds))
            if size is None and cal.history():  # an iterative fit's curve (Neural Clamping)
                curves.append(("val", spec, "fit_history", cal.history()))
            for quantity, value in cal.stored_values().items():  # e.g. a fitted temperature
                metrics.append(("test", spec, size or ALL, quantity, value))
            found = check_method(
                cal, plain, calibrated, logits_before=logits["test"], logits_after=outputs["test"]
            )
            anomalies += [(spec, size or ALL, kind, detail) for kind, detail in found]
    if run.record and run.trained:
        with _phase(phases, "measure"):
            curves += _analysis(stage1, run.train["epochs"])
    return {
        "run": run.store_row()
        | {
            "status": "done",
            "started": started,
            "finished": time.time(),
            "seconds": time.time() - started,
            "provenance": info | {"phases": {p: phases[p] for p in PHASES}} | throughput,
            "artefacts": artefacts,
        },
        "metrics": metrics,
        "history": history,
        "curves": curves,
        "anomalies": anomalies,
    }


def _file_evidence(path: str, fraction: float, seed: int) -> tuple[Evidence, dict[str, Any]]:
    """A logits file's rows split per class into calibration (``val``) and ``test`` halves
    (``fraction`` of each class calibrates; the same split as ``calibkit compare --split``)."""
    logits, labels = check_fit_data(*load_split(path, "test"))  # CSV labels, bad rows: checked
    logits, labels = logits.cpu(), labels.cpu()
    cal, test = stratified_split(labels.numpy(), fraction, seed)
    evidence = Evidence(
        logits={"val": logits[cal], "test": logits[test]},
        labels={"val": labels[cal], "test": labels[test]},
    )
    info = {"logits": str(Path(path).resolve()), "calibration_fraction": fraction}
    return evidence, info | {"n_classes": logits.shape[1]}


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _densities(z: torch.Tensor, y: torch.Tensor) -> dict[str, list[float]]:
    """Histograms (40 bins on [0, 1]) of top-label confidence, correct vs incorrect."""
    conf, pred = torch.softmax(z.double(), 1).max(1)
    ok = pred == y
    edges = np.linspace(0, 1, 41)
    return {
        "correct": np.histogram(conf[ok].numpy(), edges)[0].tolist(),
        "incorrect": np.histogram(conf[~ok].numpy(), edges)[0].tolist(),
    }


def _analysis(stage1: Path, last_epoch: int) -> list[tuple[str, str, str, Any]]:
    path = stage1 / "analysis.npz"
    if not path.exists():
        return []
    with np.load(path) as a:
        learned, max_logit = a["learned_epoch"], a["max_logit"]
        norms, brier = a[f"grad_norm_epoch{last_epoch}"], a[f"brier_epoch{last_epoch}"]
    take = np.random.default_rng(0).permutation(len(norms))[:500]
    return [
        (
            "train",
            "uncalibrated",
            "learned_epoch",
            {"learned": learned.tolist(), "max_logit": max_logit.tolist()},
        ),
        (
            "train",
            "uncalibrated",
            "grad_norm",
            {"grad_norm": norms[take].tolist(), "brier": brier[take].tolist()},
        ),
    ]
