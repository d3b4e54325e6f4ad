"""One run of a sweep: train (stage 1, then stage 2 if any), then every post-hoc method at
every calibration-set size, measured on every evaluation split. Returns the rows the store
keeps; the run folder (logits, checkpoints) stays on disk as the run's artefacts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import data, posthoc
from ..metrics import evaluate
from ..posthoc.clamping import ClampingDivergedError, NeuralClamping
from ..registry import parse_spec
from ..training import train
from ..training.maccal import stage2_config
from ..training.runs import load_run, run_stage2
from ..training.trainer import predict
from .anomalies import check_calibrated
from .spec import RunSpec
from .store import ALL

METRICS = ("accuracy", "ece", "aece", "mce", "classwise_ece", "nll", "brier", "entropy",
           "refinement_auroc")  # fmt: skip


def _subset(n: int, size: int | None, seed: int) -> torch.Tensor:
    if size is None or size >= n:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:size]


def _measure(
    z: torch.Tensor, y: torch.Tensor | None, ood: dict[str, torch.Tensor]
) -> dict[str, float]:
    out: dict[str, float] = {}
    if y is not None:
        r = evaluate(z, y, optimal=False, smooth=False)
        out = {m: r.metrics[m] for m in METRICS}
    for name, z_out in ood.items():
        r = evaluate(z, y, ood_scores=z_out, optimal=False, smooth=False)
        out[f"ood_auroc:{name}"] = r.metrics["ood_auroc"]
        out[f"ood_fpr95:{name}"] = r.metrics["ood_fpr95"]
    return out


def execute(run: RunSpec, root: Path) -> dict[str, Any]:
    """Train and evaluate ``run`` in ``root/runs/<key>``; the store's rows for it."""
    started = time.time()
    out = root / "runs" / run.key
    stage1 = out / "stage1" if run.stage2 else out
    config = run.train_config()
    resume = (stage1 / "checkpoint.pt").exists()
    if not (stage1 / "run.json").exists():
        train(config, stage1, resume=resume)
    history = [(1, i + 1, h) for i, h in enumerate(_json(stage1 / "history.json"))]
    if run.stage2:
        s2 = run_stage2(stage1, stage2_config(run.stage2), out, device="auto")
        history += [(2, i + 1, h) for i, h in enumerate(s2)]
    _, bundle, model, info = load_run(out)
    device = next(model.parameters()).device
    splits = {k: v for k, v in bundle.splits().items() if k != "train"}
    with np.load(out / "logits.npz") as saved:  # written by the run: no second forward pass
        logits = {k: torch.from_numpy(saved[f"logits_{k}"]) for k in splits}
    labels = {k: v.y for k, v in splits.items()}
    zv, yv = logits["val"], labels["val"]
    ood_names = [k for k in logits if k.startswith("ood_")]
    metrics: list[tuple[str, str, int, str, float]] = []
    curves: list[tuple[str, str, str, Any]] = []
    anomalies: list[tuple[str, int, str, str]] = []

    def record(calibrator: str, size: int | None, outputs: dict[str, torch.Tensor]) -> dict:
        """Measure every split; the test split's metrics."""
        ood = {k: outputs[k] for k in ood_names}
        test: dict[str, float] = {}
        for split, z in outputs.items():
            if split.startswith("ood_") or split == "val":
                continue
            for m, v in _measure(z, labels[split], ood if split == "test" else {}).items():
                metrics.append((split, calibrator, size or ALL, m, float(v)))
                if split == "test":
                    test[m] = float(v)
        if size is None:
            r = evaluate(
                outputs["test"], labels["test"], optimal=calibrator == "uncalibrated", smooth=False
            )
            curves.append(("test", calibrator, "bins", r.bins.to_dict()))
            if calibrator == "uncalibrated":
                metrics.append(("test", calibrator, ALL, "optimal_ece", r.metrics["optimal_ece"]))
                curves.append(
                    ("test", calibrator, "confidence", _densities(outputs["test"], labels["test"]))
                )
        return test

    plain = record("uncalibrated", None, logits)
    for spec in run.posthoc:
        name = parse_spec(spec)[0]
        for size in run.calibration_sizes:
            idx = _subset(len(yv), size, run.seed)
            converged = None
            try:
                if name == "neural-clamping":
                    outputs, temperature = _clamp(
                        spec, model, bundle, splits, idx, device, run.seed
                    )
                    keeps = False
                else:
                    cal = posthoc.create(spec).fit(zv[idx], yv[idx])
                    outputs = {k: cal(z) for k, z in logits.items()}
                    temperature = getattr(cal, "temperature_", None)
                    converged = cal.fit_report_.converged
                    keeps = cal.preserves_argmax
            except ClampingDivergedError as err:
                anomalies.append((spec, size or ALL, "diverged", str(err)))
                continue
            calibrated = record(spec, size, outputs)
            if temperature is not None:
                metrics.append(("test", spec, size or ALL, "temperature", float(temperature)))
            found = check_calibrated(
                plain, calibrated, logits_before=logits["test"], logits_after=outputs["test"],
                preserves_argmax=keeps,
                temperature=None if temperature is None else float(temperature),
                converged=converged,
            )  # fmt: skip
            anomalies += [(spec, size or ALL, kind, detail) for kind, detail in found]
    if run.record and bundle.train is not None:
        curves += _analysis(stage1, run.train["epochs"])
    return {
        "run": {
            "key": run.key,
            "spec": run.__dict__ | {"key": run.key},
            "dataset": run.dataset,
            "model": run.model,
            "method": run.method,
            "seed": run.seed,
            "status": "done",
            "started": started,
            "finished": time.time(),
            "seconds": time.time() - started,
            "provenance": info,
            "artefacts": {"folder": str(out), "logits": str(out / "logits.npz")},
        },
        "metrics": metrics,
        "history": history,
        "curves": curves,
        "anomalies": anomalies,
    }


def _json(path: Path) -> list:
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


def _clamp(spec, model, bundle, splits, idx, device, seed) -> tuple[dict[str, torch.Tensor], float]:
    _, kwargs = parse_spec(spec)
    bounds = data.input_bounds(bundle)
    if kwargs.get("init") == "data" and bounds is None:
        kwargs["init"] = "random"  # no feasible range for this data: the paper's default start
    nc = NeuralClamping(model, input_range=bounds, **({"seed": seed} | kwargs))
    val = splits["val"]
    nc.fit(data.to_inputs(val.x[idx], bundle, device), val.y[idx].to(device))
    return {k: predict(nc, v, bundle, device) for k, v in splits.items()}, float(nc.temperature_)
