"""Base class of the calibration methods that learn from a network and its inputs, not
from logits (Neural Clamping, MaC-Cal stage 2); what every method shares is in
:mod:`calibkit.posthoc._base`."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from .._docs import documented
from ._base import POSTHOC_PARAMETERS, Evidence, FitReport, Method

#: one fit's problem: (network, inputs (N, ...), labels (N,), data: what else the method takes)
Problem = tuple[nn.Module, Tensor, Tensor, dict[str, Any]]

#: a stochastic fit counts as converged when its last SETTLE_EPOCHS epochs moved little
#: (:func:`settled`); with fewer epochs than that it cannot tell, and does not say so
SETTLE_EPOCHS = 5


def settled(
    values: list[float],
    spread: float,
    *,
    relative: bool = True,
    floor: float = 0.0,
    drift: float | None = None,
) -> bool:
    """Whether a per-epoch series has settled: its last :data:`SETTLE_EPOCHS` values lie
    within ``spread`` of each other (max − min), relative to their mean magnitude when
    ``relative``, or within ``floor`` (a loss near 0 moves by more than any share of
    itself). With ``drift``, a series that moved the same way at every one of those epochs
    by more than ``drift`` (on the same scale) in all has not settled either: a steady
    descent in small steps. False with fewer epochs, or a value that is not finite.

    >>> settled([2.0, 1.0, 0.51, 0.5, 0.5, 0.49, 0.5], 0.05)
    True
    >>> settled([0.9, 0.8, 0.7, 0.6, 0.5], 0.05)
    False
    >>> steady = [1.0, 0.997, 0.994, 0.991, 0.988]  # within 2 %, falling at every epoch
    >>> settled(steady, 0.02), settled(steady, 0.02, drift=1e-3)
    (True, False)
    """
    last = values[-SETTLE_EPOCHS:]
    if len(last) < SETTLE_EPOCHS or not all(map(math.isfinite, last)):
        return False
    scale = sum(abs(v) for v in last) / len(last) if relative else 1.0
    if drift is not None:
        steps = [b - a for a, b in itertools.pairwise(last)]
        one_way = all(s < 0 for s in steps) or all(s > 0 for s in steps)
        if one_way and abs(last[-1] - last[0]) > drift * scale:
            return False
    return max(last) - min(last) <= max(spread * scale, floor)


class ModelCalibrator(Method):
    """Base class of calibration methods that learn from a network and its inputs (Neural
    Clamping, MaC-Cal stage 2): ``fit(model, inputs, labels) -> self``; afterwards
    ``forward(inputs)`` gives calibrated logits of ``model_``, the network it was fitted
    on (not copied, never changed).

    Examples
    --------
    >>> import torch
    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_network
    >>> net, digits = demo_network()
    >>> nc = posthoc.create("neural-clamping:epochs=5")
    >>> isinstance(nc, posthoc.ModelCalibrator), nc.level, nc.fit_split
    (True, 'model', 'val')
    >>> nc = nc.fit(net, digits.val.x, digits.val.y)
    >>> nc.model_ is net  # the network it was fitted on, not a copy
    True
    >>> with torch.no_grad():
    ...     nc(digits.test.x[:4]).shape  # calibrated logits from inputs
    torch.Size([4, 10])
    """

    level: ClassVar[str] = "model"

    @documented(
        POSTHOC_PARAMETERS,
        "ModelCalibrator: this method, fitted on ``model``.",
        model=("nn.Module", "The network to calibrate (not copied, never changed)."),
    )
    def fit(self, model: nn.Module, inputs: Tensor, labels: Tensor, **data: Any) -> ModelCalibrator:
        """Fit on calibration ``inputs`` (N, *input shape) and ``labels`` (N,) of ``model``;
        ``data`` holds properties of the data a method may use (``input_range``)."""
        return self.fit_group([self], [(model, inputs, labels, data)])[0]

    def fit_on(
        self, evidence: Evidence, idx: Tensor | None = None, progress: Any = None
    ) -> ModelCalibrator:
        return self.fit_group([self], [self._problem(evidence, idx, progress)])[0]

    @classmethod
    def fit_group(
        cls,
        methods: Sequence[ModelCalibrator],
        problems: Sequence[Problem],
    ) -> list[ModelCalibrator]:
        """Fit ``methods[i]`` (all of this class) on ``problems[i]`` = (model, inputs,
        labels, data), as :meth:`fit` does one: together where the method can (MaC-Cal
        trains every network's head in one stack), otherwise one after another. Each
        method's ``fit_report_.seconds`` is its share of the time."""
        for method in methods:
            method.checked()
        for _, inputs, labels, _ in problems:
            if inputs.ndim < 2 or len(inputs) != len(labels) or len(inputs) == 0:
                raise ValueError(
                    f"inputs and labels: expected N >= 1 matching samples, got "
                    f"{tuple(inputs.shape)} and {tuple(labels.shape)}"
                )
            if not bool(torch.isfinite(inputs).all()):
                raise ValueError("inputs: NaN or inf in the calibration inputs")
        start = time.perf_counter()
        reports = cls._fit_group(methods, [(m, x, y.long(), d) for m, x, y, d in problems])
        seconds = (time.perf_counter() - start) / len(methods)
        for method, (model, *_), report in zip(methods, problems, reports, strict=True):
            report.seconds = seconds
            method.model_, method.fit_report_ = model, report
        return list(methods)

    @classmethod
    def fit_group_on(
        cls, methods: Sequence[ModelCalibrator], evidences: Sequence[Evidence], progress: Any = None
    ) -> list[ModelCalibrator]:
        """:meth:`fit_group` on runs' evidence, method i on run i (``progress`` as
        :meth:`fit_on`'s, for the group); a run given several times is read once."""
        made: dict[int, tuple] = {}  # one problem per run: its inputs read once
        for m, e in zip(methods, evidences, strict=True):
            made.setdefault(id(e), m._problem(e, None, progress))
        return cls.fit_group(methods, [made[id(e)] for e in evidences])

    def _problem(self, evidence: Evidence, idx: Tensor | None, progress: Any) -> Problem:
        """(model, inputs, labels, data) of this method's fit on a run's evidence."""
        if evidence.model is None or evidence.inputs is None:
            raise ValueError(f"{self.name} calibrates a network: it needs a run's model and inputs")
        if evidence.labels.get(self.fit_split) is None:
            raise ValueError(f"{self.name} fits on a {self.fit_split} split; the run has none")
        y = evidence.labels[self.fit_split]
        x = evidence.inputs(self.fit_split, idx)
        extra = self._from_evidence(evidence)
        if progress is not None:
            extra["progress"] = progress
        return evidence.model, x, y if idx is None else y[idx], extra

    @classmethod
    def _fit_group(
        cls,
        methods: Sequence[ModelCalibrator],
        problems: Sequence[Problem],
    ) -> list[FitReport]:
        """The methods' fit reports, each fitted alone by ``_fit``; a method that fits
        several networks together overrides this."""
        return [
            m._fit(model, x, y, **d) for m, (model, x, y, d) in zip(methods, problems, strict=True)
        ]

    def _from_evidence(self, evidence: Evidence) -> dict[str, Any]:
        """What else ``_fit`` takes from a run (keyword arguments); override per method."""
        return {"input_range": evidence.input_range}

    def apply_on(self, evidence: Evidence) -> dict[str, Tensor]:
        if evidence.predict is None:
            raise ValueError(f"{self.name} calibrates a network: it needs a run's inputs")
        return {k: evidence.predict(self, k) for k in evidence.logits}

    def _fit(self, model: nn.Module, x: Tensor, y: Tensor, **data: Any) -> FitReport:
        raise NotImplementedError


def fits_together(method: type) -> bool:
    """Whether the calibration method class ``method`` fits several networks in one go
    (it overrides :meth:`ModelCalibrator._fit_group`: MaC-Cal), rather than one after
    another (every other method: a logits calibrator, Neural Clamping)."""
    own = getattr(method, "_fit_group", None)
    return own is not None and own.__func__ is not ModelCalibrator._fit_group.__func__
