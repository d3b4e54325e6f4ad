"""Benchmark sweeps: a YAML spec of datasets x models x methods x seeds run on one harness,
stored in SQLite and reported (docs/bench.md)."""

from ._report import write_report
from ._runner import run_bench
from ._spec import load_spec

__all__ = ["load_spec", "run_bench", "write_report"]
