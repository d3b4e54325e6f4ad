"""CalibrationMeter: streaming, merging, memory, errors, and a real 2-process gloo sync."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from calibkit import metrics as M
from tests.conftest import free_port, gloo_group, make_logits

BINNED = (
    "ece",
    "mce",
    "rms_ce",
    "debiased_rms_ce",
    "classwise_ece",
    "accuracy",
    "nll",
    "brier",
    "entropy",
    "gap",
)
RANKED = ("aece", "refinement_auroc", "aurc", "ks_error", "smooth_ece")


def _one_shot(z, y, **kw):
    return M.evaluate(z, y, optimal=False, **kw).metrics


def _check(result, z, y, **kw):
    want = _one_shot(z, y, **kw)
    for name in BINNED:
        assert result[name] == pytest.approx(want[name], rel=1e-12, abs=1e-15), name
    for name in RANKED:
        if name in result and name == "smooth_ece":
            # a kernel sum over every sample, reduced by PyTorch's intra-op threads: a rank's
            # thread count can change its last bit (1 ulp measured on a fresh machine)
            assert result[name] == pytest.approx(want[name], rel=1e-12), name
        elif name in result:
            assert result[name] == want[name], name  # same samples, same code: bit for bit


@pytest.mark.parametrize("binning", ["calibkit", "torchmetrics", "netcal"])
def test_streaming_equals_one_shot_on_real_logits(real_logits, binning):
    _, _, z, y = real_logits
    m = M.CalibrationMeter(n_bins=15, binning=binning)
    for zb, yb in zip(np.array_split(z, 7), np.array_split(y, 7), strict=True):
        m.update(zb, yb)
    _check(m.compute(), z, y, binning=binning)


def test_merge_and_reset():
    z, y = make_logits(1000, 10, 0, dtype=np.float32)
    a, b = M.CalibrationMeter(), M.CalibrationMeter()
    a.update(z[:400], y[:400])
    b.update(z[400:], y[400:])
    _check(a.merge(b).compute(), z, y)
    a.reset()
    with pytest.raises(ValueError, match="empty"):
        a.compute()


def test_binned_state_does_not_grow_with_n():
    sizes = []
    for n in (1_000, 100_000):
        z, y = make_logits(n, 10, 1, dtype=np.float32)
        m = M.CalibrationMeter(keep_samples=False)
        for zb, yb in zip(np.array_split(z, 10), np.array_split(y, 10), strict=True):
            m.update(zb, yb)
        sizes.append(m.state_nbytes())
        assert set(RANKED).isdisjoint(m.compute())
    assert sizes[0] == sizes[1] < 10_000


def test_meter_errors():
    m = M.CalibrationMeter()
    m.update(np.zeros((2, 3), dtype=np.float32), [0, 1])
    with pytest.raises(ValueError, match="holds 3 classes, the batch has 4"):
        m.update(np.zeros((2, 4), dtype=np.float32), [0, 1])
    with pytest.raises(TypeError, match="keep one dtype"):
        m.update(np.zeros((2, 3), dtype=np.float64), [0, 1])
    with pytest.raises(ValueError, match="differ in settings"):
        m.merge(M.CalibrationMeter(n_bins=10))


def test_a_bad_first_batch_leaves_the_meter_as_it_was():
    # the NaN check of float32 logits happens in the scan: it must come before any state
    m = M.CalibrationMeter()
    bad = np.zeros((2, 4), dtype=np.float32)
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"scores: contains 1 NaN value\(s\) \(first in row 1\)"):
        m.update(bad, [0, 1])
    assert m.n == 0 and m.n_classes is None
    m.update(np.zeros((2, 3), dtype=np.float32), [0, 1])  # another class count is still welcome
    assert m.n == 2


def test_sync_outside_distributed_is_a_no_op():
    """The tour's snippet (docs/tour.md) runs in one process: sync() keeps the totals
    (issue 11.10)."""
    logits = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    labels = np.arange(50) % 4
    m = M.CalibrationMeter()
    m.update(logits, labels)
    before = m.compute()
    assert m.sync() is m
    assert m.compute()["ece"] == before["ece"] == pytest.approx(M.ece(logits, labels), abs=1e-7)


def _worker(rank, world, port, out):
    with gloo_group(rank, world, port):
        z, y = make_logits(3001, 7, 5, dtype=np.float32)
        parts = np.array_split(np.arange(3001), world)
        m = M.CalibrationMeter(n_classes=7)
        for chunk in np.array_split(parts[rank], 3):
            m.update(z[chunk], y[chunk])
        result = m.sync().compute()
        torch.save(
            {k: torch.tensor(v, dtype=torch.float64) for k, v in result.items()}, f"{out}.{rank}"
        )


def test_sync_across_two_gloo_processes(tmp_path):
    """Each rank sees half the samples; after sync every rank reports the one-shot result."""
    out = str(tmp_path / "result")
    mp.spawn(_worker, args=(2, free_port(), out), nprocs=2, join=True)
    z, y = make_logits(3001, 7, 5, dtype=np.float32)
    for rank in range(2):
        got = {k: float(v) for k, v in torch.load(f"{out}.{rank}", weights_only=True).items()}
        _check(got, z, y)


def test_the_meter_is_callable_and_round_trips_its_state(tmp_path):
    """Issue 54 §5: ``meter(scores, labels)`` adds the batch and returns its own metrics (a
    torchmetrics Metric's forward); ``state_dict`` survives ``torch.save`` and a
    ``weights_only`` load, and a refused state leaves the meter as it was."""
    import torch

    from calibkit.metrics import CalibrationMeter, evaluate

    g = torch.Generator().manual_seed(0)
    z = torch.randn(600, 4, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 4, (600,), generator=g)
    meter = CalibrationMeter()
    first = meter(z[:300], y[:300])
    alone = evaluate(z[:300], y[:300], optimal=False).metrics
    assert first["ece"] == pytest.approx(alone["ece"], abs=1e-12)
    meter(z[300:], y[300:])
    whole = meter.compute()
    assert whole["ece"] == pytest.approx(evaluate(z, y, optimal=False).metrics["ece"], abs=1e-12)
    torch.save(meter.state_dict(), tmp_path / "meter.pt")
    back = CalibrationMeter()
    back.load_state_dict(torch.load(tmp_path / "meter.pt", weights_only=True))
    assert back.compute() == whole
    back.update(z[:10], y[:10])  # and it goes on accumulating
    assert back.n == 610
    other = CalibrationMeter(n_bins=10)
    with pytest.raises(ValueError, match="not of a meter with these settings"):
        other.load_state_dict(meter.state_dict())
    broken = meter.state_dict() | {"top": torch.zeros(3, 2)}
    with pytest.raises(ValueError, match="not a meter's state"):
        back.load_state_dict(broken)
    assert back.n == 610  # left as it was
