"""Where is CE over-confident on the built-in data, at 80 % accuracy or more? (issue 45)

The training papers start from CE networks that fit their training set completely and are
over-confident (TS temperature T >= 1.5, TS at least halving ECE). This trains CE alone,
on one CPU thread per process, for each candidate protocol (training-set size, label
noise, epochs, batch size, weight decay) and network of the main job, and prints per seed:
test accuracy, T fitted by TS on the validation split, test ECE before and after TS, and the
seconds the network took. The `default` preset's protocol was chosen from its output
(docs/bench.md, "The papers' regime on built-in data").

    python benchmarks/studies/regime_search.py -o /tmp/regime            # about 5 minutes, 2 cores
    python benchmarks/studies/regime_search.py -o /tmp/regime --json

Killed and started again with the same -o, it retrains only what is missing (one JSON line
per network in -o/rows.jsonl).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

#: (name, data spec, model spec, training settings): the candidates, tried in this order
_NO_WD = {"batch_size": 32, "weight_decay": 0.0}
_CONSTANT = _NO_WD | {"schedule": "constant"}
CANDIDATES = [
    (
        "digits cnn, whole split (the old default)",
        "digits",
        "cnn",
        {"epochs": 30, "batch_size": 128, "weight_decay": 5e-4},
    ),
    (
        "digits cnn, 200 images, 100 epochs",
        "digits:train_size=200",
        "cnn",
        _NO_WD | {"epochs": 100},
    ),
    (
        "digits cnn, 300 images, 10 % noise, 100 epochs",
        "digits:train_size=300,label_noise=0.1",
        "cnn",
        _NO_WD | {"epochs": 100},
    ),
    (
        "digits cnn, 300 images, 10 % noise, 60 epochs",
        "digits:train_size=300,label_noise=0.1",
        "cnn",
        _NO_WD | {"epochs": 60},
    ),
    (
        "digits mlp, 300 images, 10 % noise, 100 epochs",
        "digits:train_size=300,label_noise=0.1",
        "mlp",
        _NO_WD | {"epochs": 100},
    ),
    (
        "digits mlp, 300 images, 10 % noise, 200 epochs, constant lr",
        "digits:train_size=300,label_noise=0.1",
        "mlp",
        _CONSTANT | {"epochs": 200},
    ),
    (
        "digits cnn, 300 images, 10 % noise, 200 epochs, constant lr",
        "digits:train_size=300,label_noise=0.1",
        "cnn",
        _CONSTANT | {"epochs": 200},
    ),
    (
        "digits cnn, 300 images, 20 % noise, 150 epochs, constant lr",
        "digits:train_size=300,label_noise=0.2",
        "cnn",
        _CONSTANT | {"epochs": 150},
    ),
    (
        "digits mlp, 500 images, 20 % noise, 150 epochs, constant lr",
        "digits:train_size=500,label_noise=0.2",
        "mlp",
        _CONSTANT | {"epochs": 150},
    ),
    (
        "toy mlp, 1000/class, 10 % noise, 60 epochs",
        "gaussian-toy:n_train=1000,n_test=200,label_noise=0.1",
        "mlp",
        _NO_WD | {"epochs": 60},
    ),
    (
        "toy mlp, 100/class, 60 epochs",
        "gaussian-toy:n_train=100,n_test=200",
        "mlp",
        _NO_WD | {"epochs": 60},
    ),
    (
        "toy mlp, 200/class, 20 % noise, 60 epochs",
        "gaussian-toy:n_train=200,n_test=200,label_noise=0.2",
        "mlp",
        _NO_WD | {"epochs": 60},
    ),
    (
        "toy mlp, 100/class, 200 epochs, constant lr",
        "gaussian-toy:n_train=100,n_test=200",
        "mlp",
        _CONSTANT | {"epochs": 200},
    ),
    (
        "toy mlp, 200/class, 20 % noise, 200 epochs, constant lr",
        "gaussian-toy:n_train=200,n_test=200,label_noise=0.2",
        "mlp",
        _CONSTANT | {"epochs": 200},
    ),
    (
        "digits cnn, 500 images, 20 % noise, 150 epochs, constant lr",
        "digits:train_size=500,label_noise=0.2",
        "cnn",
        _CONSTANT | {"epochs": 150},
    ),
    (
        "digits cnn, 500 images, 30 % noise, 150 epochs, constant lr",
        "digits:train_size=500,label_noise=0.3",
        "cnn",
        _CONSTANT | {"epochs": 150},
    ),
    (
        "digits cnn, whole split, 25 % noise, 100 epochs, constant lr",
        "digits:label_noise=0.25",
        "cnn",
        _CONSTANT | {"epochs": 100},
    ),
    (
        "digits mlp, whole split, 25 % noise, 100 epochs, constant lr",
        "digits:label_noise=0.25",
        "mlp",
        _CONSTANT | {"epochs": 100},
    ),
]
SEEDS = (1, 2, 3)


def one(job: tuple[str, str, str, dict, int, str]) -> dict:
    name, data, model, settings, seed, out = job
    import numpy as np
    import torch

    from calibkit import posthoc
    from calibkit.metrics import accuracy, ece
    from calibkit.training import TrainConfig, train

    torch.set_num_threads(1)
    started = time.perf_counter()
    config = TrainConfig(
        data=data,
        model=model,
        loss="ce",
        seed=seed,
        device="cpu",
        **({"lr": 0.05, "schedule": "cifar"} | settings),
    )
    result = train(config, Path(out) / f"{abs(hash(name)) % 10**8}-{seed}")
    seconds = time.perf_counter() - started
    z = np.load(result.out / "logits.npz")
    ts = posthoc.create("ts").fit(z["logits_val"], z["labels_val"])
    zt, yt = z["logits_test"], z["labels_test"]
    return {
        "protocol": name,
        "seed": seed,
        "accuracy": accuracy(zt, yt),
        "T": float(ts.temperature_),
        "ece_before": ece(zt, yt),
        "ece_after": ece(ts(torch.as_tensor(zt)), yt),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "rows.jsonl"
    done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    seen = {(r["protocol"], r["seed"]) for r in done}
    jobs = [
        (n, d, m, s, seed, str(args.out))
        for n, d, m, s in CANDIDATES
        for seed in SEEDS
        if (n, seed) not in seen
    ]
    with ProcessPoolExecutor(args.workers) as pool, log.open("a") as f:
        for row in pool.map(one, jobs):
            done.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
    order = [c[0] for c in CANDIDATES]
    done.sort(key=lambda r: (order.index(r["protocol"]), r["seed"]))
    if args.json:
        print(json.dumps(done, indent=1))
        return
    print("| protocol | seed | test accuracy | CE's T | test ECE before → after TS | s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in done:
        print(
            f"| {r['protocol']} | {r['seed']} | {r['accuracy']:.3f} | {r['T']:.2f} | "
            f"{100 * r['ece_before']:.1f} → {100 * r['ece_after']:.1f} % | {r['seconds']} |"
        )


if __name__ == "__main__":
    main()
