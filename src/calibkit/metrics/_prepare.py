"""Turn (scores, labels) into the per-sample quantities every metric is built from.

A :class:`Prepared` is made once per input and computes each quantity lazily, at most
once, so that :func:`calibkit.metrics.evaluate` shares the softmax, the sort and the
bin statistics between all metrics while each standalone metric pays only for what it
uses.

Numerics: scores keep their precision (half precision is upcast to float32); every sum
over samples accumulates in float64. Probabilities passed with ``probs=True`` are used
as given (never renormalised, never rounded through a logarithm), so their confidences
match other libraries' bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
from torch import Tensor

from .._checks import as_float_scores, as_labels, check_choice, check_probabilities

BINARY_MODES = ("top-label", "positive")


def _as_two_columns(s: Tensor, probs: bool) -> Tensor:
    """A binary problem given as one column (P(class 1), or its logit) as two columns."""
    s = s.reshape(-1)
    if probs:
        return torch.stack([1.0 - s, s], 1)
    return torch.stack([torch.zeros_like(s), s], 1)


def prepare_scores(scores: Any, *, probs: bool, name: str = "scores") -> Tensor:
    """Validated scores of shape (N, K), K >= 2; a single column is a binary problem."""
    s = as_float_scores(scores, name)
    if s.ndim == 1 or (s.ndim == 2 and s.shape[1] == 1):
        if probs:
            check_probabilities(s.reshape(-1, 1), name)
        return _as_two_columns(s, probs)
    if s.ndim != 2:
        raise ValueError(
            f"{name}: expected shape (N, K) or (N,) for a binary problem, got {tuple(s.shape)}"
        )
    if probs:
        check_probabilities(s, name)
    return s


@dataclass(eq=False)
class Prepared:
    """Validated scores and labels with lazily computed per-sample quantities.

    ``scores`` is (N, K) logits, or probabilities when ``is_probs``; ``labels`` is (N,)
    int64. ``binary="positive"`` makes the calibration pair (confidence, correctness)
    be (P(class 1), 1[y = 1]) instead of the top label's (K = 2 only).
    """

    scores: Tensor
    labels: Tensor
    is_probs: bool
    binary: str = "top-label"

    @property
    def n(self) -> int:
        return self.scores.shape[0]

    @property
    def k(self) -> int:
        return self.scores.shape[1]

    @cached_property
    def probs(self) -> Tensor:
        """(N, K) probabilities."""
        return self.scores if self.is_probs else torch.softmax(self.scores, 1)

    @cached_property
    def logp(self) -> Tensor:
        """(N, K) log-probabilities (may hold -inf where a given probability is 0)."""
        return self.scores.log() if self.is_probs else torch.log_softmax(self.scores, 1)

    @cached_property
    def _top(self) -> tuple[Tensor, Tensor, Tensor]:
        """(confidence float64, prediction, u = sum_{k != top} exp(z_k - z_top) float64)."""
        if self.is_probs:
            conf, pred = self.scores.max(1)
            return conf.double(), pred, (1.0 - conf.double()) / conf.double()
        m, pred = self.scores.max(1)
        # 1 - c = u / (1 + u) keeps its relative precision where a float32 softmax rounds c
        # to exactly 1.0 (most samples of an over-confident network), so rankings survive.
        e = torch.exp(self.scores - m[:, None]).scatter_(1, pred[:, None], 0.0)
        u = e.sum(1, dtype=torch.float64)
        return 1.0 / (1.0 + u), pred, u

    @property
    def confidence(self) -> Tensor:
        """(N,) float64 top-label confidence max_k p_k."""
        return self._top[0]

    @property
    def prediction(self) -> Tensor:
        """(N,) argmax (ties: lowest index)."""
        return self._top[1]

    @cached_property
    def correct(self) -> Tensor:
        """(N,) bool, prediction == label."""
        return self.prediction == self.labels

    @cached_property
    def cal_pair(self) -> tuple[Tensor, Tensor]:
        """(confidence, outcome) the top-label calibration metrics bin: float64 and bool."""
        if self.binary == "positive":
            if self.is_probs:
                return self.scores[:, 1].double(), self.labels == 1
            return torch.sigmoid((self.scores[:, 1] - self.scores[:, 0]).double()), self.labels == 1
        return self.confidence, self.correct

    @cached_property
    def label_logp(self) -> Tensor:
        """(N,) float64 log p_y = (z_y - z_top) - log1p(u), exact for confident samples."""
        if self.is_probs:
            return self.scores.gather(1, self.labels[:, None])[:, 0].double().log()
        z = self.scores
        gap = z.gather(1, self.labels[:, None])[:, 0] - z.gather(1, self.prediction[:, None])[:, 0]
        return gap.double() - torch.log1p(self._top[2])

    @cached_property
    def brier_per_sample(self) -> Tensor:
        """(N,) float64 sum_k (p_k - e_yk)^2, computed without cancellation near 0."""
        other = self.probs.double().scatter(1, self.labels[:, None], 0.0)
        miss = other.sum(1)  # = 1 - p_y, accurate when p_y is close to 1
        return (other * other).sum(1) + miss * miss

    @cached_property
    def entropy_per_sample(self) -> Tensor:
        """(N,) float64 -sum_k p_k log p_k (natural log; 0 log 0 = 0)."""
        if self.is_probs:
            return torch.special.entr(self.scores.double()).sum(1)
        z = self.scores
        return (torch.logsumexp(z, 1) - (self.probs * z).sum(1)).double().clamp_min(0.0)

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
        sorted_vals, order = torch.sort(values, stable=True)
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


def prepare(
    scores: Any, labels: Any, *, probs: bool = False, binary: str = "top-label"
) -> Prepared:
    """Validate ``scores`` (N, K) or (N,) and ``labels`` (N,) into a :class:`Prepared`."""
    if not isinstance(probs, bool):
        raise TypeError(f"probs: expected True or False, got {probs!r}")
    check_choice(binary, "binary", BINARY_MODES)
    s = prepare_scores(scores, probs=probs)
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
    return Prepared(s, y, probs, binary)
