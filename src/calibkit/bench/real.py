"""The ``real`` preset: the five papers' methods on real networks and real images, on CPU.

``calibkit bench real --data-root DIR`` reads the real material described in
``DIR/README.md``: ``logits/zoo/*.npz`` (test logits
of 28 networks), ``cifar10-jpeg/`` (the CIFAR-10 images as JPEG class-folder trees, and the
first 1,017 test images byte-exact) and ``weights/resnet{20,32,44,56}-*.th`` (pretrained
CIFAR-10 ResNets). Five parts, each a set of units of work kept in the SQLite store (a
killed run resumes with the units still missing):

1. ``posthoc/<network>/<seed>``: every calibrator on a stratified 50/50 split of each zoo
   network's test logits, per seed (Kull et al. 2019, Tables 3-4): ECE, classwise ECE,
   NLL, Brier, accuracy and refinement AUROC (2., the Dark Side study) per calibrator.
2. ``images/resnet<D>``: each pretrained ResNet's logits on the JPEG test tree and on the
   byte-exact images and their JPEG versions (cached as ``images-resnet<D>.npz``).
3. ``clamp/resnet<D>/<seed>``: Neural Clamping against TS, TS-grid, vector scaling, MS-ODIR
   and Dir-ODIR on a stratified calibration/test split of the JPEG test images.
4. ``maccal/<row>``: MaC-Cal stage 2 on ResNet-20's frozen features of the 50,000 JPEG
   training images (cached once as ``features-resnet20.npz``): Table 5's rows and the γ
   sweep of Fig. 7.
5. ``shift/resnet<D>/<seed>``: the byte-exact images against their JPEG versions (a natural
   shift for networks trained on the original pixels): ECE, refinement AUROC, accuracy, and
   temperature scaling fitted on half of the exact images, applied to both.

``SETTINGS`` holds every size and count, chosen so that the preset finishes in about 20
minutes on 2 CPU cores; docs/real.md states them beside the numbers.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import data, models, posthoc
from ..allocator import retain_freed_memory
from ..data.files import IMAGENET_STATS, folder
from ..io import save_npz
from ..metrics import evaluate
from ..posthoc.clamping import ClampingDivergedError, NeuralClamping
from ..posthoc.compare import stratified_split
from ..posthoc.maccal import ABLATIONS, MacCal
from ..registry import parse_spec
from .anomalies import check_calibrated
from .store import ALL, Store

METRICS = ("accuracy", "ece", "classwise_ece", "nll", "brier", "refinement_auroc")
#: the cross-validated calibrators, on a coarser grid than their defaults (3 folds, 3 × 3):
#: their full 5-fold 7 × 7 search takes 70-80 s per fit on one core (issue 14), 28 networks
#: × 5 seeds of it would take hours
COARSE = {
    "dir-l2": "dir-l2:folds=3,lambdas=[0.01,1,100]",
    "ms-odir": "ms-odir:folds=3,lambdas=[0.01,1,100],mus=[0.01,1,100]",
    "dir-odir": "dir-odir:folds=3,lambdas=[0.01,1,100],mus=[0.01,1,100]",
}


#: calibrators left out on 100 classes: unregularised full maps (10,100 parameters on 5,000
#: samples) interpolate the calibration half (flagged by the checks, e.g. matrix scaling on
#: cifar100_resnet20: accuracy 68.7 % → 49.7 %), and Dir-L2 costs 23 s per split
FULL_MAPS = ("matrix", "dir-l2")
#: cross-validated calibrators whose 100-class fits (25-40 s per split) run on seed 0 only
SLOW_ON_100 = ("ms-odir", "dir-odir")


@dataclass
class Settings:
    """Sizes and counts of the preset (all documented in docs/real.md)."""

    zoo_seeds: int = 5
    zoo_fraction: float = 0.5
    posthoc: list[str] = field(
        default_factory=lambda: [COARSE.get(n, n) for n in posthoc.REGISTRY.names()]
    )
    depths: tuple[int, ...] = (20, 32, 44, 56)
    clamp_calibration: int = 500
    clamp_test: int = 2000
    clamp_seeds: int = 1
    clamp: dict[str, Any] = field(
        default_factory=lambda: {"epochs": 4, "batch_size": 100, "gamma_pool": (0.0, 1.0, 2.0)}
    )
    clamp_baselines: tuple[str, ...] = (
        "ts",
        "ts-grid",
        "vector",
        COARSE["ms-odir"],
        COARSE["dir-odir"],
    )
    maccal_depth: int = 20
    maccal_epochs: int = 20
    maccal_val: int = 5000
    maccal_gammas: tuple[float, ...] = (0.5, 0.7, 0.8, 0.95, 0.99)
    shift_seeds: int = 5

    def zoo_methods(self, classes: int, seed: int) -> list[str]:
        """The calibrators of one zoo split (see ``FULL_MAPS`` and ``SLOW_ON_100``)."""
        if classes <= 10:
            return list(self.posthoc)
        names = [spec_name(m) for m in self.posthoc]
        return [
            m
            for m, n in zip(self.posthoc, names, strict=True)
            if n not in FULL_MAPS and (seed == 0 or n not in SLOW_ON_100)
        ]


SETTINGS = Settings()


@dataclass
class Unit:
    """One unit of work: its store key and what it needs."""

    key: str
    part: str
    args: dict[str, Any]


def check_root(root: str | Path) -> Path:
    """The data root, with every part the preset reads present (one-line error otherwise)."""
    base = Path(root).expanduser()
    need = [
        "logits/zoo",
        "cifar10-jpeg/train",
        "cifar10-jpeg/test",
        "cifar10-jpeg/test_exact_first1017.npz",
        "cifar10-jpeg/test_labels_canonical.npy",
        "weights",
    ]
    missing = [p for p in need if not (base / p).exists()]
    if missing:
        raise ValueError(
            f"--data-root {base}: missing {', '.join(missing)} (expected layout: "
            "logits/zoo/*.npz, cifar10-jpeg/{train,test}, weights/resnet*.th)"
        )
    return base


def weights_of(base: Path, depth: int) -> Path:
    found = sorted((base / "weights").glob(f"resnet{depth}-*.th"))
    if not found:
        raise ValueError(f"{base / 'weights'}: no resnet{depth}-*.th checkpoint")
    return found[0]


def plan(base: Path, s: Settings = SETTINGS) -> list[Unit]:
    """Every unit of the preset, in the order they run."""
    units = [Unit(f"images/resnet{d}", "images", {"depth": d}) for d in s.depths]
    units += [
        Unit(f"shift/resnet{d}/{seed}", "shift", {"depth": d, "seed": seed})
        for d in s.depths
        for seed in range(s.shift_seeds)
    ]
    units += [
        Unit(f"clamp/resnet{d}/{seed}", "clamp", {"depth": d, "seed": seed})
        for d in s.depths
        for seed in range(s.clamp_seeds)
    ]
    rows = {name: cfg for name, cfg in ABLATIONS.items()}
    rows |= {f"gamma={g:g}": {"gamma": g} for g in s.maccal_gammas}
    units += [
        Unit(f"maccal/{name}", "maccal", {"row": name, "config": cfg}) for name, cfg in rows.items()
    ]
    for path in sorted((base / "logits" / "zoo").glob("*.npz")):
        units += [
            Unit(f"posthoc/{path.stem}/{seed}", "posthoc", {"file": str(path), "seed": seed})
            for seed in range(s.zoo_seeds)
        ]
    return units


def _measure(z: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an undefined AUROC is NaN, kept
        r = evaluate(z, y, optimal=False, smooth=False)
    return {m: float(r.metrics[m]) for m in METRICS}


def _fit_all(
    specs: list[str],
    z_cal: torch.Tensor,
    y_cal: torch.Tensor,
    z_test: torch.Tensor,
    y_test: torch.Tensor,
) -> tuple[list[tuple], list[tuple]]:
    """Metrics rows (split, calibrator, size, metric, value) and anomalies of every method."""
    plain = _measure(z_test, y_test)
    rows = [("test", "uncalibrated", ALL, m, v) for m, v in plain.items()]
    anomalies = []
    for spec in specs:
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fit report and the anomaly checks carry it
            cal = posthoc.create(spec).fit(z_cal, y_cal)
        seconds = time.perf_counter() - started
        out = cal(z_test).double()
        after = _measure(out, y_test)
        rows += [("test", spec, ALL, m, v) for m, v in after.items()]
        rows.append(("test", spec, ALL, "seconds", seconds))
        temperature = getattr(cal, "temperature_", None)
        if temperature is not None:
            rows.append(("test", spec, ALL, "temperature", float(temperature)))
        found = check_calibrated(
            plain,
            after,
            logits_before=z_test,
            logits_after=out,
            preserves_argmax=cal.preserves_argmax,
            temperature=None if temperature is None else float(temperature),
            converged=cal.fit_report_.converged,
        )
        anomalies += [(spec, ALL, kind, detail) for kind, detail in found]
    return rows, anomalies


def _split(y: torch.Tensor, fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    cal, test = stratified_split(y.numpy(), fraction, seed)
    return torch.from_numpy(cal), torch.from_numpy(test)


def run_posthoc(unit: Unit, s: Settings) -> dict[str, Any]:
    """Part 1: one zoo network, one stratified split, every calibrator."""
    with np.load(unit.args["file"]) as f:
        z, y = torch.from_numpy(f["logits"]).double(), torch.from_numpy(f["labels"]).long()
    cal, test = _split(y, s.zoo_fraction, unit.args["seed"])
    methods = s.zoo_methods(z.shape[1], unit.args["seed"])
    rows, anomalies = _fit_all(methods, z[cal], y[cal], z[test], y[test])
    name = Path(unit.args["file"]).stem
    return {
        "dataset": name.split("_")[0],
        "model": name.split("_", 1)[1],
        "metrics": rows,
        "anomalies": anomalies,
    }


class Images:
    """The JPEG CIFAR-10 tree (decoded once), the byte-exact test images and their JPEG
    versions, all as uint8 (N, 3, 32, 32), with the pretrained ResNets' normalisation."""

    def __init__(self, base: Path) -> None:
        root = base / "cifar10-jpeg"
        # called directly, not through a spec string: a data root may hold "," or "="
        self.bundle = folder(
            root=root, mean=IMAGENET_STATS[0], std=IMAGENET_STATS[1], val_size=0, in_memory=True
        )
        with np.load(root / "test_exact_first1017.npz") as f:
            self.exact = torch.from_numpy(f["images"]).permute(0, 3, 1, 2).contiguous()
            self.exact_y = torch.from_numpy(f["labels"]).long()
        canonical = np.load(root / "test_labels_canonical.npy")
        # official test image j is test/<class of j>/<rank of j within its class>.jpg; the
        # tree's test split lists classes in order and each class's files by rank
        starts = np.concatenate([[0], np.cumsum(np.bincount(canonical, minlength=10))[:-1]])
        rank = np.zeros(len(canonical), np.int64)
        seen = np.zeros(10, np.int64)
        for j, c in enumerate(canonical):
            rank[j], seen[c] = starts[c] + seen[c], seen[c] + 1
        self.jpeg_of_exact = torch.from_numpy(rank[: len(self.exact)])
        if not torch.equal(self.bundle.test.y[self.jpeg_of_exact], self.exact_y):
            raise ValueError(f"{root}: the JPEG tree's test labels do not match the exact images")

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        return data.to_inputs(x, self.bundle)


def clamp_split(y: torch.Tensor, s: Settings, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(calibration, test) positions in the JPEG test tree for Neural Clamping's comparison:
    stratified, ``clamp_calibration`` and ``clamp_test`` images."""
    n = len(y)
    cal, rest = _split(y, s.clamp_calibration / n, seed)
    keep = stratified_split(y[rest].numpy(), s.clamp_test / len(rest), seed)[0]
    return cal, rest[torch.from_numpy(keep)]


def features_of(net: nn.Module, images: Images, x: Any, idx: torch.Tensor) -> torch.Tensor:
    """(n, F) pooled features of stored images ``x[idx]``, in batches of 500."""
    net.eval()
    with torch.no_grad():
        return torch.cat(
            [
                net.forward_features(images.inputs(x[idx[i : i + 500]]))
                for i in range(0, len(idx), 500)
            ]
        )


def run_images(unit: Unit, images: Images, base: Path, out: Path, s: Settings) -> dict[str, Any]:
    """Part 2: a pretrained ResNet's features on the images the later parts use (the JPEG
    test images of the Neural Clamping splits, all of them and the training images for the
    MaC-Cal network) and on the exact images, cached with the head's weights."""
    d = unit.args["depth"]
    net = models.create(f"resnet{d}", checkpoint=weights_of(base, d))
    y = images.bundle.test.y
    if d == s.maccal_depth:
        used = torch.arange(len(y))
    else:
        parts = [images.jpeg_of_exact] + [
            torch.cat(clamp_split(y, s, k)) for k in range(s.clamp_seeds)
        ]
        used = torch.cat(parts).unique()
    f_test = torch.full((len(y), net.num_features), float("nan"))
    f_test[used] = features_of(net, images, images.bundle.test.x, used)
    exact = features_of(net, images, images.exact, torch.arange(len(images.exact)))
    arrays = {
        "jpeg_test": f_test.numpy(),
        "exact": exact.numpy(),
        "head_weight": net.head.weight.detach().numpy(),
        "head_bias": net.head.bias.detach().numpy(),
    }
    if d == s.maccal_depth:
        x = images.bundle.train.x
        arrays["train"] = features_of(net, images, x, torch.arange(len(x))).numpy()
    path = save_npz(out / f"features-resnet{d}.npz", **arrays)
    z = _cached(out, d)
    rows = [
        ("exact", "uncalibrated", ALL, m, v)
        for m, v in _measure(z["exact"], images.exact_y).items()
    ]
    if d == s.maccal_depth:
        rows += [
            ("jpeg-test", "uncalibrated", ALL, m, v) for m, v in _measure(z["jpeg_test"], y).items()
        ]
    return {
        "dataset": "cifar10-jpeg",
        "model": f"resnet{d}",
        "metrics": rows,
        "artefacts": {"features": str(path)},
    }


def _cached(out: Path, depth: int) -> dict[str, torch.Tensor]:
    """Logits (``exact``, ``jpeg_test``: NaN rows for images not computed) and features."""
    with np.load(out / f"features-resnet{depth}.npz") as f:
        arrays = {k: torch.from_numpy(f[k]) for k in f.files}
    w, b = arrays["head_weight"], arrays["head_bias"]
    logits = {k: (arrays[k] @ w.T + b).double() for k in ("exact", "jpeg_test")}
    return logits | {"features": arrays}


def run_shift(unit: Unit, images: Images, out: Path, s: Settings) -> dict[str, Any]:
    """Part 5: exact images against their JPEG versions; TS fitted on half of the exact."""
    d, seed = unit.args["depth"], unit.args["seed"]
    z = _cached(out, d)
    exact, jpeg = z["exact"], z["jpeg_test"][images.jpeg_of_exact]
    y = images.exact_y
    cal, test = _split(y, 0.5, seed)
    ts = posthoc.create("ts").fit(exact[cal], y[cal])
    rows = [("exact", "uncalibrated", ALL, m, v) for m, v in _measure(exact[test], y[test]).items()]
    rows += [
        ("exact-jpeg", "uncalibrated", ALL, m, v) for m, v in _measure(jpeg[test], y[test]).items()
    ]
    rows += [("exact", "ts", ALL, m, v) for m, v in _measure(ts(exact[test]), y[test]).items()]
    rows += [("exact-jpeg", "ts", ALL, m, v) for m, v in _measure(ts(jpeg[test]), y[test]).items()]
    rows.append(("exact", "ts", ALL, "temperature", float(ts.temperature_)))
    return {"dataset": "cifar10-exact", "model": f"resnet{d}", "metrics": rows}


def run_clamp(unit: Unit, images: Images, base: Path, out: Path, s: Settings) -> dict[str, Any]:
    """Part 3: Neural Clamping and the post-hoc baselines on one stratified split of the
    JPEG test images (calibration and test sizes from the settings)."""
    d, seed = unit.args["depth"], unit.args["seed"]
    y_all = images.bundle.test.y
    cal, test = clamp_split(y_all, s, seed)
    z = _cached(out, d)["jpeg_test"]
    rows, anomalies = _fit_all(list(s.clamp_baselines), z[cal], y_all[cal], z[test], y_all[test])
    net = models.create(f"resnet{d}", checkpoint=weights_of(base, d))
    bounds = data.input_bounds(images.bundle)
    nc = NeuralClamping(seed=seed, **s.clamp)
    x_cal = images.inputs(images.bundle.test.x[cal])
    started = time.perf_counter()
    try:
        nc.fit(net, x_cal, y_all[cal], input_range=bounds)
    except ClampingDivergedError as err:
        anomalies.append(("neural-clamping", ALL, "diverged", str(err)))
        return {
            "dataset": "cifar10-jpeg",
            "model": f"resnet{d}",
            "metrics": rows,
            "anomalies": anomalies,
        }
    seconds = time.perf_counter() - started
    with torch.no_grad():
        z_nc = torch.cat(
            [
                nc(images.inputs(images.bundle.test.x[test[i : i + 500]]))
                for i in range(0, len(test), 500)
            ]
        ).double()
    plain = {m: v for _, c, _, m, v in rows if c == "uncalibrated"}
    after = _measure(z_nc, y_all[test])
    rows += [("test", "neural-clamping", ALL, m, v) for m, v in after.items()]
    rows += [
        ("test", "neural-clamping", ALL, "seconds", seconds),
        ("test", "neural-clamping", ALL, "temperature", float(nc.temperature_)),
        ("test", "neural-clamping", ALL, "gamma", nc.gamma_),
    ]
    found = check_calibrated(
        plain,
        after,
        logits_before=z[test],
        logits_after=z_nc,
        preserves_argmax=False,
        temperature=float(nc.temperature_),
    )
    anomalies += [("neural-clamping", ALL, kind, detail) for kind, detail in found]
    return {
        "dataset": "cifar10-jpeg",
        "model": f"resnet{d}",
        "metrics": rows,
        "anomalies": anomalies,
    }


def run_maccal(unit: Unit, images: Images, base: Path, out: Path, s: Settings) -> dict[str, Any]:
    """Part 4: one MaC-Cal stage-2 configuration on the cached features. The pretrained head
    and TS on it are measured with every unit (they are the baselines of the table)."""
    f = _cached(out, s.maccal_depth)["features"]
    y_train, y_test = images.bundle.train.y, images.bundle.test.y
    train, val = data.hold_out(data.Split(f["train"], y_train), s.maccal_val, 0)
    identity = models.Classifier(nn.Identity(), f["train"].shape[1], 10)
    method = MacCal(**({"epochs": s.maccal_epochs} | unit.args["config"]))
    method.fit(identity, train.x, train.y, val=(val.x, val.y))
    history = method.history()
    with torch.no_grad():
        z_test = method(f["jpeg_test"]).double()
        z_plain = (f["jpeg_test"] @ f["head_weight"].T + f["head_bias"]).double()
        z_val_plain = (val.x @ f["head_weight"].T + f["head_bias"]).double()
    ts = posthoc.create("ts").fit(z_val_plain, val.y)
    rows = [("test", "maccal", ALL, m, v) for m, v in _measure(z_test, y_test).items()]
    rows += [("test", "pretrained", ALL, m, v) for m, v in _measure(z_plain, y_test).items()]
    rows += [("test", "pretrained+ts", ALL, m, v) for m, v in _measure(ts(z_plain), y_test).items()]
    rows.append(("test", "maccal", ALL, "final_q", float(history[-1]["q"])))
    return {
        "dataset": "cifar10-jpeg",
        "model": f"resnet{s.maccal_depth}",
        "metrics": rows,
        "history": [(2, i + 1, h) for i, h in enumerate(history)],
        "spec": method.checked(),
    }


def _posthoc_worker(unit: Unit, s: Settings) -> tuple[dict[str, Any], float]:
    retain_freed_memory()  # a spawned worker starts with glibc's defaults
    torch.set_num_threads(1)
    started = time.perf_counter()
    return run_posthoc(unit, s), time.perf_counter() - started


def run_real(
    root: str | Path,
    out: str | Path,
    *,
    settings: Settings = SETTINGS,
    workers: int = 2,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Run every unit of the preset not yet in the store ``out/results.sqlite``; returns
    {"done", "skipped", "seconds_by_part"}."""
    began = time.perf_counter()
    base = check_root(root)
    out = Path(out)
    store = Store(out / "results.sqlite")
    store.set_meta("preset", "real")
    store.set_meta("settings", asdict(settings))
    work = out / "real"
    work.mkdir(parents=True, exist_ok=True)
    units = plan(base, settings)
    done = store.done()
    todo = [u for u in units if u.key not in done]
    seconds: dict[str, float] = {}
    finished = len(units) - len(todo)

    def write(unit: Unit, result: dict[str, Any], took: float) -> None:
        nonlocal finished
        store.write_run(
            {
                "key": unit.key,
                "spec": result.get("spec", unit.args),
                "dataset": result["dataset"],
                "model": result["model"],
                "method": unit.part,
                "seed": unit.args.get("seed"),
                "seconds": took,
                "started": time.time() - took,
                "artefacts": result.get("artefacts"),
            },
            result["metrics"],
            history=result.get("history", ()),
            anomalies=result.get("anomalies", ()),
        )
        seconds[unit.part] = seconds.get(unit.part, 0.0) + took
        finished += 1
        if progress:
            progress(finished, len(units), unit.key)

    local = [u for u in todo if u.part != "posthoc"]
    if local:
        started = time.perf_counter()
        images = Images(base)
        seconds["decode"] = time.perf_counter() - started
        for unit in local:
            started = time.perf_counter()
            if unit.part == "images":
                result = run_images(unit, images, base, work, settings)
            elif unit.part == "shift":
                result = run_shift(unit, images, work, settings)
            elif unit.part == "clamp":
                result = run_clamp(unit, images, base, work, settings)
            else:
                result = run_maccal(unit, images, base, work, settings)
            write(unit, result, time.perf_counter() - started)
    zoo = [u for u in todo if u.part == "posthoc"]
    if zoo:
        ctx = get_context("spawn")
        with ProcessPoolExecutor(max(1, workers), mp_context=ctx) as pool:
            futures = {pool.submit(_posthoc_worker, u, settings): u for u in zoo}
            for future, unit in futures.items():
                write(unit, *future.result())
    if todo:
        store.set_meta("wall_seconds", time.perf_counter() - began)
    return {"done": len(todo), "skipped": len(units) - len(todo), "seconds_by_part": seconds}


def spec_name(spec: str) -> str:
    """A calibrator's name without its settings (``dir-odir:folds=3,…`` → ``dir-odir``)."""
    return parse_spec(spec).name
