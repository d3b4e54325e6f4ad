"""Benchmark sweeps: a YAML spec of datasets x models x methods x seeds run on one harness,
stored in SQLite and reported (docs/bench.md)."""
