"""Compare two bench stores value by value: the runs they share (same dataset, model,
method and seed), their metrics, histories, curves and anomalies, bit for bit.

Run keys differ where spec spellings changed; calibrators are matched by their method name
(the part before ':'). Prints the counts compared and every difference.

    python benchmarks/correctness/compare_stores.py BEFORE.sqlite AFTER.sqlite
"""

from __future__ import annotations

import json
import sqlite3
import sys


def _rows(path: str) -> dict[str, dict]:
    db = sqlite3.connect(path)
    runs = {
        key: (dataset, model, method, seed)
        for key, dataset, model, method, seed in db.execute(
            "SELECT key, dataset, model, method, seed FROM runs WHERE status = 'done'"
        )
    }
    out: dict[str, dict] = {"metrics": {}, "history": {}, "curves": {}, "anomalies": {}}
    queries = {
        "metrics": "SELECT run_key, split, calibrator, cal_size, metric, value FROM metrics",
        "history": "SELECT run_key, stage, epoch, record FROM history",
        "curves": "SELECT run_key, split, calibrator, kind, data FROM curves",
        "anomalies": "SELECT run_key, calibrator, cal_size, kind, detail FROM anomalies",
    }
    for table, query in queries.items():
        for key, *rest in db.execute(query):
            if key not in runs:
                continue
            rest = (
                [
                    r.split(":", 1)[0] if i == (1 if table != "history" else -1) else r
                    for i, r in enumerate(rest)
                ]
                if table in ("metrics", "curves")
                else rest
            )
            if table == "anomalies":
                rest[0] = rest[0].split(":", 1)[0]
            *where, value = rest
            if table == "history":  # wall-clock seconds are not results
                record = json.loads(value)
                value = {
                    k: v for k, v in record.items() if k not in ("time", "train_time", "val_time")
                }
            out[table][(runs[key], *where)] = value
    return out


def main(before: str, after: str) -> int:
    a, b = _rows(before), _rows(after)
    differ = 0
    for table in a:
        shared = sorted(set(a[table]) & set(b[table]), key=str)
        diffs = [k for k in shared if a[table][k] != b[table][k]]
        runs = {k[0] for k in shared}
        print(
            f"{table}: {len(shared)} values of {len(runs)} shared runs compared, "
            f"{len(diffs)} differ"
        )
        for k in diffs[:20]:
            print("   ", k, a[table][k], "->", b[table][k])
        differ += len(diffs)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
