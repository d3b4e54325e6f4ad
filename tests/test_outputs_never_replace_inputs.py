"""One rule for every command that writes (calibkit._outputs.check_output): the output may not be,
or lie inside, an input the command reads (by resolved path and by inode), and an empty
output path is refused. Each case checks the one-line error, exit code 2, and that the
input's bytes are unchanged."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from calibkit._outputs import check_output
from tests.conftest import make_logits
from tests.test_cli import run, run_ok


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def npz(tmp_path):
    z, y = make_logits(200, 3, 0, dtype=np.float32)
    path = tmp_path / "val.npz"
    np.savez(path, logits=z, labels=y)
    return path


@pytest.fixture
def calib(tmp_path, npz, capsys):
    path = tmp_path / "ts.calib"
    run_ok(["fit", "--method", "ts", "--val", str(npz), "-o", str(path)], capsys)
    return path


def _refused(argv, capsys, *inputs, says="input"):
    before = [_digest(p) for p in inputs]
    code, _, err = run([str(a) for a in argv], capsys)
    assert code == 2, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert says in err, err
    assert [_digest(p) for p in inputs] == before


def test_fit_onto_its_own_logits(npz, capsys):
    _refused(["fit", "--method", "ts", "--val", npz, "-o", npz], capsys, npz)


def test_fit_onto_a_hard_link_of_its_logits(tmp_path, npz, capsys):
    link = tmp_path / "same.calib"
    os.link(npz, link)
    _refused(["fit", "--method", "ts", "--val", npz, "-o", link], capsys, npz)


def test_fit_onto_a_symbolic_link_of_its_logits(tmp_path, npz, capsys):
    link = tmp_path / "alias.npz"
    link.symlink_to(npz)
    # refused at the option, before the input check: a link is never written through
    _refused(["fit", "--method", "ts", "--val", npz, "-o", link], capsys, npz, says="symbolic link")


def test_apply_onto_its_logits_or_its_calibrator(npz, calib, capsys):
    _refused(["apply", calib, npz, "-o", npz], capsys, npz, calib)
    _refused(["apply", calib, npz, "-o", calib], capsys, npz, calib)


def test_apply_onnx_onto_an_input(npz, calib, capsys):
    _refused(["apply", calib, "--onnx", calib], capsys, calib)


def test_apply_writes_npz_only(tmp_path, npz, calib, capsys):
    _refused(["apply", calib, npz, "-o", tmp_path / "out.csv"], capsys, npz, says=".npz")


def test_calibrate_into_its_source_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "logits.npz").write_bytes(b"kept")
    _refused(
        ["calibrate", "ts", run_dir, "-o", run_dir / "sub"],
        capsys,
        run_dir / "logits.npz",
        says="inside the input folder",
    )
    _refused(["calibrate", "ts", run_dir, "-o", run_dir], capsys, run_dir / "logits.npz")


def test_train_inside_its_data_folder_or_into_nothing(tmp_path, capsys):
    root = tmp_path / "images"
    root.mkdir()
    (root / "keep.txt").write_text("kept")
    _refused(
        ["train", "--data", f"folder:root={root}", "--model", "cnn", "-o", root / "run"],
        capsys,
        root / "keep.txt",
    )
    _refused(["train", "--data", "digits", "--model", "cnn", "-o", ""], capsys, says="empty")


def test_bench_store_onto_its_spec_and_empty_folders(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\n")
    _refused(["bench", spec, "--db", spec], capsys, spec)
    _refused(["bench", spec, "-o", ""], capsys, spec, says="empty")


def test_report_into_nothing(tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    db.write_bytes(b"")
    _refused(["report", db, "-o", ""], capsys, db, says="empty")


def test_evaluate_plot_onto_its_input(npz, capsys):
    _refused(["evaluate", npz, "--plot", npz], capsys, npz)


def test_demo_into_nothing(capsys):
    _refused(["demo", "-o", " "], capsys, says="empty")


def test_the_rule_allows_inputs_inside_the_output(tmp_path):
    (tmp_path / "results.sqlite").write_bytes(b"")
    assert check_output(tmp_path, [tmp_path / "results.sqlite"]) == tmp_path
    assert check_output(None, [tmp_path]) is None
