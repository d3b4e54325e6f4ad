"""Every published number on the ResNet-110 CIFAR-10 logits that calibkit can compute,
published against calibkit, under named conventions (issue 31).

Sources (quoted, not rerun):

* Kull et al. 2019 ("Beyond temperature scaling"), the notebook behind their Tables 3–4 and
  supplementary Tables 13–18 (dirichletcal/experiments_dnn, ``Final Results``): every
  column for the uncalibrated network, TS, Dir-ODIR and MS-ODIR; log-loss (6 digits) and
  classwise ECE (3 digits) for Dir-L2 and vector scaling. Their calibrated columns are the
  ``_ens`` ones: the average of the five cross-validation fold models.
* markus93/NN_calibration's histogram binning (one-vs-rest, 15 bins, empty bins 0), as
  issue 31 quotes it: 6.59 % error, ECE 0.012508, MCE 0.444502.

No published number for isotonic regression on these logits was found in those sources
(the markus93 notebook's isotonic and TS rows change the test error of an argmax-keeping
TS, 6.44 % → 5.38 %, so they are not from these logits).

A cell is "exact" when calibkit rounds to the printed digits; otherwise its cause is
stated. Run (about 3 minutes on 2 cores):

    python benchmarks/published_resnet110.py [--data ../shared/data/logits/resnet110_cifar10.npz]
    python benchmarks/published_resnet110.py --markdown     # the table in docs/posthoc.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from calibkit import posthoc
from calibkit.metrics import accuracy, brier, classwise_ece, ece, mce, nll

DATA = Path(__file__).resolve().parents[1].parent / "shared/data/logits/resnet110_cifar10.npz"

#: (column, how calibkit computes it from probabilities and labels, printed digits)
COLUMNS = {
    "error %": (lambda p, y: 100 * (1 - accuracy(p, y, probs=True)), 2),
    "ECE": (lambda p, y: ece(p, y, probs=True), 6),
    "ECE2": (lambda p, y: ece(p, y, probs=True, binary="pooled"), 6),
    "classwise ECE": (lambda p, y: classwise_ece(p, y, probs=True, binning="kull"), 6),
    "ECE_FULL": (lambda p, y: classwise_ece(p, y, probs=True, binning="kull", cells="joint"), 6),
    "MCE": (lambda p, y: mce(p, y, probs=True), 6),
    "MCE2": (lambda p, y: mce(p, y, probs=True, binary="pooled"), 6),
    "log-loss": (lambda p, y: nll(p, y, probs=True, clip=1e-15), 6),
    "Brier / K": (lambda p, y: brier(p, y, probs=True) / p.shape[1], 6),
}
#: calibkit convention of each column, for the table's notes
CONVENTIONS = {
    "ECE": "ece()",
    "ECE2": 'ece(binary="pooled")',
    "classwise ECE": 'classwise_ece(binning="kull")',
    "ECE_FULL": 'classwise_ece(binning="kull", cells="joint")',
    "MCE": "mce()",
    "MCE2": 'mce(binary="pooled")',
    "log-loss": "nll(clip=1e-15)",
    "Brier / K": "brier() / K",
}

KULL = ("error %", "ECE", "ECE2", "classwise ECE", "ECE_FULL", "MCE", "MCE2", "log-loss",
        "Brier / K")  # fmt: skip


def kull(values: tuple[float, ...]) -> dict[str, float]:
    """A row of Kull et al.'s notebook, column by column."""
    return dict(zip(KULL, values, strict=True))


#: (calibkit spec, published name, {column: published value})
PUBLISHED = [
    ("uncalibrated", "Uncal", kull((6.44, 0.047503, 0.009587, 0.098456, 0.120544,
                                              0.295799, 0.273922, 0.358274, 0.011019))),
    ("ts", "TempS", kull((6.44, 0.011321, 0.001917, 0.043437, 0.129919, 0.236393,
                                    0.090262, 0.209261, 0.009785))),
    ("vector", "VecS", {"classwise ECE": 0.036, "log-loss": 0.206245}),
    ("ms-odir:average_folds=true", "MS-ODIR", kull((
        6.49, 0.010591, 0.002021, 0.036155, 0.122723, 0.226780, 0.067931, 0.203753, 0.009759))),
    ("dir-odir:average_folds=true", "Dir-ODIR", kull((
        6.49, 0.010857, 0.002167, 0.039497, 0.119781, 0.083307, 0.079753, 0.205106, 0.009765))),
    ("dir-l2:average_folds=true", "Dir-L2", {"classwise ECE": 0.032, "log-loss": 0.203025}),
    ("hist-binning:mode=one-vs-rest,empty=zero", "histogram binning (markus93)",
     {"error %": 6.59, "ECE": 0.012508, "MCE": 0.444502}),
    ("isotonic:mode=one-vs-rest", "isotonic (markus93)", {}),
]  # fmt: skip

#: cells printed with 3 digits (the main text's Table 4 for Dir-L2 and VecS)
THREE_DIGITS = {("VecS", "classwise ECE"): 3, ("Dir-L2", "classwise ECE"): 3}


def printed(value: float, digits: int, name: str) -> float:
    """``value`` as the source printed it: Kull et al.'s notebook rounds every column to 7
    digits (``.round(7)``) before pandas or LaTeX print 6 or 3, so 0.04750351 prints as
    0.047503 there; markus93's notebook prints ``%f`` of the full value."""
    if "markus93" not in name:
        value = round(value, 7)
    return round(value, digits)


#: stated causes of the cells that are not exact, by (spec, column); the rest by spec
FLOAT32 = "a"
CAUSE_TEXT = {
    "a": "their full_ECE averages each cell in float32 (0.1205439 for Uncal when rerun with "
    "their code); calibkit sums in float64",
    "b": "their TS and VecS columns average five fold models (Keras); calibkit fits one map "
    "on the whole validation split",
    "c": "their number averages five fold models fitted with their own grid and optimiser "
    "(Keras); calibkit's cross-validation draws other folds. MCE, the gap of one sparse "
    "bin, moves furthest",
}
CAUSES = {("uncalibrated", "ECE_FULL"): FLOAT32, ("ts", "ECE_FULL"): FLOAT32}


def cause(spec: str, column: str) -> str:
    """The letter of a cell's stated cause (``CAUSE_TEXT``)."""
    if (spec, column) in CAUSES:
        return CAUSES[(spec, column)]
    return "b" if spec in ("ts", "vector") else "c"


def rows(path: Path) -> list[dict]:
    with np.load(path) as d:
        zv, yv = d["logits_val"], d["labels_val"]
        zt, yt = d["logits_test"], d["labels_test"]
    out = []
    for spec, name, published in PUBLISHED:
        started = time.perf_counter()
        if spec == "uncalibrated":
            probs = torch.softmax(torch.from_numpy(zt).double(), 1)
        else:
            cal = posthoc.create(spec).fit(zv, yv)
            probs = torch.exp(cal(torch.from_numpy(zt)).double())
            probs = probs / probs.sum(1, keepdim=True)  # float64 rows that sum to one
        seconds = time.perf_counter() - started
        for column, (compute, digits) in COLUMNS.items():
            ours = compute(probs, yt)
            theirs = published.get(column)
            digits = THREE_DIGITS.get((name, column), digits)
            exact = theirs is not None and printed(ours, digits, name) == round(theirs, digits)
            out.append({
                "method": name, "spec": spec, "column": column, "published": theirs,
                "calibkit": ours, "digits": digits, "exact": exact, "seconds": seconds,
                "cause": None if theirs is None or exact else cause(spec, column),
            })  # fmt: skip
    return out


def markdown(table: list[dict]) -> str:
    lines = [
        "| method | column | published | calibkit | |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in table:
        if r["published"] is None:
            continue
        d = r["digits"]
        delta = r["calibkit"] - r["published"]
        verdict = "exact" if r["exact"] else f"Δ {delta:+.{d}f} ({r['cause']})"
        ours = printed(r["calibkit"], d, r["method"])
        lines.append(f"| {r['method']} | {r['column']} | {r['published']:.{d}f} | "
                     f"{ours:.{d}f} | {verdict} |")  # fmt: skip
    lines.append("")
    lines += [f"({k}) {v}." for k, v in CAUSE_TEXT.items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--markdown", action="store_true", help="print the docs table")
    args = ap.parse_args()
    table = rows(args.data)
    if args.markdown:
        print(markdown(table))
        return
    for r in table:
        pub = "-" if r["published"] is None else f"{r['published']:.{r['digits']}f}"
        state = (
            "" if r["published"] is None else ("exact" if r["exact"] else CAUSE_TEXT[r["cause"]])
        )
        ours = printed(r["calibkit"], r["digits"], r["method"])
        print(f"{r['method']:<30} {r['column']:<14} {pub:>10} {ours:>12.{r['digits']}f}"
              f"  {state}")  # fmt: skip
    n = sum(r["published"] is not None for r in table)
    print(f"\n{sum(r['exact'] for r in table)} of {n} published cells exact; conventions: "
          + ", ".join(f"{c} = {v}" for c, v in CONVENTIONS.items()))  # fmt: skip


if __name__ == "__main__":
    main()
