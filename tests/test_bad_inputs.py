"""A quarter of benchmarks/hostile/bad_inputs.py's sweep of bad and odd inputs over every command
(every fourth case, so each command and kind of input is sampled): none may exit 0 on a bad
input or fail on a good one (silent), and none may end in a traceback."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

SWEEP = Path(__file__).resolve().parents[1] / "benchmarks" / "hostile" / "bad_inputs.py"


@pytest.fixture(scope="module")
def sweep():
    spec = importlib.util.spec_from_file_location("bad_inputs", SWEEP)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bad_inputs"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_sample_of_the_bad_input_sweep_is_clean(sweep, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cases = sweep.cases(tmp_path)
    try:
        if os.access(tmp_path / "ro", os.W_OK):  # as root every folder is writable
            cases = [c for c in cases if not any(str(tmp_path / "ro") in a for a in c.argv)]
        assert len(cases) >= 400
        results = [(c, *sweep.run_case(c)) for c in cases[::4]]
    finally:
        os.chmod(tmp_path / "ro", 0o755)
    bad = [
        f"{cls}: {c.command} {c.what}: {said}"
        for c, cls, said in results
        if cls in ("silent", "traceback", "data loss", "misleading")
    ]
    assert not bad, "\n".join(bad)
    commands = {"evaluate", "fit", "apply", "compare", "train", "calibrate", "bench", "report"}
    assert {c.command for c, *_ in results} >= commands
