"""What every calibrator checks and computes the same way: the fit data (logits and labels,
validated in one line), and the next float32 above a value (for maps that must keep the
argmax, exportable to ONNX)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .._checks import as_labels, to_tensor
from ..metrics.internal import prepare_scores


def next_up(x: Tensor) -> Tensor:
    """The next float32 above each float32 value (``torch.nextafter(x, inf)`` for finite x),
    from exact float64 arithmetic: the ONNX exporter has no ``nextafter``. The step is
    2^(e − 23) for |x| in [2^e, 2^(e+1)), half that going up from −2^e, and 2^−149
    (the smallest subnormal) at and below 2^−126."""
    a = x.abs().double()
    e = torch.floor(torch.log2(a))
    # log2 may be computed as log(a) / log(2) (ONNX), off by one ulp at powers of two
    e = torch.where(torch.exp2(e) > a, e - 1, e)
    e = torch.where(torch.exp2(e + 1) <= a, e + 1, e)
    down_from_power = (x < 0) & (torch.exp2(e) == a)
    step = torch.exp2(torch.clamp_min(e - 23 - down_from_power.double(), -149.0))
    return (x.double() + step).float()


def check_sample_weight(sample_weight: Any, n: int, device: torch.device) -> Tensor:
    """``sample_weight`` as float64 weights (N,): finite, non-negative, not all zero; a
    one-line ``ValueError`` otherwise. A weight is a weight (0.5 counts a row half), never a
    number of copies: nothing is allocated in proportion to a weight's value."""
    t = to_tensor(sample_weight, "sample_weight")  # refuses text and objects; no copy
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"sample_weight: expected real numbers, got dtype {t.dtype}")
    w = t.to(device=device, dtype=torch.float64)  # where the logits are, any device
    if w.shape != (n,):
        raise ValueError(
            f"sample_weight: expected shape ({n},), one weight a row, got {tuple(w.shape)}"
        )
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError("sample_weight: every weight must be a finite number >= 0")
    if not bool((w > 0).any()):
        raise ValueError("sample_weight: every weight is 0; nothing to fit on")
    return w


def check_fit_data(logits: Any, labels: Any, probs: bool | None = None) -> tuple[Tensor, Tensor]:
    """Validated float64 logits (N, K) and labels for fitting; one-line errors otherwise.
    ``probs``: False, logits as stated (not refused where they look like probabilities);
    None, logits that are refused where they look so; True is refused (calibrators map
    logits)."""
    if probs is not None and probs is not False:
        raise ValueError(
            f"probs: a calibrator maps logits; pass False (these are logits) or None, got "
            f"{probs!r} (probabilities: pass their logarithm, log p, as logits)"
        )
    z = prepare_scores(logits, probs=probs, name="logits", takes_probs=False)
    y = as_labels(labels, z.shape[1]).to(z.device)
    n, k = z.shape
    if len(y) != n:
        raise ValueError(f"logits and labels have different lengths ({n} vs {len(y)})")
    present = torch.unique(y)
    if len(present) < 2:
        raise ValueError(
            f"labels: the calibration split holds one class ({int(present[0])}); fitting a "
            "calibrator needs samples of at least two classes"
        )
    if n < k:
        raise ValueError(
            f"the calibration split has fewer samples ({n}) than classes ({k}); "
            "fit on a larger split"
        )
    return z.double(), y
