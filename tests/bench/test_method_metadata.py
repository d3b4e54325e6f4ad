"""What the bench knows of methods: the harness learns what a fit is from the method's
class (``incidental_settings``, ``stored_values``; issue 27 §3), and the presentation's
knowledge (the reference, each method's own report tables) lives in the bench, not in the
calibrators (issue 43)."""

from __future__ import annotations

from calibkit import posthoc
from calibkit.bench import _verdicts as verdicts
from calibkit.bench._report import REPORT_TABLES, build_tables
from calibkit.bench._results import REFERENCE, Results
from calibkit.bench._store import ALL, Store

from .rows import write


def _store(path):
    store = Store(path)
    for seed in (1, 2):
        metrics = [
            ("test", "uncalibrated", ALL, "ece", 0.10 + seed / 100),
            ("test", "ts:t_max=50", ALL, "ece", 0.02),
            ("test", "ts:t_max=50", ALL, "temperature", 1.5 + seed / 10),
            ("test", "hist-binning", ALL, "ece", 0.03),
            ("test", "vector", ALL, "ece", 0.04),
        ]
        run = {
            "key": f"CE-{seed}",
            "spec": {"loss": "ce", "stage2": None, "mixup": 0.0},
            "dataset": "digits",
            "model": "cnn",
            "method": "CE",
            "seed": seed,
        }
        write(store, run, metrics)
        for method, stage2 in (
            ("MaC-Cal", "maccal:epochs=5,seed=3"),
            ("ablation", "maccal:width=64"),
        ):
            spec = {"loss": "ce", "stage2": stage2, "mixup": 0.0}
            run = {
                "key": f"{method}-{seed}",
                "spec": spec,
                "dataset": "digits",
                "model": "cnn",
                "method": method,
                "seed": seed,
            }
            write(store, run, [("test", "uncalibrated", ALL, "ece", 0.05)])
    store.set_sweep(["CE", "ablation", "MaC-Cal"], "CE")
    return store


def test_the_reference_and_report_tables_name_registered_methods():
    assert REFERENCE == "ts" and set(REPORT_TABLES) <= set(posthoc.names())
    assert not hasattr(posthoc.Method, "report_tables")  # no report knowledge in the base


def test_report_tables_come_from_the_bench(tmp_path):
    res = Results(_store(tmp_path / "s.sqlite"))
    assert res.reference() == "ts:t_max=50"  # a reference with settings is still found
    tables = build_tables(res)
    for cal in ("ts", "hist-binning"):
        for _, title in REPORT_TABLES[cal]:
            assert any(t.startswith(title) for t in tables), title
    temperature = next(v for t, v in tables.items() if t.startswith("Temperature fitted"))
    assert temperature[1][1] == "1.65 ± 0.07"  # a parameter, not a fraction: not × 100
    ece_after = next(v for t, v in tables.items() if t.startswith("ECE (%) after temperature"))
    assert ece_after[1][1] == "**2.00 ± 0.00**"  # a fraction: × 100, and bold (the best)
    assert not any("vector" in t for t in tables)  # not in REPORT_TABLES: no table of its own
    # titles name a metric by the table's heading, its unit included
    assert any(t.startswith("Brier (×100) († differs") for t in tables)
    titles = list(tables)  # the reference's tables come first
    assert titles.index(next(t for t in titles if "temperature scaling" in t)) < titles.index(
        next(t for t in titles if "histogram binning" in t)
    )


def test_two_specs_of_one_method_keep_a_table_each(tmp_path):
    store = Store(tmp_path / "two.sqlite")
    for seed in (1, 2):
        run = {
            "key": f"CE-{seed}",
            "spec": {"loss": "ce", "stage2": None, "mixup": 0.0},
            "dataset": "digits",
            "model": "cnn",
            "method": "CE",
            "seed": seed,
        }
        write(
            store,
            run,
            [("test", "ts", ALL, "ece", 0.02), ("test", "ts:t_max=50", ALL, "ece", 0.03)],
        )
    store.set_sweep(["CE"], "CE")
    after = [t for t in build_tables(Results(store)) if t.startswith("ECE (%) after temperature")]
    assert len(after) == 2 and "(ts:t_max=50)" in after[1], after


def test_a_stage2_verdict_takes_the_run_that_changes_only_incidental_settings(tmp_path):
    res = Results(_store(tmp_path / "s.sqlite"))
    assert posthoc.REGISTRY.factory("maccal").incidental_settings >= {"epochs", "seed"}
    assert verdicts._method(res, res.columns[0], ("stage2", "maccal")) == "MaC-Cal"
