"""Input validation shared by every layer.

Every public entry point turns what the user passed into tensors here, so that each kind
of bad input gets the same one-line message everywhere (Python API and command line).
Messages name the argument, what is allowed, what came, and the fix when there is one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

#: Largest allowed ``|sum_k p_k - 1|`` for a row of probabilities (``probs=True``), by the
#: dtype the user passed: 1e-4, or 8 rounding steps of that dtype per class where that is
#: larger (float16 softmax rows of 10 classes sum to one within about 3e-4, bfloat16 within
#: about 3e-3; float32 rows of 1000 classes within about 1e-6).
PROB_SUM_TOL = 1e-4


def prob_sum_tolerance(dtype: torch.dtype, n_classes: int) -> float:
    """The row-sum tolerance for probabilities given in ``dtype`` (see PROB_SUM_TOL)."""
    return max(PROB_SUM_TOL, 8 * n_classes * torch.finfo(dtype).eps)


def to_tensor(x: Any, name: str) -> Tensor:
    """Return ``x`` (NumPy array, tensor, or nested list) as a tensor, without copying tensors."""
    if isinstance(x, Tensor):
        if x.is_meta:
            raise TypeError(f"{name}: a tensor on the meta device holds no values")
        return x.detach()
    if isinstance(x, np.ndarray | list | tuple) or np.isscalar(x):
        arr = np.asarray(x)
        if arr.dtype == object:
            raise TypeError(f"{name}: expected numbers, got an array of Python objects")
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name}: expected a numeric array, got dtype {arr.dtype}")
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:  # torch's int64 would wrap
            if arr.size and int(arr.max()) > np.iinfo(np.int64).max:
                raise ValueError(
                    f"{name}: value {int(arr.max())} does not fit a signed 64-bit integer"
                )
            arr = arr.astype(np.int64)
        arr = np.ascontiguousarray(arr).reshape(arr.shape)  # (it makes a 0-d array 1-d)
        return torch.from_numpy(arr if arr.flags.writeable else arr.copy())
    raise TypeError(f"{name}: expected a NumPy array or a torch tensor, got {type(x).__name__}")


def to_float(t: Tensor) -> Tensor:
    """``t`` as the floating dtype the metrics compute in: integers become float64, half
    precision float32, float32 and float64 stay as they are (no copy)."""
    if not t.is_floating_point():
        return t.to(torch.float64)
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.float()
    return t


def as_float_scores(scores: Any, name: str = "scores", *, finite: bool = True) -> Tensor:
    """Scores as a floating tensor (half precision is upcast to float32), checked finite
    (:func:`check_finite`) unless ``finite=False`` leaves that to the caller."""
    t = to_tensor(scores, name)
    if (
        t.dtype == torch.bool
        or t.is_complex()
        or not (t.is_floating_point() or t.dtype.is_signed or t.dtype == torch.uint8)
    ):
        raise TypeError(f"{name}: expected floating-point scores, got dtype {t.dtype}")
    t = to_float(t)
    if t.numel() == 0:
        raise ValueError(f"{name}: empty input (shape {tuple(t.shape)}); pass at least one sample")
    if finite:
        check_finite(t, name)
    return t


def check_finite(t: Tensor, name: str = "scores") -> None:
    """Raise a ValueError naming how many NaN and inf values ``t`` holds, and the first row."""
    if bool(torch.isfinite(t.sum())):  # NaN and inf propagate into the sum: one cheap read
        return
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        n_nan = int(torch.isnan(t).sum())
        n_inf = int(bad.sum()) - n_nan
        first = int(bad.reshape(len(t), -1).any(1).nonzero()[0, 0]) if t.ndim else 0
        what = " and ".join(
            s for s in (f"{n_nan} NaN" if n_nan else "", f"{n_inf} inf" if n_inf else "") if s
        )
        raise ValueError(
            f"{name}: contains {what} value(s) (first in row {first}); "
            "remove or fix those samples first"
        )


def as_labels(labels: Any, n_classes: int | None = None, name: str = "labels") -> Tensor:
    """Labels as an int64 vector, checked to be whole numbers in ``[0, n_classes)``."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind == "u" and labels.size:
        top = int(labels.max())  # uint64 above 2**63 would wrap to a negative int64
        if top >= 2**62:
            raise ValueError(f"{name}: class indices must lie in 0..K-1, found {top}")
    t = to_tensor(labels, name)
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.ndim != 1:
        raise ValueError(
            f"{name}: expected a 1-D vector of class indices, got shape {tuple(t.shape)}"
        )
    if t.numel() == 0:
        raise ValueError(f"{name}: empty input; pass at least one sample")
    if t.is_floating_point():
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name}: contains NaN or inf; labels must be class indices 0..K-1")
        if not bool((t == t.round()).all()):
            bad = t[t != t.round()][0].item()
            raise ValueError(f"{name}: must be whole numbers (class indices), found {bad}")
        far = t[(t < 0) | (t >= 2**53)]  # beyond 2**53 a float is no exact index
        if far.numel():
            raise ValueError(f"{name}: class indices must lie in 0..K-1, found {far[0].item():g}")
    elif t.dtype == torch.bool:
        t = t.long()
    t = t.long()
    lo, hi = int(t.min()), int(t.max())
    if lo < 0:
        raise ValueError(f"{name}: class indices must be >= 0, found {lo}")
    if n_classes is not None and hi >= n_classes:
        raise ValueError(
            f"{name}: class index {hi} is out of range for scores with {n_classes} classes "
            f"(allowed 0..{n_classes - 1}); check that labels and scores come from the same model"
        )
    return t


def check_probabilities(p: Tensor, name: str = "scores", given: torch.dtype | None = None) -> None:
    """Raise unless every row of ``p`` lies in [0, 1] and sums to one within the tolerance of
    the dtype the user ``given`` (default ``p``'s own)."""
    lo, hi = float(p.min()), float(p.max())
    if lo < 0.0 or hi > 1.0:
        raise ValueError(
            f"{name}: probs=True but values lie in [{lo:.4g}, {hi:.4g}], outside [0, 1]; "
            "pass logits with probs=False (the default) instead"
        )
    if p.shape[1] > 1:
        tol = prob_sum_tolerance(given or p.dtype, p.shape[1])
        dev = (p.sum(1, dtype=torch.float64) - 1.0).abs()
        worst = int(dev.argmax())
        if float(dev[worst]) > tol:
            total = float(p[worst].sum(dtype=torch.float64))
            raise ValueError(
                f"{name}: probs=True but row {worst} sums to {total:.6g}, not 1 "
                f"(tolerance {tol:g}); pass logits with probs=False, or normalise the rows"
            )


#: rows read first when deciding whether logits look like probabilities: valid logits are
#: told apart by these alone, so the full pass is paid only by input that looks like them
_PROBE_ROWS = 64


def _rows_are_probabilities(t: Tensor, tol: float) -> bool:
    in_range = bool(((t >= 0) & (t <= 1)).all())  # NaN compares false: not probabilities
    return in_range and bool(((t.sum(1, dtype=torch.float64) - 1).abs() <= tol).all())


def refuse_probabilities(
    s: Tensor, name: str = "scores", given: torch.dtype | None = None, takes_probs: bool = True
) -> None:
    """Raise a one-line ``ValueError`` when ``s`` (N, K), K >= 2, given where logits are
    expected, has every row in [0, 1] summing to 1 (within the tolerance of the dtype the
    user ``given``, default ``s``'s own, see :data:`PROB_SUM_TOL`: a float16 or bfloat16
    softmax upcast to float32 still sums to 1 only within half precision's rounding):
    probabilities read as logits give silently wrong numbers (ECE 0.69 where the truth is
    0.05), so every entry point refuses them instead of guessing. The message advises
    ``probs=True`` only where the caller ``takes_probs`` (a calibrator maps logits alone).
    The first rows are read first, so valid logits cost almost nothing to tell apart."""
    if s.ndim != 2 or s.shape[1] < 2 or s.shape[0] == 0:
        return
    tol = prob_sum_tolerance(given or s.dtype, s.shape[1])
    if not _rows_are_probabilities(s[:_PROBE_ROWS], tol):
        return
    if s.shape[0] > _PROBE_ROWS and not _rows_are_probabilities(s, tol):
        return
    fix = (
        "pass probs=True for probabilities, or probs=False for logits that look so"
        if takes_probs
        else "pass their logarithm (log p) as logits, or probs=False for logits that look so"
    )
    raise ValueError(
        f"{name}: every row lies in [0, 1] and sums to 1, so these look like probabilities, "
        f"but logits were expected: {fix}; nothing was computed"
    )


def check_positive_int(
    value: Any, name: str, minimum: int = 1, maximum: int | None = None, why: str = ""
) -> int:
    """``value`` as an int in [minimum, maximum], or a one-line error (``why`` explains the
    maximum)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: at most {maximum:,}, got {value:,}{why}")
    return int(value)


def check_flag(value: Any, name: str) -> bool:
    """``value`` if it is a boolean (Python's or NumPy's), else a one-line ``TypeError``: a
    string such as ``"false"`` is truthy, and would turn the option on.

    >>> check_flag("false", "debias")
    Traceback (most recent call last):
    ...
    TypeError: debias: expected True or False, got 'false'
    """
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a one-line error listing them."""
    if value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_number(value: Any, name: str, *, low: float = -math.inf, strict: bool = True) -> float:
    """``value`` as a finite float above ``low`` (or at least ``low`` when not ``strict``),
    or a one-line error."""
    ok = isinstance(value, int | float | np.floating) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < low or (strict and value == low):
        bound = f"{'>' if strict else '>='} {low:g}" if low > -math.inf else ""
        raise ValueError(f"{name}: expected a finite number {bound}, got {value!r}".rstrip())
    return float(value)
