"""Bootstrap intervals (percentile, basic, BCa) against scipy.stats.bootstrap, the synthetic
classifier's true values against closed forms and large samples, and a small coverage study
whose tolerance a broken interval cannot pass."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from calibkit.metrics import compare_nested, compare_paired, evaluate
from calibkit.metrics._intervals import acceleration, describe, interval
from calibkit.metrics._resample import bootstrap_replicates
from calibkit.metrics._synthetic import TRUE_METRICS, SyntheticClassifier

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "correctness"))
from interval_coverage import coverage_cell


@pytest.mark.parametrize("method", ["percentile", "basic", "bca"])
def test_intervals_agree_with_scipy_bootstrap(method):
    """The mean of a skewed sample (confidences from Beta(5, 1)): calibkit's interval of
    mean_confidence against scipy.stats.bootstrap's of np.mean, 20,000 resamples each (their
    Monte Carlo error is about 1 % of the width; BCa's acceleration: scipy's leave-one-out
    jackknife against calibkit's 20 groups)."""
    probs, labels = SyntheticClassifier(10, gamma=1.5).sample(300, seed=3)
    conf = probs.max(1)
    ours = evaluate(
        probs,
        labels,
        probs=True,
        bootstrap=20_000,
        interval=method,
        seed=1,
        metrics=["mean_confidence"],
    ).intervals["mean_confidence"]
    ref = stats.bootstrap((conf,), np.mean, n_resamples=20_000, method=method, random_state=2)
    lo, hi = ref.confidence_interval
    assert abs(ours[0] - lo) < 0.06 * (hi - lo) and abs(ours[1] - hi) < 0.06 * (hi - lo)


def test_basic_interval_is_the_percentile_interval_reflected_and_clipped():
    reps = torch.tensor([0.30, 0.32, 0.34, 0.36, 0.38, 0.40, 0.42], dtype=torch.float64)
    q = torch.quantile(reps, torch.tensor([0.05, 0.95], dtype=torch.float64)).tolist()
    assert interval(reps, 0.3, 0.9, "percentile") == pytest.approx(q)
    assert interval(reps, 0.3, 0.9, "basic") == pytest.approx([0.6 - q[1], 0.6 - q[0]])
    # an estimate of 0.2 reflects to [0.0 - ..]: clipped at the metric's least value
    assert interval(reps, 0.2, 0.9, "basic", lower_bound=0.0) == pytest.approx([0.0, 0.4 - q[0]])


def test_two_pivot_is_basic_widened_up_to_the_plug_in_pivot():
    """Issue 46: a debiased estimate's bootstrap world has the plug-in as its truth. By hand:
    replicates 0.30 .. 0.42, debiased estimate 0.30, plug-in 0.36."""
    reps = torch.tensor([0.30, 0.32, 0.34, 0.36, 0.38, 0.40, 0.42], dtype=torch.float64)
    q = torch.quantile(reps, torch.tensor([0.05, 0.95], dtype=torch.float64)).tolist()
    lo, hi = interval(reps, 0.30, 0.9, "two-pivot", plug_in=0.36)
    assert lo == pytest.approx(0.60 - q[1])  # basic's lower end
    assert hi == pytest.approx(0.30 - q[0] + 0.36)  # the plug-in pivot's upper end
    assert hi > 0.60 - q[0]  # above basic's: the interval is wider, never narrower
    # a plug-in estimate is its own plug-in: the two pivots are one, the basic interval
    assert interval(reps, 0.3, 0.9, "two-pivot", plug_in=0.3) == interval(reps, 0.3, 0.9, "basic")
    with pytest.raises(ValueError, match="two-pivot needs the plug-in estimate"):
        interval(reps, 0.3, 0.9, "two-pivot")


def test_the_debiased_errors_get_two_pivot_intervals_from_their_plug_ins():
    """evaluate computes the plug-in a debiased metric's interval needs, without returning
    it when it was not asked for, and gives the interval the full evaluation gives."""
    probs, labels = SyntheticClassifier(10, gamma=1.0).sample(2000, seed=4)
    full = evaluate(probs, labels, probs=True, bootstrap=200, seed=2, smooth=False)
    alone = evaluate(
        probs,
        labels,
        probs=True,
        bootstrap=200,
        seed=2,
        metrics=["debiased_ece", "debiased_classwise_ece"],
    )
    assert set(alone.metrics) == {"debiased_ece", "debiased_classwise_ece"}
    for m, plug in (("debiased_ece", "ece"), ("debiased_classwise_ece", "classwise_ece")):
        assert alone.intervals[m] == pytest.approx(full.intervals[m])
        basic = evaluate(
            probs, labels, probs=True, bootstrap=200, seed=2, interval="basic", metrics=[m]
        ).intervals[m]
        assert full.intervals[m][0] == pytest.approx(basic[0])
        assert full.intervals[m][1] > basic[1]  # widened by the debiasing, plug-in − debiased
        assert full[plug] > full[m]


def test_bca_without_bias_or_skew_is_the_percentile_interval():
    """z0 = 0 (half the replicates below the estimate) and a = 0: BCa's levels are α and 1 − α."""
    reps = torch.linspace(-1, 1, 2000, dtype=torch.float64)
    assert interval(reps, 0.0, 0.9, "bca") == pytest.approx(interval(reps, 0.0, 0.9, "percentile"))
    # an estimate above every replicate: z0 is capped, the interval is the top of the range
    lo, hi = interval(reps, 5.0, 0.9, "bca")
    assert lo > 0.9 and hi == pytest.approx(1.0)
    jack = torch.tensor([1.0, 2.0, 4.0, 8.0])
    d = jack.mean() - jack
    assert acceleration(jack) == pytest.approx(float((d**3).sum() / (6 * (d**2).sum() ** 1.5)))


def test_every_estimate_outside_its_interval_gets_a_note():
    """The issue's case: classwise ECE of a well-calibrated many-class model is biased up."""
    probs, labels = SyntheticClassifier(100, gamma=1.0).sample(3000, seed=0)
    r = evaluate(
        probs,
        labels,
        probs=True,
        bootstrap=300,
        interval="percentile",
        metrics=["classwise_ece", "accuracy"],
    )
    lo, _ = r.intervals["classwise_ece"]
    assert r["classwise_ece"] < lo and r.bias["classwise_ece"] > 0
    assert len(r.notes) == 1 and "classwise_ece" in r.notes[0] and "accuracy" not in r.notes[0]
    assert r.settings["interval"] == "percentile" and "bias" in r.to_dict()
    with pytest.raises(ValueError, match=r"interval: expected one of 'auto', .*; got 'bcaa'"):
        evaluate(probs, labels, probs=True, bootstrap=10, interval="bcaa")


def test_describe_names_each_metrics_interval():
    assert describe("basic", ["ece", "nll"]) == "intervals: basic bootstrap"
    line = describe("auto", ["ece", "accuracy", "nll", "brier"])
    assert line.startswith("intervals: ") and "ece" in line


def test_synthetic_truth_in_closed_form():
    """ECE, accuracy and RMS by quadrature of the model's definition, independently of the
    incomplete-beta closed forms."""
    k, a, b, g = 10, 5.0, 1.0, 2.0
    m = SyntheticClassifier(k, a, b, g)
    pdf = stats.beta(a, b).pdf

    def f(u):
        return 1 / k + (1 - 1 / k) * u**g

    def c(u):
        return 1 / k + (1 - 1 / k) * u

    ece = integrate.quad(lambda u: abs(c(u) - f(u)) * pdf(u), 0, 1)[0]
    acc = integrate.quad(lambda u: f(u) * pdf(u), 0, 1)[0]
    rms = math.sqrt(integrate.quad(lambda u: (c(u) - f(u)) ** 2 * pdf(u), 0, 1)[0])
    t = m.truth()
    assert t["ece"] == pytest.approx(ece, abs=1e-10) == m.continuous_ece()
    assert t["accuracy"] == pytest.approx(acc, abs=1e-10)
    assert m.continuous_rms() == pytest.approx(rms, abs=1e-10) and t["rms_ce"] < rms
    # E[u^g] = B(a + g, b) / B(a, b)
    moment = math.exp(special.betaln(a + g, b) - special.betaln(a, b))
    assert t["accuracy"] == pytest.approx(1 / k + 0.9 * moment)
    assert set(t) == set(TRUE_METRICS)


@pytest.mark.parametrize("k, gamma", [(10, 1.5), (4, 0.6)])
def test_synthetic_truth_matches_a_large_sample(k, gamma):
    """Each population value against the metric on 300,000 samples. Confidences uniform
    over [1/K, 1] (a = b = 1), so that every bin holds thousands of samples: MCE, the
    largest gap of any bin, converges only where the emptiest bin is well filled (under
    the default Beta(5, 1) the lowest bins hold a 1e-7 share)."""
    model = SyntheticClassifier(k, a=1.0, b=1.0, gamma=gamma)
    probs, labels = model.sample(300_000, seed=5)
    r = evaluate(probs, labels, probs=True, optimal=False)
    for name, value in model.truth().items():
        assert abs(r[name] - value) < 0.006, (name, r[name], value)


def test_coverage_of_the_chosen_intervals_small_study():
    """A small version of benchmarks/correctness/interval_coverage.py at N = 500, K = 10, whose full
    table (docs/metrics.md) gives the expected coverage. Every bound lies 3 or more standard
    errors (about 3 points at R = 120, 4 at R = 60) from it, so neither luck nor a broken
    interval passes: means about 95 % (bound 87), over-confident ECE by the basic interval
    87 % (bound 78), classwise ECE 76 % basic against 0 % percentile; calibrated, KS error
    88 % basic against 0 % percentile."""
    from calibkit.metrics._intervals import policy

    over = coverage_cell(
        500,
        10,
        1.5,
        120,
        300,
        smooth=False,
        metrics=("accuracy", "nll", "brier", "gap", "ece", "classwise_ece", "debiased_rms_ce"),
    )
    cov = {m: c[policy(m).method] for m, c in over["coverage"].items()}
    assert min(cov[m] for m in ("accuracy", "nll", "brier", "gap")) >= 0.87, cov
    assert cov["ece"] >= 0.78 and cov["debiased_rms_ce"] >= 0.72, cov
    assert cov["classwise_ece"] >= 0.6 >= 0.1 >= over["coverage"]["classwise_ece"]["percentile"]
    calibrated = coverage_cell(
        500, 10, 1.0, 60, 300, smooth=False, metrics=("ks_error", "overconfident")
    )
    for m, c in calibrated["coverage"].items():
        assert c[policy(m).method] >= 0.7 and c["percentile"] <= 0.1, (m, c)


def test_replicates_are_paired_across_score_sets_of_the_same_rows():
    probs, labels = SyntheticClassifier(10, gamma=1.5).sample(400, seed=0)
    z = np.log(probs)
    a = bootstrap_replicates(z, labels, ["ece", "nll"], 50, seed=4)
    b = bootstrap_replicates(z * 0.8, labels, ["ece", "nll"], 50, seed=4)
    c = compare_paired(z, z * 0.8, labels, bootstrap=50, seed=4, metrics=["ece", "nll"])
    d = torch.tensor(b["ece"] - a["ece"], dtype=torch.float64)
    q = torch.quantile(d, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    assert c.intervals["ece"] == pytest.approx(q)


def test_nested_comparison_averages_each_seeds_paired_differences():
    rng = np.random.default_rng(0)
    groups = []
    for s in range(3):
        probs, labels = SyntheticClassifier(10, gamma=1.5).sample(300 + 50 * s, seed=s)
        z = np.log(probs) * (1 + 0.1 * rng.random())
        groups.append((z, z * 0.7, labels))
    c = compare_nested(groups, bootstrap=100, seed=2, metrics=["ece"])
    diffs = [
        bootstrap_replicates(zb, y, ["ece"], 100, seed=2)["ece"]
        - bootstrap_replicates(za, y, ["ece"], 100, seed=2)["ece"]
        for za, zb, y in groups
    ]
    mean = torch.tensor(np.mean(diffs, axis=0), dtype=torch.float64)
    q = torch.quantile(mean, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    assert c.intervals["ece"] == pytest.approx(q)
    single = [
        evaluate(zb, y, metrics=["ece"], optimal=False)["ece"]
        - evaluate(za, y, metrics=["ece"], optimal=False)["ece"]
        for za, zb, y in groups
    ]
    assert c.diff["ece"] == pytest.approx(np.mean(single))
    assert c.settings["seeds"] == 3 and 0 <= c.p_values["ece"] <= 1
    with pytest.raises(ValueError, match="groups: empty"):
        compare_nested([])


def test_paired_test_holds_its_level_and_has_power():
    """60 replications of two methods equal in truth (independent per-row jitter of the
    same over-confident logits): compare_paired rejects at most 5 % + 3.5 SE; with B's logits
    scaled by 0.8 (less over-confident, about 1.5 points lower ECE) in at least 90 %."""
    rejects, detects = 0, 0
    for r in range(60):
        rng = np.random.default_rng(r)
        probs, labels = SyntheticClassifier(10).sample(1000, seed=r)
        z = 1.3 * np.log(probs)

        za, zb = (z * np.exp(0.1 * rng.standard_normal(len(z)))[:, None] for _ in range(2))
        rejects += (
            compare_paired(za, zb, labels, bootstrap=200, seed=r, metrics=["ece"]).p_values["ece"]
            < 0.05
        )
        detects += (
            compare_paired(za, 0.8 * zb, labels, bootstrap=200, seed=r, metrics=["ece"]).p_values[
                "ece"
            ]
            < 0.05
        )
    assert rejects / 60 <= 0.05 + 3.5 * math.sqrt(0.05 * 0.95 / 60)
    assert detects / 60 >= 0.9


@pytest.mark.parametrize("method", ["basic", "percentile", "bca", "auto"])
def test_every_interval_lies_within_its_metrics_range(method):
    """Issue 55 §2: basic intervals reflect the replicates about the estimate, so an MCE near
    its greatest value got [0.94, 1.80] from ``compare``. Every metric of the table with a
    range keeps its interval inside it: an estimate at each end of the range, replicates
    spread away from it (the case a reflection pushes out), for every method."""
    from calibkit.metrics._intervals import policy
    from calibkit.metrics._resample import bootstrap_intervals
    from calibkit.metrics._table import METRICS_TABLE

    spread = torch.linspace(0.0, 0.4, 201, dtype=torch.float64)
    checked = 0
    for row in METRICS_TABLE:
        rule = policy(row.name)
        for end, away in ((rule.most, -1.0), (rule.least, 1.0)):
            if end is None:
                continue
            estimates = {row.name: end + away * 0.01}
            replicates = {row.name: end + away * spread}
            plug_ins = {rule.plug_in: end} if rule.plug_in else None
            jack = lambda names, e=end, a=away: {n: e + a * spread[:20] for n in names}  # noqa: E731
            got, _, _ = bootstrap_intervals(
                estimates, replicates, 0.95, method, jack=jack, plug_ins=plug_ins
            )
            lo, hi = got[row.name]
            least = -math.inf if rule.least is None else rule.least
            most = math.inf if rule.most is None else rule.most
            assert least <= lo <= hi <= most, (row.name, method, lo, hi)
            checked += 1
    assert checked >= 2 * len(METRICS_TABLE) - 4  # NLL and entropy have no greatest value


def test_an_mce_interval_stops_at_one():
    """The case that was printed: an MCE estimate near 1 whose replicates lie below it."""
    replicates = torch.linspace(0.2, 0.99, 500, dtype=torch.float64)
    lo, hi = interval(replicates, 0.99, 0.95, "basic", lower_bound=0.0, upper_bound=1.0)
    assert 0.0 <= lo <= hi == 1.0
    unclipped = interval(replicates, 0.99, 0.95, "basic", lower_bound=0.0)
    assert unclipped[1] > 1.7  # what it gave before the bound


def test_a_note_tells_an_estimate_from_the_bound_it_lies_beyond():
    """Issue 55 §6: "0.43 [0.40, 0.43] %" read as inside; the note prints the digits that
    tell them apart."""
    from calibkit.metrics._resample import bootstrap_intervals

    replicates = {"ece": torch.linspace(0.0040, 0.004299, 100, dtype=torch.float64)}
    _, _, notes = bootstrap_intervals({"ece": 0.0043}, replicates, 0.95, "percentile")
    (note,) = notes
    assert "ece 0.430 [0.401, 0.429] %" in note, note
