"""A sweep of bad and odd inputs over every command, as a careless or hostile user gives
them: each case is one command line with what it should do (fail with a one-line error, or
run), run in this process, and classed as

- **clean**: an expected failure that exits 2 with one line starting "error: " that names
  the option or the file;
- **accepted**: an expected success (exit 0);
- **silent**: a bad input that exited 0 (or a good one that failed);
- **traceback**: anything else (an uncaught exception, another exit code, a multi-line
  error).

    python benchmarks/bad_inputs.py                 # about 35 s on 2 cores (quiet)
    python benchmarks/bad_inputs.py --json          # every case and its class
    python benchmarks/bad_inputs.py --only train    # the cases of one command

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
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from calibkit import posthoc
from calibkit.cli import main
from calibkit.training import TrainConfig, train

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the forgeries of the tests
from tests.posthoc.test_forged_files import FORGERIES, forge


@dataclass
class Case:
    command: str
    argv: list[str]
    ok: bool  # True: the command should run; False: it should fail in one line
    what: str


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


#: files a command takes although evaluate's verdict differs: probabilities are valid
#: logits to a calibrator (the file does not say which it holds), apply needs no labels
TAKEN = {
    "fit": {"probs.npz", "probsbad.npz", "probsneg.npz"},
    "apply": {"probs.npz", "probsbad.npz", "probsneg.npz", "nolabels.npz", "good.npy",
              "oneclass.npz"},
    "compare": {"probs.npz", "probsbad.npz", "probsneg.npz"},
}  # fmt: skip
#: files evaluate takes that a calibrator must refuse: one class only (nothing to fit, and
#: a 10-class calibrator cannot take a single column)
REFUSED = {"oneclass.npz", "onecol.npz"}


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
    out.append(Case("fit", ["fit", "--method", "ts:", "--val", good, "-o", str(d / "o.calib")],
                    True, "--method 'ts:' (no settings: ts)"))  # fmt: skip
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
    out.append(Case("train", [*t, "--resume", "-o", str(d / "t-new")], True,
                    "resume with no checkpoint yet"))  # fmt: skip
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
        out.append(Case("apply", ["apply", path, good, "-o", str(d / "o.npz")], False,
                        f"forged calibrator: {what}"))  # fmt: skip
    out.append(Case("methods", ["methods", "--json"], True, "methods"))
    out.append(Case("methods", ["methods", "extra"], False, "an argument"))
    return out


def run_case(case: Case) -> tuple[str, str]:
    """(class, the last line of stderr or the exception)."""
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


def main_(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default=None, help="Run the cases of one command.")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        try:
            todo = [c for c in cases(d) if args.only in (None, c.command)]
            if os.access(d / "ro", os.W_OK):  # root writes anywhere: no read-only case here
                todo = [c for c in todo if not any(str(d / "ro") in a for a in c.argv)]
            results = [(c, *run_case(c)) for c in todo]
        finally:
            os.chmod(d / "ro", 0o755)
    totals = Counter(r[1] for r in results)
    by_command: dict[str, Counter] = {}
    for c, cls, _ in results:
        by_command.setdefault(c.command, Counter())[cls] += 1
    summary = {
        "cases": len(results),
        "totals": dict(totals),
        "by_command": {k: dict(v) for k, v in by_command.items()},
        "problems": [
            {"command": c.command, "what": c.what, "argv": c.argv, "class": cls, "said": said}
            for c, cls, said in results
            if cls in ("silent", "traceback")
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
