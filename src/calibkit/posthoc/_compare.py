"""Fit several calibrators on one split and score them on another, side by side.

Methods with randomness (a ``seed`` setting: cross-validated and split-based ones) are
fitted once per seed and reported as mean ± std over seeds. Data with one split (a network's
test logits, as most published logits come) is divided into stratified calibration and test
parts, once per seed (:func:`compare_resplit`); there every method is fitted on every
seed's split and the spread is over splits. The interval of every method is the bootstrap
interval of its first seed's test metrics; its ``notes`` name every estimate of that seed, and
every mean over seeds, that lies outside it.

Every fit is checked as ``bench`` checks it (:mod:`calibkit.posthoc._anomalies`: diverged,
not converged, accuracy lost, worse ECE or NLL, ...); what it flags is kept per method and
seed, beside every seed's fit report. The default method set leaves out maps whose
parameters outnumber a tenth of the calibration rows (``MAX_PARAMETER_SHARE``): on real
CIFAR-100 networks with 5,000 calibration rows, matrix scaling lost 10–23 accuracy
points and Dir-L2 2–6.5 (issue 31.5). Named with ``methods``, they are fitted.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch

from .._metric_settings import Bootstrap, MetricBins
from .._registry import Spec, parse_spec
from .._settings import CalibrationShare, SeedCount, checks_declared
from ..metrics import evaluate
from ..metrics.internal import direction, plus_minus, shown
from . import REGISTRY, create, names
from ._anomalies import WHY_EXPECTED, CalibrationWarning, check_method
from ._base import FitDivergedError
from ._checks import check_fit_data

#: Columns of the comparison, in order (compare's own choice; the bench stores more); a
#: column whose metric has no direction (entropy: Neural Clamping's "Entropy ↑") is shown,
#: not ranked.
COLUMNS = ("accuracy", "ece", "aece", "mce", "classwise_ece", "nll", "brier", "entropy")


#: The default set leaves out a map with more parameters than this share of the rows.
MAX_PARAMETER_SHARE = 0.1


def n_parameters(spec: str, k: int) -> int | None:
    """Parameters of a method's map for K classes (:meth:`~calibkit.posthoc._base.Method.
    n_parameters`: the affine maps count theirs; None for the others)."""
    return REGISTRY.factory(parse_spec(spec).name).n_parameters(k)


def default_methods(
    rows: int | None = None, k: int | None = None, *, every: bool = False
) -> tuple[list[str], list[str]]:
    """(methods, left out): "uncalibrated", then every method on logits but the maps with
    more than ``MAX_PARAMETER_SHARE`` × ``rows`` parameters for ``k`` classes, and (unless
    ``every``) the cross-validated ones (``cross_validated``: a grid of settings fitted
    once per fold, 10-100× one fit)."""
    kept, left = ["uncalibrated"], []
    for name in names("logits"):
        count = n_parameters(name, k) if rows and k else None
        slow = REGISTRY.factory(name).cross_validated and not every
        (left if slow or (count and count > MAX_PARAMETER_SHARE * rows) else kept).append(name)
    return kept, left


def left_out_note(left: list[str], rows: int, k: int) -> str | None:
    """One line saying which methods the default set left out, and why."""
    if not left:
        return None
    by_count: dict[int, list[str]] = {}
    slow = []
    for m in left:
        count = n_parameters(m, k)
        if count and count > MAX_PARAMETER_SHARE * rows:
            by_count.setdefault(count, []).append(m)
        else:
            slow.append(m)
    parts = []
    if by_count:
        counts = "; ".join(f"{', '.join(ms)} ({n:,} parameters)" for n, ms in by_count.items())
        parts.append(
            f"{counts} for {k} classes, more than a tenth of the {rows:,} calibration rows"
        )
    if slow:
        parts.append(f"{', '.join(slow)}, cross-validated (methods='all' adds them)")
    return f"left out of the default set: {'; '.join(parts)}; name any in methods= to fit it"


def stratified_split(labels: Any, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(calibration, test) positions: ``fraction`` of every class to calibration, drawn with
    ``seed`` (scikit-learn's ``StratifiedShuffleSplit``), both sorted."""
    from sklearn.model_selection import StratifiedShuffleSplit

    if not isinstance(fraction, float | int) or not 0 < fraction < 1:
        raise ValueError(f"split: expected a fraction in (0, 1) for calibration, got {fraction!r}")
    y = np.asarray(labels)
    counts = np.bincount(y)
    if (counts == 1).any():
        k = int(np.flatnonzero(counts == 1)[0])
        raise ValueError(f"split: class {k} has one sample; a stratified split needs two per class")
    try:
        cal, test = next(
            StratifiedShuffleSplit(1, train_size=fraction, random_state=seed).split(y, y)
        )
    except ValueError as err:
        raise ValueError(f"split: {err}") from None
    return np.sort(cal), np.sort(test)


@checks_declared
def compare_methods(
    val: tuple[Any, Any],
    test: tuple[Any, Any],
    methods: list[str] | dict[str, Spec | None] | str | None = None,
    *,
    seeds: SeedCount = 1,
    bootstrap: Bootstrap = 200,
    n_bins: MetricBins = 15,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fit each method on ``val`` and score it on ``test``; methods with randomness are
    fitted once per seed (seed ``s`` of ``range(seeds)``, unless the spec sets its own, as in
    the bench). ``methods``: specs, or :func:`check_logits_methods`' result (trusted);
    None, the fast default set (every logits method but the cross-validated ones and the
    maps with more parameters than a tenth of the rows, :func:`default_methods`);
    ``"all"``, that set with the cross-validated ones.

    Returns {"methods": {method: {"metrics", "std", "intervals", "fit", "anomalies",
    "seeds"}}, "left_out": [...], "note": str | None}.
    """
    z, y = check_fit_data(*val)
    pairs = [(s, (z, y), test) for s in range(seeds)]
    return _compare(pairs, methods, False, bootstrap, n_bins, progress)


@checks_declared
def compare_resplit(
    scores: Any,
    labels: Any,
    methods: list[str] | dict[str, Spec | None] | str | None = None,
    *,
    fraction: CalibrationShare = 0.5,
    seeds: SeedCount = 5,
    bootstrap: Bootstrap = 200,
    n_bins: MetricBins = 15,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """For data with one split (test logits only): per seed, a stratified ``fraction`` of it
    calibrates and the rest tests (:func:`stratified_split`); every method is fitted on each
    seed's split, and mean ± std are over the ``seeds`` splits. Same return as
    :func:`compare_methods`."""
    z, y = check_fit_data(scores, labels)  # shapes, values and labels, before any split
    pairs = []
    for s in range(seeds):
        cal, test = (
            torch.from_numpy(i).to(z.device) for i in stratified_split(y.cpu().numpy(), fraction, s)
        )
        pairs.append((s, (z[cal], y[cal]), (z[test], y[test])))
    return _compare(pairs, methods, True, bootstrap, n_bins, progress)


def check_logits_methods(methods: list[str]) -> dict[str, Spec | None]:
    """Every spec of ``methods`` valid and a method on logits (compare fits on logits; a
    method that calibrates a network is named with the command that runs it); each once.
    Returns each spec's text with its checked :class:`~calibkit._registry.Spec` (None for
    "uncalibrated"), which :func:`compare_methods` and :func:`compare_resplit` trust."""
    twice = sorted({m for m in methods if methods.count(m) > 1})
    if twice:
        raise ValueError(f"methods: {twice[0]} is named twice; name each method once")
    checked: dict[str, Spec | None] = {}
    for m in methods:
        checked[m] = None if m == "uncalibrated" else REGISTRY.check(m)
        if checked[m] is not None and REGISTRY.factory(checked[m].name).level != "logits":
            raise ValueError(
                f"{m} calibrates a network, not logits: compare takes logits methods; use "
                f"calibkit calibrate {m} RUN_DIR"
            )
    return checked


def _compare(pairs, methods, every_seed: bool, bootstrap: int, n_bins: int, progress):
    """Each method over (seed, val, test) ``pairs``: all pairs when ``every_seed`` (splits
    differ), else only the first unless the method has randomness (one split, many seeds)."""
    rows, k = len(pairs[0][1][1]), pairs[0][1][0].shape[1]
    left: list[str] = []
    if methods is None or methods == "all":
        methods, left = default_methods(rows, k, every=methods == "all")
    checked = methods if isinstance(methods, dict) else check_logits_methods(methods)
    # the uncalibrated metrics of each test split, for the checks (one split may serve
    # several seeds: keyed by the split's object, evaluated once)
    plain: dict[int, dict[str, float]] = {}
    out: dict[str, dict[str, Any]] = {}
    for spec, method in checked.items():
        if progress:
            progress(spec)
        # fitted once per seed where it takes a seed and the spec leaves it to compare
        random = method is not None and "seed" not in method.kwargs
        random = random and "seed" in REGISTRY.parameters(method.name)
        runs = pairs if every_seed or random else pairs[:1]
        values, first, fits, found = [], None, [], []
        for s, (z_val, y_val), (z_test, y_test) in runs:
            if id(z_test) not in plain:
                plain[id(z_test)] = _metrics(_evaluate(z_test, y_test, n_bins, 0))
            cal = None
            if spec == "uncalibrated":
                scores = z_test
            else:
                cal = create(REGISTRY.seeded(method, s) if random else method)
                try:
                    with warnings.catch_warnings(record=True) as said:
                        warnings.simplefilter("always")
                        cal.fit(z_val, y_val)  # its calibration split's checks: in its report
                except FitDivergedError as err:
                    found.append({"seed": s, "kind": "diverged", "detail": str(err)})
                    continue
                # what the fit warned is flagged with the rest, not leaked as a raw warning
                found += [
                    {"seed": s, "kind": "warning", "detail": str(w.message)}
                    for w in said
                    if not issubclass(w.category, CalibrationWarning)  # the test split's, below
                ]
                scores = cal(torch.as_tensor(z_test)).double()
            r = _evaluate(scores, y_test, n_bins, bootstrap if first is None else 0)
            values.append([r[c] for c in COLUMNS])
            first = first or r
            if cal is not None:
                fits.append({"seed": s, "report": asdict(cal.fit_report_)})
                flags = _check(cal, plain[id(z_test)], r, z_test, scores)
                found += [{"seed": s, "kind": kind, "detail": detail} for kind, detail in flags]
        arr = np.array(values) if values else np.full((1, len(COLUMNS)), np.nan)
        out[spec] = {
            "metrics": dict(zip(COLUMNS, arr.mean(0).tolist(), strict=True)),
            "std": dict(zip(COLUMNS, arr.std(0, ddof=1).tolist(), strict=True))
            if len(values) > 1
            else None,
            "intervals": {c: list(first.intervals[c]) for c in COLUMNS}
            if bootstrap and first is not None
            else None,
            "notes": _interval_notes(first, arr.mean(0), len(values)) if bootstrap else [],
            "fit": fits or None,
            "anomalies": found,
            "seeds": len(values),
        }
    return {"methods": out, "left_out": left, "note": left_out_note(left, rows, k)}


def _interval_notes(first: Any, means: np.ndarray, seeds: int) -> list[str]:
    """The first seed's interval notes (an estimate outside its interval), and a note for
    each mean over seeds outside that interval."""
    if first is None:
        return []
    notes = list(first.notes)
    outside = [
        f"{c} {m:.4f} [{first.intervals[c][0]:.4f}, {first.intervals[c][1]:.4f}]"
        for c, m in zip(COLUMNS, means, strict=True)
        if not first.intervals[c][0] <= m <= first.intervals[c][1]
    ]
    if seeds > 1 and outside:
        notes.append(
            "mean over seeds outside the first seed's interval (the interval is "
            "the first seed's; the seeds' spread is the ± std): " + "; ".join(outside)
        )
    return notes


def _metrics(result: Any) -> dict[str, float]:
    return {c: result[c] for c in COLUMNS}


def _check(cal: Any, before: dict[str, float], after: Any, z_test: Any, scores: torch.Tensor):
    """The anomaly checks of ``bench`` on one fitted calibrator and test split."""
    return check_method(
        cal, before, _metrics(after), logits_before=torch.as_tensor(z_test), logits_after=scores
    )


def _evaluate(scores: Any, labels: Any, n_bins: int, bootstrap: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return evaluate(
            scores, labels, n_bins=n_bins, optimal=False, smooth=False, bootstrap=bootstrap, seed=0
        )


def anomaly_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """One line per method and kind of anomaly: 'dir-l2: accuracy on 3 of 5 seeds
    (accuracy 0.7152 → 0.6620)', the detail of its first seed."""
    lines = []
    for spec, r in results.items():
        kinds: dict[str, list[dict[str, Any]]] = {}
        for a in r.get("anomalies", []):
            kinds.setdefault(a["kind"], []).append(a)
        for kind, items in kinds.items():
            tried = r["seeds"] + sum(a["kind"] == "diverged" for a in r["anomalies"])
            lines.append(
                f"{spec}: {kind} on {len(items)} of {tried} seed{'s' * (tried != 1)} "
                f"({items[0]['detail']})"
            )
    return lines


def expected_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """What a compared method's nature does that the checks leave unflagged ('hist-binning:
    its few output probabilities ... raise NLL by design'), one line per method and kind."""
    lines = []
    for spec in results:
        name = parse_spec(spec).name
        if name not in REGISTRY:  # "uncalibrated"
            continue
        kinds = sorted(REGISTRY.factory(name).expected_anomalies & set(WHY_EXPECTED))
        lines += [f"{spec}: {WHY_EXPECTED[k]}" for k in kinds]
    return lines


def best_per_column(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The method with the best mean value in each ranked column."""
    best = {}
    results = {m: r for m, r in results.items() if r["seeds"]}
    for c in COLUMNS:
        if not direction(c):
            continue
        vals = {m: r["metrics"][c] for m, r in results.items() if not math.isnan(r["metrics"][c])}
        pick = max if direction(c) > 0 else min
        best[c] = pick(vals, key=vals.get)
    return best


def cell(result: dict[str, Any], column: str, intervals: bool = True) -> str:
    """'1.13 ± 0.04 [0.95, 1.31]' for one method and column, in the column's unit
    (``with_unit``: % for an error, nats for NLL)."""
    row = shown(column)
    scale, digits = (100, 2) if row.percent else (1, 4)
    v = result["metrics"][column]
    text = row.display(v)
    if result["std"]:
        text = plus_minus(v * scale, result["std"][column] * scale, digits)
    if intervals and result["intervals"]:
        lo, hi = result["intervals"][column]
        text += f" [{row.display(lo)}, {row.display(hi)}]"
    return text
