"""Where is CE over-confident on the main job's data? (issue: the training papers' premise)

The training papers start from CE networks that are over-confident (TS temperature above
1.2, and TS lowers ECE). The main job trains a digits CNN and a Gaussian-toy MLP, where CE
comes out under-confident. This sweeps the cheap knobs (epochs, weight decay, batch size,
the toy's training-set size and class overlap) with CE only, two seeds each, on the one bench
harness, and prints the premise's measurement (`calibkit.bench._verdicts.check_premise`) per
setting and network, with the seconds each setting took.

    python benchmarks/studies/overconfidence_search.py -o /tmp/search  # about 10 minutes, 2 cores
    python benchmarks/studies/overconfidence_search.py -o /tmp/search --json

Killed and started again with the same -o, it finishes what is missing (one store per
setting).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from calibkit.bench._results import Results
from calibkit.bench._runner import run_bench
from calibkit.bench._spec import resolve
from calibkit.bench._store import Store
from calibkit.bench._verdicts import OVERCONFIDENT, check_premise

EPOCHS = (30, 100)
WEIGHT_DECAY = (5e-4, 0.0)
BATCH = (128, 32)
NETWORKS = (
    ("digits", "cnn"),
    ("gaussian-toy:n_train=1000,n_test=2000", "mlp"),  # the main job's toy (n_test larger)
    ("gaussian-toy:n_train=200,n_test=2000", "mlp:hidden=256"),  # fewer samples, wider
)


def setting_spec(epochs: int, weight_decay: float, batch: int) -> dict:
    return {
        "name": f"search-e{epochs}-wd{weight_decay:g}-b{batch}",
        "seeds": [1, 2],
        "train": {
            "epochs": epochs,
            "batch_size": batch,
            "lr": 0.1,
            "schedule": "cifar",
            "weight_decay": weight_decay,
        },
        "datasets": [{"data": d, "models": [m]} for d, m in NETWORKS],
        "methods": [{"name": "CE", "loss": "ce"}],
        "posthoc": ["ts"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for epochs, wd, batch in itertools.product(EPOCHS, WEIGHT_DECAY, BATCH):
        raw = setting_spec(epochs, wd, batch)
        out = args.out / raw["name"]
        started = time.perf_counter()
        run_bench(resolve(raw), out, workers=args.workers)
        seconds = time.perf_counter() - started
        res = Results(Store(out / "results.sqlite", create=False))
        for column in res.columns:
            holds, numbers = check_premise(res, column, OVERCONFIDENT)
            rows.append(
                {
                    "epochs": epochs,
                    "weight_decay": wd,
                    "batch_size": batch,
                    "network": f"{column[0]} / {column[1]}",
                    "premise_holds": holds,
                    "premise": numbers,
                    "seconds_for_the_setting": round(seconds, 1),
                }
            )
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        mark = {True: "HOLDS", False: "fails", None: "unmeasured"}[r["premise_holds"]]
        print(
            f"epochs {r['epochs']:>3} wd {r['weight_decay']:<6g} batch {r['batch_size']:>3}  "
            f"{r['network']:<45} {mark:<10} {r['premise']}  ({r['seconds_for_the_setting']} s)"
        )


if __name__ == "__main__":
    main()
