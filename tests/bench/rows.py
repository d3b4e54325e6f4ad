"""Hand-made store rows for report tests: a run dict as a test writes it, given the parsed
specs that :meth:`calibkit.bench._runspec.RunSpec.store_row` gives a real run."""

from __future__ import annotations

from calibkit._registry import parse_spec


def write(store, run, metrics=(), **rows) -> None:
    """``store.write_run`` of ``run`` with its specs: the run's dataset, loss and stage 2, and
    every calibrator of ``metrics`` and of the anomalies."""
    calibrators = {m[1] for m in metrics} | {a[0] for a in rows.get("anomalies", ())}
    spec = run.get("spec", {})
    texts = {run.get("dataset"), spec.get("loss"), spec.get("stage2"), *calibrators}
    parsed = [parse_spec(t) for t in sorted(t for t in texts if t and t != "uncalibrated")]
    store.write_run(run | {"specs": parsed}, metrics, **rows)
