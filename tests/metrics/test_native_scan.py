"""The compiled row scan (calibkit.metrics._rowscan) against float64 closed forms and the
PyTorch scan.

Every test but the first runs each kernel this CPU has ("avx512", "avx2"). Where the
extension is not built (no C compiler at install time) they skip with a one-line reason, and
fail on CI (``CI`` set, as for the shared data in conftest.py), which compiles it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from calibkit.metrics import _scan as native_scan
from calibkit.metrics._scan import scan_rows

KERNELS = native_scan.runnable()
needs_kernel = pytest.mark.skipif(not KERNELS, reason="the compiled scan is not built or no AVX2")
#: tests of what calibkit does when the compiled scan serves: off in .ci/run's second pass
in_use = pytest.mark.skipif(native_scan.kernel() is None, reason="the compiled scan is not in use")


def test_the_kernel_is_built_on_ci():
    if not os.environ.get("CI"):
        pytest.skip("CI is not set: a user's install may lack a C compiler")
    assert native_scan._rowscan is not None, "calibkit.metrics._rowscan was not compiled"
    assert KERNELS
    if os.environ.get(native_scan.ENV, "").strip() == "0":  # .ci/run's second pass
        assert native_scan.kernel() is None
    else:
        assert native_scan.kernel() in native_scan.KERNELS


def _truth(z: np.ndarray) -> tuple[np.ndarray, ...]:
    """(top, s, sq, ed) from float32 logits: d = z - max rounded to float32, as both scans
    do (so each term carries |d| 2^-24 relative error from the input's precision), and the
    rest in float64: what is left to compare is the float32 exp and the products."""
    m = z.max(1, keepdims=True)
    d = np.maximum((z - m).astype(np.float64), -1e300)
    e = np.exp(d)
    return m[:, 0].astype(np.float64), e.sum(1), (e * e).sum(1), (e * d).sum(1)


def _native(z: np.ndarray, name: str, threads: int = 1) -> tuple[np.ndarray, ...]:
    torch.set_num_threads(threads)
    out, _ = native_scan.scan_logits(torch.from_numpy(z), full=True, instructions=name)
    return tuple(t.numpy() for t in out)


@pytest.fixture(autouse=True)
def _keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@needs_kernel
@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("k", [1, 2, 7, 8, 15, 16, 17, 31, 100, 1000])
def test_sums_match_float64_to_float32_exp_precision(name, k):
    gen = np.random.default_rng(k)
    z = (4 * gen.standard_normal((300, k))).astype(np.float32)
    top, s, sq, ed = _native(z, name)
    t_top, t_s, t_sq, t_ed = _truth(z)
    np.testing.assert_array_equal(top, t_top)
    np.testing.assert_allclose(s, t_s, rtol=3e-7)
    np.testing.assert_allclose(sq, t_sq, rtol=3e-7)
    np.testing.assert_allclose(ed, t_ed, rtol=3e-7)
    # the maximum contributes exactly 1: s - 1 keeps its relative precision
    np.testing.assert_allclose(s - 1, t_s - 1, rtol=3e-7, atol=4e-16)


@needs_kernel
@pytest.mark.parametrize("name", KERNELS)
def test_exp_is_accurate_over_its_whole_range(name):
    # rows (0, d): ed = exp(d) d, rounded once to float32, for d from -87 to 0 (s - 1 would
    # lose exp(d) < 1e-16 to float64's rounding of 1 + exp(d)); below -87 the term is 0
    d = np.concatenate([-np.geomspace(1e-7, 87.0, 20_000), [-87.5, -100.0, -1e30]])
    z = np.stack([np.zeros_like(d), d], 1).astype(np.float32)
    _, s, _, ed = _native(z, name)
    d32 = z[:, 1].astype(np.float64)
    live = d32 >= -87.0
    rel = np.abs(ed[live] / d32[live] - np.exp(d32[live])) / np.exp(d32[live])
    assert rel.max() < 3e-7  # exp within 2 float32 ulps (2.4e-7), the product within half
    assert np.all(ed[~live] == 0.0) and np.all(s[~live] == 1.0)


@needs_kernel
@pytest.mark.parametrize("name", KERNELS)
def test_confident_rows_keep_one_minus_confidence(name):
    # margins of 5-30: float32 softmax rounds the confidence to exactly 1 above about 17;
    # float64 keeps s - 1 to a few 1e-16 absolute (a rounding of 1 + small per addition)
    gen = np.random.default_rng(0)
    z = gen.standard_normal((500, 10)).astype(np.float32)
    z[:, 3] += np.linspace(5, 30, 500).astype(np.float32)
    _, s, _, _ = _native(z, name)
    _, t_s, _, _ = _truth(z)
    np.testing.assert_allclose((s - 1) / s, (t_s - 1) / t_s, rtol=3e-7, atol=1e-15)
    assert np.all(s > 1)


@needs_kernel
@pytest.mark.parametrize("name", KERNELS)
def test_ties_minus_inf_and_huge_logits(name):
    big = np.finfo(np.float32).max
    z = np.array(
        [
            [2.0, 2.0, 0.0],  # two maxima: s = 2 + e^-2
            [-np.inf, 1.0, 0.0],  # -inf is probability 0 (trusted path only)
            [big, -big, 0.0],  # z - max overflows to -inf: e = 0, e * d = 0
            [-big, -big, -big],
        ],
        np.float32,
    )
    top, s, sq, ed = _native(z, name)
    e2 = np.exp(-2.0)
    np.testing.assert_allclose(s, [2 + e2, 1 + np.exp(-1.0), 1.0, 3.0], rtol=3e-7)
    np.testing.assert_allclose(sq, [2 + e2**2, 1 + np.exp(-2.0), 1.0, 3.0], rtol=3e-7)
    np.testing.assert_allclose(ed, [-2 * e2, -np.exp(-1.0), 0.0, 0.0], rtol=3e-7)
    assert np.all(np.isfinite(ed))
    np.testing.assert_array_equal(top, [2.0, 1.0, big, -big])


@needs_kernel
@pytest.mark.parametrize("name", KERNELS)
def test_a_row_does_not_depend_on_its_batch_or_the_threads(name):
    gen = np.random.default_rng(1)
    z = (3 * gen.standard_normal((40_000, 37))).astype(np.float32)
    whole = _native(z, name, threads=2)
    alone = _native(np.ascontiguousarray(z[12_345:12_346]), name)
    shifted = _native(np.ascontiguousarray(z[1:]), name, threads=1)
    for w, a, sh in zip(whole, alone, shifted, strict=True):
        assert w[12_345] == a[0]
        np.testing.assert_array_equal(w[1:], sh)


@needs_kernel
@pytest.mark.parametrize("name", KERNELS)
def test_metrics_agree_with_the_pytorch_scan(name, monkeypatch):
    gen = torch.Generator().manual_seed(3)
    z = (3 * torch.randn(4000, 20, generator=gen)).float()
    z[:500, 0] += 25  # confident rows
    y = torch.randint(20, (4000,), generator=gen)
    monkeypatch.setenv(native_scan.ENV, name)
    fast = M.evaluate(z, y, optimal=False, smooth=False).metrics
    monkeypatch.setenv(native_scan.ENV, "0")
    slow = M.evaluate(z, y, optimal=False, smooth=False).metrics
    assert fast.keys() == slow.keys()
    for key in fast:
        assert fast[key] == pytest.approx(slow[key], rel=1e-6, abs=1e-9), key


@needs_kernel
def test_classwise_metrics_do_not_change_the_top_label_ones():
    gen = torch.Generator().manual_seed(4)
    z = (3 * torch.randn(3000, 12, generator=gen)).float()
    y = torch.randint(12, (3000,), generator=gen)
    both = M.evaluate(z, y, optimal=False, smooth=False, metrics=["ece", "classwise_ece", "nll"])
    alone = M.evaluate(z, y, optimal=False, smooth=False, metrics=["ece", "nll"])
    assert both.metrics["ece"] == alone.metrics["ece"]
    assert both.metrics["nll"] == alone.metrics["nll"]


def test_other_inputs_take_the_pytorch_scan():
    z = torch.randn(50, 8)
    assert not native_scan.usable(z.double())
    assert not native_scan.usable(z.t().contiguous().t())  # not contiguous
    assert not native_scan.usable(z.to(torch.bfloat16))
    if native_scan.kernel() is not None:
        assert native_scan.usable(z)
    stats = scan_rows(z.double(), False, full=True)
    assert stats.sq is not None and stats.s.dtype == torch.float64


def test_the_setting_is_checked(monkeypatch):
    monkeypatch.setenv(native_scan.ENV, "0")
    assert native_scan.kernel() is None
    assert not native_scan.usable(torch.randn(5, 3))
    if native_scan._rowscan is not None:
        monkeypatch.setenv(native_scan.ENV, "sse4")
        with pytest.raises(ValueError, match="CALIBKIT_NATIVE: expected 0, 1, avx2 or avx512"):
            native_scan.kernel()


@needs_kernel
def test_the_kernel_refuses_what_it_cannot_read():
    scan = native_scan._rowscan.scan
    z, out = np.zeros((4, 3), np.float32), np.empty(4)
    with pytest.raises(ValueError, match="logits: expected a 2-D array of format 'f'"):
        scan(z.astype(np.float64), out, np.empty(4))
    with pytest.raises(ValueError, match="s: expected 4 rows, got 3"):
        scan(z, out, np.empty(3))
    with pytest.raises(ValueError, match="sq and ed: give both or neither"):
        scan(z, out, np.empty(4), np.empty(4))
    with pytest.raises(ValueError, match="C-contiguous"):
        scan(z[:, ::2], out, np.empty(4))
    with pytest.raises(ValueError, match="not a kernel this CPU runs"):
        scan(z, out, np.empty(4), instructions="sse2")


@needs_kernel
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("native", ["1", "0"])
def test_nan_and_inf_get_the_same_error_from_either_scan(bad, native, monkeypatch):
    monkeypatch.setenv(native_scan.ENV, native)
    gen = torch.Generator().manual_seed(5)
    z = torch.randn(3000, 7, generator=gen)
    y = torch.randint(7, (3000,), generator=gen)
    z[1234, 6] = bad
    what = "1 NaN" if bad != bad else "1 inf"
    calls = [
        lambda: M.ece(z, y),
        lambda: M.nll(z, y),
        lambda: M.accuracy(z, y),
        lambda: M.classwise_ece(z, y),
        lambda: M.evaluate(z, y, optimal=False, smooth=False),
        lambda: M.ece(z[:, 5:], y % 2, binary="positive"),
    ]
    message = rf"scores: contains {what} value\(s\) \(first in row 1234\)"
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()


@in_use
def test_valid_logits_are_read_once(monkeypatch):
    # the compiled scan checks NaN and inf in its own pass: no second read of the logits
    import calibkit.metrics._inputs as inputs

    seen = []
    real = inputs.check_finite

    def counted(t, name="scores"):
        seen.append(name)
        real(t, name)

    monkeypatch.setattr(inputs, "check_finite", counted)
    z, y = torch.randn(2000, 30), torch.randint(30, (2000,))
    M.ece(z, y)
    M.evaluate(z, y, optimal=False, smooth=False, metrics=["ece", "nll", "brier"])
    assert seen == []
    monkeypatch.setenv(native_scan.ENV, "0")
    M.ece(z, y)
    assert seen == ["scores"]


def _scan_in_child(z, queue):
    # no PyTorch parallel operation here: GNU OpenMP hangs in a child forked from a process
    # that used it (PyTorch's own limitation); the scan itself uses none
    (_, s), finite = native_scan.scan_logits(z, full=False)
    queue.put((float(s.numpy().sum()), finite))


@needs_kernel
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_scans_with_threads_of_its_own():
    # the parent's pool has idle threads that a forked child does not: it must not wait on them
    import multiprocessing

    z = torch.randn(40_000, 10)
    torch.set_num_threads(2)  # the child inherits it: the scan splits rows in two there too
    float(torch.randn(1_000_000).sum())  # OpenMP used before the fork, as in a long session
    (_, s), _ = native_scan.scan_logits(z, full=False)  # the pool starts
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_scan_in_child, args=(z, queue))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in the scan")
    assert child.exitcode == 0
    total, finite = queue.get(timeout=5)
    assert finite and total == pytest.approx(float(s.numpy().sum()), rel=1e-12)


@pytest.mark.skipif(os.environ.get("CALIBKIT_SANITIZED") == "1", reason="inside that run")
def test_the_kernel_is_clean_under_address_and_undefined_behaviour_sanitizers():
    """Issue 43: benchmarks/hostile/sanitize_rowscan.py builds the extension with ASan and UBSan
    (any report aborts) and runs this file's tests against that build."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which(os.environ.get("CC", "gcc")) is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler on CI")
        pytest.skip("no C compiler")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "hostile" / "sanitize_rowscan.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "sanitized build in use" in done.stdout and "[100%]" in done.stdout
