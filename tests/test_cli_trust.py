"""Issue 11.11: bad input to every command gets one line and exit code 2 (or, for a sweep
with failed runs, a non-zero exit naming them), never a traceback or a silent result."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from calibkit import posthoc
from calibkit.training import TrainConfig, train
from tests.conftest import make_logits
from tests.test_cli import run, run_ok


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    train(TrainConfig(epochs=1), root / "run")
    return root / "run"


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    z, y = make_logits(200, 10, 0, dtype=np.float32)
    posthoc.create("ts").fit(z, y).save("ts.calib")
    nan = z.copy()
    nan[3, 2] = np.nan
    np.savez("nan.npz", logits=nan, labels=y)
    bad = y.copy()
    bad[0] = 10
    np.savez("label10.npz", logits=z, labels=bad)
    np.savez("empty.npz", logits=np.zeros((0, 10), np.float32), labels=np.zeros(0, int))
    np.savez("both.npz", logits_val=z, labels_val=y, logits_test=z, labels_test=y)
    (tmp_path / "random.npz").write_bytes(np.random.default_rng(0).bytes(300))
    (tmp_path / "blocker").write_text("a file where a folder should be")
    (tmp_path / "empty.pt").write_bytes(b"")
    np.savez("one.npz", logits=z, labels=y)
    return tmp_path


CASES = [
    (["apply", "ts.calib", "nan.npz", "-o", "out.npz"], "1 NaN value"),
    (["apply", "ts.calib", "label10.npz", "-o", "out.npz"], "class index 10 is out of range"),
    (["apply", "ts.calib", "empty.npz", "-o", "out.npz"], "empty input"),
    (["compare", "--file", "both.npz", "--methods", ","], "--methods ',' names no method"),
    (["evaluate", "random.npz"], r"random.npz: not a \.npz file"),
    (["demo", "-o", "blocker/sub"], "cannot write to blocker/sub: a part of it is a file"),
    (["train", "--seed", "-1", "-o", "r"], r"--seed: expected an integer in 0\.\.9,223,372,0"),
    (["train", "--record-grad-norms", "abc", "-o", "r"], "'--record-grad-norms': 'abc' is not"),
    (["train", "--device", "foo", "-o", "r"], "--device: 'foo' is not a device"),
    (["train", "--seed", str(2**80), "-o", "r"], r"--seed: expected an integer in .*, got 1208925"),
    (["train", "--device", "meta", "-o", "r"], "--device: 'meta' cannot train or calibrate"),
    (["compare", "--file", "one.npz", "--methods", "ts"], "one.npz holds one split .* --split"),
    (["evaluate", "empty.pt"], r"empty.pt: not a readable torch file \(empty or truncated\)"),
]


@pytest.mark.parametrize("args, match", CASES)
def test_bad_input_is_one_line(files, capsys, args, match):
    code, _, err = run(args, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert re.search(match, err), err
    assert not (files / "out.npz").exists()
    assert ".out.npz" not in err and "tmp" not in err  # no temporary file name


@pytest.mark.parametrize(
    "args, match",
    [
        (["neural-clamping", "--device", "foo"], "--device: 'foo' is not a device"),
        (["neural-clamping:gamma_pool=abc"], "gamma_pool=abc is not a float or a sequence"),
        (["neural-clamping:gamma_pool=[-1]"], r"gamma_pool: focal γ values in \[0, 20\]"),
        (["neural-clamping:lr=1e9,epochs=5"], "neural clamping diverged .* lower lr"),
    ],
)
def test_calibrate_errors_name_the_setting(trained, capsys, args, match):
    code, _, err = run(["calibrate", args[0], str(trained), *args[1:]], capsys)
    assert code == 2 and err.count("\n") == 1 and re.search(match, err), err


def _damage(run, name: str, data: bytes) -> None:
    (run / name).write_bytes(data)


@pytest.mark.parametrize(
    "damage, args, match",
    [
        (
            lambda r: _damage(r, "logits.npz", b"\x00" * 100),
            ["ts"],
            r"logits\.npz: not a \.npz file",
        ),
        (
            lambda r: _damage(r, "model.safetensors", np.random.default_rng(0).bytes(1000)),
            ["neural-clamping:epochs=1"],
            r"model\.safetensors: not a readable safetensors file",
        ),
        (lambda r: None, ["ts", "--device", "meta"], "--device: 'meta' cannot train or calibrate"),
    ],
)
def test_a_damaged_run_is_named_in_one_line(trained, tmp_path, capsys, damage, args, match):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    damage(copy)
    code, _, err = run(
        ["calibrate", args[0], str(copy), *args[1:], "-o", str(tmp_path / "o")], capsys
    )
    assert code == 2 and err.count("\n") == 1 and re.search(match, err), err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "checkpoint, match",
    [
        (lambda c: torch.zeros(3), "not a calibkit checkpoint"),
        (
            lambda c: c | {"model": {k: torch.zeros(2, 2) for k in c["model"]}},
            "the checkpoint does not fit this run",
        ),
    ],
)
def test_a_bad_checkpoint_is_refused_on_resume(tmp_path, capsys, checkpoint, match):
    out = tmp_path / "r"
    run_ok(["train", "--data", "digits", "--model", "cnn", "--epochs", "1", "-o", str(out)], capsys)
    good = torch.load(out / "checkpoint.pt", weights_only=True)
    torch.save(checkpoint(good), out / "checkpoint.pt")
    (out / "run.json").unlink()  # as if killed before the end
    code, _, err = run(
        [
            "train",
            "--data",
            "digits",
            "--model",
            "cnn",
            "--epochs",
            "1",
            "-o",
            str(out),
            "--resume",
        ],
        capsys,
    )
    assert code == 2 and err.count("\n") == 1 and re.search(match, err), err


def test_a_temporary_name_never_reaches_an_error(tmp_path, monkeypatch):
    from calibkit._outputs import save_npz

    def failing_savez(path, **_):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(OSError) as err:
        save_npz(tmp_path / "out.npz", a=np.zeros(2))
    assert err.value.filename == str(tmp_path / "out.npz")
    assert list(tmp_path.iterdir()) == []


SPEC = """name: failing
seeds: [1]
train: {epochs: 1}
datasets:
  - data: digits
    models: [mlp]
methods:
  - {name: CE, loss: ce}
posthoc: [ts]
"""


def test_bench_with_failed_runs_exits_non_zero_and_names_them(tmp_path, capsys, monkeypatch):
    import calibkit.bench._runner as runner

    def broken(run, root, report=None):
        raise RuntimeError("out of memory in a test")

    monkeypatch.setattr(runner, "execute", broken)
    (tmp_path / "spec.yaml").write_text(SPEC)
    code, out, _ = run(["bench", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "o")], capsys)
    assert code == 1
    assert "failed: CE seed 1: RuntimeError: out of memory in a test" in out
    assert "no report" in out and not (tmp_path / "o" / "report.html").exists()


def test_report_on_a_store_without_results_says_there_is_nothing(tmp_path, capsys):
    from calibkit.bench._store import Store

    Store(tmp_path / "empty.sqlite")  # a calibkit store, no run in it
    code, _, err = run(
        ["report", str(tmp_path / "empty.sqlite"), "-o", str(tmp_path / "r")], capsys
    )
    assert code == 2 and "nothing to report" in err and err.count("\n") == 1
    assert not (tmp_path / "r" / "report.md").exists()


@pytest.mark.parametrize(
    "arrays, match",
    [
        (
            lambda z, y: {"logits": z, "labels": np.where(np.arange(len(y)) == 3, 1e20, y)},
            r"class indices must lie in 0\.\.K-1, found 1e\+20",
        ),
        (
            lambda z, y: {"logits": np.float32(1.0), "labels": y},
            r"logits: a single number; expected shape \(N, K\)",
        ),
    ],
)
def test_messages_name_the_real_problem(tmp_path, capsys, arrays, match):
    z, y = make_logits(50, 10, 0)
    np.savez(tmp_path / "f.npz", **arrays(z, y.astype(float)))
    code, _, err = run(["evaluate", str(tmp_path / "f.npz")], capsys)
    assert code == 2 and re.search(match.replace("logits:", "(logits|scores):"), err), err


def test_a_rewritten_file_keeps_its_mode(tmp_path):
    import os
    import stat

    from calibkit._outputs import write_text

    path = write_text(tmp_path / "private.md", "one")
    os.chmod(path, 0o600)
    write_text(path, "two")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "two"
