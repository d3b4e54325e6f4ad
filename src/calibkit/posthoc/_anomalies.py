"""Checks run on every fit, so that a result that went wrong is never printed as if it
were fine:

* every ``Calibrator.fit`` (Python, ``calibkit fit``) checks its calibration split;
* :func:`calibkit.runs.calibrate_run` (``calibkit calibrate``, ``train --stage2``)
  checks the run's test split (the validation split when the test split has no labels);
* ``bench`` and ``compare`` check the test split of every run and seed.

What they flag is kept in ``fit_report_.anomalies`` (and in ``--json``'s ``fit``), issued
as one :class:`CalibrationWarning` per fit (a ``UserWarning`` users can filter, as
scikit-learn's ``ConvergenceWarning``; the CLI prints it as one ``warning:`` line), stored
beside the bench's numbers and shown in its report and under ``compare``'s table.

Each check compares the calibrated split with the uncalibrated one:

========================  ==============================================================
kind                      flagged when
========================  ==============================================================
``diverged``              the fit stopped with an error (the message is the detail)
``not-converged``         the calibrator's fit report says it did not converge
``temperature``           a fitted temperature outside ``SANE_TEMPERATURE`` (0.05 … 20)
``argmax``                a calibrator that declares it keeps the argmax changed a
                          prediction (any number of them)
``accuracy``              any other calibrator lowered accuracy by more than
                          ``ACCURACY_DROP`` (2 points)
``worse-ece``             ECE rose by more than ``ECE_RISE`` (5 points) and more than
                          doubled
``worse-nll``             NLL rose by more than ``NLL_RISE`` (25 %)
``non-finite``            a metric or a calibrated logit is NaN or infinite
``grid-edge``             a cross-validated penalty chose the edge of its grid, after the
                          grid extended itself (``GRID_EXTENSIONS``): the optimum may lie
                          beyond; the detail names the grid to widen
``mask-inactive``         MaC-Cal's adaptive mask rate q sat at 1 (nothing masked) or at
                          its floor for the whole second half of stage 2 (Eq. 12
                          saturated): the fit is plain retraining, or mostly masked
``mask-unsettled``        MaC-Cal's q moved by its whole clip η_t at every epoch of the
                          second half of stage 2, at whatever value: Eq. 12 never reached
                          its fixed point (Conf = γ Acc), q only followed the clip's decay
``warning``               (``compare`` only) the fit issued a warning, e.g. a map with
                          fewer than 10 calibration rows per parameter
========================  ==============================================================

A method declares the kinds that are its nature in ``expected_anomalies`` (histogram
binning: ``worse-nll``, from its coarse probabilities); they are not flagged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from ..metrics import trusted
from ..metrics.internal import metric_values

SANE_TEMPERATURE = (0.05, 20.0)
ACCURACY_DROP = 0.02
ECE_RISE = 0.05
NLL_RISE = 0.25

KINDS = ("diverged", "not-converged", "temperature", "argmax", "accuracy", "worse-ece",
         "worse-nll", "non-finite", "grid-edge", "mask-inactive",
         "mask-unsettled")  # fmt: skip


#: Why a kind a method declares part of its nature (``expected_anomalies``) is not flagged,
#: for the line ``compare`` prints under its table
WHY_EXPECTED = {
    "worse-nll": "its few output probabilities (one per bin) raise NLL by design, not flagged",
}

#: The metrics the checks compare, before and after.
CHECKED = ("accuracy", "ece", "nll")


class CalibrationWarning(UserWarning):
    """A fit that went wrong: did not converge, lost accuracy, made ECE or NLL worse, an
    insane temperature, a non-finite output. Filter it as any warning (``"error"`` makes it
    fatal); the fit report keeps what it said.

    Examples
    --------
    A temperature held below its optimum by ``t_max`` does not converge:

    >>> import warnings
    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     ts = posthoc.create("ts:t_max=1.1").fit(d["logits_val"], d["labels_val"])
    >>> [(w.category.__name__, str(w.message)) for w in caught]  # doctest: +NORMALIZE_WHITESPACE
    [('CalibrationWarning',
      'ts: not-converged on the calibration split (the fit did not converge)')]
    >>> ts.fit_report_.anomalies
    [{'kind': 'not-converged', 'detail': 'the fit did not converge', 'split': 'calibration'}]
    """


def check_calibrated(
    before: Mapping[str, float],
    after: Mapping[str, float],
    *,
    logits_before: torch.Tensor,
    logits_after: torch.Tensor,
    preserves_argmax: bool,
    temperature: float | None = None,
    converged: bool | None = None,
) -> list[tuple[str, str]]:
    """(kind, detail) for every anomaly of one calibrator on one test split. ``before`` and
    ``after`` are metric dicts (``accuracy``, ``ece``, ``nll``) of the uncalibrated and the
    calibrated logits (N, K)."""
    found: list[tuple[str, str]] = []
    bad = sorted(k for k, v in after.items() if not math.isfinite(v))
    if bad or not bool(torch.isfinite(logits_after).all()):
        what = ", ".join(bad) if bad else "calibrated logits"
        found.append(("non-finite", f"{what} not finite"))
    if converged is False:
        found.append(("not-converged", "the fit did not converge"))
    if temperature is not None and not (SANE_TEMPERATURE[0] <= temperature <= SANE_TEMPERATURE[1]):
        found.append(("temperature", f"T = {temperature:.4g} outside {SANE_TEMPERATURE}"))
    changed = int((logits_before.argmax(1) != logits_after.argmax(1)).sum())
    drop = before["accuracy"] - after["accuracy"]
    if preserves_argmax and changed:
        found.append(("argmax", f"{changed} predictions changed (accuracy {drop:+.4f} lost)"))
    elif not preserves_argmax and drop > ACCURACY_DROP:
        found.append(("accuracy", f"accuracy {before['accuracy']:.4f} → {after['accuracy']:.4f}"))
    e0, e1 = before["ece"], after["ece"]
    if e1 - e0 > ECE_RISE and e1 > 2 * e0:
        found.append(("worse-ece", f"ECE {e0:.4f} → {e1:.4f}"))
    n0, n1 = before["nll"], after["nll"]
    if n1 > n0 * (1 + NLL_RISE):
        found.append(("worse-nll", f"NLL {n0:.4f} → {n1:.4f}"))
    return found


def check_method(
    method: Any,
    before: Mapping[str, float],
    after: Mapping[str, float],
    *,
    logits_before: torch.Tensor,
    logits_after: torch.Tensor,
) -> list[tuple[str, str]]:
    """:func:`check_calibrated` for a fitted calibration ``method``, with what it says of
    itself (whether it keeps the argmax, its temperature, whether its fit converged), less
    the kinds it declares part of its nature (``expected_anomalies``: histogram binning's
    coarse probabilities raise NLL by design)."""
    temperature = getattr(method, "temperature_", None)
    found = check_calibrated(
        before,
        after,
        logits_before=logits_before,
        logits_after=logits_after,
        preserves_argmax=method.preserves_argmax,
        temperature=None if temperature is None else float(temperature),
        converged=method.fit_report_.converged,
    )
    details = method.fit_report_.details
    for key, kind in (
        ("grid_edge", "grid-edge"),
        ("mask_stopped", "mask-inactive"),
        ("mask_unsettled", "mask-unsettled"),
    ):
        if details.get(key):
            found.append((kind, details[key]))
    return [(kind, detail) for kind, detail in found if kind not in method.expected_anomalies]


def check_fit(
    method: Any,
    before: torch.Tensor,
    after: torch.Tensor,
    labels: torch.Tensor,
    split: str,
    stacklevel: int = 3,
) -> list[dict[str, str]]:
    """The checks of one fitted ``method`` on a split: logits ``before`` and ``after``
    calibration (N, K), ``labels`` (N,). Returns ``{"kind", "detail", "split"}`` per anomaly,
    adds them to ``method.fit_report_.anomalies`` and warns once (:class:`CalibrationWarning`)
    when there are any, pointing ``stacklevel`` frames up (default: the caller's caller)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        plain = metric_values(trusted(before, labels), None, CHECKED)
        calibrated = metric_values(trusted(after, labels), None, CHECKED)
    found = check_method(method, plain, calibrated, logits_before=before, logits_after=after)
    flagged = [{"kind": kind, "detail": detail, "split": split} for kind, detail in found]
    method.fit_report_.anomalies += flagged
    warn_flagged(method.name, flagged, stacklevel=stacklevel)
    return flagged


def warn_flagged(name: str, flagged: list[dict[str, str]], stacklevel: int = 1) -> None:
    """One :class:`CalibrationWarning` naming every anomaly of one fit (``stacklevel`` as
    :func:`warnings.warn`'s, counted from the caller of this function)."""
    if flagged:
        listed = "; ".join(
            f"{a['kind']} on the {a['split']} split ({a['detail']})" for a in flagged
        )
        warnings.warn(f"{name}: {listed}", CalibrationWarning, stacklevel=stacklevel + 1)
