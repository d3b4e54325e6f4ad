"""The command line: every input format, JSON and tables, plots, and one-line errors (exit 2)."""

from __future__ import annotations

import contextlib
import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from calibkit.cli import main
from tests.conftest import make_logits


def run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def run_ok(argv, capsys):
    try:
        main(argv)
    except SystemExit as e:  # click exits 0 after --help
        assert e.code in (0, None)
    return capsys.readouterr().out


@pytest.fixture
def data():
    return make_logits(300, 4, 0, dtype=np.float32)


def _json_metrics(out):
    return json.loads(out)["metrics"]


def test_npz_table_json_and_plot(tmp_path, data, capsys):
    z, y = data
    np.savez(tmp_path / "run.npz", logits=z, labels=y)
    out = run_ok(["evaluate", str(tmp_path / "run.npz")], capsys)
    assert "ece" in out and "refinement_auroc" in out and "300 samples" in out
    png, svg = tmp_path / "rel.png", tmp_path / "rel.svg"
    out = run_ok(
        ["evaluate", str(tmp_path / "run.npz"), "--json", "--bootstrap", "50", "--plot", str(png)],
        capsys,
    )
    payload = json.loads(out)
    assert payload["metrics"]["ece"] == pytest.approx(M.ece(z, y))
    assert (
        payload["intervals"]["ece"][0]
        <= payload["metrics"]["ece"]
        <= payload["intervals"]["ece"][1]
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run_ok(["evaluate", str(tmp_path / "run.npz"), "--plot", str(svg), "--no-optimal"], capsys)
    assert b"<svg" in svg.read_bytes()[:500]


def test_every_format_gives_the_same_numbers(tmp_path, data, capsys):
    z, y = data
    want = M.ece(z, y)
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "y.npy", y)
    header = [f"class_{k}" for k in range(4)] + ["labels"]
    rows = np.c_[z.astype(np.float64), y]
    np.savetxt(tmp_path / "s.csv", rows, delimiter=",", header=",".join(header), comments="")
    torch.save({"logits": torch.from_numpy(z), "labels": torch.from_numpy(y)}, tmp_path / "s.pt")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({**{h: z[:, k] for k, h in enumerate(header[:4])}, "label": y}),
        tmp_path / "s.parquet",
    )
    for args in (["z.npy", "y.npy"], ["s.csv"], ["s.pt"], ["s.parquet"]):
        out = run_ok(
            [
                "evaluate",
                *[str(tmp_path / a) for a in args],
                "--json",
                "--no-optimal",
                "--no-smooth",
            ],
            capsys,
        )
        assert _json_metrics(out)["ece"] == pytest.approx(want, abs=1e-6), args


def test_keys_probs_and_binning_options(tmp_path, data, capsys):
    z, y = data
    p = torch.softmax(torch.from_numpy(z), 1).numpy()
    np.savez(tmp_path / "p.npz", probs_test=p, y_test=y)
    args = [
        "evaluate",
        str(tmp_path / "p.npz"),
        "--logits-key",
        "probs_test",
        "--labels-key",
        "y_test",
        "--probs",
        "--binning",
        "torchmetrics",
        "--n-bins",
        "10",
        "--json",
    ]
    assert _json_metrics(run_ok(args, capsys))["ece"] == pytest.approx(
        M.ece(p, y, probs=True, binning="torchmetrics", n_bins=10)
    )


def test_ood_option(tmp_path, data, capsys):
    z, y = data
    np.savez(tmp_path / "in.npz", logits=z, labels=y)
    np.savez(tmp_path / "out.npz", logits=z[:100] / 5)
    out = run_ok(
        ["evaluate", str(tmp_path / "in.npz"), "--ood", str(tmp_path / "out.npz"), "--json"], capsys
    )
    assert _json_metrics(out)["ood_auroc"] == pytest.approx(M.ood_auroc(z, z[:100] / 5))


def _write_pickled_npz(path):
    np.savez(path, logits=np.array([{"a": 1}], dtype=object), labels=np.array([0]))


@pytest.mark.parametrize(
    "make,args,match",
    [
        (None, ["missing.npz"], "no such file"),
        (
            lambda p: np.savez(p / "x.npz", logits=np.zeros((2, 2))),
            ["x.npz"],
            "no labels array 'labels'",
        ),
        (
            lambda p: np.savez(p / "x.npz", scores=np.zeros((2, 2)), labels=[0, 1]),
            ["x.npz"],
            "no scores array 'logits'.*--logits-key",
        ),
        (lambda p: _write_pickled_npz(p / "x.npz"), ["x.npz"], "only pickle could load"),
        (
            lambda p: (p / "x.pt").write_bytes(pickle.dumps({"logits": [1.0]})),
            ["x.pt"],
            "only pickle could load|not a readable torch file",
        ),
        (
            lambda p: torch.save(
                {"logits": torch.zeros(2, 2), "labels": torch.tensor([0, 5])}, p / "x.pt"
            ),
            ["x.pt"],
            "out of range",
        ),
        (
            lambda p: np.savez(p / "x.npz", logits=np.array([[np.nan, 0]]), labels=[0]),
            ["x.npz"],
            "NaN",
        ),
        (
            lambda p: (p / "x.npz").write_bytes(b"PK\x03\x04 truncated"),
            ["x.npz"],
            "not a readable .npz",
        ),
        (lambda p: (p / "x.txt").write_text("1,2"), ["x.txt"], "unknown extension"),
        (
            lambda p: (p / "x.csv").write_text("a,b,labels\n0.1,x,1\n"),
            ["x.csv"],
            "row 2, column 'b': 'x' is not a number",
        ),
        (lambda p: np.save(p / "x.npy", np.zeros((2, 2))), ["x.npy"], "pass the labels .npy too"),
        (
            lambda p: np.savez(p / "x.npz", logits=np.zeros((2, 2)), labels=[0, 1]),
            ["x.npz", "--plot", "out.gif"],
            "--plot",
        ),
        (
            lambda p: np.savez(p / "x.npz", logits=np.zeros((2, 2)), labels=[0, 1]),
            ["x.npz", "--n-bins", "0"],
            "n-bins",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, make, args, match):
    monkeypatch.chdir(tmp_path)
    if make is not None:
        make(tmp_path)
    code, _out, err = run(["evaluate", *args], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
    import re

    assert re.search(match, err), err


def test_help_has_examples_and_module_entry_point(capsys):
    out = run_ok(["evaluate", "--help"], capsys)
    assert "Examples:" in out and "calibkit evaluate run.npz" in out
    proc = subprocess.run(
        [sys.executable, "-m", "calibkit", "--help"], capture_output=True, text=True, check=True
    )
    assert "evaluate" in proc.stdout and "demo" in proc.stdout


def test_demo_makes_logits_and_a_figure(tmp_path, capsys):
    out = run_ok(["demo", "-o", str(tmp_path), "--bootstrap", "20", "--json"], capsys)
    payload = json.loads(out)
    assert payload["n_samples"] == 497 and payload["metrics"]["accuracy"] > 0.9
    assert (tmp_path / "reliability.png").exists()
    with np.load(tmp_path / "digits_logits.npz") as d:
        assert d["logits_val"].shape == (300, 10) and d["labels_test"].shape == (497,)


def test_unwritable_output_is_one_line(tmp_path, data, capsys, monkeypatch):
    """An output path under a file (not a folder) fails cleanly and leaves no temporary file."""
    monkeypatch.chdir(tmp_path)
    z, y = data
    np.savez("run.npz", logits=z, labels=y)
    code, _, err = run(["evaluate", "run.npz", "--plot", "run.npz/r.png"], capsys)
    assert (
        code == 2
        and err == "error: cannot write run.npz/r.png: a part of run.npz is a file, not a folder\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]


def test_evaluate_reads_a_split_as_fit_and_apply_do(tmp_path, data, capsys):
    z, y = data
    np.savez(
        tmp_path / "two.npz",
        logits_val=z[:100],
        labels_val=y[:100],
        logits_test=z[100:],
        labels_test=y[100:],
    )
    out = run_ok(["evaluate", str(tmp_path / "two.npz"), "--json", "--no-smooth"], capsys)
    assert json.loads(out)["n_samples"] == 200  # test by default
    out = run_ok(["evaluate", str(tmp_path / "two.npz"), "--split", "val", "--json"], capsys)
    assert _json_metrics(out)["ece"] == pytest.approx(M.ece(z[:100], y[:100]))
    code, _, err = run(["evaluate", str(tmp_path / "two.npz"), "--split", "train"], capsys)
    assert code == 2 and "no split 'train' (the file has: test, val)" in err


def test_long_commands_talk_off_a_terminal(tmp_path, data, capsys, monkeypatch):
    """Piped or captured, no bar: a progress line on stderr every PROGRESS_EVERY seconds and
    at the end (done/total, elapsed, ETA)."""
    from calibkit.cli import _progress as progress

    z, y = data
    np.savez(tmp_path / "run.npz", logits=z, labels=y)
    monkeypatch.setattr(progress, "PROGRESS_EVERY", 0.0)
    with contextlib.suppress(SystemExit):
        main(["evaluate", str(tmp_path / "run.npz"), "--bootstrap", "600", "--no-smooth"])
    lines = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("bootstrap: ")
    ]
    assert lines[-1].startswith("bootstrap: 600/600, elapsed ") and "ETA 0:00" in lines[-1]
    assert len(lines) >= 2 and lines[0].startswith("bootstrap: 256/600")
    tick = progress._Lines(4, "x")
    tick(0, 4, {"epoch": 1})  # nothing done yet: the ETA is unknown
    assert "x epoch 1: 0/4" in capsys.readouterr().err and progress._clock(float("nan")) == "-:--"


def test_a_long_step_is_not_silent_and_its_eta_skips_the_first_step(monkeypatch, capsys):
    """Issue 42 §2: a line at least every PROGRESS_EVERY seconds while a step runs (the
    heartbeat), with what is running; the ETA is measured from the first step's end."""
    import time as clock

    from calibkit.cli import _progress as progress

    monkeypatch.setattr(progress, "PROGRESS_EVERY", 0.2)
    with progress.progress(3, "work", True) as tick:
        tick.status("building the network")
        # one long first step and no tick: the heartbeat speaks (the sleeps leave room for a
        # heartbeat thread that waits for a core while the suite runs on every core)
        clock.sleep(1.4)
        tick(1)
        tick(1)
        clock.sleep(0.8)
    lines = capsys.readouterr().err.splitlines()
    silent = [line for line in lines if line.startswith("work: 0/3")]
    assert len(silent) >= 2 and all("building the network" in line for line in silent)
    assert lines[-1].startswith("work: 2/3") and "ETA -:--" not in lines[-1]
    t = progress._Lines(10, "x")
    t.start -= 100.0  # a first step of 100 s (reading data), then steps of ~0 s each
    t(1)
    t(1)
    assert t.eta(clock.monotonic()) < 5.0  # not 100 s per step
    t = progress._Lines(27, "bench")  # runs of 10 s, then one that runs for minutes
    t(1)
    t.first, t.last = (t.last - 10.0, 1), t.last - 10.0
    t(1)  # 2 of 27 done, 10 s apart: 25 runs of 10 s left
    assert t.eta(t.last) == pytest.approx(250.0)
    assert t.eta(t.last + 5.0) == pytest.approx(245.0)  # the running run's 5 s count
    assert t.eta(t.last + 600.0) == pytest.approx(240.0)  # held still, not 600 × 25 s


def test_the_terminal_bar_has_an_eta_when_each_step_takes_minutes():
    """Issue 30.3: a bench run or a Neural Clamping epoch takes longer than rich's default
    30-second speed window, and the ETA stayed -:--:--."""
    import io

    from rich.console import Console

    from calibkit.cli._progress import terminal_bar

    clock = [0.0]
    bar = terminal_bar(Console(file=io.StringIO(), force_terminal=True), lambda: clock[0])
    task = bar.add_task("bench", total=4)
    for _ in range(2):
        clock[0] += 60.0  # a run a minute
        bar.advance(task, 1)
    assert bar.tasks[0].time_remaining == pytest.approx(120.0)


def test_version_names_the_row_scan_in_use(monkeypatch):
    from click.testing import CliRunner

    from calibkit.cli import cli
    from calibkit.metrics import _scan as native_scan

    monkeypatch.setenv(native_scan.ENV, "0")
    out = CliRunner().invoke(cli, ["--version"])
    assert out.exit_code == 0
    assert out.output.splitlines()[1] == "row scan: PyTorch (CALIBKIT_NATIVE=0)"
    monkeypatch.delenv(native_scan.ENV)
    kernel = native_scan.kernel()
    line = CliRunner().invoke(cli, ["--version"]).output.splitlines()[1]
    assert line == (f"row scan: compiled ({kernel})" if kernel else line)


def test_help_imports_no_torch():
    """Issue 42 §5: ``calibkit --help`` and each command's ``--help`` import neither PyTorch
    nor scipy (benchmarks/overhead/cli_start.py times them)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from calibkit.cli import cli\n"
        "for args in ([], ['train'], ['evaluate'], ['bench'], ['calibrate'], ['compare']):\n"
        "    try:\n"
        "        cli.main([*args, '--help'], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in ('torch', 'scipy', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_evaluate_help_says_what_every_metric_is():
    from click.testing import CliRunner

    from calibkit.cli import cli
    from calibkit.metrics import METRICS

    text = CliRunner().invoke(cli, ["evaluate", "--help"]).output
    assert [m for m in METRICS if m not in text] == []


def test_the_evaluate_command_checks_each_setting_once(tmp_path, data, capsys, monkeypatch):
    """Issue 67 §4: ``evaluate --n-bins 15 --bootstrap 50`` checked n_bins, bootstrap, seed
    and ci twice (the option, then the library's ``evaluate``); the options are checked where
    they enter and the command calls ``evaluate.trusting``. The library's own call still
    checks, naming the parameter."""
    from calibkit._settings import Declared

    seen = []
    real = Declared.check

    def counted(self, value):
        seen.append(self.name)
        return real(self, value)

    monkeypatch.setattr(Declared, "check", counted)
    np.savez(tmp_path / "run.npz", logits=data[0], labels=data[1])
    argv = ["evaluate", str(tmp_path / "run.npz"), "--n-bins", "15", "--bootstrap", "50"]
    run_ok([*argv, "--no-smooth", "--no-optimal", "--json"], capsys)
    assert sorted(seen) == ["bootstrap", "ci", "n_bins", "seed"]
    with pytest.raises(ValueError, match=r"n_bins: expected an integer in 1\.\.100,000"):
        M.evaluate(*data, n_bins=200_000)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--interval", "bcaa", "Invalid value for '--interval'"),
        ("--binary", "pooled", "Invalid value for '--binary'"),
        ("--n-bins", "200000", "--n-bins: expected an integer in 1..100,000, got 200000"),
    ],
)
def test_the_options_refuse_what_the_library_refuses(tmp_path, data, capsys, flag, value, message):
    """Each metric option is built from its declaration: a value the library refuses is
    refused by the command, under the flag's name, before the file is read."""
    code, _out, err = run(["evaluate", str(tmp_path / "missing.npz"), flag, value], capsys)
    assert code == 2 and message in err and "missing.npz" not in err, err
    name = flag.removeprefix("--").replace("-", "_")
    with pytest.raises(ValueError, match=f"^{name}: expected"):
        M.evaluate(*data, **{name: int(value) if value.isdigit() else value})
