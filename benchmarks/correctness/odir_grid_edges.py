"""How often the ODIR maps' cross-validated choice sits on an edge of docs/real.md's
3 x 3 grid (lambda, mu in {0.01, 1, 100}, 3 folds), on the zoo networks of ../shared/data,
with the grid as given and with the grid that extends itself past an edge (issue 44).

Each network's file is split per class into calibration and test halves per seed, as in
the real preset and benchmarks/studies/zoo_odir.yaml (5 seeds at 10 classes, 3 at 100). Prints, per
class count and method, the fits whose lambda or mu sat on an edge of the given grid, the
fits still on an edge after extension (the ``grid-edge`` anomaly), and the test accuracy
and classwise ECE of each (mean over networks and seeds, in %).

    python benchmarks/correctness/odir_grid_edges.py           # about 10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import torch

from calibkit import posthoc
from calibkit.cli._progress import progress
from calibkit.io import load_split
from calibkit.metrics import accuracy, classwise_ece
from calibkit.posthoc._compare import stratified_split

ZOO = Path(__file__).resolve().parents[2].parent / "shared/data/logits/zoo"
GRID = "folds=3,lambdas=[0.01,1,100],mus=[0.01,1,100]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", type=Path, default=ZOO)
    a = ap.parse_args()
    rows: dict[tuple[str, str, str], list[tuple[bool, float, float]]] = {}
    paths = sorted(a.zoo.glob("*.npz"))
    with progress(len(paths), "networks", True) as tick:  # a line every few seconds
        for path in paths:
            _fit_network(path, rows)
            tick(1)
    _print(rows)


def _fit_network(path: Path, rows: dict) -> None:
    """Both ODIR maps on every seed's split of one network, each grid as given and extending
    itself; appends (on an edge at the end, extended, accuracy, classwise ECE, uncalibrated
    accuracy) to ``rows`` by (class group, method, extend_grid)."""
    z, y = load_split(str(path), "test")
    k = z.shape[1]
    group = "10 classes or fewer" if k <= 10 else "100 classes"
    for seed in range(5 if k <= 10 else 3):
        cal, test = stratified_split(np.asarray(y), 0.5, seed)
        for method in ("ms-odir", "dir-odir"):
            for extend in ("false", "true"):
                spec = f"{method}:{GRID},extend_grid={extend}"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fitted = posthoc.create(spec).fit(z[cal], y[cal])
                p = fitted.predict_proba(z[test])
                d = fitted.fit_report_.details
                rows.setdefault((group, method, extend), []).append(
                    (
                        "grid_edge" in d,
                        d.get("grid_extended", 0) > 0,
                        100 * accuracy(p, y[test], probs=True),
                        100 * classwise_ece(p, y[test], probs=True),
                        100 * accuracy(z[test], y[test]),
                    )
                )


def _print(rows: dict) -> None:
    print(
        "\n| classes | method | grid | fits | on an edge at the end | extended | accuracy "
        "(%) | uncalibrated accuracy (%) | classwise ECE (%) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (group, method, extend), r in sorted(rows.items()):
        v = np.array(r, dtype=float)
        grid = "3 × 3, extends itself" if extend == "true" else "3 × 3 as given"
        print(
            f"| {group} | {method} | {grid} | {len(r)} | {int(v[:, 0].sum())} | "
            f"{int(v[:, 1].sum())} | {v[:, 2].mean():.2f} | {v[:, 4].mean():.2f} | "
            f"{v[:, 3].mean():.3f} |"
        )


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
