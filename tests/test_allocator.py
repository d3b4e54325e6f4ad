"""retain_freed_memory: applied on glibc, a no-op elsewhere, and called by the command line
and the benchmark workers before their work."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from calibkit import _allocator as allocator
from calibkit.cli import main


def test_applied_on_glibc_and_idempotent():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    assert allocator.retain_freed_memory() is True
    assert allocator.retain_freed_memory() is True  # cached: mallopt runs once


def test_no_c_library_or_no_mallopt_changes_nothing(monkeypatch):
    uncached = allocator.retain_freed_memory.__wrapped__
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert uncached() is False

    class NoMallopt:  # macOS's libc has no mallopt
        def __init__(self, name):
            pass

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libc.dylib")
    monkeypatch.setattr(allocator.ctypes, "CDLL", NoMallopt)
    assert uncached() is False


def test_the_command_line_and_the_bench_workers_apply_it(monkeypatch, capsys):
    import calibkit.bench._runner as runner
    import calibkit.cli._common as common

    calls = []
    for module in (common, runner):
        monkeypatch.setattr(module, "retain_freed_memory", lambda: calls.append(1))
    main(["methods"])
    assert calls == [1]
    assert "failed" in runner._attempt(None, "/nonexistent", 1)  # applied before the run
    assert calls == [1, 1]
