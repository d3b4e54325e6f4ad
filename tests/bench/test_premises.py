"""Issue 25 §1: every verdict names its premise; where CE is not over-confident the verdict
is "not testable here" with the number, never "does not hold"."""

from __future__ import annotations

from calibkit.bench._report import write_report
from calibkit.bench._results import Results
from calibkit.bench._store import ALL, Store
from calibkit.bench._verdicts import (
    CLAIMS,
    NOT_TESTABLE_HERE,
    OVERCONFIDENT,
    check_premise,
    verdict_table,
)

from .rows import write

CE_ECE = {1: 0.10, 2: 0.12, 3: 0.11}
# BSCE-GRA 4 points above CE in every seed: "does not hold" where the premise holds
BSCE_ECE = {s: v + 0.04 + 0.001 * s for s, v in CE_ECE.items()}


def _store(path, temperatures, ts_lowers=True):
    store = Store(path)
    for method, loss, eces in (("CE", "ce", CE_ECE), ("BSCE-GRA", "bsce-gra", BSCE_ECE)):
        for seed, ece in eces.items():
            after = ece / 3 if ts_lowers else ece * 1.1
            metrics = [
                ("test", "uncalibrated", ALL, "ece", ece),
                ("test", "ts", ALL, "ece", after),
                ("test", "ts", ALL, "temperature", temperatures[seed]),
            ]
            run = {
                "key": f"{method}-{seed}",
                "spec": {"loss": loss, "stage2": None, "mixup": 0.0},
                "dataset": "digits",
                "model": "cnn",
                "method": method,
                "seed": seed,
            }
            write(store, run, metrics)
    store.set_sweep(["CE", "BSCE-GRA"], "CE")
    return store


def _row(rows, claim_text):
    head, *body = rows
    row = next(r for r in body if r[1] == claim_text)
    return dict(zip(head, row, strict=True))


def test_premise_holds_and_the_verdict_is_judged(tmp_path):
    res = Results(_store(tmp_path / "over.sqlite", {1: 1.8, 2: 2.1, 3: 1.6}))
    holds, text = check_premise(res, res.columns[0], OVERCONFIDENT)
    assert holds is True
    assert "T = 1.83 (seeds 1.80, 2.10, 1.60)" in text and "11.00 → 3.67" in text
    row = _row(verdict_table(res), CLAIMS[0].text)
    assert row["verdict"] == "does not hold" and row["premise"].startswith("holds: CE is over")


def test_under_confident_ce_makes_every_premised_claim_not_testable(tmp_path):
    db = tmp_path / "under.sqlite"
    res = Results(_store(db, {1: 0.74, 2: 0.70, 3: 0.78}))
    holds, text = check_premise(res, res.columns[0], OVERCONFIDENT)
    assert holds is False and text.startswith("CE is under-confident: T = 0.74")
    rows = verdict_table(res)
    premised = [r for r in rows[1:] if r[3] != "none"]
    assert premised and all(r[4] == NOT_TESTABLE_HERE for r in premised)
    assert not any(r[4] == "does not hold" for r in premised)
    assert (
        "for the record: BSCE-GRA 15.20 vs CE 11.00"
        in _row(rows, CLAIMS[0].text)["numbers (%) and test"]
    )
    md = (tmp_path / "rep").joinpath("report.md")
    write_report(db, tmp_path / "rep")
    assert "Premise 'CE is over-confident'" in md.read_text()
    assert "fails: CE is under-confident: T = 0.74" in md.read_text()


def test_one_seed_below_the_threshold_or_ts_not_helping_fails_the_premise(tmp_path):
    res = Results(_store(tmp_path / "a.sqlite", {1: 1.8, 2: 1.1, 3: 1.9}))
    assert check_premise(res, res.columns[0], OVERCONFIDENT)[0] is False
    res = Results(_store(tmp_path / "b.sqlite", {1: 1.8, 2: 1.9, 3: 1.9}, ts_lowers=False))
    holds, text = check_premise(res, res.columns[0], OVERCONFIDENT)
    assert holds is False and "TS does not lower" in text


def test_an_insane_or_missing_temperature_leaves_the_premise_unmeasured(tmp_path):
    res = Results(_store(tmp_path / "c.sqlite", {1: 1.8, 2: 100.0, 3: 1.9}))
    holds, text = check_premise(res, res.columns[0], OVERCONFIDENT)
    assert holds is None and "outside" in text
    row = _row(verdict_table(res), CLAIMS[0].text)
    assert row["verdict"] == NOT_TESTABLE_HERE and row["premise"].startswith("not measured")


def test_keeping_accuracy_is_judged_as_non_inferiority():
    """Issue 42 §7: "keeps CE's accuracy" holds only when the paired 95 % interval of the
    difference lies above −1 point; no significant drop with 2 seeds is "inconclusive"."""
    from calibkit.bench._verdicts import CLAIMS, judge

    keeps = next(c for c in CLAIMS if c.metric == "accuracy")
    ce = {1: 0.820, 2: 0.830, 3: 0.825, 4: 0.822, 5: 0.828}
    close = {s: v - 0.002 + 0.0005 * (s % 2) for s, v in ce.items()}
    assert judge(keeps, close, ce)[0] == "holds"
    dropped = {s: v - 0.03 + 0.001 * (s % 2) for s, v in ce.items()}
    assert judge(keeps, dropped, ce)[0] == "does not hold"
    noisy = {1: 0.80, 2: 0.84}  # two seeds, p = 0.5 in the old rule: "holds"; now unknown
    assert judge(keeps, noisy, {1: 0.83, 2: 0.82})[0] == "inconclusive"
