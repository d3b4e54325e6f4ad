"""The parameters the metric functions share, each described once for the Parameters
sections of their docstrings (:func:`calibkit._docs.documented`)."""

from __future__ import annotations

from .._docs import Described

__all__ = ["METRIC_PARAMETERS"]

METRIC_PARAMETERS: dict[str, Described] = {
    "scores": (
        "array-like or Tensor, shape (N, K), or (N,) for a binary problem; or Prepared",
        "Logits, or probabilities with ``probs=True``; NumPy, PyTorch on any device, or "
        "anything ``torch.as_tensor`` takes. Computed where they are. Or an input checked "
        "once by :func:`~calibkit.metrics.prepare` (or vouched for by "
        ":func:`~calibkit.metrics.trusted`), taken as it is, without ``labels``.",
    ),
    "labels": (
        "array-like or Tensor of int, shape (N,); None with a prepared input",
        "The true class of each row, in 0..K-1.",
    ),
    "probs": (
        "bool, default False",
        "Read ``scores`` as probabilities (rows in [0, 1] summing to 1) rather than logits; "
        "nothing is guessed from the values.",
    ),
    "n_bins": ("int, default 15", "Number of equal-width confidence bins (1 or more)."),
    "binning": (
        "str, default 'calibkit'",
        "Convention for a value on a bin edge: 'calibkit', 'torchmetrics', 'netcal' or "
        "'kull' (:mod:`calibkit.metrics.binning`).",
    ),
    "binary": (
        "str, default 'top-label'",
        "Which calibration pair is measured: 'top-label' (confidence and correctness), "
        "'positive' (P(class 1) and 1[y = 1], K = 2), 'pooled' or 'top-<r>' "
        "(:mod:`calibkit.metrics.pairs`).",
    ),
    "debias": (
        "bool, default False",
        "Replace each bin's gap by its debiased estimate (docs/metrics.md, "
        '"Debiased binned errors").',
    ),
    "ood_scores": (
        "array-like or Tensor, shape (M, K)",
        "Scores of out-of-distribution samples (no labels), in the same form as ``scores``.",
    ),
    "score": (
        "str, default 'msp'",
        "The in-distribution score: 'msp', 'max-logit', 'energy' or 'entropy' "
        "(:func:`~calibkit.metrics.ood.ood_score`).",
    ),
    "bootstrap": ("int", "Number of bootstrap resamples (0: no intervals)."),
    "seed": ("int, default 0", "Seed of the bootstrap draws."),
    "ci": ("float, default 0.95", "Level of the intervals, in (0, 1)."),
    "smooth": ("bool, default True", "Compute smooth ECE (False skips it: it is the slowest)."),
    "metrics": (
        "iterable of str or None, default None",
        "The metrics wanted, by name (:data:`~calibkit.metrics.METRICS`); None: all. Only "
        "what they need is computed, and each value equals the full evaluation's.",
    ),
}
