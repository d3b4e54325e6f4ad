"""The sweep harness: overhead per run, local scaling, and Ray against the local engine.

    python benchmarks/overhead/bench_speed.py  # on the `default` preset (~30 minutes)
    # a 12-run sweep, ~3 min:
    python benchmarks/overhead/bench_speed.py --spec benchmarks/overhead/quick.yaml
    python benchmarks/overhead/bench_speed.py --ray            # + the Ray engine (pip install ray)

1. Harness overhead: one run through the harness (train, measure, store) with no post-hoc
   method, against calling the trainer directly on the same configuration.
2. The spec with 1 and 2 local workers: wall times and their ratio (target <= 0.6).
3. With ``--ray``: the spec on a local 2-CPU Ray cluster; its numbers against the local ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from calibkit.bench._execute import execute
from calibkit.bench._runner import run_bench
from calibkit.bench._spec import load_spec
from calibkit.bench._store import Store
from calibkit.training import train


def overhead(spec) -> None:
    run = dataclasses.replace(spec.runs[0], posthoc=(), record=False, stage2=None)
    torch.set_num_threads(1)
    direct, harness = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(4):  # the first of each warms caches and imports up: not counted
            start = time.perf_counter()
            train(run.train_config(), Path(tmp) / f"direct{rep}")
            direct.append(time.perf_counter() - start)
            start = time.perf_counter()
            result = execute(run, Path(tmp) / f"harness{rep}")
            store = Store(Path(tmp) / f"s{rep}.sqlite")
            store.write_run(result["run"], result["metrics"], result["history"])
            harness.append(time.perf_counter() - start)
    direct, harness = min(direct[1:]), min(harness[1:])
    print(
        f"one run ({run.dataset}, {run.model}, {run.method}): trainer {direct:6.2f} s, harness "
        f"{harness:6.2f} s, overhead {100 * (harness / direct - 1):+5.1f} % (target <= 5 %)"
    )


def sweep(spec, engine: str, workers: int, out: Path) -> float:
    start = time.perf_counter()
    run_bench(spec, out, engine=engine, workers=workers)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", default="default")
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    overhead(spec)
    with tempfile.TemporaryDirectory() as tmp:
        one = sweep(spec, "local", 1, Path(tmp) / "one")
        two = sweep(spec, "local", 2, Path(tmp) / "two")
        print(
            f"{spec.name}: {len(spec.runs)} runs; 1 worker {one:7.1f} s, 2 workers {two:7.1f} s, "
            f"ratio {two / one:4.2f} (target <= 0.6)"
        )
        a = {tuple(r[:5]): r[5] for r in Store(Path(tmp) / "one" / "results.sqlite").metrics()}
        b = {tuple(r[:5]): r[5] for r in Store(Path(tmp) / "two" / "results.sqlite").metrics()}
        print(f"2 workers give the numbers of 1: {a == b} ({len(a)} values)")
        if args.ray:
            import ray

            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            t_ray = sweep(spec, "ray", 1, Path(tmp) / "ray")
            c = {tuple(r[:5]): r[5] for r in Store(Path(tmp) / "ray" / "results.sqlite").metrics()}
            print(f"Ray (local 2-CPU cluster): {t_ray:7.1f} s; the local numbers: {a == c}")


if __name__ == "__main__":
    main()
