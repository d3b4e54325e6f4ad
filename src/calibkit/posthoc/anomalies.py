"""Checks run on every calibrator of every bench run and of every ``compare`` fit; what
they flag is stored beside the numbers, shown in the report, in ``calibkit bench``'s
closing summary and under ``calibkit compare``'s table, so that a result that went wrong
is never printed as if it were fine.

Each check compares the calibrated test split with the uncalibrated one of the same run:

========================  ==============================================================
kind                      flagged when
========================  ==============================================================
``diverged``              the fit stopped with an error (the message is the detail)
``not-converged``         the calibrator's fit report says it did not converge
``temperature``           a fitted temperature outside ``SANE_TEMPERATURE`` (0.05 … 20)
``argmax``                a calibrator that declares it keeps the argmax changed a test
                          prediction (any number of them)
``accuracy``              any other calibrator lowered test accuracy by more than
                          ``ACCURACY_DROP`` (2 points)
``worse-ece``             test ECE rose by more than ``ECE_RISE`` (5 points) and more than
                          doubled
``worse-nll``             test NLL rose by more than ``NLL_RISE`` (25 %)
``non-finite``            a metric or a calibrated logit is NaN or infinite
``warning``               (``compare`` only) the fit issued a warning, e.g. a map with
                          fewer than 10 calibration rows per parameter
========================  ==============================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

SANE_TEMPERATURE = (0.05, 20.0)
ACCURACY_DROP = 0.02
ECE_RISE = 0.05
NLL_RISE = 0.25

KINDS = ("diverged", "not-converged", "temperature", "argmax", "accuracy", "worse-ece",
         "worse-nll", "non-finite")  # fmt: skip


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
        found.append(("argmax", f"{changed} test predictions changed (accuracy {drop:+.4f} lost)"))
    elif not preserves_argmax and drop > ACCURACY_DROP:
        found.append(("accuracy", f"accuracy {before['accuracy']:.4f} → {after['accuracy']:.4f}"))
    e0, e1 = before["ece"], after["ece"]
    if e1 - e0 > ECE_RISE and e1 > 2 * e0:
        found.append(("worse-ece", f"ECE {e0:.4f} → {e1:.4f}"))
    n0, n1 = before["nll"], after["nll"]
    if n1 > n0 * (1 + NLL_RISE):
        found.append(("worse-nll", f"NLL {n0:.4f} → {n1:.4f}"))
    return found
