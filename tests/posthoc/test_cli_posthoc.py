"""calibkit fit / apply / compare: round trips, JSON, and one-line errors with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibkit import metrics as M
from calibkit import posthoc
from tests.conftest import make_logits
from tests.test_cli import run, run_ok


@pytest.fixture
def splits(tmp_path):
    z, y = make_logits(900, 4, 3, scale=6.0, acc=0.75, dtype=np.float32)
    path = tmp_path / "both.npz"
    np.savez(path, logits_val=z[:400], labels_val=y[:400], logits_test=z[400:], labels_test=y[400:])
    np.savez(tmp_path / "val.npz", logits=z[:400], labels=y[:400])
    np.savez(tmp_path / "test.npz", logits=z[400:], labels=y[400:])
    return path, z, y


def test_fit_then_apply_equals_python(tmp_path, splits, capsys):
    path, z, y = splits
    out = run_ok(
        ["fit", "--method", "ts", "--val", str(path), "-o", str(tmp_path / "ts.calib")], capsys
    )
    assert "converged" in out and "before" in out and "after" in out
    run_ok(
        ["apply", str(tmp_path / "ts.calib"), str(path), "-o", str(tmp_path / "out.npz")], capsys
    )
    want = posthoc.create("ts").fit(z[:400], y[:400])
    with np.load(tmp_path / "out.npz") as d:
        assert np.allclose(d["logits"], want(z[400:]).numpy(), atol=1e-6)
        assert np.allclose(d["probs"].sum(1), 1) and (d["labels"] == y[400:]).all()


def test_the_commands_are_one_library_call_each(tmp_path, splits):
    """Issue 27.4: fit's measuring and apply's checks live in calibkit.posthoc._on_files."""
    from calibkit.posthoc._on_files import apply_file, fit_file

    path, z, y = splits
    done = fit_file("ts", path, tmp_path / "ts.calib")
    assert done.n_samples == 400 and done.path == tmp_path / "ts.calib"
    assert done.before["ece"] == pytest.approx(M.ece(z[:400], y[:400]))
    assert done.after["nll"] < done.before["nll"]
    out = apply_file(done.calibrator, path, tmp_path / "out.npz")
    before, after = out.pop("before"), out.pop("after")  # the test split has labels: its effect
    assert out == {"method": "ts", "n_samples": 500, "path": str(tmp_path / "out.npz")}
    assert before["ece"] == pytest.approx(M.ece(z[400:], y[400:])) and after["nll"] < before["nll"]
    with pytest.raises(ValueError, match="calibrates a network, not logits"):
        fit_file("neural-clamping", path, tmp_path / "nc.calib")


def test_fit_json_reports_before_and_after(tmp_path, splits, capsys):
    path, *_ = splits
    out = run_ok(
        [
            "fit",
            "--method",
            "hist-binning:n_bins=10",
            "--val",
            str(path),
            "-o",
            str(tmp_path / "h.calib"),
            "--json",
        ],
        capsys,
    )
    payload = json.loads(out)
    assert payload["after"]["ece"] < payload["before"]["ece"]


@pytest.mark.parametrize(
    "args", [["--file", "both.npz"], ["--val", "val.npz", "--test", "test.npz"]]
)
def test_compare_table_and_json(tmp_path, splits, capsys, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    base = ["compare", *args, "--methods", "ts,ts-grid,scaling-binning", "--bootstrap", "50"]
    out = run_ok([*base, "--seeds", "2"], capsys)
    assert "ts-grid" in out and "*" in out
    payload = json.loads(run_ok([*base, "--json"], capsys))
    methods = payload["methods"]
    assert list(methods) == ["ts", "ts-grid", "scaling-binning"]
    _, z, y = splits
    ts = posthoc.create("ts").fit(z[:400], y[:400])
    assert methods["ts"]["metrics"]["ece"] == pytest.approx(M.ece(ts(z[400:]).double(), y[400:]))
    lo, hi = methods["ts"]["intervals"]["ece"]
    assert lo <= methods["ts"]["metrics"]["ece"] <= hi


def test_compare_seeds_give_mean_and_std(tmp_path, splits, capsys):
    path, *_ = splits
    out = run_ok(
        [
            "compare",
            "--file",
            str(path),
            "--methods",
            "scaling-binning,ts",
            "--seeds",
            "3",
            "--bootstrap",
            "0",
            "--json",
        ],
        capsys,
    )
    methods = json.loads(out)["methods"]
    assert (
        methods["scaling-binning"]["seeds"] == 3 and methods["scaling-binning"]["std"] is not None
    )
    assert methods["ts"]["seeds"] == 1 and methods["ts"]["std"] is None


@pytest.mark.parametrize("width", [80, 120, 200])
def test_compare_table_fits_the_width(splits, capsys, monkeypatch, width):
    """Issue 30.3: the table was about 170 columns wide; where the terminal is narrower it
    is printed as several tables, each with the method column, and no line is longer."""
    path, *_ = splits
    monkeypatch.setenv("COLUMNS", str(width))
    out = run_ok(
        [
            "compare",
            "--file",
            str(path),
            "--methods",
            "scaling-binning,ts",
            "--seeds",
            "3",
            "--bootstrap",
            "0",
        ],
        capsys,
    )
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    heads = [line for line in lines if "┃ method" in line]
    assert len(heads) == (1 if width == 200 else 2 if width == 120 else 3)
    table = "".join(lines)
    for c in (" accuracy (%) ± std", " ece (%) ± std", " entropy (nats) ± std"):  # each once
        assert table.count(c) == 1


def test_errors_are_one_line(tmp_path, splits, capsys, monkeypatch):
    _, z, y = splits
    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "three.npz", logits=z[:, :3], labels=np.minimum(y, 2))
    posthoc.create("ts").fit(z[:400], y[:400]).save(tmp_path / "ts.calib")
    (tmp_path / "bad.calib").write_bytes(b"garbage")
    cases = [
        (
            ["fit", "--method", "temp", "--val", "both.npz", "-o", "x.calib"],
            "unknown calibrator 'temp'",
        ),
        (
            ["fit", "--method", "ts:gamma=1", "--val", "both.npz", "-o", "x.calib"],
            "no parameter 'gamma'",
        ),
        (
            ["apply", "ts.calib", "three.npz", "-o", "o.npz"],
            "3 classes but this TemperatureScaling was fitted on 4",
        ),
        (["apply", "bad.calib", "both.npz", "-o", "o.npz"], "not a calibkit calibrator"),
        (["compare", "--val", "both.npz"], "pass --val FILE and --test FILE"),
        (["compare", "--file", "both.npz", "--methods", "ts,nope"], "unknown calibrator 'nope'"),
    ]
    for argv, match in cases:
        code, _, err = run(argv, capsys)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (argv, err)
        assert match in err, (argv, err)


def test_a_network_method_on_a_file_names_the_api_in_python_and_the_command_in_the_cli(
    tmp_path, splits, capsys
):
    """Issue 56 §5: the library names calibrate_run; `calibkit fit` names `calibkit
    calibrate` and its options."""
    from calibkit.posthoc._on_files import NetworkMethodError, fit_file

    path, *_ = splits
    with pytest.raises(NetworkMethodError, match=r"fit it on a run folder \(calibkit\.runs\."):
        fit_file("neural-clamping", path, tmp_path / "nc.calib")
    code, _, err = run(
        ["fit", "--method", "neural-clamping", "--val", str(path), "-o", str(tmp_path / "x")],
        capsys,
    )
    assert code == 2 and err.startswith(
        "error: neural-clamping calibrates a network, not logits: use calibkit calibrate "
        "neural-clamping RUN_DIR (or --model, --checkpoint, --data)"
    )
