"""Calibrators on logits files, what ``calibkit fit`` and ``calibkit apply`` do: fit a
method on a file's calibration split and measure it there, and apply a fitted calibrator
to a file's logits, writing calibrated logits, probabilities and the labels."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import torch

from .._checks import as_labels, to_tensor
from .._outputs import save_npz
from ..io import load_scores, load_split, split_keys
from ..metrics import evaluate
from . import create
from ._base import Method


class NetworkMethodError(ValueError):
    """A model-level method (it calibrates a network) asked to fit a file of logits;
    ``method`` is its name."""

    def __init__(self, method: str) -> None:
        self.method = method
        super().__init__(
            f"{method} calibrates a network, not logits: fit it on a run folder "
            "(calibkit.runs.calibrate_run)"
        )


class FileFit(NamedTuple):
    """What :func:`fit_file` did: the fitted calibrator, the metrics of its calibration
    split before and after it, the file written and the split's size."""

    calibrator: Method
    before: dict[str, float]
    after: dict[str, float]
    path: Path
    n_samples: int


def fit_file(
    method: str,
    path: str | os.PathLike,
    output: str | os.PathLike,
    *,
    logits_key: str | None = None,
    labels_key: str | None = None,
    device: torch.device | str = "cpu",
    probs: bool | None = None,
) -> FileFit:
    """Fit ``method`` (a logits method's spec) on the calibration split of ``path`` (keys
    ``logits_val``/``labels_val``, or ``logits``/``labels``, or the keys given), save it to
    ``output`` and measure it there; the fit's checks are in ``fit_report_.anomalies``.
    ``probs=False``: the file's logits are logits even where they look like probabilities
    (:meth:`~calibkit.posthoc.Calibrator.fit`)."""
    cal = create(method)  # a bad spec fails before the data is read
    if cal.level != "logits":
        raise NetworkMethodError(cal.name)
    scores, labels = load_split(path, "val", logits_key=logits_key, labels_key=labels_key)
    # calibkit's checks first (a column of text, unsigned labels past int64), then torch
    z = to_tensor(scores, f"{path}: logits").to(device)
    y = as_labels(labels, name=f"{path}: labels").to(device)
    cal.fit(z, y, probs=probs)
    written = cal.save(output)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an undefined AUROC is a NaN here
        before = evaluate(z, y, probs=probs, optimal=False, smooth=False).metrics
        after = evaluate(cal(z).double(), y, probs=False, optimal=False, smooth=False).metrics
    return FileFit(cal, before, after, written, len(y))


def apply_file(
    cal: Method,
    path: str | os.PathLike,
    output: str | os.PathLike,
    *,
    split: str = "test",
    logits_key: str | None = None,
    labels_key: str | None = None,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """Apply the fitted logits calibrator ``cal`` to the ``split`` of ``path`` and write
    ``output`` (.npz): ``logits`` (calibrated; log-probabilities for binning and isotonic
    maps), ``probs`` (float64 softmax) and ``labels`` where the file has them (checked:
    in range, one per row). Returns {method, n_samples, path}, and where there are labels
    the metrics of the split ``before`` and ``after`` calibration."""
    keys = split_keys(path, split, logits_key, labels_key)
    z, labels = load_scores(path, **keys, need_labels=False)
    out = cal(to_tensor(z, f"{path}: logits").to(device)).cpu()  # checked by cal: finite, K
    result = {"logits": out.numpy(), "probs": torch.softmax(out.double(), 1).numpy()}
    if labels is not None:
        labels = as_labels(labels, out.shape[1], name=f"{path}: {keys['labels_key']}")
        if len(labels) != len(out):
            raise ValueError(f"{path}: {len(labels)} labels for {len(out)} rows of logits")
        result["labels"] = labels.numpy()
    written = save_npz(output, **result)
    done: dict[str, Any] = {"method": cal.name, "n_samples": len(out), "path": str(written)}
    if labels is not None:  # the effect on this split, as fit shows it on its own
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an undefined AUROC is a NaN
            done["before"] = evaluate(z, labels, optimal=False, smooth=False).metrics
            done["after"] = evaluate(out.double(), labels, optimal=False, smooth=False).metrics
    return done
