"""Bench specs are validated completely, with places in the file; the store keeps whole
runs only, survives parallel writers and refuses newer schemas."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from calibkit.bench._spec import SpecError, load_spec
from calibkit.bench._store import SCHEMA_VERSION, Store, StoreError

TINY = """name: tiny
seeds: [1, 2]
train: {epochs: 2}
datasets:
  - data: digits
    models: [cnn, mlp]
methods:
  - {name: CE, loss: ce}
  - {name: MaC-Cal, loss: ce, stage2: "maccal:epochs=2"}
posthoc: [ts, "neural-clamping:epochs=2"]
calibration_sizes: [all, 50]
"""


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_a_spec_expands_to_keyed_runs(tmp_path):
    spec = load_spec(spec_file(tmp_path, TINY))
    assert len(spec.runs) == 2 * 2 * 2  # models x methods x seeds
    keys = [r.key for r in spec.runs]
    assert len(set(keys)) == len(keys)
    again = load_spec(spec_file(tmp_path, TINY))
    assert [r.key for r in again.runs] == keys
    changed = load_spec(spec_file(tmp_path, TINY.replace("epochs: 2}", "epochs: 3}")))
    assert not set(r.key for r in changed.runs) & set(keys)
    assert {r.calibration_sizes for r in spec.runs} == {(None, 50)}
    assert len(load_spec("default").runs) > 50


@pytest.mark.parametrize(
    "edit, message",
    [
        (("loss: ce}", "loss: focus}"), "spec.yaml:8: methods[0].loss: unknown loss 'focus'"),
        (
            ("models: [cnn, mlp]", "models: [cnn, resnet18]"),
            "spec.yaml:6: datasets[0].models[1]: unknown model",
        ),
        (("models: [cnn, mlp]", "models: ['cnn:depth=3']"), "model 'cnn' has no parameter 'depth'"),
        (
            ("data: digits", "data: cifar10:root=/nowhere,val_size=many"),
            "datasets[0].data: dataset 'cifar10': val_size=many is not an int",
        ),
        (("seeds: [1, 2]", "seeds: [1, two]"), "spec.yaml:2: seeds[1]: expected an integer in 0.."),
        (("posthoc: [ts,", "posthoc: [tss,"), "posthoc[0]: unknown calibrator 'tss'"),
        (
            ('"maccal:epochs=2"', '"maccal:q0=2"'),
            "methods[1].stage2: calibrator 'maccal': q0: expected a number in (0, 1], got 2",
        ),
        (("name: MaC-Cal", "name: CE"), "methods[1].name: method name 'CE' is used twice"),
        (
            ("train: {epochs: 2}", "train: {epochs: 2, lr2: 1}"),
            "spec.yaml:3: train.lr2: unknown training option",
        ),
        (("name: tiny", "nam: tiny"), "spec.yaml:1: nam: unknown key"),
        (("[all, 50]", "[all, 1]"), "calibration_sizes[1]: expected 'all' or an integer in 2.."),
        (("seeds: [1, 2]", "seeds: [1, 2"), "not valid YAML"),
        # issue 53 §6: YAML 1.2, not YAML 1.1's surprises; depth limits
        (
            ("seeds: [1, 2]", "seeds: [1:30]"),
            "seeds[0]: expected an integer in 0..9,223,372,036,854,775,807, got '1:30'",
        ),
        (
            ("seeds: [1, 2]", "seeds: [1, 0b11]"),
            "seeds[1]: expected an integer in 0..9,223,372,036,854,775,807, got '0b11'",
        ),
        (
            ("train: {epochs: 2}", "train: {epochs: 2, record_learned_epochs: yes}"),
            "record_learned_epochs",
        ),
        (("seeds: [1, 2]", "seeds: &s [1, *s]"), "nested deeper than 50 levels"),
        (("seeds: [1, 2]", "seeds: " + "[" * 600 + "]" * 600), "nested too deep"),
        (("seeds: [1, 2]", "seeds: " + "[" * 3000 + "]" * 3000), "nested too deep"),
    ],
)
def test_bad_specs_name_their_place(tmp_path, edit, message):
    with pytest.raises(SpecError) as err:
        load_spec(spec_file(tmp_path, TINY.replace(*edit)))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_yaml_12_scalars():
    """The spec is read as YAML 1.2's core schema: ``010`` is ten, ``0o10`` eight, ``0x10``
    sixteen, ``true`` a boolean and ``yes`` text (refused where a boolean is expected)."""
    from calibkit.bench._spec import Yaml12

    def read(text):
        loader = Yaml12(text)
        return loader.construct_document(loader.get_single_node())

    assert read("[010, 0o10, 0x10, 1_000, 1:30, 1.5e3, .inf, true, yes, on, ~]") == [
        10,
        8,
        16,
        "1_000",
        "1:30",
        1500.0,
        float("inf"),
        True,
        "yes",
        "on",
        None,
    ]


def row(key: str) -> dict:
    return {"key": key, "spec": {"k": key}, "dataset": "d", "model": "m", "method": "CE", "seed": 1}


def metrics(n: int) -> list:
    return [("test", "ts", 0, f"m{i}", float(i)) for i in range(n)]


def writer(path: str, start: int) -> None:
    store = Store(path)
    for i in range(start, start + 20):
        store.write_run(
            row(f"run{i}"), metrics(30), [(1, 1, {"a": 1})], [("test", "ts", "bins", [1])]
        )


def test_parallel_writers_lose_no_row(tmp_path):
    path = str(tmp_path / "r.sqlite")
    Store(path)
    procs = [mp.get_context("spawn").Process(target=writer, args=(path, 100 * p)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(path)
    assert len(store.done()) == 80 and len(store.metrics()) == 80 * 30


KILLER = """
import sys
from calibkit.bench._store import Store
s = Store(sys.argv[1])
i = 0
while True:
    rows = [("test", "ts", 0, f"m{j}", 1.0) for j in range(3000)]
    s.write_run({"key": f"k{i}", "spec": {}}, rows)
    i += 1
"""


def test_a_process_killed_while_writing_leaves_whole_runs_only(tmp_path):
    path = tmp_path / "r.sqlite"
    Store(path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", KILLER, str(path)], env=env)
    deadline = time.time() + 60
    while len(Store(path).done()) < 3 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = Store(path)
    counts = {}
    for key, *_ in store.metrics():
        counts[key] = counts.get(key, 0) + 1
    assert len(store.done()) >= 3 and set(counts) == store.done()
    assert set(counts.values()) == {3000}


def test_newer_schema_corrupt_file_and_write_failures_are_one_line(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite"
    Store(path)
    with sqlite3.connect(path) as con:
        con.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    with pytest.raises(StoreError, match=r"written by a newer calibkit .* upgrade calibkit"):
        Store(path)
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="not a calibkit results store"):
        Store(tmp_path / "junk.sqlite")
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot create the folder"):
        Store(tmp_path / "file" / "r.sqlite")
    store = Store(tmp_path / "ok.sqlite")
    real = sqlite3.connect

    for text, message in (
        ("attempt to write a readonly database", "read-only"),
        ("database or disk is full", "disk is full"),
    ):

        class Failing:
            def __init__(self, *a, **k):
                self.con = real(*a, **k)

            def __getattr__(self, name):
                return getattr(self.con, name)

            def executemany(self, *a, text=text):
                raise sqlite3.OperationalError(text)

            def __enter__(self):
                return self.con.__enter__() and self

            def __exit__(self, *a):
                return self.con.__exit__(*a)

        monkeypatch.setattr(sqlite3, "connect", Failing)
        with pytest.raises(StoreError, match=message):
            store.write_run(row("x"), metrics(2))
        monkeypatch.setattr(sqlite3, "connect", real)
        assert "x" not in store.done()  # the transaction rolled back: nothing of the run


@pytest.mark.parametrize(
    "make",
    [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema_version', '2')",  # calibkit's meta shape alone
        "CREATE TABLE meta (k INTEGER, v BLOB)",
        "CREATE TABLE people (name TEXT)",
    ],
)
def test_a_foreign_database_is_refused_before_any_byte_changes(tmp_path, make):
    path = tmp_path / "foreign.db"
    with closing(sqlite3.connect(path)) as con:
        con.executescript(make)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"not a calibkit results store .* nothing was written"):
        Store(path)
    assert path.read_bytes() == before


def test_a_newer_store_is_refused_unchanged_and_an_older_one_is_stamped(tmp_path):
    from calibkit.bench._store import APPLICATION_ID

    path = tmp_path / "r.sqlite"
    Store(path)
    with closing(sqlite3.connect(path)) as con, con:
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"newer calibkit .* nothing was written"):
        Store(path)
    assert path.read_bytes() == before
    with closing(sqlite3.connect(path)) as con, con:  # a store from before the marker
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        con.execute("PRAGMA application_id = 0")
    Store(path)
    with closing(sqlite3.connect(path)) as con:
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_a_second_sweep_on_a_held_folder_is_refused_naming_the_holder(tmp_path):
    from calibkit.bench._runner import folder_lock, run_bench

    held = rf"another calibkit bench \(pid {os.getpid()}\)"
    with folder_lock(tmp_path), pytest.raises(ValueError, match=held), folder_lock(tmp_path):
        pass
    with folder_lock(tmp_path):  # released: taken again
        pass
    spec = load_spec("default")
    with folder_lock(tmp_path), pytest.raises(ValueError, match="another calibkit bench"):
        run_bench(spec, tmp_path)  # refused before the store is opened
    assert not (tmp_path / "results.sqlite").exists()


def test_two_sweeps_on_one_store_from_two_folders_are_refused(tmp_path):
    """Issue 41 §7: the lock guarded the folder, not the store: two benches with different
    -o and the same --db both ran every run."""
    from calibkit.bench._runner import folder_lock, run_bench

    db = tmp_path / "shared.sqlite"
    spec = load_spec("default")
    with (
        folder_lock(db, "store", db.with_name(db.name + ".lock")),
        pytest.raises(
            ValueError, match=r"running on this store; wait .* choose another store \(db=\)"
        ),
    ):
        run_bench(spec, tmp_path / "second", db=db)
    assert not db.exists()


WORKERS = """
import os, sys, time
from calibkit.bench._runner import worker_pool
pool = worker_pool(2)
futures = [pool.submit(time.sleep, 120) for _ in range(2)]
time.sleep(2)
print(" ".join(str(p) for p in pool._processes), flush=True)
time.sleep(120)
"""


def test_workers_exit_when_the_bench_process_is_killed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WORKERS], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    proc.kill()  # SIGKILL: the main process cannot stop its pool
    proc.wait()

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for init counts as gone
            return f.read().split(")")[-1].split()[0] != "Z"

    deadline = time.time() + 15
    while any(alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in pids)


def test_a_calibration_size_beyond_the_split_is_stored_as_the_whole_split(tmp_path):
    """digits holds 300 validation rows: a size of 100,000 fits on all of them, so it is the
    "all" fit (stored once, as all), not a row labelled 100,000."""
    from calibkit.bench._execute import execute
    from calibkit.bench._spec import resolve
    from calibkit.bench._store import ALL

    spec = resolve(
        {
            "seeds": [1],
            "train": {"epochs": 1},
            "datasets": [{"data": "digits", "models": ["mlp"]}],
            "methods": [{"name": "CE", "loss": "ce"}],
            "posthoc": ["ts"],
            "calibration_sizes": ["all", 100000, 50],
        }
    )
    result = execute(spec.runs[0], tmp_path)
    sizes = {size for _, cal, size, m, _ in result["metrics"] if cal == "ts" and m == "ece"}
    assert sizes == {ALL, 50}


def test_a_store_being_created_by_another_process_opens(tmp_path):
    """CI caught it: a process polling a sweep's store opened it between the creator's WAL
    pragma (which writes the file's header) and its schema's transaction, saw a database
    with no table and no application_id, and called it another application's."""
    from calibkit.bench._store import APPLICATION_ID

    path = tmp_path / "r.sqlite"
    with closing(sqlite3.connect(path)) as con:
        con.execute("PRAGMA journal_mode=WAL")  # what the creator has done so far
    assert path.stat().st_size > 0
    Store(path).done()  # the schema's transaction: the store, not an error
    with closing(sqlite3.connect(path)) as con:
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_the_store_keeps_each_specs_name_and_an_older_store_gains_them(tmp_path):
    """Issue 43: the report reads spec names and settings from the store's ``specs`` table
    instead of parsing stored text; a store of schema 2 (no such table) is read by parsing
    its texts once (read-only), and upgraded with the table filled when opened to write."""
    from calibkit._registry import parse_spec
    from calibkit.bench._results import Results

    path = tmp_path / "r.sqlite"
    store = Store(path)
    texts = ("digits:train_size=100", "focal:gamma=3", "maccal:epochs=5", "ts:t_max=50")
    run = {
        "key": "k",
        "spec": {"loss": "focal:gamma=3", "stage2": "maccal:epochs=5"},
        "dataset": "digits:train_size=100",
        "model": "cnn",
        "method": "Focal",
        "seed": 0,
        "specs": [parse_spec(t) for t in texts],
    }
    store.write_run(run, [("test", "ts:t_max=50", 0, "ece", 0.1)])
    named = {
        "digits:train_size=100": ("digits", {"train_size": 100}),
        "focal:gamma=3": ("focal", {"gamma": 3}),
        "maccal:epochs=5": ("maccal", {"epochs": 5}),
        "ts:t_max=50": ("ts", {"t_max": 50}),
    }
    assert store.specs() == named
    res = Results(Store(path, create=False))
    assert res.short("ts:t_max=50") == "ts" and res.calibrator("ts") == "ts:t_max=50"
    assert res.short("uncalibrated") == "uncalibrated" and res.settings("focal:gamma=3") == {
        "gamma": 3
    }
    with closing(sqlite3.connect(path)) as con, con:  # as calibkit 2's schema left it
        con.execute("DROP TABLE specs")
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    old = Store(path, create=False)
    assert old.specs() == named  # parsed from the texts, nothing written
    assert Results(old).short("digits:train_size=100") == "digits"
    Store(path)  # opened to write: upgraded, the table filled
    with closing(sqlite3.connect(path)) as con:
        assert con.execute("SELECT count(*) FROM specs").fetchone()[0] == 4
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
            str(SCHEMA_VERSION),
        )
    assert Store(path, create=False).specs() == named


def test_a_bench_run_stores_its_specs_names(tmp_path):
    from calibkit.bench._runner import run_bench
    from calibkit.bench._spec import resolve
    from tests.conftest import shared

    logits = str(shared("logits", "resnet110_cifar10.npz"))
    spec = resolve(
        {
            "methods": [{"name": "Given"}],
            "posthoc": ["ts:t_max=50"],
            "seeds": [0],
            "datasets": [{"logits": logits}],
        }
    )
    run_bench(spec, tmp_path)
    specs = Store(tmp_path / "results.sqlite", create=False).specs()
    assert specs["ts:t_max=50"] == ("ts", {"t_max": 50})
