"""The sixth round of the bad-input sweep (issue 65): the families that round found, each
case a command line or, where the input is a Python value no command line can carry (a
NumPy scalar, a tensor), a call of the library. Families (each name starts with "6 "):

- **schema**: a bench spec with one key set to an odd value, read by the spec reader that
  ``calibkit bench`` uses; the case expects what the shipped JSON Schema says (valid: read;
  invalid: refused in one line naming the key), so every disagreement between them counts
  as *silent*. Whole floats (``1.0``), which JSON Schema counts as integers, are left out,
  and a ``baseline`` that names no method is expected refused though the schema, which
  cannot see another key's names, passes it: docs/bench.md names both differences;
- **checkpoints**: files that hold no weights (NaN, inf, meta, sparse, a pickled model, a
  text, an empty file, a folder, a device, ``/proc``), given to ``calibkit train
  --checkpoint`` and to a spec's ``checkpoint``; a genuine torch and safetensors file and
  the legacy torch format are read;
- **numbers**: NumPy scalars where a setting takes a number (accepted, as the number they
  hold), and tensors, booleans and strings there (refused), at every kind of entry: the
  metric functions, ``evaluate``, the meter, the registries, ``TrainConfig``, the adapters;
- **adapters**: the adapters' and losses' own settings (``debias``, ``probs``, ``prefix``,
  ``diagram``, ``n_jobs``, ``bandwidth``) and ``kull_probabilities``' input;
- **doc**: ``--doc`` section names holding a comment's end, script tags and markup, written
  by the function ``calibkit bench --doc`` writes with; the Markdown must keep every
  payload inside its comment.

The race (a folder swapped for a link while a report is written) is not here: its timing
cannot be placed from a command line; tests/test_io.py places it deterministically.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from calibkit import losses, metrics, posthoc, schemas
from calibkit.training import TrainConfig

GOOD = {"datasets": [{"data": "digits", "models": ["cnn"]}], "methods": [{"loss": "ce"}]}

#: odd values, each set in turn at every place of a spec below
ODD: dict[str, Any] = {
    "null": None,
    "true": True,
    "-1": -1,
    "0": 0,
    "1": 1,
    "7": 7,
    "1.5": 1.5,
    "2**63": 2**63,
    "2**70": 2**70,
    "empty text": "",
    "bogus": "bogus",
    "all": "all",
    "ts": "ts",
    "empty list": [],
    "[1, 1]": [1, 1],
    "[all, all]": ["all", "all"],
    "[-1]": [-1],
    "[1.5]": [1.5],
    "[null]": [None],
    "[ts, ts]": ["ts", "ts"],
    "[2, 3]": [2, 3],
    "mapping": {"a": 1},
}

#: where each odd value is set: (place in the error, a function setting it on a spec)
PLACES: dict[str, Callable[[dict, Any], None]] = {
    "name": lambda s, v: s.__setitem__("name", v),
    "seeds": lambda s, v: s.__setitem__("seeds", v),
    "calibration_sizes": lambda s, v: s.__setitem__("calibration_sizes", v),
    "record": lambda s, v: s.__setitem__("record", v),
    "posthoc": lambda s, v: s.__setitem__("posthoc", v),
    "train": lambda s, v: s.__setitem__("train", v),
    "baseline": lambda s, v: s.__setitem__("baseline", v),
    "methods[0].name": lambda s, v: s["methods"][0].__setitem__("name", v),
    "methods[0].mixup": lambda s, v: s["methods"][0].__setitem__("mixup", v),
    "methods[0].posthoc": lambda s, v: s["methods"][0].__setitem__("posthoc", v),
    "datasets[0].seeds": lambda s, v: s["datasets"][0].__setitem__("seeds", v),
    "datasets[0].posthoc": lambda s, v: s["datasets"][0].__setitem__("posthoc", v),
    "train.epochs": lambda s, v: s.__setitem__("train", {"epochs": v}),
}


def _whole_float(value: Any) -> bool:
    if isinstance(value, float) and value.is_integer():
        return True
    return isinstance(value, list) and any(_whole_float(v) for v in value)


def _schema_cases(d: Path, call: Callable) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schemas.load("bench-spec"))
    from calibkit.bench import load_spec

    folder = d / "sixth-specs"
    folder.mkdir()
    for place, put in PLACES.items():
        for label, value in ODD.items():
            if _whole_float(value):
                continue
            spec = yaml.safe_load(yaml.safe_dump(GOOD))
            put(spec, value)
            path = folder / f"{place}-{label}.yaml".replace(" ", "_").replace("*", "^")
            path.write_text(yaml.safe_dump(spec))
            ok = validator.is_valid(spec)
            if place == "baseline" and value not in (None, "ce"):
                ok = False  # a name of another key's list: beyond a schema (docs/bench.md)
            call(
                lambda path=path: load_spec(path),
                ok,
                f"spec {place}: {label} (schema: {'valid' if ok else 'invalid'})",
                "schema",
                cause=None if ok else place.split("[")[0].split(".")[0],
            )


def _checkpoints(d: Path) -> dict[str, bool]:
    """Checkpoint files by name, each with whether it holds weights calibkit reads."""
    from safetensors.torch import save_file

    from calibkit import models

    folder = d / "sixth-checkpoints"
    folder.mkdir()
    state = models.create("cnn").state_dict()
    key = next(k for k in state if k.endswith("weight"))
    files: dict[str, bool] = {}

    def save(name: str, ok: bool, tensors: dict, legacy: bool = False) -> None:
        torch.save(tensors, folder / name, _use_new_zipfile_serialization=not legacy)
        files[str(folder / name)] = ok

    def changed(fn: Callable[[torch.Tensor], torch.Tensor]) -> dict:
        return {k: fn(v) if k == key else v for k, v in state.items()}

    def poisoned(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
        def put(t: torch.Tensor) -> torch.Tensor:
            t = t.clone()
            t.view(-1)[0] = value
            return t

        return put

    save("good.th", True, state)
    save("legacy.th", True, state, legacy=True)
    save("nan.th", False, changed(poisoned(math.nan)))
    save("inf.th", False, changed(poisoned(math.inf)))
    save("sparse.th", False, changed(lambda t: t.to_sparse()))
    save("meta.th", False, {k: torch.empty_like(v, device="meta") for k, v in state.items()})
    torch.save(torch.nn.Linear(2, 2), folder / "pickled-model.th")
    files[str(folder / "pickled-model.th")] = False
    save_file({k: v.contiguous() for k, v in state.items()}, folder / "good.safetensors")
    files[str(folder / "good.safetensors")] = True
    save_file(changed(poisoned(math.nan)), folder / "nan.safetensors")
    files[str(folder / "nan.safetensors")] = False
    (folder / "text.th").write_text("weights: none\n")
    (folder / "empty.th").write_bytes(b"")
    (folder / "truncated.th").write_bytes((folder / "good.th").read_bytes()[:200])
    (folder / "a-folder.th").mkdir()
    for name in ("text.th", "empty.th", "truncated.th", "a-folder.th"):
        files[str(folder / name)] = False
    files["/dev/null"] = False
    files["/proc/self/environ"] = False
    return files


def _checkpoint_cases(d: Path, case: Callable, call: Callable) -> None:
    from calibkit.bench import load_spec

    for path, ok in _checkpoints(d).items():
        name = Path(path).name
        argv = ["train", "--data", "digits", "--model", "cnn", "--epochs", "1"]
        argv += ["--checkpoint", path, "-o", str(d / f"sixth-run-{name}")]
        case("train", argv, ok, f"--checkpoint {name}", "checkpoints", (), None if ok else name)
        spec = {
            "datasets": [
                {"data": "digits", "models": [{"model": "cnn", "checkpoint": path}]},
            ],
            "methods": [{"loss": "ce"}],
        }
        spec_file = d / f"sixth-spec-{name}.yaml"
        spec_file.write_text(yaml.safe_dump(spec))
        # the spec reader sniffs the file; the tensors are read when a run loads it
        late = ("nan", "inf", "sparse", "meta", "pickled-model", "truncated")
        sniffed = ok or name.split(".")[0] in late
        call(
            lambda f=spec_file: load_spec(f),
            sniffed,
            f"spec checkpoint {name}",
            "checkpoints",
            cause=None if sniffed else "checkpoint",
        )


def _number_cases(call: Callable) -> None:
    z, y = np.random.default_rng(0).normal(size=(200, 4)), np.arange(200) % 4
    from calibkit.adapters import torchmetrics as tm

    ev = metrics.evaluate
    entries: dict[str, tuple[Callable[[Any], Any], str, Any]] = {
        # name: (a call taking the value, the setting, a good value of its kind)
        "ece n_bins": (lambda v: metrics.ece(z, y, n_bins=v), "n_bins", 15),
        "mce n_bins": (lambda v: metrics.mce(z, y, n_bins=v), "n_bins", 15),
        "classwise_ece n_bins": (lambda v: metrics.classwise_ece(z, y, n_bins=v), "n_bins", 15),
        "evaluate n_bins": (lambda v: ev(z, y, n_bins=v, smooth=False), "n_bins", 15),
        "evaluate ci": (
            lambda v: ev(z, y, ci=v, bootstrap=20, smooth=False),
            "ci",
            0.9,
        ),
        "evaluate bootstrap": (
            lambda v: ev(z, y, bootstrap=v, smooth=False),
            "bootstrap",
            20,
        ),
        "evaluate seed": (
            lambda v: ev(z, y, seed=v, bootstrap=20, smooth=False),
            "seed",
            3,
        ),
        "meter n_bins": (lambda v: metrics.CalibrationMeter(n_bins=v), "n_bins", 15),
        "meter n_classes": (lambda v: metrics.CalibrationMeter(n_classes=v), "n_classes", 4),
        "hist-binning n_bins": (lambda v: posthoc.create("hist-binning", n_bins=v), "n_bins", 10),
        "ts t_max": (lambda v: posthoc.create("ts", t_max=v), "t_max", 50.0),
        "focal gamma": (lambda v: losses.create("focal", gamma=v), "gamma", 2.0),
        "TrainConfig epochs": (lambda v: TrainConfig(epochs=v).check(), "epochs", 3),
        "TrainConfig lr": (lambda v: TrainConfig(lr=v).check(), "lr", 0.1),
        "torchmetrics ECE n_bins": (lambda v: tm.ECE(n_bins=v), "n_bins", 15),
        "torchmetrics AdaptiveECE n_bins": (lambda v: tm.AdaptiveECE(n_bins=v), "n_bins", 15),
        "mmce_weighted bandwidth": (
            lambda v: losses.mmce_weighted(torch.tensor(z), torch.tensor(y), bandwidth=v),
            "bandwidth",
            0.4,
        ),
    }
    for name, (fn, setting, good) in entries.items():
        integer = isinstance(good, int)
        kinds = [np.int64, np.int32, np.uint16] if integer else [np.float64, np.float32, np.float16]
        for kind in kinds:
            number = kind(good)
            call(lambda fn=fn, v=number: fn(v), True, f"{name}={kind.__name__}", "numbers")
        for label, value in {
            "tensor": torch.tensor(good),
            "bool": True,
            "numpy bool": np.bool_(True),
            "text": str(good),
            "list": [good],
        }.items():
            call(lambda fn=fn, v=value: fn(v), False, f"{name}={label}", "numbers", cause=setting)


def _adapter_cases(call: Callable) -> None:
    from calibkit.adapters import torchmetrics as tm
    from calibkit.adapters.lightning import CalibrationCallback
    from calibkit.adapters.sklearn import CalibratedClassifier

    z, y = torch.randn(64, 3), torch.arange(64) % 3
    rms, mw, kp = tm.RMSCalibrationError, losses.mmce_weighted, metrics.kull_probabilities
    bad: dict[str, tuple[Callable[[], Any], str]] = {
        "RMSCalibrationError debias='false'": (
            lambda: rms(debias="false"),
            "debias",
        ),
        "RMSCalibrationError debias=1": (lambda: rms(debias=1), "debias"),
        "RMSCalibrationError debias=None": (lambda: rms(debias=None), "debias"),
        "ECE probs='yes'": (lambda: tm.ECE(probs="yes"), "probs"),
        "MCE probs=2": (lambda: tm.MCE(probs=2), "probs"),
        "AURC probs='no'": (lambda: tm.AURC(probs="no"), "probs"),
        "RefinementAUROC probs=[]": (lambda: tm.RefinementAUROC(probs=[]), "probs"),
        "ECE binning='x'": (lambda: tm.ECE(binning="x"), "binning"),
        "callback probs='yes'": (lambda: CalibrationCallback(probs="yes"), "probs"),
        "callback prefix=5": (lambda: CalibrationCallback(prefix=5), "prefix"),
        "callback prefix=None": (lambda: CalibrationCallback(prefix=None), "prefix"),
        "callback test_prefix=b'x'": (lambda: CalibrationCallback(test_prefix=b"x"), "test_prefix"),
        "callback diagram='no'": (lambda: CalibrationCallback(diagram="no"), "diagram"),
        "callback n_bins=0": (lambda: CalibrationCallback(n_bins=0), "n_bins"),
        "meter keep_samples=1": (lambda: metrics.CalibrationMeter(keep_samples=1), "keep_samples"),
        "mmce bandwidth=0": (lambda: mw(z, y, bandwidth=0), "bandwidth"),
        "mmce bandwidth=nan": (lambda: mw(z, y, bandwidth=math.nan), "bandwidth"),
        "mmce bandwidth=inf": (lambda: mw(z, y, bandwidth=math.inf), "bandwidth"),
        "mmce bandwidth=-1": (lambda: mw(z, y, bandwidth=-1), "bandwidth"),
        "mmce normalisation='x'": (
            lambda: mw(z, y, normalisation="x"),
            "normalisation",
        ),
        "kull_probabilities inf": (lambda: kp([[math.inf, 0.0]]), "logits"),
        "kull_probabilities 1e308": (lambda: kp([[1e308, 0.0]]), "logits"),
        "kull_probabilities bool": (
            lambda: kp(np.ones((2, 2), bool)),
            "logits",
        ),
        "kull_probabilities 1-D": (lambda: kp([0.0, 1.0]), "logits"),
    }
    x, labels = np.random.default_rng(0).normal(size=(60, 3)), np.arange(60) % 2
    for n_jobs in (1.5, "2", -0.5):
        bad[f"CalibratedClassifier n_jobs={n_jobs!r}"] = (
            lambda n=n_jobs: CalibratedClassifier(cv=3, n_jobs=n).fit(x, labels),
            "n_jobs",
        )
    for what, (fn, setting) in bad.items():
        call(fn, False, what, "adapters", cause=setting)
    good: dict[str, Callable[[], Any]] = {
        "RMSCalibrationError debias=np.bool_": lambda: rms(debias=np.bool_(True)),
        "callback prefix='v/'": lambda: CalibrationCallback(prefix="v/"),
        "mmce bandwidth=np.float32": lambda: mw(z, y, bandwidth=np.float32(0.2)),
        "kull_probabilities float16": lambda: kp(np.ones((2, 2), np.float16)),
        "CalibratedClassifier n_jobs=np.int64": lambda: CalibratedClassifier(
            cv=3, n_jobs=np.int64(1)
        ).fit(x, labels),
        # scikit-learn's own validation, as its estimators: a bool is an int there
        "CalibratedClassifier n_jobs=True": lambda: CalibratedClassifier(cv=3, n_jobs=True).fit(
            x, labels
        ),
    }
    for what, fn in good.items():
        call(fn, True, what, "adapters")


PAYLOADS = {
    "comment end": "a-->b",
    "script": "--><script>alert(1)</script><!--",
    "dashes": "x--y",
    "markers": "<!-- /calibkit:x -->",
    "line break": "a\n--> <b>bold</b>",
    "rich markup": "[red]x[/red]-->",
    "html comment": "<!---->",
    "backticks": "`-->`",
    "percent": "%3C!--%3E-->",
    "unicode": "\u2014>\u200b-->",
}


def _doc_cases(d: Path, call: Callable) -> None:
    from calibkit._outputs import write_section

    for label, name in PAYLOADS.items():
        path = d / f"sixth-doc-{label.replace(' ', '-')}.md"
        path.write_text("# Results\n\nwritten by a person\n")

        def check(path: Path = path, name: str = name) -> str | None:
            text = path.read_text()
            if "written by a person" not in text:
                return "the person's text was lost"
            outside = text.replace("<!--", "\0").split("\0")
            for part in outside[1:]:  # what follows each comment's start
                if "-->" not in part or "<script>" in part.split("-->", 1)[1]:
                    return "a payload left its comment"
            return None

        call(
            lambda path=path, name=name: write_section(path, name, "| a | b |\n| - | - |"),
            True,
            f"--doc section named {label}",
            "doc",
            verify=check,
        )


def sixth_round(d: Path, case: Callable, call: Callable) -> None:
    """Issue 65's families. ``case(command, argv, ok, what, family, inputs, cause)`` adds a
    command line; ``call(fn, ok, what, family, cause=None, verify=None)`` a library call."""
    _schema_cases(d, call)
    _checkpoint_cases(d, case, call)
    _number_cases(call)
    _adapter_cases(call)
    _doc_cases(d, call)
