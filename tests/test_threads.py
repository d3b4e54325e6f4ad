"""calibkit's thread rule: one thread for tiny work, no more threads than spare cores, the
cap from CALIBKIT_THREADS or set_threads, nested work keeping the outer choice, and the
previous setting restored."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from calibkit import _threads as threads


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv(threads.ENV, raising=False)
    threads.set_threads(None)
    yield
    threads.set_threads(None)
    torch.set_num_threads(before)


def test_tiny_work_runs_on_one_thread_and_the_setting_comes_back(monkeypatch):
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "spare_cores", lambda: 2)
    with threads.for_work(threads.SMALL - 1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with threads.for_work(10**6):
        assert torch.get_num_threads() == 2


def test_no_more_threads_than_spare_cores(monkeypatch):
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "spare_cores", lambda: 1)  # another process holds a core
    with threads.for_work(10**6):
        assert torch.get_num_threads() == 1
    monkeypatch.setattr(threads, "spare_cores", lambda: None)  # not Linux: the cap
    assert threads.threads_for(10**6) == 2


def test_the_cap_and_the_switch(monkeypatch):
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "spare_cores", lambda: 8)
    monkeypatch.setenv(threads.ENV, "1")
    assert threads.threads_for(10**6) == 1
    monkeypatch.setenv(threads.ENV, "0")  # the rule off: PyTorch's setting everywhere
    assert threads.threads_for(10) is None
    with threads.for_work(10):
        assert torch.get_num_threads() == 2
    threads.set_threads(3)  # the Python setting wins over the environment
    assert threads.threads_for(10**6) == 3
    monkeypatch.setenv(threads.ENV, "two")
    threads.set_threads(None)
    with pytest.raises(ValueError, match="CALIBKIT_THREADS: expected an integer >= 0"):
        threads.threads_for(10**6)
    with pytest.raises(ValueError, match="threads: expected an integer >= 0"):
        threads.set_threads(-1)


def test_nested_work_keeps_the_outer_choice(monkeypatch):
    """A fit's loss calls metric code on small tensors: switching threads there would
    rebuild OpenMP's team at every call."""
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "spare_cores", lambda: 2)
    with threads.for_work(10**6):
        with threads.for_work(10):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 2
    with threads.for_work(10), threads.for_work(10**6):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_spare_cores_counts_other_processes_not_ours():
    """A busy-loop process beside this one takes a core; this process's own threads do not."""
    if not hasattr(__import__("os"), "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    threads._seen[0] = -1.0
    quiet = threads.spare_cores()
    assert quiet is not None and quiet >= 1
    loop = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nend = time.time() + 20\nwhile time.time() < end: pass\n",
        ]
    )
    try:
        import time

        deadline = time.time() + 10
        busy = quiet
        while time.time() < deadline and busy >= quiet and quiet > 1:
            time.sleep(0.6)
            threads._seen[0] = -1.0
            busy = threads.spare_cores()
        if quiet > 1:
            assert busy < quiet
    finally:
        loop.kill()


def test_calibkit_functions_run_under_the_rule(monkeypatch):
    """A metric on tiny input and a fit run on one thread; the caller's setting returns."""
    from calibkit import posthoc
    from calibkit.metrics import ece

    seen = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (seen.append(n), real(n)))
    real(2)
    z = np.random.default_rng(0).normal(size=(100, 3))
    y = np.arange(100) % 3
    ece(z, y)
    posthoc.create("ts").fit(z, y)
    assert seen and seen[0] == 1 and torch.get_num_threads() == 2


def test_importing_calibkit_leaves_openmps_wait_policy_alone():
    """The policy costs small fits 30–50 % on a quiet machine (docs/performance.md): it is
    the user's choice, never set by an import."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run(
        [sys.executable, "-c", "import calibkit, os; print(os.environ.get('OMP_WAIT_POLICY'))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "None"
