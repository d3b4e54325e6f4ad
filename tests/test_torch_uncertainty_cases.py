"""The cases of TorchUncertainty's own tests of its calibration metrics and temperature
scaler (``tests/metrics/classification/test_calibration.py``,
``tests/post_processing/test_scalers.py``), written again with calibkit's classes where
calibkit has them (issue 66 §3): the cases and their expected values carry over, not their
code. Each test names the TorchUncertainty test it comes from.

Not carried over: the ``plot()`` cases (calibkit's reliability diagrams are
``calibkit.plots``, with labels of their own), ``set_temperature`` (a calibkit calibrator's
temperature is fitted, never set) and the vector and matrix scalers' ``num_classes``
checks (calibkit's maps take K from the logits they are fitted on).
"""

from __future__ import annotations

import pytest
import torch

from calibkit import posthoc
from calibkit.adapters.torchmetrics import AdaptiveECE, CalibrationError
from calibkit.metrics import aece

TU = "torch-uncertainty"
#: test_main's five binary probabilities of class 1 and their labels; top-class
#: confidences 0.7, 0.76, 0.75 (right), 0.8 (wrong), 0.8 (right)
PROBS = torch.as_tensor([0.3, 0.24, 0.25, 0.2, 0.8], dtype=torch.float64)
LABELS = torch.as_tensor([0, 0, 0, 1, 1])
#: tensor_split's bins of the sorted confidences: (0.7, 0.75, 0.76) all right, (0.8, 0.8)
#: half right
LOW, HIGH = 1 - (0.7 + 0.76 + 0.75) / 3, 0.8 - 0.5


def _adaptive(probs: torch.Tensor, labels: torch.Tensor, **settings) -> float:
    metric = AdaptiveECE(n_bins=2, probs=True, convention=TU, **settings)
    metric.update(probs, labels)
    return float(metric.compute())


def test_adaptive_equals_binned_where_each_bin_holds_one_confidence():
    """TestAdaptiveCalibrationError.test_main, first case: two confidences twice each."""
    probs = torch.as_tensor([0.35, 0.35, 0.75, 0.75], dtype=torch.float64)
    labels = torch.as_tensor([0, 0, 1, 1])
    binned = CalibrationError(task="binary", n_bins=2, norm="l1")
    binned.update(probs, labels)
    assert _adaptive(probs, labels) == pytest.approx(float(binned.compute()), abs=1e-12)
    assert _adaptive(probs, labels) == pytest.approx(0.3, abs=1e-12)


@pytest.mark.parametrize(
    "norm, expected",
    [
        ("l1", 3 / 5 * LOW + 2 / 5 * HIGH),
        ("l2", (3 / 5 * LOW**2 + 2 / 5 * HIGH**2) ** 0.5),
        ("max", HIGH),
    ],
)
def test_adaptive_norms_by_hand(norm, expected):
    """TestAdaptiveCalibrationError.test_main: the l1 case on binary probabilities, the l2
    and max cases on the same rows as two columns."""
    assert _adaptive(PROBS, LABELS, norm=norm) == pytest.approx(expected, abs=1e-12)
    two_columns = torch.stack([1 - PROBS, PROBS], 1)
    assert _adaptive(two_columns, LABELS, norm=norm) == pytest.approx(expected, abs=1e-12)
    assert aece(two_columns, LABELS, probs=True, n_bins=2, norm=norm, convention=TU) == (
        pytest.approx(expected, abs=1e-12)
    )


def test_calibkit_bins_put_the_larger_bin_last():
    """Where N is not a multiple of M the conventions differ: calibkit cuts at ⌊mN/M⌋, so
    (0.7, 0.75) and (0.76, 0.8, 0.8), where tensor_split gives (0.7, 0.75, 0.76), (0.8, 0.8)."""
    low, high = 1 - (0.7 + 0.75) / 2, (0.76 + 0.8 + 0.8) / 3 - 2 / 3
    assert aece(PROBS, LABELS, probs=True, n_bins=2) == pytest.approx(
        2 / 5 * low + 3 / 5 * high, abs=1e-12
    )


def test_multiclass_needs_an_integer_number_of_classes():
    """TestCalibrationError.test_errors and TestAdaptiveCalibrationError.test_errors:
    ``num_classes=None`` is refused (TorchUncertainty raises torchmetrics' TypeError;
    calibkit its one-line ValueError naming the argument)."""
    with pytest.raises(ValueError, match=r"num_classes: .*an int; got None"):
        CalibrationError(task="multiclass", num_classes=None)


def test_temperature_grows_without_bound_on_uninformative_logits():
    """TestTemperatureScaler.test_fit_biased: logits (0.6, 0.4) for every row, whose labels
    are half one class and half the other, are best served by T = +inf. TorchUncertainty's
    soft labels (0.5, 0.5) are five rows of each class here (the same NLL minimiser), and
    the logits, which lie in [0, 1] and sum to 1, are declared logits with ``probs=False``."""
    logits = torch.as_tensor([0.6, 0.4], dtype=torch.float64).repeat(10, 1)
    labels = torch.as_tensor([0, 1] * 5)
    with pytest.warns(UserWarning):  # T ends at its bound: flagged, not hidden
        cal = posthoc.create("ts").fit(logits, labels, probs=False)
    assert float(cal.temperature_) > 10  # at its bound, t_max = 100
    probs = torch.softmax(cal(torch.as_tensor([[0.6, 0.4]], dtype=torch.float64)), 1)
    assert float(((probs - 0.5).sum()) ** 2) < 0.001


@pytest.mark.parametrize("spec", ["ts:max_iter=-1", "ts:t_min=-1", "ts:tol=-1"])
def test_temperature_settings_out_of_range_are_refused(spec):
    """TestTemperatureScaler.test_errors: a negative start, learning rate or iteration
    count is refused; calibkit's TS has no start or learning rate, so its own settings."""
    with pytest.raises(ValueError, match=spec.split(":")[1].split("=")[0]):
        posthoc.create(spec)
