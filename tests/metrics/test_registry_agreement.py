"""Every metric of the registry (metrics/_table.py) agrees across the four ways calibkit
computes it: the functional API, ``evaluate``, the streaming meter (fed in batches) and the
bootstrap's weighted path (all weights one is the sample itself)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import calibkit.metrics as M
from calibkit.metrics._binning import BinScheme
from calibkit.metrics._inputs import prepare
from calibkit.metrics._resample import metric_vectors
from calibkit.metrics._table import COMPUTED, SAMPLE_METRICS
from tests.conftest import make_logits

#: the functional API's way to each metric that has no function of its own
FUNCTIONAL = {
    "debiased_rms_ce": lambda z, y: M.rms_ce(z, y, debias=True),
    "debiased_ece": lambda z, y: M.ece(z, y, debias=True),
    "debiased_classwise_ece": lambda z, y: M.classwise_ece(z, y, debias=True),
    "mean_confidence": lambda z, y: M.ece_decomposition(z, y)["mean_confidence"],
    "gap": lambda z, y: M.ece_decomposition(z, y)["gap"],
    "overconfident": lambda z, y: M.ece_decomposition(z, y)["overconfident"],
    "underconfident": lambda z, y: M.ece_decomposition(z, y)["underconfident"],
}


@pytest.mark.parametrize("binary", ["top-label", "positive"])
def test_every_metric_agrees_across_functional_evaluate_meter_and_bootstrap(binary):
    k = 2 if binary == "positive" else 6
    z, y = make_logits(900, k, 4)
    z = np.round(z, 1)  # ties, so that the rank-based metrics meet tie runs
    want = M.evaluate(z, y, binary=binary).metrics
    meter = M.CalibrationMeter(k, binary=binary)
    for part in np.array_split(np.arange(len(y)), 4):
        meter.update(z[part], y[part])
    streamed = meter.compute()
    scheme = BinScheme(15, "calibkit", torch.float64)
    weighted = metric_vectors(
        prepare(z, y, binary=binary),
        scheme,
        torch.ones(1, len(y), dtype=torch.float64),
        smooth=True,
    )
    for m in COMPUTED:
        name = m.name
        assert streamed[name] == pytest.approx(want[name], rel=1e-9, abs=1e-12), name
        assert float(weighted[name][0]) == pytest.approx(want[name], rel=1e-9, abs=1e-12), name
        func = FUNCTIONAL.get(name) or getattr(M, name, None)  # a functional is optional
        if binary == "top-label" and func is not None:
            assert func(z, y) == pytest.approx(want[name], rel=1e-9, abs=1e-12), name


def test_a_meter_without_samples_gives_every_metric_but_the_rank_based():
    z, y = make_logits(300, 4, 1)
    meter = M.CalibrationMeter(4, keep_samples=False).update(z, y)
    assert set(meter.compute()) == {m.name for m in COMPUTED} - set(SAMPLE_METRICS)


def test_each_metric_is_shown_and_has_an_interval_policy_of_the_tables_names():
    """A metric is three entries (docs/architecture.md, "Adding a metric"): its row, how it
    is shown (every row, in the table's order) and its interval policy (listed only where it
    departs from the percentile interval within [0, 1], never for a name the table lacks)."""
    from calibkit.metrics._display import SHOWN
    from calibkit.metrics._intervals import POLICIES
    from calibkit.metrics._table import METRICS_TABLE

    names = [r.name for r in METRICS_TABLE]
    assert list(SHOWN) == names
    assert set(POLICIES) <= set(names)
