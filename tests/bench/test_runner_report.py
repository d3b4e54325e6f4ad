"""The sweep runner resumes after SIGKILL without redoing work or duplicating rows, gives
the same numbers with 1 or 2 workers, and its HTML report renders in headless Chromium."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from calibkit.bench._report import write_report
from calibkit.bench._runner import run_bench
from calibkit.bench._spec import load_spec
from calibkit.bench._store import Store, StoreError
from tests.browser import headless
from tests.test_cli import run

REPO = Path(__file__).resolve().parents[2]
SPEC = """name: three
seeds: [1, 2, 3]
train: {epochs: 3}
datasets:
  - data: digits
    models: [mlp]
methods:
  - {name: CE, loss: ce}
posthoc: [ts, hist-binning]
record: true
"""


def bench_cmd(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.Popen(
        [sys.executable, "-m", "calibkit", "bench", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A sweep killed with SIGKILL after its first finished run, then started again."""
    root = tmp_path_factory.mktemp("sweep")
    (root / "spec.yaml").write_text(SPEC)
    out = root / "out"
    proc = bench_cmd(str(root / "spec.yaml"), "-o", str(out), "--workers", "1")
    db = out / "results.sqlite"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        try:
            if db.exists() and Store(db).done():
                break
        except StoreError:  # the sweep is still creating its store
            pass
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = {k: t for k, t in sqlite3.connect(db).execute("SELECT key, finished FROM runs")}
    second = bench_cmd(str(root / "spec.yaml"), "-o", str(out), "--workers", "1")
    assert second.wait(timeout=600) == 0, second.stderr.read().decode()[-2000:]
    return root, out, first


def test_a_killed_sweep_finishes_the_rest_once(swept):
    _, out, first = swept
    assert 1 <= len(first) < 3, "the sweep was not interrupted"
    con = sqlite3.connect(out / "results.sqlite")
    rows = dict(con.execute("SELECT key, finished FROM runs"))
    assert len(rows) == 3 and set(Store(out / "results.sqlite").done()) == set(rows)
    assert all(rows[k] == t for k, t in first.items())  # finished runs were not redone
    per_run = dict(con.execute("SELECT run_key, COUNT(*) FROM metrics GROUP BY run_key"))
    assert len(set(per_run.values())) == 1 and set(per_run) == set(rows)


def test_each_run_records_its_phases_and_they_fit_inside_its_time(swept):
    _, out, _ = swept
    store = Store(out / "results.sqlite")
    con = sqlite3.connect(out / "results.sqlite")
    for seconds, prov in con.execute("SELECT seconds, provenance FROM runs"):
        phases = json.loads(prov)["phases"]
        assert set(phases) == {"train", "stage2", "model_fit", "posthoc", "measure"}
        assert phases["train"] > 0 and phases["posthoc"] > 0 and phases["measure"] > 0
        assert phases["stage2"] == 0 and phases["model_fit"] == 0  # none in this spec
        assert sum(phases.values()) <= seconds
    totals = store.phase_seconds(store.done())
    assert totals["train"] == pytest.approx(
        sum(json.loads(p)["phases"]["train"] for (p,) in con.execute("SELECT provenance FROM runs"))
    )
    assert store.phase_seconds([]) == {}


def test_two_workers_give_the_numbers_of_one(swept, tmp_path):
    root, out, _ = swept
    counts = run_bench(load_spec(root / "spec.yaml"), tmp_path / "two", workers=2)
    assert counts["done"] == 3
    # every run uses the same thread count: bit-identical numbers
    assert computed(out) == computed(tmp_path / "two")


def computed(out) -> dict:
    """The store's metrics but the fit times (wall time: measured, not computed), which must
    be there for every calibrator."""
    metrics = {tuple(r[:5]): r[5] for r in Store(out / "results.sqlite").metrics()}
    timed = {k[:4] for k in metrics if k[4] == "fit_seconds"}
    assert timed == {k[:4] for k in metrics if k[2] != "uncalibrated" and k[4] == "ece"}
    return {k: v for k, v in metrics.items() if k[4] != "fit_seconds"}


def test_the_html_report_renders_in_headless_chromium(swept, tmp_path):
    _, out, _ = swept
    info = write_report(out / "results.sqlite", tmp_path)
    page = (tmp_path / "report.html").resolve()
    dom = headless("--dump-dom", page.as_uri())
    assert dom.count("<table>") == info["tables"] >= 6
    assert dom.count("<img") == info["figures"] >= 4 and "data:image/png;base64," in dom
    shot = tmp_path / "shot.png"
    headless(f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.shape == (1600, 1200) and pixels.std() > 10  # not a blank page
    assert (pixels < 128).mean() > 0.01  # text and table lines are drawn


def test_bench_and_report_commands_fail_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    (tmp_path / "one.yaml").write_text(SPEC.replace("seeds: [1, 2, 3]", "seeds: [1]"))
    code, _, err = run(
        ["bench", str(tmp_path / "one.yaml"), "--engine", "ray", "-o", str(tmp_path)], capsys
    )
    assert code == 2 and "pip install 'calibkit[ray]'" in err
    code, _, err = run(["report", str(tmp_path / "none.sqlite"), "-o", str(tmp_path)], capsys)
    assert code == 2 and "no such results store" in err
    Store(tmp_path / "empty.sqlite")
    code, _, err = run(["report", str(tmp_path / "empty.sqlite"), "-o", str(tmp_path)], capsys)
    assert code == 2 and "holds no finished run" in err
    (tmp_path / "bad.yaml").write_text("datasets: 3\n")
    code, _, err = run(["bench", str(tmp_path / "bad.yaml")], capsys)
    assert code == 2 and "bad.yaml" in err and len(err.strip().splitlines()) == 1


def test_missing_data_files_fail_once_before_any_run(tmp_path, capsys):
    """Issue 30.4: a root folder without the dataset's files is one line, exit code 2, and
    no run is tried (not every run failing with the same error)."""
    (tmp_path / "data").mkdir()
    spec = SPEC.replace("data: digits", f"data: cifar10:root={tmp_path / 'data'}")
    (tmp_path / "cifar.yaml").write_text(spec.replace("models: [mlp]", "models: [resnet20]"))
    code, _, err = run(["bench", str(tmp_path / "cifar.yaml"), "-o", str(tmp_path / "o")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: data cifar10:root={tmp_path / 'data'}: missing ") and (
        "nothing has run" in err
    )
    assert Store(tmp_path / "o" / "results.sqlite").done() == set()


def test_report_tables_follow_the_store(swept, tmp_path):
    _, out, _ = swept
    info = write_report(out / "results.sqlite", tmp_path)
    md = (tmp_path / "report.md").read_text()
    for title in (
        "Test ECE (%), uncalibrated",
        "ECE (%) after temperature scaling",
        "calibratability",
        "Refinement AUROC",
        "Post-hoc methods",
    ):
        assert title in md
    head, *rows = info["headline"]
    assert head == ["method", "digits / mlp (± std over seeds)"] and rows[0][0] == "CE"
    store = Store(out / "results.sqlite")
    eces = [
        v for k, s, c, n, m, v in store.metrics() if (s, c, m) == ("test", "uncalibrated", "ece")
    ]
    mean, std = 100 * np.mean(eces), 100 * np.std(eces, ddof=1)
    assert rows[0][1].strip("*") == f"{mean:.2f} ± {std:.2f}"
    assert json.loads(json.dumps(info["headline"]))


def test_every_run_stores_paired_bootstrap_replicates(swept):
    """The verdicts' nested bootstrap: 200 replicates of each claim metric per run and
    calibrator on the test split, the resamples shared by runs of the same test rows."""
    from calibkit.bench._execute import REPLICATES
    from calibkit.bench._verdicts import NESTED_METRICS
    from calibkit.metrics._resample import bootstrap_replicates

    _, out, _ = swept
    store = Store(out / "results.sqlite")
    reps = store.curves("bootstrap")
    assert {c for _, _, c, _ in reps} >= {"uncalibrated", "ts"}
    key, _, _, data = next(r for r in reps if r[2] == "uncalibrated")
    assert set(data) == set(NESTED_METRICS) and all(len(v) == REPLICATES for v in data.values())
    with sqlite3.connect(out / "results.sqlite") as con:
        (artefacts,) = con.execute("SELECT artefacts FROM runs WHERE key = ?", (key,)).fetchone()
    z = np.load(json.loads(artefacts)["logits"])
    again = bootstrap_replicates(z["logits_test"], z["labels_test"], ["ece"], REPLICATES)
    np.testing.assert_allclose(data["ece"], again["ece"], rtol=1e-12)


def test_ray_engine_gives_the_numbers_of_the_local_engine(swept, tmp_path):
    """A local Ray cluster of 2 CPUs runs each run as a task; the numbers are the local ones."""
    ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")
    root, out, _ = swept
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        counts = run_bench(load_spec(root / "spec.yaml"), tmp_path / "ray", engine="ray")
    finally:
        ray.shutdown()
    assert counts["done"] == 3
    assert computed(out) == computed(tmp_path / "ray")


def test_a_sweep_killed_late_restarts_only_the_missing_runs(tmp_path):
    """Issue 41 §7: SIGKILL after k of n runs are stored; the restart runs exactly n - k."""
    n = 4
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        SPEC.replace("seeds: [1, 2, 3]", "seeds: [1, 2, 3, 4]")
        .replace("record: true\n", "")
        .replace("epochs: 3", "epochs: 1")
    )
    out = tmp_path / "out"
    proc = bench_cmd(str(spec), "-o", str(out), "--workers", "1")
    db = out / "results.sqlite"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if db.exists() and len(Store(db).done()) >= n - 1:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    k = len(Store(db).done())
    assert 1 <= k < n, f"the sweep was not interrupted late ({k} of {n} stored)"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "calibkit",
            "bench",
            str(spec),
            "-o",
            str(out),
            "--workers",
            "1",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    counts = json.loads(again.stdout)["counts"]
    assert counts == {"total": n, "skipped": k, "done": n - k, "failed": 0}


def test_sigterm_stops_the_workers_without_leaking_semaphores(tmp_path):
    """Issue 41 §7: SIGTERM printed a resource_tracker 'leaked semaphore objects' warning.
    It now unwinds like Ctrl-C: the workers are stopped, the queues released, exit 143."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("record: true\n", "").replace("epochs: 3", "epochs: 20"))
    out = tmp_path / "out"
    proc = bench_cmd(str(spec), "-o", str(out), "--workers", "2")
    deadline = time.time() + 120
    while time.time() < deadline and not list((out / "train").glob("*/checkpoint.pt")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    err = proc.stderr.read().decode()
    assert "leaked semaphore" not in err and "Traceback" not in err, err[-2000:]
    assert err.strip().endswith("terminated")
