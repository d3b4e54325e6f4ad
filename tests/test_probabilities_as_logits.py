"""Probabilities where logits were expected: one behaviour at every entry point. Scores
whose every row lies in [0, 1] and sums to 1 are refused with one line naming probs=True
(calibkit._checks.refuse_probabilities), never read as logits (ECE 0.69 where the truth is
0.05); with probs=True, or as their logarithm, they give the right number."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from calibkit import posthoc
from calibkit.metrics import CalibrationMeter, compare_paired, evaluate
from calibkit.metrics._synthetic import SyntheticClassifier
from tests.test_cli import run, run_ok


@pytest.fixture(scope="module")
def probs_labels():
    p, y = SyntheticClassifier(10, gamma=1.5).sample(500, seed=0)
    return torch.as_tensor(p, dtype=torch.float32), torch.as_tensor(y)


def _refused(call):
    with pytest.raises(ValueError, match=r"look like probabilities.*probs=True"):
        call()


FUNCTIONS = [M.ece, M.accuracy, M.nll, M.brier, M.classwise_ece, M.aece, M.mce, M.aurc]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_functions_refuse_probabilities_and_accept_them_when_told(fn, probs_labels):
    p, y = probs_labels
    _refused(lambda: fn(p, y))
    assert fn(p, y, probs=True) == pytest.approx(fn(p.double().log(), y), rel=1e-4, abs=1e-6)


def test_evaluate_and_paired_refuse(probs_labels):
    p, y = probs_labels
    _refused(lambda: evaluate(p, y, optimal=False))
    _refused(lambda: compare_paired(p, p, y, bootstrap=10))
    right = evaluate(p, y, probs=True, optimal=False)["ece"]
    assert right == pytest.approx(M.ece(p.double().log(), y), rel=1e-4)
    assert right < 0.2  # the wrong reading gives about 0.69


def test_only_the_first_rows_decide_for_logits(probs_labels):
    p, y = probs_labels
    mixed = p.clone()
    mixed[-1] = torch.tensor([2.0] + [0.0] * 9)  # one logit row at the end: logits after all
    assert M.ece(mixed, y) > 0  # read as logits, no error


def test_meter_refuses_and_is_left_as_it_was(probs_labels):
    p, y = probs_labels
    meter = CalibrationMeter()
    _refused(lambda: meter.update(p, y))
    assert meter.n == 0 and meter.n_classes is None
    told = CalibrationMeter(probs=True).update(p, y).compute()
    assert told["ece"] == pytest.approx(M.ece(p, y, probs=True), rel=1e-9)


def test_torchmetrics_adapters_refuse(probs_labels):
    pytest.importorskip("torchmetrics")
    from calibkit.adapters.torchmetrics import ECE, AdaptiveECE

    p, y = probs_labels
    for metric in (ECE(), AdaptiveECE()):
        _refused(lambda m=metric: m.update(p, y))
    told = ECE(probs=True)
    told.update(p, y)
    assert float(told.compute()) == pytest.approx(M.ece(p, y, probs=True), rel=1e-9)


def test_calibrators_refuse_probabilities_for_logits(probs_labels):
    p, y = probs_labels
    with pytest.raises(ValueError, match="look like probabilities") as err:
        posthoc.create("ts").fit(p, y)
    # a calibrator has no probs setting: the message advises only what exists (issue 54 §5)
    assert "pass their logarithm (log p) as logits" in str(err.value)
    assert "probs=True" not in str(err.value)


def test_the_cli_advises_only_its_own_options(tmp_path, probs_labels, capsys):
    """``fit`` has no --probs: its refusal does not advise it (issue 53: it did)."""
    p, y = probs_labels
    np.savez(tmp_path / "probs.npz", logits=p.numpy(), labels=y.numpy())
    argv = ["fit", "--method", "ts", "--val", str(tmp_path / "probs.npz"), "-o", "t.calib"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "look like probabilities" in err and "--probs" not in err


def test_cli_refuses_without_printing_a_table(tmp_path, probs_labels, capsys):
    p, y = probs_labels
    path = tmp_path / "probs.npz"
    np.savez(path, logits=p.numpy(), labels=y.numpy())
    code, out, err = run(["evaluate", str(path)], capsys)
    assert code == 2 and out == ""
    assert "look like probabilities" in err and "--probs" in err
    assert "ece" in run_ok(["evaluate", str(path), "--probs"], capsys)


def test_lightning_callback_refuses_softmax_outputs(tmp_path, probs_labels):
    L = pytest.importorskip("lightning.pytorch")
    from calibkit.adapters.lightning import CalibrationCallback
    from tests.test_adapters_lightning import Digits, _loaders, _trainer

    class Softmax(Digits):
        def validation_step(self, batch, batch_idx):
            x, y = batch
            return {"logits": self.net(x).softmax(1), "labels": y}

    train, val = _loaders()
    trainer = _trainer(tmp_path, CalibrationCallback(["ece"], diagram=False))
    with pytest.raises(ValueError, match="look like probabilities"):
        trainer.fit(Softmax(), train, val)
    assert L is not None


HALF = [torch.float16, torch.bfloat16, torch.float32]


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_precision_softmax_is_refused_at_every_entry_point(dtype, real_logits):
    """Issue 54 §1: a float16 or bfloat16 softmax (Lightning's and torchmetrics' usual
    mixed precision) is refused like a float32 one: before the fix the refusal used float32's
    tolerance and ECE read the float16 probabilities as logits, 0.7067 for 0.0475.
    torchmetrics' own names follow torchmetrics' convention (values in [0, 1] are
    probabilities), so they read them right: as torchmetrics does."""
    from torchmetrics.classification import MulticlassCalibrationError as Theirs

    from calibkit.adapters.torchmetrics import ECE, MulticlassCalibrationError

    z, y = torch.as_tensor(real_logits[2]), torch.as_tensor(real_logits[3]).long()
    p = torch.softmax(z, 1).to(dtype)
    _refused(lambda: M.ece(p, y))
    _refused(lambda: evaluate(p, y, optimal=False))
    _refused(lambda: CalibrationMeter().update(p, y))
    _refused(lambda: ECE()(p, y))
    right = float(MulticlassCalibrationError(num_classes=10)(p, y))
    # torchmetrics sums 10,000 float32 confidences in float32: 4e-6 of its own rounding
    assert right == pytest.approx(float(Theirs(num_classes=10)(p, y)), abs=1e-5)
    assert right == pytest.approx(M.ece(z, y), abs=3e-3)  # not 0.7
    with pytest.raises(ValueError, match="look like probabilities"):
        posthoc.create("ts").fit(p, y)
    if dtype == torch.float16:  # NumPy has float16 (not bfloat16): the same from an array
        _refused(lambda: M.ece(p.numpy(), y.numpy()))
    # told they are probabilities, they give the logits' ECE within half precision
    assert M.ece(p, y, probs=True) == pytest.approx(M.ece(z, y), abs=2e-3)


def test_logits_that_look_like_probabilities_pass_when_stated(tmp_path, probs_labels, capsys):
    """Issue 66 §3: genuine logits whose rows lie in [0, 1] and sum to 1 (TorchUncertainty's
    temperature-scaling test data are such) are read as logits when the caller says so:
    ``probs=False`` in the metric functions, ``evaluate`` and ``Calibrator.fit`` (whose
    fitted calibrator then applies to them too), ``--logits`` on the command line. Left
    unsaid (None, the default), they are refused as before."""
    z, y = probs_labels  # read as logits now
    assert M.ece(z, y, probs=False) == M.ece(M.trusted(z, y))
    assert evaluate(z, y, probs=False, optimal=False)["nll"] == M.nll(M.trusted(z, y))
    ts = posthoc.create("ts").fit(z, y, probs=False)
    same = posthoc.create("ts").fit(z.double() + 5.0, y)  # logits shifted: the same fit
    assert float(ts.temperature_) == pytest.approx(float(same.temperature_), rel=1e-9)
    assert torch.allclose(ts(z).double(), same(z.double() + 5.0).double() - 5.0 / float(
        same.temperature_), atol=1e-6)  # fmt: skip
    with pytest.raises(ValueError, match="a calibrator maps logits"):
        posthoc.create("ts").fit(z, y, probs=True)
    path = tmp_path / "looks.npz"
    np.savez(path, logits=z.numpy(), labels=y.numpy(), logits_val=z.numpy(), labels_val=y.numpy())
    code, _, err = run(["evaluate", str(path)], capsys)
    assert code == 2 and "--probs for probabilities, or --logits" in err
    assert "ece" in run_ok(["evaluate", str(path), "--logits"], capsys)
    out = tmp_path / "ts.calib"
    code, _, err = run(["fit", "--method", "ts", "--val", str(path), "-o", str(out)], capsys)
    assert code == 2 and "--logits for logits that look so" in err and "--probs" not in err
    run_ok(["fit", "--method", "ts", "--val", str(path), "-o", str(out), "--logits"], capsys)
    assert out.exists()
