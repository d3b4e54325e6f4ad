"""The one table of metrics, what each computes: its name, in report order, and how its (B,)
values come from the shared :class:`Statistics`. How its interval is made is
:mod:`calibkit.metrics._intervals` (``POLICIES``); how it is shown, :mod:`calibkit.metrics.
display` (``SHOWN``). A metric is those three entries, its statistics in
:mod:`calibkit.metrics._stats` and its functional form in :mod:`calibkit.metrics._functional`.

>>> row("ece").null_test, row("ood_auroc:svhn").compute is None
(True, True)
>>> METRICS[:3]
('accuracy', 'ece', 'aece')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from torch import Tensor

from . import _stats as st


class Statistics(Protocol):
    """The shared statistics a metric is computed from, for B weighted resamples at once
    (B = 1 without resampling): :func:`~calibkit.metrics._evaluate` builds them from the
    scores, :class:`~calibkit.metrics.CalibrationMeter` from its running sums. Each is
    computed only when a metric asks for it."""

    n: int  # samples (each resample's total weight)
    n_bins: int

    def sums(self) -> Tensor:
        """(B, 3, M) per equal-width bin: count, sum of confidence, sum of outcome."""

    def mean(self, per_sample: str) -> Tensor:
        """(B,) mean of ``correct``, ``nll``, ``brier`` or ``entropy`` per sample."""

    def classwise(self) -> tuple[Tensor, Any]:
        """(B, 3, K, M) per-class bin sums, and their bin scheme."""

    def runs(self) -> tuple[Any, Tensor, Tensor]:
        """The tie runs of the calibration pair, sorted by confidence, with (B, R) sizes and
        positives (needs every sample)."""

    def correct_runs(self) -> tuple[Tensor, Tensor]:
        """(B, R) sizes and positives of the top-label confidence's runs against
        correctness (needs every sample)."""

    def smooth(self) -> Tensor:
        """(B,) smooth ECE of the calibration pair (needs every sample)."""


class Memo:
    """Each statistic computed once per object: a :class:`Statistics` is built for one
    evaluation, and several metrics ask for the same tie runs or bin sums."""

    def __init__(self) -> None:
        self._done: dict[str, Any] = {}

    def _once(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._done:
            self._done[key] = make()
        return self._done[key]


@dataclass(frozen=True)
class MetricRow:
    """One metric's computation: ``compute``, its (B,) values from the shared
    :class:`Statistics` (None where another path computes it: optimal ECE's temperature
    scan, the OOD metrics); ``samples``: it needs every sample (ranks or ties), not only bin
    sums; ``null_test``: 0 at perfect calibration and computed from bin sums alone, so
    :mod:`calibkit.metrics._consistency` tests it and its interval reaches 0 where the test
    does not reject."""

    name: str
    compute: Callable[[Statistics], Tensor] | None = None
    samples: bool = False
    null_test: bool = False


def _gap(s: Statistics) -> Tensor:
    sums = s.sums()
    return (sums[:, 1].sum(-1) - sums[:, 2].sum(-1)) / s.n


def _aece(s: Statistics) -> Tensor:
    return st.aece_from_runs(*s.runs(), s.n, s.n_bins)


def _classwise_ece(s: Statistics, debias: bool = False) -> Tensor:
    sums, scheme = s.classwise()
    if debias:
        return st.debiased_classwise_from_sums(sums, s.n, scheme)
    return st.classwise_ece_from_sums(sums, s.n, scheme)


def _ks(s: Statistics) -> Tensor:
    return st.ks_from_runs(*s.runs(), s.n)


M = MetricRow
#: every metric in report order: adding one is a row here, its calculation, its interval
#: policy and how it is shown (docs/architecture.md, "Adding a metric")
METRICS_TABLE: tuple[MetricRow, ...] = (
    M("accuracy", lambda s: s.mean("correct")),
    M("ece", lambda s: st.ece_from_sums(s.sums(), s.n), null_test=True),
    M("aece", _aece, samples=True),
    # no consistency test: its largest gap sits in a bin of one or two samples, whose gap is
    # as large when labels are drawn from the model (p = 1 on the uncalibrated ResNet-110)
    M("mce", lambda s: st.mce_from_sums(s.sums())),
    M("ace", lambda s: st.ace_from_sums(s.sums())),  # netcal's: every non-empty bin alike
    M("classwise_ece", lambda s: _classwise_ece(s), null_test=True),
    M("nll", lambda s: s.mean("nll")),
    M("brier", lambda s: s.mean("brier")),
    M("entropy", lambda s: s.mean("entropy")),
    M("refinement_auroc", lambda s: st.auroc_from_runs(*s.correct_runs()), samples=True),
    M("ks_error", _ks, samples=True),
    M("smooth_ece", lambda s: s.smooth(), samples=True),
    M("rms_ce", lambda s: st.rms_from_sums(s.sums(), s.n), null_test=True),
    M("debiased_rms_ce", lambda s: st.rms_from_sums(s.sums(), s.n, debias=True),
      null_test=True),
    M("debiased_ece", lambda s: st.debiased_ece_from_sums(s.sums(), s.n), null_test=True),
    M("debiased_classwise_ece", lambda s: _classwise_ece(s, debias=True), null_test=True),
    M("aurc", lambda s: st.aurc_from_runs(*s.correct_runs()), samples=True),
    M("augrc", lambda s: st.augrc_from_runs(*s.correct_runs()), samples=True),
    M("optimal_ece"),
    M("mean_confidence", lambda s: s.sums()[:, 1].sum(-1) / s.n),
    M("gap", _gap),
    M("overconfident", lambda s: st.over_under_from_sums(s.sums(), s.n)[0]),
    M("underconfident", lambda s: st.over_under_from_sums(s.sums(), s.n)[1]),
    M("ood_auroc"),
    M("ood_fpr95"),
    M("ood_aupr"),
)  # fmt: skip


_BY_NAME = {m.name: m for m in METRICS_TABLE}

#: what :func:`~calibkit.metrics._evaluate` reports, in order (OOD ones need OOD scores)
METRICS = tuple(m.name for m in METRICS_TABLE if not m.name.startswith("ood_"))
OOD_METRICS = tuple(m.name for m in METRICS_TABLE if m.name.startswith("ood_"))
#: the metrics that need every sample (ranks, ties), not only bin sums
SAMPLE_METRICS = tuple(m.name for m in METRICS_TABLE if m.samples)
#: the metrics computed from :class:`Statistics`, in report order
COMPUTED = tuple(m for m in METRICS_TABLE if m.compute is not None)


def row(name: str) -> MetricRow:
    """The table's row of ``name``; ``ood_auroc:<split>`` reads as ``ood_auroc``."""
    base = name.split(":", 1)[0]
    if base not in _BY_NAME:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(_BY_NAME)}")
    return _BY_NAME[base]
