"""The report's verdicts: one line per headline claim of each paper that a sweep can test.

Each claim compares two sets of runs on one test metric, per (dataset, model) column: the
claimed-better side against the other, over the seeds they share. The line gives both
means, the difference with its 95 % t-interval, the test (:func:`~calibkit.bench.report.
compare`: paired over seeds, Welch's otherwise) and the verdict:

- **holds**: the difference is in the claimed direction and significant at 0.05;
- **does not hold**: it is not (the line says whether the direction was wrong or the
  difference not significant with this many seeds);
- **not testable at this scale**: the sweep lacks one side, or has fewer than 2 seeds.

Methods are found by what they train, not by their names: a loss (plain runs: no mixup, no
stage 2), MaC-Cal (a ``maccal`` stage 2 with the fewest changed settings: the full method,
not an ablation), or a post-hoc calibrator on the baseline.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scipy import stats

from ..registry import parse_spec
from .store import ALL

if TYPE_CHECKING:
    from .report import Results

NOT_TESTABLE = "not testable at this scale"


@dataclass(frozen=True)
class Claim:
    paper: str
    text: str
    better: tuple[str, str]  # (kind, name): ("loss", "bsce-gra"), ("maccal", ""), ("posthoc", c)
    other: tuple[str, str]
    metric: str
    calibrator: str = "uncalibrated"  # applied to both sides (for "posthoc" sides: theirs)
    lower: bool = True  # the claimed-better side has the lower value


CLAIMS = (
    Claim("BSCE-GRA §5, Table 1", "BSCE-GRA has a lower test ECE than CE",
          ("loss", "bsce-gra"), ("loss", "ce"), "ece"),
    Claim("BSCE-GRA §5, Table 1", "BSCE-GRA has a lower test ECE than CE after TS",
          ("loss", "bsce-gra"), ("loss", "ce"), "ece", "ts"),
    Claim("Dark Side §4, Tables 1–3", "focal loss lowers refinement AUROC against CE",
          ("loss", "focal"), ("loss", "ce"), "refinement_auroc"),
    Claim("Rethinking §4, Table 2", "after TS, focal loss has a higher ECE than CE "
          "(regularised losses are less calibratable)", ("loss", "ce"), ("loss", "focal"),
          "ece", "ts"),
    Claim("MaC-Cal §5, Table 1", "MaC-Cal has a lower test ECE than CE",
          ("maccal", ""), ("loss", "ce"), "ece"),
    Claim("MaC-Cal §5, Table 1", "MaC-Cal keeps CE's accuracy (not significantly lower)",
          ("maccal", ""), ("loss", "ce"), "accuracy", lower=False),
    Claim("Neural Clamping §4, Table 2", "Neural Clamping has a lower test ECE than TS",
          ("posthoc", "neural-clamping"), ("posthoc", "ts"), "ece"),
)  # fmt: skip


def _method(res: Results, column: tuple[str, str], side: tuple[str, str]) -> str | None:
    """The method of ``column`` that trains ``side`` (see the module docstring)."""
    kind, name = side
    if kind == "posthoc":
        return res.baseline
    best: tuple[int, str] | None = None
    for r in res.runs.values():
        spec = r["spec"]
        if (r["dataset"], r["model"]) != column or spec.get("mixup"):
            continue
        stage2, loss = spec.get("stage2"), parse_spec(spec.get("loss", "ce"))
        if kind == "loss":
            if stage2 is not None or loss.name != name or (name == "ce" and loss.params):
                continue
            rank = (0 if r["method"] == res.baseline else 1, r["method"])
        elif (
            kind == "maccal"
            and stage2
            and parse_spec(stage2).name == "maccal"
            and loss.name == "ce"
        ):
            changed = set(parse_spec(stage2).kwargs) - {"batch_size", "epochs", "lr", "seed"}
            rank = (len(changed), r["method"])
        else:
            continue
        best = rank if best is None or rank < best else best
    return None if best is None else best[1]


def _side(res: Results, column, side, claim: Claim) -> dict[int, float]:
    method = _method(res, column, side)
    if method is None:
        return {}
    cal = claim.calibrator
    if side[0] == "posthoc":  # the sweep's spec of that calibrator, settings and all
        cal = next((c for c in res.calibrators() if parse_spec(c).name == side[1]), None)
        if cal is None:
            return {}
    return res.by_seed(method, column, "test", cal, ALL, claim.metric)


def judge(claim: Claim, a: dict[int, float], b: dict[int, float]) -> tuple[str, str]:
    """(verdict, numbers and test) for the claimed-better values ``a`` against ``b``."""
    from .report import compare

    if len(a) < 2 or len(b) < 2:
        return NOT_TESTABLE, f"{len(a)} and {len(b)} seeds; needs 2 or more on each side"
    scale = 100.0
    shared = sorted(set(a) & set(b))
    paired = set(a) == set(b)
    diffs = [a[s] - b[s] for s in shared] if paired else []
    mean_a, mean_b = statistics.mean(a.values()), statistics.mean(b.values())
    diff = mean_a - mean_b
    numbers = f"{mean_a * scale:.2f} vs {mean_b * scale:.2f} (difference {diff * scale:+.2f}"
    if paired and len(diffs) > 1 and statistics.stdev(diffs) > 0:
        half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
        numbers += f", 95 % CI [{(diff - half) * scale:+.2f}, {(diff + half) * scale:+.2f}]"
    test = compare(a, b)
    if test is None:
        return "does not hold", numbers + "); the two sides are identical"
    p, name = test
    numbers += f"; {name}, n = {len(shared) if paired else f'{len(a)}+{len(b)}'}, p = {p:.3g})"
    right = diff < 0 if claim.lower else diff > 0
    if claim.metric == "accuracy" and not claim.lower:  # a "keeps" claim: not lower
        ok = right or p >= 0.05
        return ("holds" if ok else "does not hold"), numbers
    if right and p < 0.05:
        return "holds", numbers
    if right:
        why = "the claimed direction, not significant with these seeds"
    else:
        why = "the opposite direction" + ("" if p < 0.05 else ", not significant")
    return "does not hold", f"{numbers}: {why}"


def verdict_table(res: Results) -> list[list[str]]:
    """The verdicts as table rows (header first)."""
    from .report import short

    rows = [["paper", "claim", "dataset / model", "verdict", "numbers (%) and test"]]
    for claim in CLAIMS:
        for column in res.columns:
            a = _side(res, column, claim.better, claim)
            b = _side(res, column, claim.other, claim)
            verdict, detail = judge(claim, a, b)
            rows.append([claim.paper, claim.text, f"{short(column[0])} / {column[1]}",
                         f"**{verdict}**" if verdict == "holds" else verdict, detail])  # fmt: skip
    return rows
