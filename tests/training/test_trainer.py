"""The trainer: deterministic for a seed, resumable after SIGKILL with exactly the weights
and numbers of an uninterrupted run, data-parallel under torchrun, and its output flows
into `calibkit compare`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from calibkit.training import TrainConfig, TrainingError, train
from tests.data.test_loaders import write_cifar_binary

REPO = Path(__file__).resolve().parents[2]


def without_time(history):
    return [
        {k: v for k, v in h.items() if k not in ("time", "train_time", "val_time")} for h in history
    ]


def weights(run: Path):
    return load_file(run / "model.safetensors")


def test_same_seed_same_run_other_seed_other_run(tmp_path):
    cfg = dict(data="digits", model="cnn", loss="focal:gamma=3", epochs=3, mixup=0.2)
    a = train(TrainConfig(**cfg, seed=1), tmp_path / "a")
    b = train(TrainConfig(**cfg, seed=1), tmp_path / "b")
    c = train(TrainConfig(**cfg, seed=2), tmp_path / "c")
    assert without_time(a.history) == without_time(b.history) != without_time(c.history)
    wa, wb = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    logits = np.load(tmp_path / "a" / "logits.npz")
    assert set(logits) == {"logits_val", "labels_val", "logits_test", "labels_test"}
    assert logits["logits_test"].shape == (497, 10)
    record = a.history[-1]
    assert set(record) == {
        "epoch",
        "train_loss",
        "train_acc",
        "val_acc",
        "val_ece",
        "val_nll",
        "val_optimal_ece",
        "lr",
        "train_time",
        "val_time",
        "time",
    }
    assert 0 < record["val_time"] <= record["time"] - record["train_time"]
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["loss"]["parameters"]["gamma"] == 3 and run["mixup"] == 0.2
    assert {"torch", "calibkit"} <= set(run["versions"]) and "git_revision" in run


def test_recorders_write_the_analysis_arrays(tmp_path):
    cfg = TrainConfig(
        epochs=3, record_learned_epochs=True, record_grad_norms=[1, 3], loss="bsce-gra"
    )
    train(cfg, tmp_path)
    with np.load(tmp_path / "analysis.npz") as a:
        assert a["learned_epoch"].shape == a["max_logit"].shape == (1000,)
        assert set(np.unique(a["learned_epoch"])) <= {1, 2, 3, 4}
        assert a["grad_norm_epoch1"].shape == a["brier_epoch3"].shape == (1000,)
        assert (a["grad_norm_epoch3"] >= 0).all()


CLI_RUN = [
    "--data",
    "gaussian-toy:n_train=2000,n_test=100",
    "--model",
    "mlp:hidden=256",
    "--loss",
    "bsce-gra",
    "--epochs",
    "4",
    "--batch-size",
    "16",
    "--seed",
    "3",
]


def calibkit(*args, **kw):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "calibkit", *args], env=env, **kw)


def test_resume_after_sigkill_mid_epoch_finishes_the_same_run(tmp_path):
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert calibkit("train", *CLI_RUN, "-o", str(whole)).wait(timeout=300) == 0
    proc = calibkit("train", *CLI_RUN, "-o", str(broken))
    checkpoint = broken / "checkpoint.pt"
    deadline = time.time() + 300
    while not checkpoint.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # well inside the second epoch (an epoch takes over a second)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (broken / "history.json").exists()
    assert torch.load(checkpoint, weights_only=True)["epoch"] < 4
    assert calibkit("train", *CLI_RUN, "-o", str(broken), "--resume").wait(timeout=300) == 0
    wa, wb = weights(whole), weights(broken)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    ha = json.loads((whole / "history.json").read_text())
    hb = json.loads((broken / "history.json").read_text())
    assert without_time(ha) == without_time(hb)
    la, lb = np.load(whole / "logits.npz"), np.load(broken / "logits.npz")
    assert all(np.array_equal(la[k], lb[k]) for k in la)


def test_two_gloo_processes_match_one_process(tmp_path):
    """With a model without batch norm (the MLP), two processes that each take half of
    every batch compute the same averaged gradient as one process with the whole batch:
    the weights agree up to float32 summation order (1e-5), the history to 1e-4. (With
    batch norm they would differ: each process normalises by its own half-batch.)"""
    args = ["train", "--data", "digits", "--model", "mlp", "--epochs", "2", "--batch-size", "100"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert calibkit(*args, "-o", str(one)).wait(timeout=300) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "calibkit",
        *args,
        "-o",
        str(two),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("epochs: train accuracy") == 1  # one summary, from the writer
    w1, w2 = weights(one), weights(two)
    assert all(torch.allclose(w1[k], w2[k], atol=1e-5) for k in w1)
    h1 = json.loads((one / "history.json").read_text())
    h2 = json.loads((two / "history.json").read_text())
    for a, b in zip(h1, h2, strict=True):
        for key in ("train_loss", "train_acc", "val_acc", "val_nll"):
            assert a[key] == pytest.approx(b[key], abs=1e-4), key


def test_cifar_files_with_an_extra_split_flow_into_compare(tmp_path):
    write_cifar_binary(tmp_path, 10, per_batch=20)
    np.save(tmp_path / "cifar10.1_v6_data.npy", np.zeros((6, 32, 32, 3), np.uint8))
    np.save(tmp_path / "cifar10.1_v6_labels.npy", np.arange(6))
    root = f"root={tmp_path}"
    run = tmp_path / "run"
    write_cifar_binary(tmp_path, 100, per_batch=10)  # another label set: out-of-distribution
    extra = [f"cifar10.1:{root}", f"cifar100:{root},val_size=2"]
    cfg = TrainConfig(
        data=f"cifar10:{root},val_size=20", model="resnet32", epochs=1, batch_size=32, extra=extra
    )
    train(cfg, run)
    with np.load(run / "logits.npz") as f:
        assert f["logits_cifar10_1"].shape == (6, 10) and f["labels_val"].shape == (20,)
        assert f["logits_ood_cifar100"].shape == (10, 10) and "labels_ood_cifar100" not in f
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "calibkit",
            "compare",
            "--file",
            str(run / "logits.npz"),
            "--methods",
            "ts",
            "--bootstrap",
            "0",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "ts" in json.loads(out.stdout)["methods"]


def test_bad_runs_fail_with_one_line(tmp_path):
    train(TrainConfig(epochs=1), tmp_path / "x")
    with pytest.raises(TrainingError, match="already holds a run; pass resume=True"):
        train(TrainConfig(epochs=1), tmp_path / "x")
    with pytest.raises(TrainingError, match="another configuration"):
        train(TrainConfig(epochs=1, seed=5), tmp_path / "x", resume=True)
    with pytest.raises(ValueError, match=r"epochs: expected an integer in 1\.\.1,000,000"):
        TrainConfig(epochs=0).check()
    with pytest.raises(ValueError, match="unknown model 'resnet18'"):
        TrainConfig(model="resnet18").check()
    with pytest.raises(ValueError, match=r"record_grad_norms: epochs must lie in 1\.\.2"):
        TrainConfig(epochs=2, record_grad_norms=[3]).check()
    with pytest.raises(TrainingError, match="training loss became nan"):
        train(
            TrainConfig(epochs=2, lr=100.0, momentum=0.99, weight_decay=1.0, model="mlp"),
            tmp_path / "nan",
        )
    np.save(tmp_path / "cifar10.1_v6_data.npy", np.zeros((2, 32, 32, 3), np.uint8))
    np.save(tmp_path / "cifar10.1_v6_labels.npy", np.arange(2))
    with pytest.raises(ValueError, match="has no training split; pass it as extra="):
        train(TrainConfig(data=f"cifar10.1:root={tmp_path}"), tmp_path / "y")
    with pytest.raises(ValueError, match=r"missing .*cifar-10-batches-py \(python version\)"):
        train(TrainConfig(data=f"cifar10:root={tmp_path}"), tmp_path / "z")


def test_train_command_help_json_and_errors(tmp_path, capsys):
    from tests.test_cli import run, run_ok

    out = run_ok(["train", "--help"], capsys)
    assert "Examples:" in out and "--loss bsce-gra" in out and "--resume" in out
    out = run_ok(
        ["train", "--epochs", "2", "--model", "mlp", "-o", str(tmp_path / "r"), "--json"], capsys
    )
    assert [h["epoch"] for h in json.loads(out)["history"]] == [1, 2]
    for argv, message in [
        (["--loss", "focal:gama=1"], "loss 'focal' has no parameter 'gama'; valid: gamma"),
        (["--data", "cifar10"], "error: root: this dataset is read from local files"),
        (["--epochs", "0"], "--epochs: expected an integer in 1..1,000,000, got 0"),
        (["--schedule", "cosine"], "unknown schedule 'cosine'"),
        (["--extra", "nope"], "--extra: unknown dataset 'nope'"),
        (
            ["--record-grad-norms", "1", "--record-grad-norms", "9", "--epochs", "2"],
            "--record-grad-norms: epochs must lie",
        ),
    ]:
        code, _, err = run(["train", *argv, "-o", str(tmp_path / "bad")], capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run(
        ["train", "--epochs", "2", "--model", "mlp", "-o", str(tmp_path / "r")], capsys
    )
    assert code == 2 and "already holds a run; pass --resume" in err


def test_the_train_command_checks_each_setting_and_spec_once(monkeypatch, tmp_path, capsys):
    """Issue 67 §4: ``train --stage2`` checked every TrainConfig field twice (its option,
    then TrainConfig.check) and parsed the data, model and loss specs twice (the check, then
    run.json's again where the calibration loaded the run); the options now only read
    numbers, the config's one check names the flag, and the calibration takes the checked
    config."""
    from calibkit._registry import Registry
    from calibkit._settings import Declared
    from tests.test_cli import run_ok

    texts, values = [], []
    real_check, real_declared = Registry._check, Declared.check

    def check(self, spec, overrides):
        if isinstance(spec, str):  # text, parsed and checked
            texts.append(self.family)
        return real_check(self, spec, overrides)

    def declared(self, value):
        values.append(self.name)
        return real_declared(self, value)

    monkeypatch.setattr(Registry, "_check", check)
    monkeypatch.setattr(Declared, "check", declared)
    argv = ["train", "--model", "mlp", "--epochs", "1", "--lr", "0.05", "--stage2", "ts"]
    run_ok([*argv, "--device", "cpu", "-o", str(tmp_path / "r"), "--json"], capsys)
    assert sorted(texts) == ["calibrator", "dataset", "loss", "model", "schedule"]
    assert values.count("lr") == 1 and values.count("epochs") == 1


def test_a_checkpoint_compares_specs_as_parsed_not_as_typed():
    """A checkpoint keeps its configuration as text; one written before specs were kept
    parsed holds them as the user typed them, and must still resume."""
    from calibkit.training._checkpoints import _same_config

    config = TrainConfig(loss="focal:gamma=3", schedule="step:milestones=[1,2],gamma=0.5")
    typed = config.as_json() | {
        "loss": "focal: gamma=3",
        "schedule": "step:milestones=[1, 2], gamma=0.5",
    }
    assert _same_config(json.dumps(typed), config.check())
    assert not _same_config(json.dumps(typed | {"seed": 5}), config)
    assert not _same_config(json.dumps(typed | {"loss": "focal:gamma=2"}), config)
    assert not _same_config("not json", config)
