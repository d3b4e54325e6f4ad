"""Turn (scores, labels) into the per-sample quantities every metric is built from.

A :class:`Prepared` is made once per input and computes each quantity lazily, at most
once, so that :func:`calibkit.metrics._evaluate` shares the softmax, the sort and the
bin statistics between all metrics while each standalone metric pays only for what it
uses.

The named reductions to one binary calibration problem (``binary=`` of the top-label
metrics :func:`~calibkit.metrics.ece`, ``mce``, ``rms_ce``, ``aece``, ``ks_error``,
``smooth_ece``; issue 31; docs/metrics.md, "Conventions of published tables"), made by
:func:`prepare_pair`:

* ``"pooled"``: every class's pair (p_k, 1[y = k]) of every sample, N·K pairs in one
  problem. ``ece(binary="pooled")`` is Kull et al. 2019's ECE2 and
  ``mce(binary="pooled")`` their MCE2 (``ECE(..., ece_full=True)`` and ``MCE(...)`` in
  their ``utility/evaluation.py``).
* ``"top-<r>"`` (r >= 2): the r-th largest probability p_(r) and 1[y = its class], the
  "top-r" calibration of Gupta et al. (ICLR 2021, §5, Tables 1–2): ``ks_error(...,
  binary="top-2")`` is their top-2 KS error. Tied probabilities are ranked by
  ``torch.topk``; Gupta et al.'s ``np.argpartition`` may pick another of the tied
  classes (the probability is the same, the label can differ), which
  ``ks_error(..., convention="spline-calibration")`` follows.

Numerics: scores keep their precision (half precision is upcast to float32); every sum
over samples accumulates in float64. Probabilities passed with ``probs=True`` are used
as given (never renormalised, never rounded through a logarithm), so their confidences
match other libraries' bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .._checks import (
    as_float_scores,
    as_labels,
    check_finite,
    check_flag,
    check_probabilities,
    refuse_probabilities,
    to_float,
    to_tensor,
)
from .._docs import documented
from .._metric_settings import METRIC_PARAMETERS, Binary, PairBinary, Probs
from .._settings import checks_declared
from .._threads import for_work
from ._binning import BinScheme
from ._scan import RowStats, scan_rows
from ._scan import usable as native_usable


def _as_two_columns(s: Tensor, probs: bool) -> Tensor:
    """A binary problem given as one column (P(class 1), or its logit) as two columns."""
    s = s.reshape(-1)
    if probs:
        return torch.stack([1.0 - s, s], 1)
    return torch.stack([torch.zeros_like(s), s], 1)


def prepare_scores(
    scores: Any,
    *,
    probs: bool | None,
    name: str = "scores",
    finite: bool = True,
    takes_probs: bool = True,
) -> Tensor:
    """Validated scores of shape (N, K), K >= 2; a single column is a binary problem.
    ``probs``: True, probabilities; False, logits as stated; None, logits that are refused
    where they look like probabilities (:func:`~calibkit._checks.refuse_probabilities`).
    ``finite=False`` leaves the check for NaN and inf to the caller; ``takes_probs=False``:
    the caller reads logits alone (a refusal does not advise ``probs=True``)."""
    stated = probs is False
    probs = False if probs is None else check_flag(probs, "probs")  # "false" is truthy
    given = getattr(scores, "dtype", None)  # half precision is upcast: keep what came
    if isinstance(given, np.dtype):
        given = {np.dtype(np.float16): torch.float16}.get(given)
    given = given if isinstance(given, torch.dtype) and given.is_floating_point else None
    s = as_float_scores(scores, name, finite=finite)
    if s.ndim == 0:
        raise ValueError(f"{name}: a single number; expected shape (N, K), or (N,) for binary")
    if s.ndim == 1 or (s.ndim == 2 and s.shape[1] == 1):
        if probs:
            check_probabilities(s.reshape(-1, 1), name, given)
        return _as_two_columns(s, probs)
    if s.ndim != 2:
        raise ValueError(
            f"{name}: expected shape (N, K) or (N,) for a binary problem, got {tuple(s.shape)}"
        )
    if probs:
        check_probabilities(s, name, given)
    elif not stated:
        refuse_probabilities(s, name, given, takes_probs)
    return s


@dataclass(eq=False)
class Prepared:
    """Validated scores and labels with lazily computed per-sample quantities.

    ``scores`` is (N, K) logits, or probabilities when ``is_probs``; ``labels`` is (N,)
    int64. ``binary="positive"`` makes the calibration pair (confidence, correctness)
    be (P(class 1), 1[y = 1]) instead of the top label's (K = 2 only). Per-row
    quantities come from one chunked pass (:func:`scan_rows`); call :meth:`scan` with a
    bin scheme first when classwise metrics are wanted too, so that pass serves both.

    ``unchecked`` names the scores where their check for NaN and inf is still to come: the
    compiled scan makes it in its own pass (:mod:`calibkit.metrics._scan`), so valid
    logits are read once, not twice. Everything else reads ``scores``, which makes the
    check first; ``raw`` is for their shape, dtype and device only.

    Examples
    --------
    Checked once, a sample is measured by any metric without a second check:

    >>> from calibkit.metrics import ece, nll, prepare
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> p = prepare(logits, labels)
    >>> round(ece(p), 4), round(nll(p), 4), p.is_probs
    (0.2848, 0.446, False)
    """

    raw: Tensor
    labels: Tensor
    is_probs: bool
    binary: str = "top-label"
    _rows: RowStats | None = field(default=None, repr=False)
    cache: dict = field(default_factory=dict, repr=False)  # results keyed by bin scheme
    unchecked: str | None = None

    def numel(self) -> int:
        """Elements of the scores (N · K), as a tensor counts them."""
        return self.raw.numel()

    @property
    def scores(self) -> Tensor:
        """(N, K) scores, checked for NaN and inf first where that is still to come."""
        if self.unchecked is not None:
            check_finite(self.raw, self.unchecked)
            self.unchecked = None
        return self.raw

    @property
    def n(self) -> int:
        return self.raw.shape[0]

    @property
    def k(self) -> int:
        return self.raw.shape[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.raw.dtype

    @property
    def device(self) -> torch.device:
        return self.raw.device

    def scan(self, *, full: bool = False, classwise: BinScheme | None = None) -> RowStats:
        """Per-row statistics; ``full`` adds Brier and entropy sums, ``classwise`` that
        scheme's classwise entries. A later call that asks for more scans again."""
        r = self._rows
        if (
            r is None
            or (full and not r.full)
            or (classwise is not None and r.classwise != classwise)
        ):
            keep = r is not None and r.classwise is not None and classwise is None
            with for_work(self.raw.numel()):
                # unchecked scores go to the compiled scan only, which checks them as it reads
                native = not self.is_probs and native_usable(self.raw)
                rows = scan_rows(
                    self.raw if native else self.scores,
                    self.is_probs,
                    full=full or (r is not None and r.full),
                    classwise=r.classwise if keep else classwise,
                    labels=self.labels,
                )
            if rows.finite:  # the compiled scan read every value (the PyTorch one, checked ones)
                self.unchecked = None
            else:
                self.scores  # noqa: B018 (checks, and raises naming the bad values)
            self._rows = rows
        return self._rows

    @cached_property
    def probs(self) -> Tensor:
        """(N, K) probabilities, materialised (only the bootstrap's classwise sums need them)."""
        return self.scores if self.is_probs else torch.softmax(self.scores, 1)

    @cached_property
    def confidence(self) -> Tensor:
        """(N,) float64 top-label confidence max_k p_k."""
        r = self.scan()
        return r.top if self.is_probs else 1.0 / r.s

    @cached_property
    def label_score(self) -> Tensor:
        """(N,) float64 score (logit or probability) of the true class."""
        return self.scores.gather(1, self.labels[:, None])[:, 0].double()

    @cached_property
    def prediction(self) -> Tensor:
        """(N,) argmax (ties: lowest index)."""
        return self.scores.argmax(1)

    @cached_property
    def correct(self) -> Tensor:
        """(N,) bool, argmax == label, without an argmax over every row.

        The label is the prediction when its score is the maximum, unless another class
        ties it at a lower index; a tie needs s >= 2 (probability <= 1/2), so only those
        rows are checked with an argmax.
        """
        r = self.scan()
        hit = self.label_score == r.top
        maybe_tied = hit & ((r.top <= 0.5) if self.is_probs else (r.s >= 2))
        if bool(maybe_tied.any()):
            rows = maybe_tied.nonzero()[:, 0]
            hit[rows] = self.scores[rows].argmax(1) == self.labels[rows]
        return hit

    @cached_property
    def cal_pair(self) -> tuple[Tensor, Tensor]:
        """(confidence, outcome) the top-label calibration metrics bin: float64 and bool."""
        if self.binary == "positive":
            if self.is_probs:
                return self.scores[:, 1].double(), self.labels == 1
            return torch.sigmoid((self.scores[:, 1] - self.scores[:, 0]).double()), self.labels == 1
        return self.confidence, self.correct

    @cached_property
    def label_prob(self) -> Tensor:
        """(N,) float64 p_y."""
        if self.is_probs:
            return self.label_score
        r = self.scan()
        return torch.exp(self.label_score - r.top) / r.s

    @cached_property
    def label_logp(self) -> Tensor:
        """(N,) float64 log p_y = (z_y − max) − log1p(s − 1), exact for confident samples."""
        if self.is_probs:
            return self.label_score.log()
        r = self.scan()
        return (self.label_score - r.top) - torch.log1p(r.s - 1)

    @cached_property
    def brier_per_sample(self) -> Tensor:
        """(N,) float64 Σ_{k≠y} p_k² + (1 − p_y)², with 1 − p_y kept in relative precision."""
        r = self.scan(full=True)
        if self.is_probs:
            p_y = self.label_score
            return (r.sq - p_y * p_y).clamp_min(0) + (1 - p_y) ** 2
        e_y = torch.exp(self.label_score - r.top)
        others = (r.sq - e_y * e_y).clamp_min(0)  # Σ_{k≠y} e_k²
        miss = torch.where(self.label_score == r.top, r.s - 1, r.s - e_y) / r.s
        return others / (r.s * r.s) + miss * miss

    @cached_property
    def entropy_per_sample(self) -> Tensor:
        """(N,) float64 −Σ_k p_k log p_k (natural log; 0 log 0 = 0)."""
        r = self.scan(full=True)
        if self.is_probs:
            return r.ed
        return (torch.log1p(r.s - 1) - r.ed / r.s).clamp_min(0.0)

    @cached_property
    def runs(self) -> Runs:
        """Tie runs of the calibration confidence in ascending order."""
        conf, outcome = self.cal_pair
        return Runs.from_values(conf, outcome)


@dataclass(eq=False)
class Runs:
    """Samples sorted by a score, grouped into runs of equal score.

    ``order`` (N,) sorts the samples ascending (stable); ``run_of`` (N,) gives, for each
    sorted position, its run; ``values`` (R,) the run's score; ``sizes`` (R,) its length;
    ``positives`` (R,) how many of its samples have a true outcome.
    """

    order: Tensor
    run_of: Tensor
    values: Tensor
    sizes: Tensor
    positives: Tensor
    outcome_sorted: Tensor

    @classmethod
    def from_values(cls, values: Tensor, outcome: Tensor) -> Runs:
        """Runs of finite float64 ``values`` (confidences, probabilities, OOD scores)."""
        values = values.double() + 0.0  # -0.0 becomes +0.0
        if bool((values < 0).any()):  # logit-based scores: a comparison sort
            order = torch.sort(values, stable=True).indices
        else:
            # the bit patterns of non-negative floats sort like the floats; integer keys take
            # torch's radix sort, several times faster than a comparison sort
            order = torch.sort(values.view(torch.int64), stable=True).indices
        sorted_vals = values[order]
        uniq, run_of, sizes = torch.unique_consecutive(
            sorted_vals, return_inverse=True, return_counts=True
        )
        out_sorted = outcome[order]
        pos = torch.zeros(len(uniq), dtype=torch.float64, device=values.device).index_add_(
            0, run_of, out_sorted.double()
        )
        return cls(order, run_of, uniq, sizes.double(), pos, out_sorted)

    @property
    def n_runs(self) -> int:
        return len(self.values)


@documented(METRIC_PARAMETERS, "Prepared: the checked input, for any metric function.")
@checks_declared
def prepare(
    scores: Any,
    labels: Any = None,
    *,
    probs: Probs = None,
    binary: Binary = "top-label",
) -> Prepared:
    """Check ``scores`` (N, K) or (N,) and ``labels`` (N,) once, into a :class:`Prepared`:
    the checked input's own type, which every metric function, ``evaluate`` and the
    resampling functions take in place of ``scores`` (``labels`` left out) and trust as it
    is. Measuring several metrics of one input through one ``Prepared`` checks it once and
    shares its per-row pass. A ``Prepared`` given here is returned as it is; ``probs`` and
    ``binary`` must then be left at their defaults or say what it already says.

    >>> import torch
    >>> p = prepare(torch.tensor([[2.0, 0.0], [0.0, 1.0]]), [0, 0])
    >>> prepare(p) is p
    True
    """
    if isinstance(scores, Prepared):
        return _reused(scores, labels, probs, binary)
    if labels is None:
        raise TypeError("labels: required with scores (only a prepared input carries its own)")
    # logits for the compiled scan are checked for NaN and inf in its pass (Prepared.scan)
    s = prepare_scores(scores, probs=probs, finite=bool(probs))
    y = as_labels(labels, s.shape[1])
    if len(y) != len(s):
        raise ValueError(
            f"scores and labels have different lengths ({len(s)} vs {len(y)}); "
            "pass one label per row of scores"
        )
    if y.device != s.device:
        y = y.to(s.device)
    if binary == "positive" and s.shape[1] != 2:
        raise ValueError(
            f"binary='positive' needs a binary problem (K = 2), got K = {s.shape[1]}; "
            "use binary='top-label' or classwise_ece for multi-class scores"
        )
    unchecked = None
    if not probs:
        if native_usable(s):
            unchecked = "scores"
        else:
            check_finite(s, "scores")
    return Prepared(s, y, bool(probs), binary, unchecked=unchecked)


def _reused(p: Prepared, labels: Any, probs: bool | None, binary: str) -> Prepared:
    """A prepared input given again: its own labels and reading, or one line on a conflict."""
    if labels is not None:
        raise TypeError("labels: a prepared input carries its labels; pass none beside it")
    if probs is True and not p.is_probs:  # None or False: logits, as it holds
        raise ValueError(
            "probs=True, but the prepared input holds logits; prepare it with probs=True"
        )
    if binary != "top-label" and binary != p.binary:
        raise ValueError(
            f"binary={binary!r}, but the prepared input measures {p.binary!r}; prepare it "
            f"with binary={binary!r}"
        )
    return p


@documented(METRIC_PARAMETERS, "Prepared: the input as given, taken as checked.")
def trusted(
    scores: Any, labels: Any, *, probs: Probs = None, binary: Binary = "top-label"
) -> Prepared:
    """``scores`` and ``labels`` as a :class:`Prepared` without any check, only the
    conversions of :func:`prepare`: the caller vouches for them (torchmetrics'
    ``validate_args=False``). On valid input every metric equals that of :func:`prepare`'s
    result, bit for bit; on invalid input it is wrong or a low-level error. Logits whose
    rows happen to look like probabilities, which :func:`prepare` refuses, pass here.
    calibkit's own loops use it on logits they produced and checked themselves.

    Examples
    --------
    >>> from calibkit.metrics import ece, prepare, trusted
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> ece(trusted(logits, labels)) == ece(prepare(logits, labels))
    True
    """
    s = to_float(to_tensor(scores, "scores"))
    if s.ndim == 1 or s.shape[1] == 1:
        s = _as_two_columns(s, bool(probs))
    y = to_tensor(labels, "labels").reshape(-1).long().to(s.device)
    return Prepared(s, y, bool(probs), binary)


def prepare_pair(
    scores: Any, labels: Any, *, probs: Probs, binary: PairBinary, pick: str = "topk"
) -> Prepared:
    """:func:`prepare`, plus the ``"pooled"`` and ``"top-<r>"``
    reductions (module docstring), returned as a binary problem in probabilities.

    ``pick="argpartition"``: the r-th class of a row (r = 1 for ``"top-label"``) is the one
    ``numpy.argpartition`` puts r-th from the end, as Gupta et al.'s ``get_top_results``
    picks it; among tied probabilities that may be another class than ``torch.topk``'s.
    ``probs`` and ``binary`` are trusted: the metric that calls it checked them."""
    if binary == "positive" or (binary == "top-label" and pick == "topk"):
        return prepare.trusting(scores, labels, probs=probs, binary=binary)
    rank = 1 if binary == "top-label" else _rank(binary)
    p = prepare.trusting(scores, labels, probs=probs)
    prob = p.probs
    if rank is None:  # pooled
        conf = prob.reshape(-1)
        hit = torch.nn.functional.one_hot(p.labels, p.k).reshape(-1).bool()
    else:
        if rank > p.k:
            raise ValueError(f"binary={binary!r} needs at least {rank} classes, got K = {p.k}")
        if pick == "argpartition":
            order = np.argpartition(prob.detach().cpu().numpy(), -rank, axis=1)[:, -rank]
            cls = torch.from_numpy(order).to(prob.device)
            conf = prob.gather(1, cls[:, None])[:, 0]
        else:
            top = prob.topk(rank, dim=1)
            conf, cls = top.values[:, -1], top.indices[:, -1]
        hit = cls == p.labels
    return Prepared(torch.stack([1 - conf, conf], 1), hit.long(), True, "positive")


def _rank(binary: str) -> int | None:
    """None for ``"pooled"``, r for ``"top-<r>"`` (checked by its declaration, PairBinary)."""
    return None if binary == "pooled" else int(binary.removeprefix("top-"))
