"""The results store: one SQLite file (WAL journal), written in transactions.

Tables: ``meta`` (the schema version), ``runs`` (one row per finished training run: its
resolved spec, status, timings, provenance and artefact paths), ``specs`` (every spec text
the other tables hold, with its name and settings as JSON: the report reads names here
instead of parsing text again), ``metrics`` (one value per
run, split, calibrator, calibration-set size and metric), ``history`` (per-epoch records of
stage 1 and stage 2), ``curves`` (JSON data behind the report's figures) and ``anomalies``
(what the run's checks flagged: a diverged or unconverged fit, an insane temperature, an
argmax-preserving calibrator that changed predictions, a calibration far worse than none, a
non-finite value; see :mod:`calibkit.posthoc._anomalies`). ``meta`` also keeps the last
sweep's method order and baseline, which the report follows. A run's rows are
written in a single transaction, so a process killed while writing leaves either the whole
run or nothing; several processes may write at once (SQLite serialises them; each waits up
to a minute for the lock).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

from .._outputs import LinkRefused, refuse_link

SCHEMA_VERSION = 3
TABLES = ("meta", "runs", "metrics", "history", "curves", "anomalies", "specs")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY, spec TEXT NOT NULL, dataset TEXT, model TEXT, method TEXT,
    seed INTEGER, status TEXT NOT NULL, error TEXT, started REAL, finished REAL,
    seconds REAL, provenance TEXT, artefacts TEXT
);
CREATE TABLE IF NOT EXISTS metrics (
    run_key TEXT NOT NULL, split TEXT NOT NULL, calibrator TEXT NOT NULL,
    cal_size INTEGER NOT NULL, metric TEXT NOT NULL, value REAL,
    PRIMARY KEY (run_key, split, calibrator, cal_size, metric)
);
CREATE TABLE IF NOT EXISTS history (
    run_key TEXT NOT NULL, stage INTEGER NOT NULL, epoch INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (run_key, stage, epoch)
);
CREATE TABLE IF NOT EXISTS curves (
    run_key TEXT NOT NULL, split TEXT NOT NULL, calibrator TEXT NOT NULL, kind TEXT NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (run_key, split, calibrator, kind)
);
CREATE TABLE IF NOT EXISTS anomalies (
    run_key TEXT NOT NULL, calibrator TEXT NOT NULL, cal_size INTEGER NOT NULL,
    kind TEXT NOT NULL, detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS specs (
    text TEXT PRIMARY KEY, name TEXT NOT NULL, settings TEXT NOT NULL
);
"""

#: SQLite's application_id of a calibkit store ("CLBK"): a foreign file cannot have it by
#: chance, and it is checked before anything is written
APPLICATION_ID = int.from_bytes(b"CLBK", "big")
#: every table's columns, as the schema creates them
COLUMNS = {
    "meta": ["key", "value"],
    "runs": ["key", "spec", "dataset", "model", "method", "seed", "status", "error", "started",
             "finished", "seconds", "provenance", "artefacts"],
    "metrics": ["run_key", "split", "calibrator", "cal_size", "metric", "value"],
    "history": ["run_key", "stage", "epoch", "record"],
    "curves": ["run_key", "split", "calibrator", "kind", "data"],
    "anomalies": ["run_key", "calibrator", "cal_size", "kind", "detail"],
    "specs": ["text", "name", "settings"],
}  # fmt: skip

#: cal_size stored for "the whole calibration split"
ALL = 0


class StoreError(ValueError):
    """The store cannot be opened or written (one line, what to do)."""


def _explain(err: sqlite3.Error, path: Path) -> StoreError:
    text = str(err)
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"{path}: the results store is read-only; choose a writable folder (out=)"
        )
    if "disk is full" in text or "disk I/O" in text:
        return StoreError(f"{path}: the disk is full or failing; nothing of this run was written")
    if "not a database" in text or "malformed" in text:
        return StoreError(f"{path}: not a calibkit results store (corrupted or another file)")
    return StoreError(f"{path}: {text}")


class Store:
    """A results store at ``path``: created if missing, or (``create=False``) opened
    read-only, for reports, which must never write to their input."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self.readonly = not create
        if not create:
            if not self.path.exists():
                raise StoreError(f"{self.path}: no such results store")
            self._check_schema()
            return
        try:
            refuse_link(self.path)  # SQLite would follow it and write where it points
        except LinkRefused as err:
            raise StoreError(str(err)) from None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(
                f"{self.path.parent}: cannot create the folder ({err.strerror})"
            ) from None
        # read-only: a foreign or newer file is never altered, and a current store is opened
        # without a write (a process polling it never takes the write lock)
        if self.path.exists() and self.path.stat().st_size > 0 and self._check_existing():
            return
        try:
            with closing(self._connect()) as con:
                # one transaction: another process that opens the file meanwhile (a report,
                # a second sweep) sees no store or the whole store, never tables without the
                # application_id. IMMEDIATE takes the write lock at once, waiting (the busy
                # timeout) for a writer that holds it, rather than failing on upgrading a read
                # lock. New, or schema 1 (no anomalies table) or 2 (no specs table).
                con.isolation_level = None  # the transaction below is the only one
                con.execute("BEGIN IMMEDIATE")
                try:
                    for statement in SCHEMA.split(";"):
                        con.execute(statement)
                    if con.execute("SELECT count(*) FROM specs").fetchone()[0] == 0:
                        _name_old_specs(con)  # schema 2 or older: its texts parsed once
                    con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    con.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
                    con.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:  # SQLite ends one itself on a full disk
                        con.execute("ROLLBACK")
                    raise
        except sqlite3.Error as err:
            raise _explain(err, self.path) from None

    def _check_existing(self) -> bool:
        """Refuse, before anything is written, an existing file that is not calibkit's store:
        calibkit's stores carry SQLite's ``application_id``; one written before it was set
        must hold every calibkit table with its columns. True where the store is current
        (this schema version, every table there): nothing to create or upgrade."""
        try:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            with closing(sqlite3.connect(uri, uri=True, timeout=60)) as con:
                app = con.execute("PRAGMA application_id").fetchone()[0]
                empty = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
                columns = {
                    t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")] for t in TABLES
                }
                version = None
                if columns["meta"] == ["key", "value"]:
                    row = con.execute(
                        "SELECT value FROM meta WHERE key = 'schema_version'"
                    ).fetchone()
                    version = row and row[0]
        except sqlite3.Error as err:
            raise _explain(err, self.path) from None
        if app == 0 and empty:
            # an empty database: one that another process is creating right now (its WAL
            # pragma writes the file's header before the schema's transaction), or a blank
            # file: the schema's transaction serialises with the creator, nothing is lost
            return False
        ours = app == APPLICATION_ID or (
            app == 0 and version is not None and all(columns[t] == COLUMNS[t] for t in TABLES[:5])
        )
        if not ours:
            raise StoreError(
                f"{self.path}: not a calibkit results store (another application's database); "
                "nothing was written to it; choose another folder (out=) or store (db=)"
            )
        if not str(version).isdigit():
            raise StoreError(f"{self.path}: its schema_version {version!r} is not a number")
        if int(version) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer calibkit (schema {version}, this one reads "
                f"{SCHEMA_VERSION}); upgrade calibkit; nothing was written to it"
            )
        return (
            app == APPLICATION_ID
            and int(version) == SCHEMA_VERSION
            and all(columns[t] == COLUMNS[t] for t in TABLES)
        )

    def _check_schema(self) -> None:
        """Refuse, without writing, a file that is not a calibkit store of a known version."""
        try:
            with closing(self._connect()) as con:
                names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
                row = None
                if "meta" in names:
                    row = con.execute(
                        "SELECT value FROM meta WHERE key = 'schema_version'"
                    ).fetchone()
        except sqlite3.Error as err:
            raise _explain(err, self.path) from None
        missing = [t for t in TABLES[:5] if t not in names]
        if missing or row is None:
            raise StoreError(
                f"{self.path}: not a calibkit results store (no {', '.join(missing) or 'schema'}"
                " table); nothing was written to it"
            )
        if int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer calibkit (schema {row[0]}, this one reads "
                f"{SCHEMA_VERSION}); upgrade calibkit"
            )
        self.has_anomalies = "anomalies" in names
        self.has_specs = "specs" in names

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        con = sqlite3.connect(self.path, timeout=60)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        try:
            with closing(self._connect()) as con:
                return con.execute(sql, tuple(args)).fetchall()
        except sqlite3.Error as err:
            raise _explain(err, self.path) from None

    def done(self) -> set[str]:
        """Keys of the runs already finished."""
        return {k for (k,) in self._read("SELECT key FROM runs WHERE status = 'done'")}

    def write_run(
        self,
        run: dict[str, Any],
        metrics: Iterable[tuple[str, str, int, str, float]],
        history: Iterable[tuple[int, int, dict]] = (),
        curves: Iterable[tuple[str, str, str, Any]] = (),
        anomalies: Iterable[tuple[str, int, str, str]] = (),
    ) -> None:
        """Write one finished run and all its rows in one transaction (all or nothing).
        ``metrics`` rows are (split, calibrator, cal_size, metric, value); ``anomalies`` rows
        (calibrator, cal_size, kind, detail); ``run["specs"]``, the run's parsed specs
        (:class:`~calibkit._registry.Spec`), each kept once in the ``specs`` table."""
        key = run["key"]
        specs = [(str(s), s.name, json.dumps(s.kwargs)) for s in run.get("specs", ())]
        row = (
            key,
            json.dumps(run["spec"], sort_keys=True),
            run.get("dataset"),
            run.get("model"),
            run.get("method"),
            run.get("seed"),
            run.get("status", "done"),
            run.get("error"),
            run.get("started"),
            run.get("finished", time.time()),
            run.get("seconds"),
            json.dumps(run.get("provenance"), default=str),
            json.dumps(run.get("artefacts")),
        )
        try:
            with closing(self._connect()) as con, con:
                con.execute("BEGIN IMMEDIATE")
                for table in ("metrics", "history", "curves", "anomalies"):
                    con.execute(f"DELETE FROM {table} WHERE run_key = ?", (key,))
                con.execute("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
                con.executemany(
                    "INSERT INTO metrics VALUES (?,?,?,?,?,?)", [(key, *m) for m in metrics]
                )
                con.executemany(
                    "INSERT INTO history VALUES (?,?,?,?)",
                    [(key, s, e, json.dumps(r)) for s, e, r in history],
                )
                con.executemany(
                    "INSERT INTO curves VALUES (?,?,?,?,?)",
                    [(key, sp, cal, kind, json.dumps(d)) for sp, cal, kind, d in curves],
                )
                con.executemany(
                    "INSERT INTO anomalies VALUES (?,?,?,?,?)", [(key, *a) for a in anomalies]
                )
                con.executemany("INSERT OR IGNORE INTO specs VALUES (?,?,?)", specs)
        except sqlite3.Error as err:
            raise _explain(err, self.path) from None

    def set_meta(self, key: str, value: Any) -> None:
        """Record one JSON value under ``key`` in the store's meta table."""
        try:
            with closing(self._connect()) as con, con:
                con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
        except sqlite3.Error as err:
            raise _explain(err, self.path) from None

    def meta(self, key: str) -> Any:
        """The JSON value recorded under ``key``, or None."""
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return self._json(rows[0][0], f"meta {key!r}") if rows else None

    def set_sweep(self, methods: list[str], baseline: str) -> None:
        """Record the sweep's method order and baseline (the report follows them)."""
        self.set_meta("sweep", {"methods": methods, "baseline": baseline})

    def sweep(self) -> dict[str, Any] | None:
        """The method order and baseline of the last sweep written here, if recorded."""
        return self.meta("sweep")

    def anomalies(self) -> list[tuple[str, str, int, str, str]]:
        """(run_key, calibrator, cal_size, kind, detail) rows."""
        if self.readonly and not getattr(self, "has_anomalies", True):
            return []  # a store of schema 1, opened read-only
        return self._read("SELECT run_key, calibrator, cal_size, kind, detail FROM anomalies")

    def runs(self, status: str = "done") -> list[dict[str, Any]]:
        """The runs of ``status``: their columns, with ``spec`` and ``artefacts`` (the run
        folder and its logits file; {} where none was kept) read as JSON."""
        cols = ("key", "spec", "dataset", "model", "method", "seed", "status", "error", "seconds")
        cols += ("artefacts",)
        rows = self._read(f"SELECT {', '.join(cols)} FROM runs WHERE status = ?", (status,))
        out = []
        for r in rows:
            d = dict(zip(cols, r, strict=True))
            d["spec"] = self._json(d["spec"], f"run {d['key']!r}'s spec", dict)
            d["artefacts"] = self._json(d["artefacts"], f"run {d['key']!r}'s artefacts", dict, {})
            out.append(d)
        return out

    def provenance(self) -> dict[str, dict[str, Any]]:
        """Each finished run's provenance (configuration, versions, phases, training rate,
        and what a run given by a logits file read), by run key."""
        rows = self._read("SELECT key, provenance FROM runs WHERE status = 'done'")
        return {key: self._json(prov, f"run {key!r}'s provenance", dict, {}) for key, prov in rows}

    def phase_seconds(self, keys: Iterable[str]) -> dict[str, float]:
        """Seconds spent in each phase (``provenance["phases"]``), summed over the finished
        runs ``keys``; runs written before phases were recorded add nothing."""
        wanted = set(keys)
        total: dict[str, float] = {}
        for key, prov in self.provenance().items():
            phases = prov.get("phases", {}) if key in wanted else {}
            for name, seconds in phases.items():
                total[name] = total.get(name, 0.0) + seconds
        return total

    def metrics(self) -> list[tuple[str, str, str, int, str, float]]:
        """(run_key, split, calibrator, cal_size, metric, value) rows; a value that is not a
        number (a crafted store: SQLite keeps text in any column) is refused in one line."""
        rows = self._read("SELECT run_key, split, calibrator, cal_size, metric, value FROM metrics")
        for row in rows:
            value = row[5]
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise StoreError(
                    f"{self.path}: metric {row[4]!r} of run {row[0]!r} holds {value!r}, not a "
                    "number (a damaged or crafted store)"
                )
        return rows

    def _json(self, text: Any, what: str, kind: type | None = None, empty: Any = None) -> Any:
        """``text`` read as JSON (of type ``kind`` where given; ``empty`` where it is NULL
        or JSON null and ``empty`` is given), or a one-line :class:`StoreError` naming
        ``what``: a store is a file anyone may have written."""
        if text is None and empty is not None:
            return empty
        try:
            value = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            raise StoreError(
                f"{self.path}: {what} is not valid JSON (a damaged or crafted store)"
            ) from None
        if value is None and empty is not None:
            return empty
        if kind is not None and not isinstance(value, kind):
            raise StoreError(
                f"{self.path}: {what} is {type(value).__name__}, not a {kind.__name__} (a "
                "damaged or crafted store)"
            )
        return value

    def history(self, run_key: str, stage: int = 1) -> list[dict]:
        rows = self._read(
            "SELECT record FROM history WHERE run_key = ? AND stage = ? ORDER BY epoch",
            (run_key, stage),
        )
        return [self._json(r, f"run {run_key!r}'s history", dict) for (r,) in rows]

    def curves(self, kind: str) -> list[tuple[str, str, str, Any]]:
        """(run_key, split, calibrator, data) rows of one kind of curve."""
        rows = self._read(
            "SELECT run_key, split, calibrator, data FROM curves WHERE kind = ?", (kind,)
        )
        return [(k, s, c, self._json(d, f"run {k!r}'s {kind} curve")) for k, s, c, d in rows]

    def specs(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Every spec text the store holds: {text: (name, settings)}. A store of schema 2
        or older opened read-only has no such table: its texts are parsed here, once."""
        if self.readonly and not getattr(self, "has_specs", True):
            with closing(self._connect()) as con:
                return {t: (n, json.loads(v)) for t, n, v in _old_specs(con)}
        rows = self._read("SELECT text, name, settings FROM specs")
        return {
            text: (name, self._json(settings, f"spec {text!r}'s settings", dict))
            for text, name, settings in rows
        }

    def schema_version(self) -> int:
        return int(self._read("SELECT value FROM meta WHERE key = 'schema_version'")[0][0])


def _old_specs(con: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(text, name, settings JSON) of every spec text in a store written before the
    ``specs`` table (schema 2 or older): each run's dataset, loss, stage 2, splits and
    calibrators, and the calibrators of its metrics, parsed. A text that no longer parses is
    its own name."""
    from .._registry import SpecError, parse_spec

    texts = set()
    for dataset, spec in con.execute("SELECT dataset, spec FROM runs"):
        values = json.loads(spec)
        texts |= {dataset, values.get("loss"), values.get("stage2")}
        texts |= set(values.get("splits") or []) | set(values.get("posthoc") or [])
    texts |= {c for (c,) in con.execute("SELECT DISTINCT calibrator FROM metrics")}
    rows = []
    for text in sorted(t for t in texts if t and t != "uncalibrated"):
        try:
            parsed = parse_spec(text)
        except SpecError:
            rows.append((text, text, "{}"))
            continue
        rows.append((text, parsed.name, json.dumps(parsed.kwargs)))
    return rows


def _name_old_specs(con: sqlite3.Connection) -> None:
    """Fill the ``specs`` table of a store upgraded from schema 2 or older."""
    con.executemany("INSERT OR IGNORE INTO specs VALUES (?,?,?)", _old_specs(con))
