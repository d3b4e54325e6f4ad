"""The scan over rows behind the metrics: one chunked pass over the (N, K) scores that
yields every per-row quantity the metrics need (the scan over temperatures is
:mod:`calibkit.metrics._temperatures`).

Rows are processed in chunks of about 256K values, so the temporaries (z - max, exp) stay
in cache and the softmax is never written out: the pass costs about one read of the scores
plus the exponentials, less than a ``torch.softmax``.

For logits z with row maximum m, d_k = z_k - m <= 0 and e_k = exp(d_k), the pass returns

* ``top`` = m and ``s`` = Σ_k e_k, summed in float64: the maximum contributes exactly 1, so
  s - 1 (hence 1 − confidence = (s − 1) / s) keeps about 1e-16 absolute precision where a
  float32 softmax rounds the confidence of many samples of an over-confident network to
  exactly 1 (29 % of the ResNet-110 CIFAR-10 test set) and destroys their ranking;
* with ``full``: ``sq`` = Σ_k e_k² (Brier) and ``ed`` = Σ_k e_k d_k (entropy);
* with a ``classwise`` bin scheme: the column sums Σ_n p_nk (float64, so that batching does
  not change them), every entry p_nk outside the first bin (a row has fewer than M), and
  p_{n,y_n}, the very values binned, so that a label is counted in the bin its class's
  probability was summed in (a second computation of p_y can round across a bin edge).

For probabilities (``probs=True``) top = max p, s = 1, sq = Σ p², ed = −Σ p log p.

**The compiled fast path.** Contiguous float32 logits on the CPU take the compiled scan where
it is built: the same per-row quantities in one fused pass per row, 1.3–2.6 times faster
(docs/performance.md); a classwise scheme's entries are then computed here from its sums.
``calibkit.metrics._rowscan`` is a small C extension built at install time (``src/calibkit/metrics/
_rowscan.c``). Per row it takes the maximum and the float64 sums of exp(z − max), and for
Brier and entropy of its square and of exp · (z − max), in one fused pass. PyTorch needs four
parallel operations per chunk for the same. Rows are split between Python threads (the C
code releases the GIL), as many as :func:`calibkit._threads.for_work` chose for the work, so
no OpenMP barrier waits on a busy core. Any other input takes the PyTorch scan. The
compiled scan also reports whether every value was finite, so that
:func:`calibkit.metrics._inputs.prepare` need not read valid logits a second time to check
them. Both scans compute d = z − max and
exp(d) in float32; the kernel's exp is within 2 float32 ulps of float64's, and its sums
agree with float64 ones from the same d to 3e-7 relative (tests/metrics/test_native_scan.py).

``CALIBKIT_NATIVE`` chooses: unset, the widest kernel the CPU runs (AVX-512, else AVX2 with
FMA); ``0``, the PyTorch scan; ``avx2`` or ``avx512``, that kernel. Where the extension was
not built (no C compiler at install time) or the CPU has neither instruction set, calibkit
uses the PyTorch scan; :func:`kernel` tells which is in use.
"""

from __future__ import annotations

import functools
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ._binning import BinScheme

try:
    from . import _rowscan
except ImportError:  # not compiled: the PyTorch scan serves
    _rowscan = None

CHUNK_VALUES = 1 << 18
#: the compiled scan's switch and kernels
ENV = "CALIBKIT_NATIVE"
KERNELS = ("avx512", "avx2")
#: at least this many values per thread: below it a thread costs more than it saves
PER_THREAD = 1 << 16


@dataclass(eq=False)
class RowStats:
    top: Tensor  # (N,) float64
    s: Tensor  # (N,) float64 softmax normaliser (ones for probabilities)
    sq: Tensor | None = None  # (N,) float64
    ed: Tensor | None = None  # (N,) float64
    col_sum: Tensor | None = None  # (K,) float64
    big_rows: Tensor | None = None  # (E,) int64
    big_cols: Tensor | None = None  # (E,) int64
    big_vals: Tensor | None = None  # (E,) scores dtype
    label_vals: Tensor | None = None  # (N,) scores dtype: p_{n, y_n} as binned
    classwise: BinScheme | None = None
    finite: bool = True  # False: the compiled scan met NaN or inf (the PyTorch scan: not checked)

    @property
    def full(self) -> bool:
        return self.sq is not None


def scan_rows(
    scores: Tensor,
    is_probs: bool,
    *,
    full: bool = False,
    classwise: BinScheme | None = None,
    labels: Tensor | None = None,
) -> RowStats:
    """Per-row statistics of ``scores`` (N, K); see the module docstring. ``labels`` (N,)
    are needed with ``classwise``."""
    n, k = scores.shape
    dev, f64 = scores.device, torch.float64
    # the compiled scan gives the per-row sums; a classwise scheme is then added from them, so
    # that top-label metrics do not depend on whether classwise ones were asked for too
    native = not is_probs and usable(scores)
    if native:
        sums, finite = scan_logits(scores, full=full)
        stats = RowStats(*sums, finite=finite)
        if classwise is None:
            return stats
    else:
        sums = [torch.empty(n, dtype=f64, device=dev) for _ in range(3 if full else 1)]
        stats = RowStats(sums[0], torch.ones(n, dtype=f64, device=dev), *sums[1:])
    if classwise is not None:
        stats.classwise = classwise
        stats.col_sum = torch.zeros(k, dtype=f64, device=dev)
        stats.label_vals = torch.empty(n, dtype=scores.dtype, device=dev)
    big: list[tuple[Tensor, Tensor, Tensor]] = []
    rows = max(1, CHUNK_VALUES // k)
    buf = torch.empty(min(rows, n), k, dtype=scores.dtype, device=dev)
    ebuf = torch.empty_like(buf)
    for start in range(0, n, rows):
        c = scores[start : start + rows]
        r = len(c)
        sl = slice(start, start + r)
        if native:
            d = torch.sub(c, stats.top[sl, None].to(c.dtype), out=buf[:r])
            p = torch.div(torch.exp(d, out=ebuf[:r]), stats.s[sl, None].to(c.dtype), out=buf[:r])
        else:
            p = _chunk(c, is_probs, stats, sl, buf[:r], ebuf[:r], want_probs=classwise is not None)
        if classwise is not None:
            stats.label_vals[sl] = p.gather(1, labels[sl, None])[:, 0]
            stats.col_sum += p.sum(0, dtype=f64)
            # flat positions: a 1-D nonzero and index_select cost about 17 % less than 2-D ones
            flat = classwise.beyond_first(p).reshape(-1).nonzero()[:, 0]
            rr = flat.div(k, rounding_mode="floor")
            big.append((rr + start, flat - rr * k, p.reshape(-1).index_select(0, flat)))
    if classwise is not None:
        stats.big_rows, stats.big_cols, stats.big_vals = (
            torch.cat(t) for t in zip(*big, strict=True)
        )
    return stats


def _chunk(
    c: Tensor,
    is_probs: bool,
    stats: RowStats,
    sl: slice,
    buf: Tensor,
    ebuf: Tensor,
    *,
    want_probs: bool,
) -> Tensor | None:
    """The PyTorch scan of one chunk ``c`` of rows ``sl``: fills ``stats``' per-row entries;
    returns the chunk's probabilities where ``want_probs`` (for logits, in ``buf``)."""
    m = c.amax(1, keepdim=True)
    stats.top[sl] = m[:, 0]
    if is_probs:
        if stats.full:
            stats.sq[sl] = torch.mul(c, c, out=buf).sum(1)
            stats.ed[sl] = torch.special.entr(c, out=buf).sum(1)
        return c
    d = torch.sub(c, m, out=buf)
    e = torch.exp(d, out=ebuf)
    s_chunk = e.sum(1, dtype=torch.float64)
    stats.s[sl] = s_chunk
    if stats.full:
        # d = -inf where z_k - max overflows (logits near ±3e38): clamp, as e_k = 0
        d.clamp_(min=torch.finfo(d.dtype).min)
        stats.ed[sl] = torch.mul(e, d, out=buf).sum(1)
        stats.sq[sl] = torch.mul(e, e, out=buf).sum(1)
    return torch.div(e, s_chunk.to(e.dtype)[:, None], out=buf) if want_probs else None


def kernel() -> str | None:
    """The compiled kernel in use ("avx512" or "avx2"), or None for the PyTorch scan."""
    raw = os.environ.get(ENV, "").strip().lower()
    if _rowscan is None or raw == "0":
        return None
    if raw in ("", "1"):
        return _rowscan.instructions()
    if raw not in KERNELS:
        raise ValueError(f"{ENV}: expected 0, 1, avx2 or avx512, got {raw!r}")
    return raw


def runnable() -> list[str]:
    """The compiled kernels this CPU runs, widest first (empty where none is built)."""
    if _rowscan is None:
        return []
    one = np.zeros((1, 2), np.float32)
    found = []
    for name in KERNELS:
        try:
            _rowscan.scan(one, np.empty(1), np.empty(1), instructions=name)
        except ValueError:  # not a kernel this CPU runs
            continue
        found.append(name)
    return found


def usable(scores: Tensor) -> bool:
    """Whether :func:`scan_logits` takes ``scores``: contiguous float32 (N, K) on the CPU,
    with a compiled kernel in use."""
    return (
        scores.dtype == torch.float32
        and scores.device.type == "cpu"
        and scores.ndim == 2
        and scores.is_contiguous()
        and kernel() is not None
    )


def scan_logits(
    scores: Tensor, *, full: bool, instructions: str | None = None
) -> tuple[tuple[Tensor, ...], bool]:
    """((top, s) or, with ``full``, (top, s, sq, ed), finite) of float32 logits (N, K): each
    (N,) float64, the row maximum, Σ_k e_k, Σ_k e_k² and Σ_k e_k d_k with d_k = z_k − max
    and e_k = exp(d_k); ``finite`` False where a value is NaN or ±inf (the sums are then
    meaningless). ``instructions``: the kernel ("avx512" or "avx2"); by default
    :func:`kernel`'s, else the widest. Uses ``torch.get_num_threads()`` threads, fewer for
    small input."""
    n, k = scores.shape
    out = [torch.empty(n, dtype=torch.float64) for _ in range(4 if full else 2)]
    z = scores.detach().numpy()
    arrays = [o.numpy() for o in out]
    parts = max(1, min(torch.get_num_threads(), n, (n * k) // PER_THREAD))
    cuts = [n * i // parts for i in range(parts + 1)]
    pieces = [(z[a:b], *(x[a:b] for x in arrays)) for a, b in itertools.pairwise(cuts)]
    run = functools.partial(_rowscan.scan, instructions=instructions or kernel())
    if parts == 1:
        return tuple(out), run(*pieces[0])
    done = [_executor().submit(run, *p) for p in pieces[1:]]
    finite = run(*pieces[0])
    return tuple(out), all([finite, *(f.result() for f in done)])


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="calibkit-scan")


# a forked child has none of the pool's threads, but the pool would count its idle ones and
# wait on them forever: the child makes its own
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_executor.cache_clear)
