"""A sweep of bad and odd inputs over every command, as a careless or hostile user gives
them: each case is one command line with what it should do (fail with a one-line error, or
run), run in this process, and classed as

- **clean**: an expected failure that exits 2 with one line starting "error: " that names
  the option or the file;
- **accepted**: an expected success (exit 0);
- **silent**: a bad input that exited 0 (or a good one that failed);
- **traceback**: anything else (an uncaught exception, another exit code, a multi-line
  error);
- **data loss**: a file the command read was changed or replaced (checked for the cases
  that name their inputs), whatever the exit code;
- **misleading**: a clean failure whose line does not name the case's cause (the fourth
  round's cases say what the message must contain), or an accepted run whose output the
  case's check finds wrong (a name rendered as markup) — counted as silent.

The third round (issue 41, :func:`third_round`) adds cases by family: an output onto an
input, table files, forged calibrator files, settings beyond reason, label dtypes, torch
files, split names, methods, devices and bench specs. ``--round 3`` runs those alone. The
fourth (issue 53, ``bad_inputs_hostile.py``) adds what someone sharing a folder can plant
and inputs that mean something else: ``--round 4``. The sixth (issue 65,
``bad_inputs_sixth.py``) adds schema agreement, checkpoints, NumPy scalars, the adapters'
settings and ``--doc`` names, partly as library calls (``command == "library"``: a value
no command line carries), each clean where it raises one line: ``--round 6`` (495 cases).

    python benchmarks/hostile/bad_inputs.py                 # 1,627 cases, 85 s on 2 cores:
                                                    # 301 accepted, 1,326 clean, 0 else
    python benchmarks/hostile/bad_inputs.py --json          # every case and its class
    python benchmarks/hostile/bad_inputs.py --only train    # the cases of one command

The test suite runs a quarter of it (tests/test_bad_inputs.py) and requires 0 silent and 0
traceback there; this script gives the totals over all of them. Run as root, the 6 cases
that write into a read-only folder are left out (root writes anywhere).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pickle
import sqlite3
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from calibkit import posthoc
from calibkit.cli import main
from calibkit.training import TrainConfig, train

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the forgeries of the tests
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the fourth round, beside it
from tests.posthoc.test_forged_files import FORGERIES, forge

from bad_inputs_hostile import fourth_round
from bad_inputs_sixth import sixth_round


@dataclass
class Case:
    command: str
    argv: list[str]
    ok: bool  # True: the command should run; False: it should fail in one line
    what: str
    family: str = "round 2"  # the sweep that added it (round 3: issue 41, by family)
    inputs: tuple[str, ...] = ()  # files whose bytes must survive the command (data loss)
    cause: str | None = None  # what the one-line error must say (else: misleading)
    verify: Callable[[], str | None] | None = None  # what an accepted run must have made
    call: Callable[[], object] | None = None  # a library call instead of a command line


def _logits(n: int = 300, k: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += 2.5
    return z.astype(np.float32), y


def score_files(d: Path) -> dict[str, bool]:
    """Score files (logits and labels) by name, each with whether it should be read."""
    z, y = _logits()
    files: dict[str, bool] = {}

    def npz(name: str, ok: bool, **arrays) -> None:
        np.savez(d / name, **arrays)
        files[name] = ok

    npz("good.npz", True, logits=z, labels=y)
    npz("good64.npz", True, logits=z.astype(np.float64), labels=y)
    npz(
        "nan.npz",
        False,
        logits=np.where(np.arange(z.size).reshape(z.shape) == 5, np.nan, z),
        labels=y,
    )
    npz(
        "inf.npz",
        False,
        logits=np.where(np.arange(z.size).reshape(z.shape) == 5, np.inf, z),
        labels=y,
    )
    npz(
        "neginf.npz",
        False,
        logits=np.where(np.arange(z.size).reshape(z.shape) == 7, -np.inf, z),
        labels=y,
    )
    npz("label10.npz", False, logits=z, labels=np.where(np.arange(len(y)) == 3, 10, y))
    npz("labelneg.npz", False, logits=z, labels=np.where(np.arange(len(y)) == 3, -1, y))
    npz("labelhuge.npz", False, logits=z, labels=np.where(np.arange(len(y)) == 3, 1e20, y))
    npz("labelfrac.npz", False, logits=z, labels=y + 0.5)
    npz("labelnan.npz", False, logits=z, labels=np.where(np.arange(len(y)) == 3, np.nan, y))
    npz("labelstr.npz", False, logits=z, labels=y.astype(str))
    npz("labels2d.npz", True, logits=z, labels=y[:, None])
    npz("short.npz", False, logits=z, labels=y[:-5])
    npz("empty.npz", False, logits=np.zeros((0, 10), np.float32), labels=np.zeros(0, int))
    npz("onecol.npz", True, logits=z[:, :1], labels=np.zeros(len(y), int))
    npz("vector.npz", False, logits=z[:, 0], labels=y)
    npz("cube.npz", False, logits=z[:, :, None], labels=y)
    npz("scalar.npz", False, logits=np.float32(1.0), labels=y)
    npz("oneclass.npz", True, logits=z, labels=np.zeros(len(y), int))
    npz("huge.npz", True, logits=z * 1e30, labels=y)
    npz("bool.npz", False, logits=z > 0, labels=y)
    npz("complex.npz", False, logits=z.astype(np.complex64), labels=y)
    npz("wrongkeys.npz", False, scores=z, target=y)
    npz("nolabels.npz", False, logits=z)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    npz("probs.npz", True, logits=p, labels=y)
    npz("probsbad.npz", False, logits=p * 1.5, labels=y)
    npz("probsneg.npz", False, logits=p - 0.2, labels=y)
    npz("object.npz", False, logits=np.array([z, "x"], dtype=object), labels=y)
    np.save(d / "good.npy", z)
    np.save(d / "labels.npy", y)
    (d / "emptyfile.npz").write_bytes(b"")
    (d / "random.npz").write_bytes(np.random.default_rng(1).bytes(500))
    (d / "text.npz").write_text("logits,labels\n1,2\n")
    (d / "pickle.npy").write_bytes(pickle.dumps(z))
    (d / "pickle.pt").write_bytes(pickle.dumps({"logits": z, "labels": y}))
    (d / "emptyfile.pt").write_bytes(b"")
    torch.save(
        {"logits": torch.from_numpy(z).bfloat16(), "labels": torch.from_numpy(y)}, d / "bf16.pt"
    )
    torch.save({"logits": torch.from_numpy(z).half(), "labels": torch.from_numpy(y)}, d / "half.pt")
    torch.save({"logits": torch.from_numpy(z), "labels": torch.from_numpy(y)}, d / "good.pt")
    torch.save(torch.from_numpy(z), d / "tensor.pt")
    header = ",".join(f"c{i}" for i in range(10)) + ",labels"
    rows = "\n".join(",".join(map(str, r)) + f",{t}" for r, t in zip(z, y, strict=True))
    (d / "good.csv").write_text(header + "\n" + rows + "\n")
    (d / "dup.csv").write_text(header.replace("c1,", "c0,") + "\n" + rows + "\n")
    (d / "headeronly.csv").write_text(header + "\n")
    (d / "emptyfile.csv").write_text("")
    (d / "letters.csv").write_text(header + "\n" + rows.replace("0.", "a.", 3) + "\n")
    (d / "ragged.csv").write_text(header + "\n" + rows + "\n1,2\n")
    (d / "latin1.csv").write_bytes((header.replace("c1", "c\xe9") + "\n" + rows).encode("latin-1"))
    (d / "corrupt.parquet").write_bytes(b"PAR1" + bytes(100))
    (d / "data.txt").write_text("1 2 3\n")
    (d / "adir.npz").mkdir()
    files |= {
        "good.npy": False,
        "pickle.npy": False,
        "emptyfile.npz": False,
        "random.npz": False,
        "text.npz": False,
        "pickle.pt": False,
        "emptyfile.pt": False,
        "bf16.pt": True,
        "half.pt": True,
        "good.pt": True,
        "tensor.pt": False,
        "good.csv": True,
        "dup.csv": False,
        "headeronly.csv": False,
        "emptyfile.csv": False,
        "letters.csv": False,
        "ragged.csv": False,
        "latin1.csv": False,
        "corrupt.parquet": False,
        "data.txt": False,
        "adir.npz": False,
        "missing.npz": False,
    }
    return files


def fixtures(d: Path) -> dict[str, Path]:
    """Good material the bad inputs are variations of."""
    z, y = _logits()
    zt, yt = _logits(seed=1)
    np.savez(d / "split.npz", logits_val=z, labels_val=y, logits_test=zt, labels_test=yt)
    posthoc.create("ts").fit(z, y).save(d / "ts.calib")
    posthoc.create("vector").fit(z, y).save(d / "vector.calib")
    (d / "bad.calib").write_bytes(b"\x00" * 64)
    np.savez(d / "k5.npz", logits=z[:, :5], labels=y % 5)
    train(TrainConfig(epochs=1), d / "run")
    (d / "ro").mkdir()
    os.chmod(d / "ro", 0o555)
    (d / "afile").write_text("x")
    con = sqlite3.connect(d / "foreign.db")
    con.execute("CREATE TABLE meta (key, value)")
    con.commit()
    con.close()
    (d / "corrupt.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(200))
    return {}


def spec_cases(d: Path) -> list[Case]:
    """Bench specs: one good, the rest each with one thing wrong."""
    good = (
        "seeds: [1]\ntrain: {epochs: 1}\ndatasets:\n  - data: digits\n    models: [mlp]\n"
        "methods:\n  - {name: CE, loss: ce}\nposthoc: [ts]\n"
    )
    bad = {
        "seeds": good.replace("seeds: [1]", "seeds: [-1]"),
        "seeds-huge": good.replace("seeds: [1]", "seeds: [99999999999999999999999]"),
        "seeds-str": good.replace("seeds: [1]", "seeds: [a]"),
        "seeds-twice": good.replace("seeds: [1]", "seeds: [1, 1]"),
        "epochs": good.replace("epochs: 1", "epochs: 0"),
        "epochs-str": good.replace("epochs: 1", "epochs: two"),
        "train-list": good.replace("train: {epochs: 1}", "train: [1, 2]"),
        "train-key": good.replace("epochs: 1", "epoch: 1"),
        "lr": good.replace("epochs: 1", "epochs: 1, lr: -1"),
        "dataset": good.replace("data: digits", "data: nope"),
        "dataset-param": good.replace("data: digits", "data: digits:foo=1"),
        "model": good.replace("models: [mlp]", "models: [nope]"),
        "models-empty": good.replace("models: [mlp]", "models: []"),
        "models-twice": good.replace("models: [mlp]", "models: [mlp, mlp]"),
        "loss": good.replace("loss: ce", "loss: focus"),
        "loss-param": good.replace("loss: ce", "loss: 'focal:gamma=-1'"),
        "mixup-nan": good.replace("loss: ce}", "loss: ce, mixup: .nan}"),
        "mixup-inf": good.replace("loss: ce}", "loss: ce, mixup: .inf}"),
        "mixup-neg": good.replace("loss: ce}", "loss: ce, mixup: -1}"),
        "posthoc-twice": good.replace("posthoc: [ts]", "posthoc: [ts, ts]"),
        "posthoc-map": good.replace("posthoc: [ts]", "posthoc: {ts: 1}"),
        "posthoc-bad": good.replace("posthoc: [ts]", "posthoc: [nope]"),
        "posthoc-param": good.replace("posthoc: [ts]", "posthoc: ['ts:t_min=-1']"),
        "sizes-twice": good + "calibration_sizes: [all, all]\n",
        "sizes-one": good + "calibration_sizes: [1]\n",
        "baseline": good + "baseline: X\n",
        "unknown-key": good + "colour: red\n",
        "key-twice": good + "seeds: [2]\n",
        "methods-empty": good.replace("methods:\n  - {name: CE, loss: ce}", "methods: []"),
        "method-name-twice": good.replace(
            "  - {name: CE, loss: ce}", "  - {name: CE, loss: ce}\n  - {name: CE, loss: focal}"
        ),
        "stage2": good.replace("loss: ce}", "loss: ce, stage2: nope}"),
        "schema-str": "schema_version: two\n" + good,
        "not-a-mapping": "- 1\n- 2\n",
        "empty": "",
        "bad-yaml": "seeds: [1\n",
        "binary": None,
        "alias-bomb": "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
        + "".join(
            f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
            for p, c in zip("abcdefg", "bcdefgh", strict=True)
        ),
        "logits-missing": good.replace(
            "  - data: digits\n    models: [mlp]", "  - logits: /nowhere/*.npz"
        ),
        "checkpoint-missing": good.replace(
            "models: [mlp]", "models: [{model: mlp, checkpoint: /no.th}]"
        ),
    }
    cases = []
    for name, text in bad.items():
        path = d / f"spec-{name}.yaml"
        if text is None:
            path.write_bytes(b"\xff\xfe\x00\x01")
        else:
            path.write_text(text)
        cases.append(
            Case(
                "bench",
                ["bench", str(path), "-o", str(d / f"b-{name}"), "--estimate"],
                False,
                f"spec: {name}",
            )
        )
    (d / "spec-good.yaml").write_text(good)
    cases.append(
        Case(
            "bench",
            [
                "bench",
                str(d / "spec-good.yaml"),
                "-o",
                str(d / "b-good"),
                "--workers",
                "1",
                "--json",
            ],
            True,
            "spec: good",
        )
    )
    for opts, what in (
        (["--workers", "-1"], "workers -1"),
        (["--threads", "0"], "threads 0"),
        (["--engine", "spark"], "engine"),
        (["--db", str(d / "foreign.db")], "foreign db"),
        (["--db", str(d / "corrupt.sqlite")], "corrupt db"),
        (["--doc", str(d / "ro" / "x" / "doc.md")], "doc unwritable"),
        (["-o", str(d / "afile")], "out is a file"),
    ):
        cases.append(
            Case(
                "bench",
                ["bench", str(d / "spec-good.yaml"), "-o", str(d / "b2"), *opts],
                False,
                f"bench {what}",
            )
        )
    cases.append(Case("bench", ["bench", str(d / "missing.yaml")], False, "spec missing"))
    cases.append(Case("bench", ["bench", str(d)], False, "spec is a folder"))
    return cases


#: files a command takes although evaluate's verdict differs: probabilities out of range are
#: finite numbers to a calibrator (they are no probabilities), apply needs no labels
TAKEN = {
    "fit": {"probsbad.npz", "probsneg.npz"},
    "apply": {"probsbad.npz", "probsneg.npz", "nolabels.npz", "good.npy", "oneclass.npz"},
    "compare": {"probsbad.npz", "probsneg.npz"},
}
#: files evaluate takes that a calibrator must refuse: one class only (nothing to fit, and
#: a 10-class calibrator cannot take a single column), and probabilities where logits are
#: expected (issue 42 §1: refused everywhere; evaluate takes them with --probs)
REFUSED = {"oneclass.npz", "onecol.npz", "probs.npz"}


def expected(command: str, name: str, ok: bool) -> bool:
    """Whether ``command`` should take the score file ``name`` (``ok``: evaluate takes it)."""
    if name in TAKEN.get(command, ()):
        return True
    return ok and name not in REFUSED


def cases(d: Path) -> list[Case]:
    files = score_files(d)
    fixtures(d)
    out: list[Case] = []
    for name, ok in files.items():
        f = str(d / name)
        probs = ["--probs"] if name.startswith("probs") else []
        out.append(Case("evaluate", ["evaluate", f, *probs, "--no-smooth"], ok, f"file {name}"))
        for command, argv in (
            ("fit", ["fit", "--method", "ts", "--val", f, "-o", str(d / "o.calib")]),
            ("apply", ["apply", str(d / "ts.calib"), f, "-o", str(d / "o.npz")]),
            ("compare", ["compare", "--file", f, "--split", "0.5", "--methods", "ts"]),
        ):
            out.append(Case(command, argv, expected(command, name, ok), f"file {name}"))
    good = str(d / "good.npz")
    for value, ok in (
        ("0", False),
        ("-1", False),
        ("abc", False),
        ("1000000000", False),
        ("1", True),
        ("100000", True),
        ("2.5", False),
    ):
        out.append(Case("evaluate", ["evaluate", good, "--n-bins", value], ok, f"--n-bins {value}"))
    for opt, values in {
        "--bootstrap": ["-1", "x"],
        "--ci": ["0", "1", "1.5", "nan"],
        "--seed": ["-1", str(2**80)],
        "--binning": ["nope"],
        "--binary": ["nope"],
        "--logits-key": ["nope"],
        "--labels-key": ["nope"],
        "--ood": [str(d / "missing.npz"), str(d / "random.npz")],
        "--plot": [str(d / "x.bmp"), str(d / "ro" / "x.png"), str(d / "afile" / "x.png")],
    }.items():
        for v in values:
            out.append(Case("evaluate", ["evaluate", good, opt, v], False, f"{opt} {v}"))
    out.append(Case("evaluate", ["evaluate", good, "--probs"], False, "logits given as --probs"))
    out.append(
        Case(
            "fit",
            ["fit", "--method", "ts:", "--val", good, "-o", str(d / "o.calib")],
            True,
            "--method 'ts:' (no settings: ts)",
        )
    )
    for spec in (
        "nope",
        ":",
        "",
        "ts:foo=1",
        "ts:t_min=abc",
        "ts:t_min=-1",
        "ts:t_min=2,t_max=1",
        "ts:max_iter=0",
        "ts:t_min=nan",
        "ts:t_max=inf",
        "dir-odir:lambdas=[]",
        "dir-odir:folds=1",
        "dir-odir:folds=100000",
        "dir-odir:lambdas=[-1]",
        "hist-binning:n_bins=0",
        "hist-binning:n_bins=1e9",
        "hist-binning:strategy=x",
        "ts-grid:grid=[]",
        "neural-clamping",
        "maccal",
        "dir-l2:mus=[1000]",
        "ts,vector",
        "ts:t_min=1:2",
    ):
        out.append(
            Case(
                "fit",
                ["fit", "--method", spec, "--val", good, "-o", str(d / "o.calib")],
                False,
                f"--method {spec!r}",
            )
        )
    for o, what in (
        (str(d / "ro" / "o.calib"), "read-only folder"),
        (str(d / "afile" / "o.calib"), "under a file"),
        (str(d), "a folder"),
    ):
        out.append(Case("fit", ["fit", "--method", "ts", "--val", good, "-o", o], False, what))
    for cal, what in (
        (d / "bad.calib", "garbage calibrator"),
        (d / "missing.calib", "missing"),
        (d / "good.npz", "npz as calibrator"),
        (d, "folder as calibrator"),
    ):
        out.append(Case("apply", ["apply", str(cal), good, "-o", str(d / "o.npz")], False, what))
    out.append(
        Case(
            "apply",
            ["apply", str(d / "vector.calib"), str(d / "k5.npz"), "-o", str(d / "o.npz")],
            False,
            "5 classes into a 10-class map",
        )
    )
    out.append(Case("apply", ["apply", str(d / "ts.calib")], False, "no file, no --onnx"))
    out.append(
        Case(
            "apply",
            ["apply", str(d / "ts.calib"), good, "-o", str(d / "ro" / "o.npz")],
            False,
            "read-only output",
        )
    )
    out.append(
        Case(
            "apply",
            ["apply", str(d / "ts.calib"), good, "-o", str(d / "o.npz"), "--split", "nope"],
            True,
            "--split without such keys: plain",
        )
    )
    split = str(d / "split.npz")
    for args, ok, what in (
        (["--file", good, "--methods", "ts"], False, "one split without --split"),
        (["--file", split], True, "both splits, every method"),
        (["--file", split, "--methods", ","], False, "--methods ','"),
        (["--file", split, "--methods", "nope"], False, "--methods nope"),
        (
            ["--file", split, "--methods", "dir-odir:folds=5,average_folds=true"],
            True,
            "a spec with a comma",
        ),
        (["--file", good, "--split", "0"], False, "--split 0"),
        (["--file", good, "--split", "1"], False, "--split 1"),
        (["--file", good, "--split", "-0.5"], False, "--split -0.5"),
        (["--file", good, "--split", "0.5", "--seeds", "0"], False, "--seeds 0"),
        (["--file", good, "--split", "0.5", "--seeds", "-2"], False, "--seeds -2"),
        (["--file", good, "--split", "0.001", "--methods", "ts"], False, "a split of 0 rows"),
        (["--val", good], False, "--val without --test"),
        (
            ["--val", good, "--test", str(d / "k5.npz"), "--methods", "ts"],
            False,
            "val and test with different classes",
        ),
        ([], False, "nothing"),
        (["--file", split, "--bootstrap", "-1"], False, "--bootstrap -1"),
        (["--file", split, "--split", "0.5"], False, "--split with --val/--test keys"),
    ):
        out.append(Case("compare", ["compare", *args], ok, what))
    run = str(d / "run")
    for args, ok, what in (
        (["ts", run, "-o", run], False, "output is the source"),
        (["ts", str(d / "missing")], False, "no such run"),
        (["ts", str(d)], False, "not a run"),
        (["nope", run], False, "unknown method"),
        (["neural-clamping:epochs=0", run], False, "epochs 0"),
        (["neural-clamping:lr=1e9,epochs=3", run, "-o", str(d / "nc")], False, "diverges"),
        (["ts", run, "--device", "meta"], False, "--device meta"),
        (["ts", run, "--device", "cuda:7"], False, "--device cuda:7"),
        (["ts", run, "-o", str(d / "ts-run")], True, "ts on a run"),
        (
            ["ts", "--checkpoint", str(d / "missing.th"), "--model", "cnn"],
            False,
            "missing checkpoint",
        ),
    ):
        out.append(Case("calibrate", ["calibrate", *args], ok, what))
    t = ["train", "--epochs", "1"]
    for opts, what in (
        (["--epochs", "0"], "epochs 0"),
        (["--epochs", "-1"], "epochs -1"),
        (["--epochs", "x"], "epochs x"),
        (["--batch-size", "0"], "batch 0"),
        (["--lr", "0"], "lr 0"),
        (["--lr", "-1"], "lr -1"),
        (["--lr", "nan"], "lr nan"),
        (["--lr", "inf"], "lr inf"),
        (["--momentum", "-1"], "momentum -1"),
        (["--momentum", "1.5"], "momentum 1.5"),
        (["--weight-decay", "-1"], "wd -1"),
        (["--weight-decay", "nan"], "wd nan"),
        (["--schedule", "nope"], "schedule"),
        (["--mixup", "-1"], "mixup -1"),
        (["--mixup", "nan"], "mixup nan"),
        (["--seed", "-1"], "seed -1"),
        (["--seed", str(2**80)], "seed 2**80"),
        (["--data", "nope"], "data nope"),
        (["--data", "cifar10:root=/nonexistent"], "root"),
        (["--data", "gaussian-toy:n_train=-5"], "n_train -5"),
        (["--data", "gaussian-toy:n_train=abc"], "n_train abc"),
        (["--data", "digits:foo=1"], "data param"),
        (["--model", "nope"], "model"),
        (["--model", "mlp:hidden=0"], "hidden 0"),
        (["--loss", "nope"], "loss"),
        (["--loss", "focal:gamma=-1"], "gamma -1"),
        (["--extra", "nope"], "extra"),
        (["--device", "meta"], "device meta"),
        (["--device", "foo"], "device foo"),
        (["--device", "cuda"], "device cuda (none here)"),
        (["--checkpoint", str(d / "missing.th")], "missing checkpoint"),
        (["--checkpoint", str(d / "random.npz")], "garbage checkpoint"),
        (["--stage2", "nope"], "stage2"),
        (["--record-grad-norms", "0"], "grad norms 0"),
        (["--record-grad-norms", "5"], "grad norms beyond epochs"),
    ):
        out.append(Case("train", [*t, *opts, "-o", str(d / "t-bad")], False, what))
    out.append(Case("train", [*t, "-o", str(d / "afile")], False, "output is a file"))
    # a run killed before its first checkpoint has nothing to resume: it starts over
    out.append(
        Case(
            "train", [*t, "--resume", "-o", str(d / "t-new")], True, "resume with no checkpoint yet"
        )
    )
    out.append(Case("train", [*t, "-o", str(d / "ro" / "r")], False, "read-only output"))
    out.append(
        Case(
            "train",
            [*t, "--data", "gaussian-toy", "--model", "mlp", "-o", str(d / "t-ok")],
            True,
            "toy MLP",
        )
    )
    out += spec_cases(d)
    for db, ok, what in (
        (d / "missing.sqlite", False, "missing store"),
        (d / "foreign.db", False, "foreign sqlite"),
        (d / "corrupt.sqlite", False, "corrupt store"),
        (d / "good.npz", False, "not sqlite"),
        (d / "b-good" / "results.sqlite", True, "a finished store"),
    ):
        out.append(Case("report", ["report", str(db), "-o", str(d / "rep")], ok, what))
    out.append(
        Case(
            "report",
            ["report", str(d / "b-good" / "results.sqlite"), "-o", str(d / "afile")],
            False,
            "report into a file",
        )
    )
    for args, ok, what in (
        (["-o", str(d / "afile")], False, "output is a file"),
        (["-o", str(d / "dm"), "--seed", "-1"], False, "seed -1"),
        (["-o", str(d / "dm"), "--bootstrap", "-1"], False, "bootstrap -1"),
        (["-o", str(d / "dm")], True, "demo"),
    ):
        out.append(Case("demo", ["demo", *args], ok, what))
    for what, (spec, edit) in FORGERIES.items():  # calibrator files forged, checksum recomputed
        folder = d / "forged" / what.replace(" ", "-")
        folder.mkdir(parents=True)
        path = forge(folder, spec, edit)
        out.append(
            Case(
                "apply",
                ["apply", path, good, "-o", str(d / "o.npz")],
                False,
                f"forged calibrator: {what}",
            )
        )
    out.append(Case("methods", ["methods", "--json"], True, "methods"))
    out.append(Case("methods", ["methods", "extra"], False, "an argument"))
    sixth: list[Case] = []

    def line(command, argv, ok, what, family, inputs=(), cause=None) -> None:
        sixth.append(Case(command, [str(a) for a in argv], ok, what, "6 " + family, inputs, cause))

    def call(fn, ok, what, family, cause=None, verify=None) -> None:
        sixth.append(Case("library", [], ok, what, "6 " + family, (), cause, verify, fn))

    sixth_round(d, line, call)
    return out + third_round(d) + fourth_round(d, Case) + sixth


def _tables(d: Path) -> dict[str, bool]:
    """Table files written as pandas and spreadsheets write them (issue 41 §2), by name,
    each with whether it should be read."""
    import pandas as pd

    z, y = _logits()
    df = pd.DataFrame(z, columns=[f"c{i}" for i in range(10)])
    df["labels"] = y
    t = d / "tables"
    t.mkdir()
    df.to_csv(t / "pandas-index.csv")
    df.rename_axis("index").to_csv(t / "named-index.csv")
    df.to_csv(t / "semicolon.csv", index=False, sep=";")
    df.to_csv(t / "tab.csv", index=False, sep="\t")
    df.to_csv(t / "bar.csv", index=False, sep="|")
    df.assign(label=y).to_csv(t / "two-labels.csv", index=False)
    (t / "bom.csv").write_text(df.to_csv(index=False), encoding="utf-8-sig")
    (t / "bad-cell.csv").write_text(df.to_csv(index=False).replace("0.", "o.", 1))
    (t / "ragged-row.csv").write_text(df.to_csv(index=False) + "1,2,3\n")
    (t / "decimal-comma.csv").write_text(df.to_csv(index=False, sep=";", decimal=","))
    df.to_csv(t / "plain.csv", index=False)
    df.rename(columns={"labels": "label"}).to_csv(t / "label-column.csv", index=False)
    df.iloc[np.random.default_rng(2).permutation(len(df))].to_parquet(t / "level0.parquet")
    df.set_index(pd.Index(np.random.default_rng(1).permutation(len(df)), name="row")).to_parquet(
        t / "named-index.parquet"
    )
    df.to_parquet(t / "plain.parquet", index=False)
    df.assign(label=y).to_parquet(t / "two-labels.parquet", index=False)
    good = {"bom.csv", "plain.csv", "label-column.csv", "plain.parquet"}
    return {f"tables/{p.name}": p.name in good for p in sorted(t.iterdir())}


def _odd_files(d: Path) -> dict[str, bool]:
    """Label dtypes and torch files that were misread or misnamed (issue 41 §5)."""
    z, y = _logits()
    o = d / "odd"
    o.mkdir()
    files = {}
    for name, labels, ok in (
        ("uint64-huge", np.where(np.arange(len(y)) == 3, 2**63 + 7, y).astype(np.uint64), False),
        ("uint64", y.astype(np.uint64), True),
        ("uint8", y.astype(np.uint8), True),
        ("int8-negative", np.where(np.arange(len(y)) == 3, -3, y).astype(np.int8), False),
        ("float16", y.astype(np.float16), True),
        ("bool", (y > 4), True),
        ("int16-out-of-range", np.where(np.arange(len(y)) == 3, 300, y).astype(np.int16), False),
    ):
        np.savez(o / f"{name}.npz", logits=z, labels=labels)
        files[f"odd/{name}.npz"] = ok
    zt, yt = torch.from_numpy(z), torch.from_numpy(y)
    for name, obj, ok in (
        ("nested", {"logits": {"a": zt}, "labels": yt}, False),
        ("float8", {"logits": zt.to(torch.float8_e4m3fn), "labels": yt}, True),
        ("list", [zt, yt], False),
        ("int-logits", {"logits": zt.round().long(), "labels": yt}, True),
        ("labels-float", {"logits": zt, "labels": yt.double()}, True),
        ("empty-dict", {}, False),
    ):
        torch.save(obj, o / f"{name}.pt")
        files[f"odd/{name}.pt"] = ok
    return files


def third_round(d: Path) -> list[Case]:
    """Issue 41's families, each case with the command line that shows it."""
    out: list[Case] = []
    good, ts = str(d / "good.npz"), str(d / "ts.calib")
    split, run = str(d / "split.npz"), str(d / "run")

    def case(command, argv, ok, what, family, inputs=()):
        out.append(
            Case(command, [str(a) for a in argv], ok, what, family, tuple(str(p) for p in inputs))
        )

    # §1: an output never replaces an input, by path, link or inode, nor lies inside one
    (d / "links").mkdir()
    os.link(d / "good.npz", d / "links" / "hard.npz")
    (d / "links" / "soft.npz").symlink_to(d / "good.npz")
    os.link(d / "ts.calib", d / "links" / "hard.calib")
    spec = d / "spec-b.yaml"
    spec.write_text(
        "seeds: [1]\ntrain: {epochs: 1}\ndatasets:\n  - data: digits\n"
        "    models: [mlp]\nmethods:\n  - {name: CE, loss: ce}\nposthoc: [ts]\n"
    )
    onto = [good, d / "links" / "hard.npz", d / "links" / "soft.npz"]
    for target in onto:
        case(
            "fit",
            ["fit", "--method", "ts", "--val", good, "-o", target],
            False,
            f"-o onto the input ({Path(target).name})",
            "data loss",
            [good],
        )
        case(
            "apply",
            ["apply", ts, good, "-o", target],
            False,
            f"-o onto the logits ({Path(target).name})",
            "data loss",
            [good, ts],
        )
        case(
            "evaluate",
            ["evaluate", good, "--plot", str(target) + ".png"],
            True,
            f"--plot beside the input ({Path(target).name}.png)",
            "data loss",
            [good],
        )
    for target in (ts, d / "links" / "hard.calib"):
        case(
            "apply",
            ["apply", ts, good, "-o", target],
            False,
            f"-o onto the calibrator ({Path(target).name})",
            "data loss",
            [good, ts],
        )
        case(
            "apply",
            ["apply", ts, "--onnx", target],
            False,
            f"--onnx onto the calibrator ({Path(target).name})",
            "data loss",
            [ts],
        )
    for empty in ("", " "):
        for command, argv in (
            ("fit", ["fit", "--method", "ts", "--val", good, "-o", empty]),
            ("apply", ["apply", ts, good, "-o", empty]),
            ("train", ["train", "--epochs", "1", "-o", empty]),
            ("report", ["report", d / "b-good" / "results.sqlite", "-o", empty]),
            ("demo", ["demo", "-o", empty]),
            ("bench", ["bench", spec, "-o", empty]),
            ("calibrate", ["calibrate", "ts", run, "-o", empty]),
        ):
            case(command, argv, False, f"an empty output {empty!r}", "data loss", [good, ts])
    for sub in ("sub", "a/b", "."):
        case(
            "calibrate",
            ["calibrate", "ts", run, "-o", Path(run) / sub],
            False,
            f"-o inside the source run ({sub})",
            "data loss",
            [Path(run) / "logits.npz"],
        )
        case(
            "train",
            ["train", "--data", f"folder:root={d / 'tables'}", "-o", d / "tables" / sub],
            False,
            f"-o inside the data folder ({sub})",
            "data loss",
            [d / "tables"],
        )
    for flag in ("--db", "--doc"):
        case(
            "bench",
            ["bench", spec, flag, spec, "-o", d / "b-new"],
            False,
            f"{flag} onto the spec",
            "data loss",
            [spec],
        )
    for suffix in (".csv", ".parquet", ".pt", ".calib", ""):
        case(
            "apply",
            ["apply", ts, good, "-o", d / f"out{suffix}"],
            False,
            f"-o out{suffix}: apply writes .npz",
            "data loss",
            [good],
        )

    # §2: table files read by rule
    for name, ok in _tables(d).items():
        f = d / name
        case("evaluate", ["evaluate", f, "--no-smooth", "--no-optimal"], ok, name, "tables")
        case("fit", ["fit", "--method", "ts", "--val", f, "-o", d / "t.calib"], ok, name, "tables")
        case("apply", ["apply", ts, f, "-o", d / "t.npz"], ok, name, "tables")
        case(
            "compare",
            ["compare", "--file", f, "--split", "0.5", "--methods", "ts", "--seeds", "2"],
            ok,
            name,
            "tables",
        )

    # §3: forged files, exported as well as applied (the new forgeries are round 3's)
    for what, (spec_, edit) in FORGERIES.items():
        folder = d / "forged3" / what.replace(" ", "-")
        folder.mkdir(parents=True)
        path = forge(folder, spec_, edit)
        case(
            "apply",
            ["apply", path, "--onnx", folder / "x.onnx"],
            False,
            f"forged calibrator exported: {what}",
            "forged files",
        )

    # §4 and §6: settings beyond reason, on the command line and in specs
    settings = {
        "--lr": ["1e308", "1e400", "101", "-1", "nan", "inf", "0"],
        "--weight-decay": ["1e308", "2", "-1", "nan"],
        "--momentum": ["1", "1.5", "-0.1", "inf"],
        "--mixup": ["1e308", "101", "-1", "nan"],
        "--epochs": [str(10**30), "0", "-1", "1.5", str(10**7)],
        "--batch-size": ["0", str(10**7), "-3"],
        "--schedule": [
            "step:milestones=[5,2]",
            "step:milestones=[2,2]",
            "step:gamma=0",
            "step:milestones=[0]",
        ],
        "--model": ["mlp:hidden=100000000000", "mlp:hidden=0", "mlp:hidden=-1"],
        "--seed": [str(2**63), "-1", "1.5"],
        "--device": ["gpu", "cuda:99", "", "tpu"],
    }
    for option, values in settings.items():
        for v in values:
            case(
                "train",
                ["train", "--epochs", "1", option, v, "-o", d / "t-set"],
                False,
                f"{option} {v}",
                "settings",
            )
    spec_values = {
        "lr": ["1" + "0" * 400, "1e308", "-1"],
        "epochs": [str(10**30), "0"],
        "weight_decay": ["1e308"],
        "momentum": ["1"],
        "batch_size": ["0"],
    }
    for key, values in spec_values.items():
        for v in values:
            f = d / f"spec-{key}-{len(v)}-{v[:3]}.yaml"
            f.write_text(
                spec.read_text().replace("epochs: 1}", f"epochs: 1, {key}: {v}}}")
                if key != "epochs"
                else spec.read_text().replace("epochs: 1}", f"epochs: {v}}}")
            )
            case("bench", ["bench", f, "--estimate"], False, f"spec {key}: {v[:12]}", "settings")
    merge = d / "spec-merge.yaml"
    merge.write_text(
        spec.read_text().replace(
            "  - {name: CE, loss: ce}", "  - &m {name: CE, loss: ce}\n  - {<<: *m, name: CE2}"
        )
    )
    case("bench", ["bench", merge, "--estimate"], True, "spec with a YAML merge key", "settings")
    for workers in ("0", "-1", "x"):
        case(
            "bench",
            ["bench", spec, "--estimate", "--workers", workers],
            False,
            f"--workers {workers}",
            "settings",
        )

    # §5: labels, torch files, split names, methods, devices
    for name, ok in _odd_files(d).items():
        f = d / name
        case(
            "evaluate", ["evaluate", f, "--no-smooth", "--no-optimal"], ok, name, "labels and files"
        )
        case(
            "fit",
            ["fit", "--method", "ts", "--val", f, "-o", d / "o3.calib"],
            ok,
            name,
            "labels and files",
        )
        case(
            "compare",
            ["compare", "--file", f, "--split", "0.5", "--methods", "ts", "--seeds", "2"],
            ok,
            name,
            "labels and files",
        )
    for name in ("tset", "Test", "train", "validation", "", "val ", "TEST"):
        case("evaluate", ["evaluate", split, "--split", name], False, f"--split {name!r}", "splits")
        case(
            "apply",
            ["apply", ts, split, "--split", name, "-o", d / "s.npz"],
            False,
            f"--split {name!r}",
            "splits",
        )
    for name in ("val", "test"):
        case(
            "evaluate",
            ["evaluate", split, "--split", name, "--no-smooth"],
            True,
            f"--split {name}",
            "splits",
        )
    for methods in ("neural-clamping", "ts,maccal", "ts,nc", "conformal", "ts,,ts", "TS"):
        case(
            "compare",
            ["compare", "--file", good, "--split", "0.5", "--methods", methods],
            False,
            f"--methods {methods}",
            "methods",
        )
    for command, argv in (
        ("evaluate", ["evaluate", good, "--no-smooth"]),
        ("fit", ["fit", "--method", "ts", "--val", good, "-o", d / "dev.calib"]),
        ("apply", ["apply", ts, good, "-o", d / "dev.npz"]),
        ("compare", ["compare", "--file", good, "--split", "0.5", "--methods", "ts"]),
    ):
        cuda = torch.cuda.is_available()
        for device, ok in (
            ("cpu", True),
            ("auto", True),
            ("gpu", False),
            ("cuda:99", False),
            ("", False),
            ("tpu", False),
            ("cuda", cuda),
        ):
            if device == "auto" and torch.cuda.is_available():
                continue
            case(command, [*argv, "--device", device], ok, f"--device {device!r}", "devices")
    for device in ("gpu", "cuda:99", ""):
        case(
            "calibrate",
            ["calibrate", "ts", run, "--device", device, "-o", d / "cd"],
            False,
            f"--device {device!r}",
            "devices",
        )
    # method specs: at fit, compare and calibrate
    for method in (
        "ts:t_min=0",
        "ts:t_max=1e400",
        "ts:t_min=5,t_max=1",
        "dir-odir:folds=1",
        "hist-binning:n_bins=0",
        "hist-binning:n_bins=1e9",
        "isotonic:mode=x",
        "vector:max_iter=0",
        "sigmoid",
        "TS",
        ":ts",
        "ts:tmax=5",
        "scaling-binning:seed=-1",
        "ets:loss=l1",
        "ts-grid:grid=[0,1]",
        "ts-grid:grid=[]",
        "dir-l2:mus=[1]",
        "neural-clamping:epochs=0",
        "maccal:lr=1e308",
    ):
        known = method == "sigmoid"  # scikit-learn's name for Platt scaling: an alias now
        case(
            "fit",
            ["fit", "--method", method, "--val", good, "-o", d / "m.calib"],
            known,
            f"--method {method}",
            "methods",
        )
        case(
            "compare",
            ["compare", "--file", good, "--split", "0.5", "--methods", method],
            known,
            f"--methods {method}",
            "methods",
        )
    for method in ("neural-clamping:epochs=0", "maccal:lr=1e308", "ts:t_min=0", "nope"):
        case("calibrate", ["calibrate", method, run, "-o", d / "cm"], False, method, "methods")
    # table files read with a label key, and applied
    for name, ok in _tables_named(d).items():
        case(
            "evaluate",
            ["evaluate", d / name, "--labels-key", "label", "--no-smooth", "--no-optimal"],
            ok and "label-column" in name,
            f"{name}, label key",
            "tables",
        )
    for name, ok in _odd_named(d).items():
        case("apply", ["apply", ts, d / name, "-o", d / "odd.npz"], ok, name, "labels and files")
    for fraction in ("0", "1", "1.5", "-0.1", "nan", "0.5x"):
        case(
            "compare",
            ["compare", "--file", good, "--split", fraction],
            False,
            f"--split {fraction}",
            "splits",
        )
    # the built-in data's options (issue 45), on the command line and in specs
    for data_spec, ok in (
        ("digits:train_size=5", False),
        ("digits:train_size=2000", False),
        ("digits:train_size=x", False),
        ("digits:label_noise=1", False),
        ("digits:label_noise=-0.1", False),
        ("digits:label_noise=a", False),
        ("digits:subset_seed=-1", False),
        ("digits:train_size=300.5", False),
        ("gaussian-toy:label_noise=1.5", False),
        ("gaussian-toy:n_train=20,train_size=500", False),
        ("digits:train_size=200,label_noise=0.2", True),
    ):
        case(
            "train",
            ["train", "--data", data_spec, "--epochs", "1", "-o", d / f"dt{len(out)}"],
            ok,
            f"--data {data_spec}",
            "settings",
        )
        f = d / f"spec-data-{len(out)}.yaml"
        f.write_text(spec.read_text().replace("data: digits", f"data: '{data_spec}'"))
        case("bench", ["bench", f, "--estimate"], ok, f"spec data {data_spec}", "settings")
    for posthoc_spec, ok in (
        ("ts:t_min=0", False),
        ("hist-binning:n_bins=0", False),
        ("nope", False),
        ("maccal", True),
        ("ts-grid:grid=[-1]", False),
        ("vector:max_iter=-5", False),
        ("dir-odir:lambdas=[]", False),
        ("ts", True),
    ):
        f = d / f"spec-posthoc-{len(out)}.yaml"
        f.write_text(spec.read_text().replace("posthoc: [ts]", f"posthoc: ['{posthoc_spec}']"))
        case("bench", ["bench", f, "--estimate"], ok, f"spec posthoc {posthoc_spec}", "settings")
    for seeds in ("0", "-1", "x", str(10**9)):
        case(
            "compare",
            ["compare", "--file", good, "--split", "0.5", "--seeds", seeds],
            False,
            f"--seeds {seeds}",
            "settings",
        )
    # an output that is another file, not an input: refused or left as it was, never lost
    for command, argv in (
        ("bench", ["bench", spec, "--db", good, "-o", d / "b-db"]),
        ("bench", ["bench", spec, "-o", good]),
        ("report", ["report", d / "b-none.sqlite", "-o", good]),
        ("train", ["train", "--epochs", "1", "-o", good]),
        ("demo", ["demo", "-o", good]),
        ("calibrate", ["calibrate", "ts", run, "-o", good]),
        ("bench", ["bench", spec, "--estimate", "--doc", d / "links"]),
    ):
        case(
            command,
            argv,
            False,
            f"-o onto a file of another kind ({argv[-1]})",
            "data loss",
            [good],
        )
    return out


def _tables_named(d: Path) -> dict[str, bool]:
    names = sorted(p.name for p in (d / "tables").iterdir())
    good = {"bom.csv", "plain.csv", "label-column.csv", "plain.parquet"}
    return {f"tables/{n}": n in good for n in names}


def _odd_named(d: Path) -> dict[str, bool]:
    bad = {
        "uint64-huge.npz",
        "int8-negative.npz",
        "int16-out-of-range.npz",
        "nested.pt",
        "list.pt",
        "empty-dict.pt",
    }
    return {f"odd/{p.name}": p.name not in bad for p in sorted((d / "odd").iterdir())}


def _digests(paths: tuple[str, ...]) -> list[str | None]:
    import hashlib

    out = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.append("|".join(sorted(str(q.relative_to(path)) for q in path.rglob("*"))))
        else:
            out.append(hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None)
    return out


def run_case(case: Case) -> tuple[str, str]:
    """(class, the last line of stderr or the exception)."""
    before = _digests(case.inputs)
    cls, said = _run(case)
    if before != _digests(case.inputs):
        return "data loss", f"an input changed ({said})"
    if cls == "clean" and case.cause is not None and case.cause not in said:
        return "misleading", f"does not say {case.cause!r}: {said}"
    if cls == "accepted" and case.verify is not None:
        problem = case.verify()
        if problem:
            return "silent", problem
    return cls, said


def _called(case: Case) -> tuple[str, str]:
    """A library call: a one-line ValueError or TypeError is clean where the input is bad;
    anything else that escapes it is a traceback."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            case.call()
    except (ValueError, TypeError) as err:
        said = str(err)
        if "\n" in said.strip() or not said:
            return "traceback", said.strip().splitlines()[-1] if said else type(err).__name__
        return ("clean" if not case.ok else "silent"), said
    except BaseException:
        return "traceback", traceback.format_exc().strip().splitlines()[-1]
    return ("accepted" if case.ok else "silent"), ""


def _run(case: Case) -> tuple[str, str]:
    if case.call is not None:
        return _called(case)
    err, outp = io.StringIO(), io.StringIO()
    code: object = 0
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(outp):
            main(case.argv)
    except SystemExit as e:
        code = e.code if e.code is not None else 0
    except BaseException:
        return "traceback", traceback.format_exc().strip().splitlines()[-1]
    text = err.getvalue().strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    if code == 0:
        return ("accepted" if case.ok else "silent"), (lines[-1] if lines else "")
    if code == 2 and len(errors) == 1 and "Traceback" not in text:
        return ("clean" if not case.ok else "silent"), errors[0]
    return "traceback", (lines[-1] if lines else f"exit {code}")


def _round(case: Case) -> int:
    """The round that added ``case``: 2, 3 (issue 41's families), 4 (issue 53's) or 6
    (issue 65's)."""
    if case.family == "round 2":
        return 2
    return int(case.family[0]) if case.family[:2] in ("4 ", "6 ") else 3


def main_(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default=None, help="Run the cases of one command.")
    parser.add_argument(
        "--round",
        type=int,
        choices=(2, 3, 4, 6),
        default=None,
        help="Run one round's cases (3: issue 41's families; 4: issue 53's; 6: issue 65's).",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        os.chdir(d)  # the working folder too: an output a version wrote to '' lands here
        try:
            print("building the cases' files ...", file=sys.stderr, flush=True)
            todo = [c for c in cases(d) if args.only in (None, c.command)]
            if args.round is not None:
                todo = [c for c in todo if _round(c) == args.round]
            if os.access(d / "ro", os.W_OK):  # root writes anywhere: no read-only case here
                todo = [c for c in todo if not any(str(d / "ro") in a for a in c.argv)]
            results, last = [], time.monotonic()
            for i, c in enumerate(todo, 1):
                results.append((c, *run_case(c)))
                if time.monotonic() - last >= 10:  # a line every 10 s, on a terminal or not
                    print(f"{i}/{len(todo)} cases", file=sys.stderr, flush=True)
                    last = time.monotonic()
        finally:
            os.chmod(d / "ro", 0o755)
            os.chdir(here)
    totals = Counter(r[1] for r in results)
    by_command: dict[str, Counter] = {}
    for c, cls, _ in results:
        by_command.setdefault(c.command, Counter())[cls] += 1
        if c.family != "round 2":
            by_command.setdefault(f"[{c.family}]", Counter())[cls] += 1
    summary = {
        "cases": len(results),
        "totals": dict(totals),
        "by_command": {k: dict(v) for k, v in by_command.items()},
        "problems": [
            {"command": c.command, "what": c.what, "argv": c.argv, "class": cls, "said": said}
            for c, cls, said in results
            if cls in ("silent", "traceback", "data loss", "misleading")
        ],
    }
    if args.json:
        print(
            json.dumps(
                summary
                | {
                    "every": [
                        {"what": c.what, "class": cls, "said": said} for c, cls, said in results
                    ]
                },
                indent=1,
            )
        )
    else:
        for p in summary["problems"]:
            print(f"{p['class']:>9}  {p['command']}: {p['what']}: {p['said'][:150]}")
        for k, v in summary["by_command"].items():
            print(f"{k:>10}: " + ", ".join(f"{n} {c}" for c, n in sorted(v.items())))
        print(f"{len(results)} cases: " + ", ".join(f"{n} {c}" for c, n in sorted(totals.items())))
    return summary


if __name__ == "__main__":
    main_(sys.argv[1:])
