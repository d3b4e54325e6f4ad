"""Model-level methods on any pretrained network: `calibkit calibrate` and MaC-Cal stage 2 given
--model, --checkpoint and a data spec instead of a calibkit run folder."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from calibkit import models
from calibkit.cli import main
from tests.data.test_real_formats import write_tree
from tests.models.test_checkpoint import published_layout


@pytest.fixture
def pretrained(tmp_path):
    root = tmp_path / "tree"
    write_tree(root, "train", ["a", "b", "c"], 12, size=(16, 16))
    write_tree(root, "test", ["a", "b", "c"], 4, size=(16, 16), seed=1)
    torch.manual_seed(0)
    net = models.create("resnet20", num_classes=3)
    torch.save({"state_dict": published_layout(net)}, tmp_path / "r20.th")
    return f"folder:root={root},val_size=9", tmp_path / "r20.th", net


def run_json(argv, capsys):
    try:
        main([*argv, "--json"])
    except SystemExit as e:
        assert e.code in (0, None), capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def digits_checkpoint(tmp_path_factory):
    """A CNN trained for 6 epochs on digits by calibkit: its weights are the checkpoint."""
    out = tmp_path_factory.mktemp("digits") / "run"
    try:
        main(
            [
                "train",
                "--data",
                "digits",
                "--model",
                "cnn",
                "--epochs",
                "6",
                "--schedule",
                "constant",
                "--lr",
                "0.05",
                "--device",
                "cpu",
                "-o",
                str(out),
                "--json",
            ]
        )
    except SystemExit as e:
        assert e.code in (0, None)
    return out


def test_calibrate_takes_a_pretrained_network_and_writes_its_uncalibrated_run_beside(
    digits_checkpoint, tmp_path, capsys
):
    out = tmp_path / "nc"
    ckpt = digits_checkpoint / "model.safetensors"
    argv = [
        "calibrate",
        "neural-clamping:epochs=2",
        "--model",
        "cnn",
        "--checkpoint",
        str(ckpt),
        "--data",
        "digits",
        "-o",
        str(out),
    ]
    report = run_json([*argv, "--device", "cpu"], capsys)
    assert report["output"] == str(out) and 0.01 <= report["fit"]["details"]["temperature"] <= 100
    base = np.load(out / "pretrained" / "logits.npz")
    calibrated = np.load(out / "logits.npz")
    assert base["logits_test"].shape == calibrated["logits_test"].shape == (497, 10)
    # the uncalibrated logits are the checkpoint's network: those of the run it came from
    trained = np.load(digits_checkpoint / "logits.npz")
    assert np.allclose(base["logits_test"], trained["logits_test"], atol=1e-5)
    assert np.array_equal(base["labels_test"], trained["labels_test"])


def test_calibrate_on_an_image_tree_reports_a_fit_with_no_optimum_in_one_line(
    pretrained, tmp_path, capsys
):
    """An untrained network on random images has no signal: the best temperature is infinite.
    The fit stops with the cause, rather than writing a diverged calibrator."""
    spec, ckpt, _ = pretrained
    with pytest.raises(SystemExit) as e:
        main(
            [
                "calibrate",
                "neural-clamping:epochs=2",
                "--model",
                "resnet20",
                "--checkpoint",
                str(ckpt),
                "--data",
                spec,
                "--device",
                "cpu",
                "-o",
                str(tmp_path / "nc"),
            ]
        )
    err = capsys.readouterr().err
    assert e.value.code == 2 and "neural clamping diverged" in err and "Traceback" not in err
    assert (tmp_path / "nc" / "pretrained" / "logits.npz").exists()
    assert not (tmp_path / "nc" / "logits.npz").exists()


def test_stage2_runs_on_pretrained_weights_without_training_stage1(pretrained, tmp_path, capsys):
    spec, ckpt, _ = pretrained
    out = tmp_path / "m"
    argv = [
        "train",
        "--data",
        spec,
        "--model",
        "resnet20",
        "--checkpoint",
        str(ckpt),
        "--stage2",
        "maccal:epochs=2,batch_size=8",
        "--device",
        "cpu",
        "-o",
        str(out),
    ]
    report = run_json(argv, capsys)
    assert len(report["history"]) == 2 and report["method"] == "maccal:epochs=2,batch_size=8"
    run = json.loads((out / "stage1" / "run.json").read_text())
    assert run["pretrained"] == str(ckpt.resolve()) and run["config"]["checkpoint"] == str(ckpt)
    assert (out / "model.safetensors").exists()


def test_pretrained_options_are_checked_before_anything_runs(pretrained, tmp_path, capsys):
    spec, ckpt, _ = pretrained
    with pytest.raises(SystemExit) as e:
        main(
            [
                "calibrate",
                "neural-clamping",
                "--model",
                "resnet20",
                "--checkpoint",
                str(ckpt),
                "-o",
                str(tmp_path),
            ]
        )
    assert e.value.code == 2 and "--model, --checkpoint, --data" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(
            [
                "calibrate",
                "neural-clamping",
                "--model",
                "resnet20",
                "--checkpoint",
                str(tmp_path / "none.th"),
                "--data",
                spec,
                "-o",
                str(tmp_path / "o"),
            ]
        )
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--checkpoint: no such file" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as e:
        main(
            [
                "calibrate",
                "neural-clamping",
                "--model",
                "resnet32",
                "--checkpoint",
                str(ckpt),
                "--data",
                spec,
                "-o",
                str(tmp_path / "o"),
            ]
        )
    err = capsys.readouterr().err
    assert e.value.code == 2 and "does not fit the model: missing layer1.3" in err


def test_building_the_pretrained_run_says_what_it_does(
    digits_checkpoint, tmp_path, capsys, monkeypatch
):
    """Issue 42 §2: reading the CIFAR JPEG tree and predicting its splits took half a minute
    with no line at all, before the calibration's own progress started."""
    from calibkit.cli import _progress as progress

    monkeypatch.setattr(progress, "PROGRESS_EVERY", 0.0)
    main(
        [
            "calibrate",
            "ts",
            "--model",
            "cnn",
            "--checkpoint",
            str(digits_checkpoint / "model.safetensors"),
            "--data",
            "digits",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "ts"),
        ]
    )
    err = capsys.readouterr().err
    assert "pretrained run: 1/1" in err and "reading digits and predicting its splits" in err
    # train --stage2 on pretrained weights: the same step, silent for 46 s on the JPEG tree
    main(
        [
            "train",
            "--data",
            "digits",
            "--model",
            "cnn",
            "--checkpoint",
            str(digits_checkpoint / "model.safetensors"),
            "--stage2",
            "ts",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "m"),
        ]
    )
    err = capsys.readouterr().err
    assert "pretrained run: 1/1" in err and "reading digits and predicting its splits" in err
