"""The report's verdicts: one line per headline claim of each paper that a sweep can test.

Each claim compares two sets of runs on one test metric, per (dataset, model) column: the
claimed-better side against the other, over the seeds they share. The line gives both
means, the difference with its 95 % t-interval, the test (:func:`~calibkit.bench._results.
compare`: paired over seeds, Welch's otherwise) and the verdict:

- **holds**: the difference is in the claimed direction and significant at 0.05 over
  seeds (the t-test);
- **holds on these networks**: in the claimed direction and significant only by the nested
  bootstrap over test rows (:data:`NESTED`): the trained networks differ on this test
  population, but three seeds cannot say whether retraining would keep the difference;
- **inconclusive**: in the claimed direction, significant by neither test;
- **does not hold**: the opposite direction (the line says whether that is significant);
- **not testable at this scale**: the sweep lacks one side, or has fewer than 2 seeds;
- **not testable here**: the claim's premise fails (or cannot be measured) in this column.

Each claim names its **premise**, the regime its paper starts from, measured in the same
sweep. The training papers (BSCE-GRA, Dark Side, Rethinking, MaC-Cal) and Neural Clamping
start from CE networks that are over-confident: :data:`OVERCONFIDENT` holds where CE's
temperature-scaling temperature, fitted on the calibration split, is at least
:data:`OVERCONFIDENT_T` and TS lowers CE's test ECE, in every seed (a TS fit that ran outside
the sane temperatures leaves the premise unmeasured). Where it fails, the
verdict is "not testable here" with the numbers ("CE is under-confident: T = 0.74"), never
"does not hold": a claim about over-confident networks says nothing about the others.

Methods are found by what they train, not by their names: a loss (plain runs: no mixup, no
stage 2), a stage-2 method on CE's networks (MaC-Cal: the run whose ``maccal`` stage 2
changes the fewest settings beyond the method's ``incidental_settings``, so the full method,
not an ablation; a side that spells settings, as MaC-Cal's no-mask control
:data:`NO_MASK`, is the run whose stage 2 sets exactly those), or a post-hoc calibrator on
the baseline.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from .. import posthoc
from .._escape import Strong
from ..posthoc.internal import SANE_TEMPERATURE, mask_stopped, mask_unsettled
from ._results import spelled
from ._store import ALL

if TYPE_CHECKING:
    from ._results import Results

NOT_TESTABLE = "not testable at this scale"
HOLDS_HERE = "holds on these networks"
INCONCLUSIVE = "inconclusive"
#: the second test: test rows bootstrapped within each seed (replicates stored by every
#: run, paired across runs), the difference averaged over the seeds
NESTED = "nested bootstrap over test rows"
NOT_TESTABLE_HERE = "not testable here"
#: the least TS temperature (in every seed) at which CE counts as over-confident; CIFAR
#: networks in the papers fit 1.5–2.5
OVERCONFIDENT_T = 1.2


@dataclass(frozen=True)
class Premise:
    """The regime a claim's paper starts from, and how a sweep measures it."""

    text: str
    how: str


OVERCONFIDENT = Premise(
    "CE is over-confident",
    f"in every seed, CE's TS temperature, fitted on the calibration split, is at least "
    f"{OVERCONFIDENT_T} and TS lowers CE's test ECE",
)


@dataclass(frozen=True)
class Claim:
    paper: str
    text: str
    #: (kind, name): ("loss", "bsce-gra"), ("stage2", "maccal"), ("posthoc", c)
    better: tuple[str, str]
    other: tuple[str, str]
    metric: str
    calibrator: str = "uncalibrated"  # applied to both sides (for "posthoc" sides: theirs)
    lower: bool = True  # the claimed-better side has the lower value
    premise: Premise | None = OVERCONFIDENT


#: MaC-Cal's control arm (issue 68 §1): stage 2 with nothing masked, so that a verdict
#: can tell the mask's effect from the retrained head's
NO_MASK = "maccal:adaptive=fixed,q0=1.0"
#: Neural Clamping's control arm: the same focal-loss fit of T without the input
#: perturbation δ (temperature scaling by focal loss, γ from the same pool)
NO_DELTA = "neural-clamping:fit_delta=false"

CLAIMS = (
    Claim("BSCE-GRA §5, Table 1", "BSCE-GRA has a lower test ECE than CE",
          ("loss", "bsce-gra"), ("loss", "ce"), "ece"),
    Claim("BSCE-GRA §5, Table 1", "BSCE-GRA has a lower test ECE than CE after TS",
          ("loss", "bsce-gra"), ("loss", "ce"), "ece", "ts"),
    Claim("BSCE-GRA §4, Table 1", "BSCE-GRA has a lower test ECE than BSCE (the control: "
          "the same loss without the gradient rescaling)",
          ("loss", "bsce-gra"), ("loss", "bsce"), "ece"),
    Claim("Dark Side §4, Tables 1–3", "focal loss lowers refinement AUROC against CE",
          ("loss", "focal"), ("loss", "ce"), "refinement_auroc"),
    Claim("Rethinking §4, Table 2", "after TS, focal loss has a higher ECE than CE "
          "(regularised losses are less calibratable)", ("loss", "ce"), ("loss", "focal"),
          "ece", "ts"),
    Claim("MaC-Cal §5, Table 1", "MaC-Cal has a lower test ECE than CE",
          ("stage2", "maccal"), ("loss", "ce"), "ece"),
    Claim("MaC-Cal §5, Table 1", "MaC-Cal keeps CE's accuracy (within 1 point: the 95 % CI "
          "of the drop lies above −1)",
          ("stage2", "maccal"), ("loss", "ce"), "accuracy", lower=False, premise=None),
    Claim("MaC-Cal §4.2, Table 5", "MaC-Cal has a lower test ECE than its head retrained "
          "without a mask (the control: the same head, data and schedule, q = 1)",
          ("stage2", "maccal"), ("stage2", NO_MASK), "ece"),
    Claim("Neural Clamping §4, Table 2", "Neural Clamping has a lower test ECE than TS",
          ("posthoc", "neural-clamping"), ("posthoc", "ts"), "ece"),
    Claim("Neural Clamping §3, Table 2", "Neural Clamping has a lower test ECE than its "
          "temperature alone (the control: the same focal-loss fit without δ)",
          ("posthoc", "neural-clamping"), ("posthoc", NO_DELTA), "ece"),
)  # fmt: skip


#: the metrics the claims test: every run stores their bootstrap replicates
NESTED_METRICS = tuple(sorted({c.metric for c in CLAIMS}))


@dataclass(frozen=True)
class NetworkClaim:
    """A claim about post-hoc calibration over many networks trained elsewhere: the
    ``better`` (split, calibrator name) against the ``other`` on ``metric``, paired over the
    networks that ``given`` names ("logits": networks given as logits files; "checkpoint":
    pretrained networks), each network's value its mean over seeds."""

    paper: str
    text: str
    better: tuple[str, str]
    other: tuple[str, str]
    metric: str
    given: str
    lower: bool = True
    premise: Premise | None = None


NETWORK_CLAIMS = (
    NetworkClaim("Kull et al. 2019 §5, Tables 3–4", "Dir-ODIR has a lower classwise ECE than TS",
                 ("test", "dir-odir"), ("test", "ts"), "classwise_ece", "logits"),
    NetworkClaim("Kull et al. 2019 §5, Tables 3–4", "MS-ODIR has a lower classwise ECE than TS",
                 ("test", "ms-odir"), ("test", "ts"), "classwise_ece", "logits"),
    NetworkClaim("Dark Side §4.3 (shift)", "the networks' ECE is higher on the JPEG versions of "
                 "the test images than on the byte-exact images", ("cifar10_exact", "uncalibrated"),
                 ("cifar10_exact_jpeg", "uncalibrated"), "ece", "checkpoint"),
)  # fmt: skip


def _network_names(claim: NetworkClaim) -> tuple[str, str]:
    """The sides' calibrators, or their splits where the calibrators are the same."""
    i = 0 if claim.better[1] == claim.other[1] else 1
    return claim.better[i], claim.other[i]


def network_verdicts(res: Results, claim: NetworkClaim) -> list[list[str]]:
    """The table rows of ``claim``: over every network it concerns and, for networks given
    as logits files with both kinds present, over those with 10 classes or fewer and those
    with more (Kull et al.'s grid behaves differently at 100 classes; docs/real.md). A group
    with fewer than 2 networks, or lacking a side, gives no row."""
    from ._given import given_by, n_classes

    columns = [c for c in res.columns if given_by(res, c) == claim.given]
    groups = [("", columns)]
    if claim.given == "logits":
        provenance = res.store.provenance()
        few = [c for c in columns if n_classes(res, c, provenance) <= 10]
        many = [c for c in columns if c not in few]
        if len(few) >= 2 and len(many) >= 2:
            groups += [(" with 10 classes or fewer", few), (" with more than 10 classes", many)]
    return [row for label, cols in groups if (row := _network_row(res, claim, cols, label))]


def _network_row(res: Results, claim: NetworkClaim, columns: list, label: str) -> list[str] | None:
    from ._given import network_mean

    sides, specs = [], []
    for split, name in (claim.better, claim.other):
        cal = name if name == "uncalibrated" else res.calibrator(name)
        specs.append(cal)
        values = (
            {}
            if cal is None
            else {i: network_mean(res, c, split, cal, claim.metric) for i, c in enumerate(columns)}
        )
        sides.append({i: v for i, v in values.items() if math.isfinite(v)})
    a, b = sides
    shared = set(a) & set(b)
    if len(shared) < 2:
        return None
    result, detail = judge(
        claim,
        {i: a[i] for i in shared},
        {i: b[i] for i in shared},
        "networks",
        names=_network_names(claim),
    )
    kind = "logits files" if claim.given == "logits" else "pretrained"
    where = f"{len(shared)} networks{label} ({kind})"
    spelled = [
        s
        for s, (_, name) in zip(specs, (claim.better, claim.other), strict=True)
        if s not in (None, name, "uncalibrated")
    ]
    if spelled:
        where += "; " + ", ".join(f"`{s}`" for s in spelled)
    return [
        claim.paper,
        claim.text,
        where,
        "none",
        Strong(f"**{result}**") if result == "holds" else result,
        detail,
    ]


def _method(res: Results, column: tuple[str, str], side: tuple[str, str]) -> str | None:
    """The method of ``column`` that trains ``side`` (see the module docstring)."""
    kind, name = side
    if kind == "posthoc":
        return res.baseline
    # a stage-2 side: "maccal", or "maccal:q0=1.0,...", exactly those settings (a loss side
    # is a loss name, which the post-hoc registry must not read)
    base, given = spelled(name) if kind == "stage2" else (name, {})
    best: tuple[int, str] | None = None
    for r in res.runs.values():
        spec = r["spec"]
        if (r["dataset"], r["model"]) != column or spec.get("mixup"):
            continue
        stage2, loss = spec.get("stage2"), spec.get("loss", "ce")
        if kind == "loss":
            if stage2 is not None or res.short(loss) != name or (name == "ce" and loss != name):
                continue
            rank = (0 if r["method"] == res.baseline else 1, r["method"])
        elif kind == "stage2" and stage2 and res.short(loss) == "ce":
            if res.short(stage2) != base:
                continue
            incidental = posthoc.REGISTRY.factory(base).incidental_settings
            chosen = {k: v for k, v in res.settings(stage2).items() if k not in incidental}
            if given and chosen != given:
                continue
            rank = (len(chosen), r["method"])
        else:
            continue
        best = rank if best is None or rank < best else best
    return None if best is None else best[1]


def mask_note(res: Results, column: tuple[str, str], method: str) -> str:
    """What MaC-Cal's mask did in ``method``'s runs of ``column`` (issue 68), by the fit
    report's own rules (:func:`~calibkit.posthoc.internal.mask_stopped`,
    :func:`~calibkit.posthoc.internal.mask_unsettled`): where q_t sat at 1 for the second
    half of stage 2, nothing was masked from then on, and a change against CE is the
    refitted head's, not the mask's; where q_t moved by its whole clip at every epoch of
    that half, Eq. 12 never settled. Empty where no run stored its q_t."""
    stopped, unsettled, runs = [], 0, 0
    for k, r in res.runs.items():
        if r["method"] != method or (r["dataset"], r["model"]) != column:
            continue
        history = res.store.history(k, stage=2)
        if not history or "q" not in history[0]:
            continue
        runs += 1
        s = posthoc.create(r["spec"]["stage2"]).checked()
        why = mask_stopped(history, s)
        if why:
            stopped.append(why)
        unsettled += mask_unsettled(history, s) is not None
    if not runs:
        return ""
    never = (
        f"; q_t never settled (moved by its whole clip at every epoch of the second half) in "
        f"{unsettled} of {runs} runs"
        if unsettled
        else ""
    )
    if not stopped:
        return (
            f"; the mask acted: q_t still moved in the second half of stage 2 in {runs} runs"
            + never
        )
    head = all(w.startswith("q reached 1") for w in stopped)
    return (
        f"; the mask stopped acting in {len(stopped)} of {runs} runs ("
        + "; ".join(sorted(set(stopped)))
        + ")"
        + (", so the change is the refitted head's, not the mask's" if head else "")
        + never
    )


def _side(res: Results, column, side, claim: Claim) -> tuple[dict[int, float], dict]:
    """The side's test values by seed, and its stored bootstrap replicates by seed."""
    method = _method(res, column, side)
    if method is None:
        return {}, {}
    cal = claim.calibrator
    if side[0] == "posthoc":  # the sweep's spec of that calibrator, settings and all
        cal = res.calibrator(side[1])
        if cal is None:
            return {}, {}
    return (
        res.by_seed(method, column, "test", cal, ALL, claim.metric),
        res.replicates(method, column, cal, claim.metric),
    )


def nested_p(
    reps_a: dict[int, list[float]], reps_b: dict[int, list[float]]
) -> tuple[float, int, int] | None:
    """(two-sided p-value, seeds, replicates) of the nested bootstrap: replicate b's
    difference a − b averaged over the seeds both sides have; None without paired
    replicates. With B replicates a p-value below 2/B reads 0."""
    seeds = sorted(set(reps_a) & set(reps_b))
    if not seeds or len({len(reps_a[s]) for s in seeds} | {len(reps_b[s]) for s in seeds}) != 1:
        return None
    d = np.mean([np.subtract(reps_a[s], reps_b[s]) for s in seeds], axis=0)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None
    p = min(1.0, 2 * min(float(np.mean(d <= 0)), float(np.mean(d >= 0))))
    return p, len(seeds), d.size


#: a "keeps accuracy" claim holds when the 95 % interval of the accuracy difference lies
#: above minus this margin (a fraction: 1 accuracy point). Not finding a significant drop
#: is not evidence of none (2 seeds and p = 0.5 show nothing): it is a non-inferiority claim.
NONINFERIORITY_MARGIN = 0.01


def _kept(ci: tuple[float, float] | None, numbers: str) -> tuple[str, str]:
    """The verdict of a non-inferiority claim from the paired 95 % interval of a − b."""
    m = NONINFERIORITY_MARGIN
    if ci is None:
        return INCONCLUSIVE, f"{numbers}: no interval over paired seeds to judge a drop by"
    if ci[0] > -m:
        return "holds", f"{numbers}: the interval lies above −{100 * m:g} point (the margin)"
    if ci[1] < -m:
        return "does not hold", f"{numbers}: the drop exceeds the {100 * m:g}-point margin"
    return INCONCLUSIVE, f"{numbers}: the interval reaches below −{100 * m:g} point (the margin)"


def judge(
    claim: Claim | NetworkClaim,
    a: dict[int, float],
    b: dict[int, float],
    unit: str = "seeds",
    nested: tuple[dict, dict] | None = None,
    names: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """(verdict, numbers and tests) for the claimed-better values ``a`` against ``b``,
    paired over ``unit`` (seeds, or networks); ``nested``: both sides' bootstrap replicates
    over test rows by seed, for the second test (:data:`NESTED`); ``names``: the two sides'
    names, printed before their means (the claimed-better side always first)."""
    from ._results import compare

    if len(a) < 2 or len(b) < 2:
        return NOT_TESTABLE, f"{len(a)} and {len(b)} {unit}; needs 2 or more on each side"
    scale = 100.0
    shared = sorted(set(a) & set(b))
    paired = set(a) == set(b)
    diffs = [a[s] - b[s] for s in shared] if paired else []
    mean_a, mean_b = statistics.mean(a.values()), statistics.mean(b.values())
    diff = mean_a - mean_b
    na, nb = (f"{n} " for n in names) if names else ("", "")
    numbers = (
        f"{na}{mean_a * scale:.2f} vs {nb}{mean_b * scale:.2f} (difference {diff * scale:+.2f}"
    )
    ci = None
    if paired and len(diffs) > 1 and statistics.stdev(diffs) > 0:
        half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
        ci = (diff - half, diff + half)
        numbers += f", 95 % CI [{ci[0] * scale:+.2f}, {ci[1] * scale:+.2f}]"
    test = compare(a, b)
    if test is None:
        return "does not hold", numbers + "); the two sides are identical"
    p, name = test
    count = len(shared) if paired else f"{len(a)}+{len(b)}"
    numbers += f"; {name} over {unit}, n = {count}, p = {p:.3g}"
    rows = None if nested is None else nested_p(*nested)
    q = 1.0 if rows is None else rows[0]
    if rows is not None:
        shown = f"< {2 / rows[2]:.2g}" if q == 0 else f"= {q:.3g}"
        numbers += f"; {NESTED} in {rows[1]} seeds, p {shown}"
    numbers += ")"
    right = diff < 0 if claim.lower else diff > 0
    if claim.metric == "accuracy" and not claim.lower:  # a "keeps" claim: non-inferiority
        return _kept(ci, numbers)
    if right and p < 0.05:
        return "holds", numbers
    if right and q < 0.05:
        return HOLDS_HERE, f"{numbers}: significant on these networks' test rows, not over {unit}"
    if right:
        return INCONCLUSIVE, f"{numbers}: the claimed direction, not significant"
    significant = p < 0.05 or q < 0.05
    return "does not hold", f"{numbers}: the opposite direction" + (
        "" if significant else ", not significant"
    )


def check_premise(
    res: Results, column: tuple[str, str], premise: Premise
) -> tuple[bool | None, str]:
    """(whether ``premise`` holds in ``column``: None where it cannot be measured, the
    numbers). Only :data:`OVERCONFIDENT` exists: CE's TS temperature and test ECE."""
    assert premise is OVERCONFIDENT, premise
    ce = _method(res, column, ("loss", "ce"))
    ts = res.reference()
    if ce is None or ts is None:
        missing = "no plain CE runs" if ce is None else "no TS fit (add ts to posthoc)"
        return None, f"not measured: the sweep has {missing}"
    temps = res.by_seed(ce, column, "test", ts, ALL, "temperature")
    before = res.by_seed(ce, column, "test", "uncalibrated", ALL, "ece")
    after = res.by_seed(ce, column, "test", ts, ALL, "ece")
    if not temps or not before or not after:
        return None, "not measured: CE's runs have no TS temperature or ECE"
    insane = {k: t for k, t in temps.items() if not SANE_TEMPERATURE[0] <= t <= SANE_TEMPERATURE[1]}
    seeds = ", ".join(f"{temps[k]:.2f}" for k in sorted(temps))
    if insane:
        return None, f"not measured: CE's TS fit ran to T = {seeds} (outside {SANE_TEMPERATURE})"
    t = statistics.mean(temps.values())
    e0, e1 = statistics.mean(before.values()) * 100, statistics.mean(after.values()) * 100
    numbers = f"T = {t:.2f} (seeds {seeds}), CE's ECE {e0:.2f} → {e1:.2f} after TS"
    if t < 1:
        return False, f"CE is under-confident: {numbers}"
    if min(temps.values()) < OVERCONFIDENT_T:
        return False, f"CE is not over-confident in every seed (T < {OVERCONFIDENT_T}): {numbers}"
    if any(after[k] >= before[k] for k in after if k in before):
        return False, f"TS does not lower CE's ECE in every seed: {numbers}"
    return True, f"CE is over-confident: {numbers}"


def _name(res: Results, column: tuple[str, str], side: tuple[str, str]) -> str:
    """What a side is called in a verdict: the post-hoc method, or the training method."""
    return side[1] if side[0] == "posthoc" else _method(res, column, side) or side[1]


def verdict(res: Results, claim: Claim, column: tuple[str, str]) -> tuple[str, str, str]:
    """(premise, verdict, numbers and test) of ``claim`` in ``column``."""
    a, reps_a = _side(res, column, claim.better, claim)
    b, reps_b = _side(res, column, claim.other, claim)
    names = (_name(res, column, claim.better), _name(res, column, claim.other))
    verdict, detail = judge(claim, a, b, nested=(reps_a, reps_b), names=names)
    if claim.better == ("stage2", "maccal") and (method := _method(res, column, claim.better)):
        detail += mask_note(res, column, method)
    if claim.premise is None:
        return "none", verdict, detail
    holds, premise = check_premise(res, column, claim.premise)
    if holds:
        return f"holds: {premise}", verdict, detail
    shown = premise if holds is None else f"fails: {premise}"
    return (
        shown,
        NOT_TESTABLE_HERE,
        f"for the record: {detail}",  # the premise has its own column
    )


def verdict_table(res: Results) -> list[list[str]]:
    """The verdicts as table rows (header first), each with its premise."""

    rows = [["paper", "claim", "dataset / model", "premise", "verdict", "numbers (%) and test"]]
    for claim in CLAIMS:
        for column in res.columns:
            if not _has_sides(res, claim, column):
                continue
            premise, result, detail = verdict(res, claim, column)
            rows.append(
                [
                    claim.paper,
                    claim.text,
                    f"{res.short(column[0])} / {column[1]}",
                    premise,
                    Strong(f"**{result}**") if result == "holds" else result,
                    detail,
                ]
            )
    rows += [row for claim in NETWORK_CLAIMS for row in network_verdicts(res, claim)]
    return rows


def _has_sides(res: Results, claim: Claim, column: tuple[str, str]) -> bool:
    """Whether ``column`` has runs of both sides of ``claim`` (a column without, e.g. a
    network given by its logits for a claim about training losses, gets no line)."""
    return all(
        _method(res, column, side) is not None
        and (
            side[0] != "posthoc"
            or res.by_seed(res.baseline, column, "test", res.calibrator(side[1]) or "", ALL, "ece")
        )
        for side in (claim.better, claim.other)
    )


#: what each of a verdict's two p-values answers, for the report's Verdicts caption
TESTS_TEXT = (
    "A verdict can show two p-values, and they answer different questions. The t-test over "
    "seeds (or networks) asks whether the difference would hold for networks trained again "
    "with new seeds: the papers' claim, and the one 'holds' needs. The "
    f"{NESTED} asks whether it holds on the test images of these very networks: "
    f"significant there and not over seeds reads '{HOLDS_HERE}'."
)


def premises_text() -> str:
    """One line per premise the claims use: what it is and how it is measured."""
    used = {c.premise for c in CLAIMS if c.premise is not None}
    return " ".join(f"Premise '{p.text}': {p.how}." for p in sorted(used, key=lambda p: p.text))
