"""Bench specs: one YAML file → the list of runs it means, validated before anything runs.

A spec (the ``default`` preset is ``calibkit/bench/presets/default.yaml``)::

    name: my-sweep
    seeds: [1, 2, 3]
    train: {epochs: 30, batch_size: 128, lr: 0.1, schedule: cifar}
    datasets:
      - data: cifar10:root=~/data         # any dataset spec
        models: [resnet110, wrn-26-10]
        splits: [cifar10.1:root=~/data, svhn:root=~/data]   # shift and OOD evaluation
      - data: cifar10:root=~/data         # a pretrained network: evaluated, not trained
        models: [{model: resnet20, checkpoint: resnet20.th}]
        methods: [CE]                      # this entry's methods (default: all)
      - logits: zoo/*.npz                  # networks given by logits files, split per seed
    methods:                               # training methods
      - {name: CE, loss: ce}
      - {name: Focal, loss: focal:gamma=3}
      - {name: Mixup, loss: ce, mixup: 0.2}
      - {name: MaC-Cal, loss: ce, stage2: maccal}   # stage 2: any calibration method
      - {name: CE+NC, loss: ce, posthoc: [neural-clamping]}   # post-hoc for this method only
    baseline: CE                           # what every test compares with (default: first)
    posthoc: [ts, ts-grid, hist-binning, dir-odir, neural-clamping]
    calibration_sizes: [all, 100]          # Rethinking Fig. 3
    record: true                           # learned epochs and gradient norms

A run is one (dataset, model, method, seed); post-hoc methods and calibration sizes are
evaluated inside it. Networks trained elsewhere come as checkpoints or logits files; an
entry's ``methods``, ``posthoc`` and ``seeds`` narrow or extend the spec's lists
(docs/bench.md). ``stage2`` is any registered method fitted on the stage-1 run (MaC-Cal's
head retraining, or another); a method's unset ``seed`` is the run's. Every name and value
is checked first, and an error names its place (``spec.yaml:14: methods[1].loss: ...``).
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any

import yaml

from .. import data, losses, models, posthoc
from .._registry import Registry, Spec
from .._settings import declarations
from ..io import load_split
from ..models import CheckpointError
from ..models.internal import checkpoint_file
from ..posthoc.internal import check_fit_data
from ..training import TrainConfig
from ..training.internal import SCHEDULES
from ._runspec import BenchSpec, RunSpec
from ._sections import TRAIN_KEYS, DatasetEntry, MethodEntry, SpecFile, keys

PRESETS = Path(__file__).parent / "presets"
#: training options that enter a run's settings (and so its key) only where a spec gives
#: them, so that the runs of specs written before they existed keep their keys
LATER_TRAIN_KEYS = ("grad_clip",)
#: the keys of the top level, of one ``methods`` entry and of one ``datasets`` entry, each
#: declared once in :mod:`calibkit.bench._sections`
TOP_KEYS = keys(SpecFile)
METHOD_KEYS = keys(MethodEntry)
ENTRY_KEYS = keys(DatasetEntry)


class SpecError(ValueError):
    """A spec that cannot run, with its place in the file (one line)."""


class _Lines:
    """Line numbers (1-based) of every value in a YAML document, by path."""

    def __init__(self, source: str) -> None:
        self.source, self.at, self.values = source, {}, 0

    def where(self, path: str) -> str:
        line = self.at.get(path)
        return f"{self.source}:{line}: {path}" if line else f"{self.source}: {path}"


#: the most values a spec may expand to: YAML aliases can make a few lines mean billions
#: (an "alias bomb"); a real sweep has hundreds
MAX_VALUES = 100_000


#: the deepest a spec may nest: a real one nests four or five levels
MAX_DEPTH = 50


class Yaml12(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's core schema for plain scalars: ``true``/``false``
    are the only booleans (``yes``, ``on``, ``n`` stay text), integers are decimal, ``0o``
    octal or ``0x`` hexadecimal (``1:30`` is the text "1:30", not YAML 1.1's sexagesimal
    90; ``010`` is 10, not 8), floats are decimal with an optional exponent, ``.inf`` or
    ``.nan``. A value that needs another type is then refused by the spec's own checks."""


Yaml12.yaml_implicit_resolvers = {
    first: [
        (tag, rx) for tag, rx in resolvers if tag.rsplit(":", 1)[-1] not in ("bool", "int", "float")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
):
    Yaml12.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first))


def _int12(loader: Yaml12, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


Yaml12.add_constructor("tag:yaml.org,2002:int", _int12)
Yaml12.add_constructor(
    "tag:yaml.org,2002:bool", lambda loader, node: loader.construct_scalar(node).lower() == "true"
)


def _plain(node: yaml.Node, path: str, lines: _Lines, loader: Yaml12, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise SpecError(
            f"{lines.where(path.split('[')[0] or '(top)')}: nested deeper than {MAX_DEPTH} "
            "levels (a YAML "
            "alias that contains itself?); write it out"
        )
    lines.at[path or "(top)"] = node.start_mark.line + 1
    lines.values += 1
    if lines.values > MAX_VALUES:
        raise SpecError(
            f"{lines.source}: the spec expands to more than {MAX_VALUES:,} values "
            "(nested YAML aliases?); write it out"
        )
    if isinstance(node, yaml.MappingNode):
        out = {}
        merged: dict[str, Any] = {}
        for k, v in node.value:
            if k.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys, unless given
                for source in v.value if isinstance(v, yaml.SequenceNode) else [v]:
                    if not isinstance(source, yaml.MappingNode):
                        raise _fail(lines, path or "(top)", "`<<` merges mappings only")
                    merged = _plain(source, path, lines, loader, depth + 1) | merged
                continue
            key = str(loader.construct_object(k, deep=True))
            sub = f"{path}.{key}" if path else key
            lines.at[sub] = k.start_mark.line + 1
            if key in out:
                raise _fail(lines, sub, "this key is given twice in one mapping")
            out[key] = _plain(v, sub, lines, loader, depth + 1)
            lines.at[sub] = k.start_mark.line + 1
        return merged | out
    if isinstance(node, yaml.SequenceNode):
        return [
            _plain(v, f"{path}[{i}]", lines, loader, depth + 1) for i, v in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)


def presets() -> list[dict[str, Any]]:
    """Every preset that ships, by name: what it runs (its ``about``), how long it took when
    last run (its ``measured``), and its run count, or why it cannot be read here (a
    preset of real data needs ../shared/data beside the working folder)."""
    rows = []
    for path in sorted(PRESETS.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        row = {"name": path.stem} | {k: raw.get(k, "") for k in ("about", "measured")}
        try:
            row |= {"runs": len(load_spec(path).runs), "unreadable": None}
        except SpecError as err:
            row |= {"runs": None, "unreadable": str(err)}
        rows.append(row)
    return rows


def load_spec(source: str | Path) -> BenchSpec:
    """Read and validate a spec file, or a preset by name (``default``, ``paper-cifar``).

    Examples
    --------
    >>> from calibkit.bench import load_spec, run_bench, write_report
    >>> tmp = getfixture("tmp_path")
    >>> _ = (tmp / "sweep.yaml").write_text('''
    ... name: tiny
    ... seeds: [1]
    ... train: {epochs: 2, batch_size: 64, lr: 0.05, schedule: constant}
    ... datasets: [{data: "digits:train_size=200", models: [mlp]}]
    ... methods: [{name: CE, loss: ce}, {name: Focal, loss: "focal:gamma=3"}]
    ... posthoc: [ts]
    ... ''')
    >>> spec = load_spec(tmp / "sweep.yaml")
    >>> spec.name, len(spec.runs), spec.methods, spec.baseline
    ('tiny', 2, ['CE', 'Focal'], 'CE')
    >>> len(load_spec("default").runs)  # a preset (calibkit presets lists them)
    90
    >>> _ = (tmp / "bad.yaml").write_text("seeds: [1, 1]")
    >>> load_spec(tmp / "bad.yaml")
    Traceback (most recent call last):
    ...
    calibkit.bench._spec.SpecError: bad.yaml:1: seeds[1]: 1 is listed twice
    """
    path = Path(source)
    if not path.exists() and (PRESETS / f"{source}.yaml").exists():
        path = PRESETS / f"{source}.yaml"
    if not path.exists():
        names = ", ".join(p.stem for p in sorted(PRESETS.glob("*.yaml")))
        raise SpecError(f"{source}: no such spec file or preset (presets: {names})")
    if path.is_dir():
        raise SpecError(f"{path}: is a folder; pass a YAML spec file or a preset name")
    try:
        loader = Yaml12(path.read_text(encoding="utf-8"))
        node = loader.get_single_node()
    except RecursionError:
        raise SpecError(f"{path}: nested too deep to read (over {MAX_DEPTH} levels)") from None
    except UnicodeDecodeError as err:
        raise SpecError(f"{path}: not a text file (undecodable byte at {err.start})") from None
    except OSError as err:
        raise SpecError(f"{path}: cannot read ({err.strerror})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SpecError(f"{where}: not valid YAML ({getattr(err, 'problem', err)})") from None
    lines = _Lines(path.name)
    try:
        raw = _plain(node, "", lines, loader) if node is not None else None
    except yaml.YAMLError as err:  # a value YAML cannot build (an unknown tag, ...)
        raise SpecError(f"{path}: not valid YAML ({getattr(err, 'problem', err)})") from None
    return resolve(raw, lines)


def _fail(lines: _Lines, path: str, message: str) -> SpecError:
    return SpecError(f"{lines.where(path)}: {message}")


def _declared_check(section: type, key: str, value: Any, lines: _Lines, where: str) -> Any:
    """``value`` of ``key`` checked against its declaration in ``section``, its error at
    ``where``."""
    try:
        return declarations(section)[key].check(value)
    except ValueError as err:  # "key[i]: ..." names an item: its place is where[i]
        head, _, message = str(err).partition(": ")
        raise _fail(lines, where + head.removeprefix(key), message) from None


def _checked(registry: Registry, spec: Any, lines: _Lines, path: str) -> Spec:
    """A registry spec checked by signature (nothing is built, no data is read), parsed:
    what the run carries (its text, canonical, is the same for two spellings of a setting,
    so they make one run key)."""
    if not isinstance(spec, str):
        raise _fail(lines, path, f"expected a spec string such as 'name:key=value', got {spec!r}")
    try:
        return registry.check(spec)
    except (ValueError, TypeError) as err:
        raise _fail(lines, path, str(err).splitlines()[0]) from None


def _check_data(spec: Any, lines: _Lines, path: str) -> Spec:
    """A dataset spec checked as far as it can be without loading files: by signature, its
    ``root`` folder present, and a dataset without files (digits, the Gaussian toy) built,
    which is cheap and runs its own checks of every value."""
    parsed = _checked(data.REGISTRY, spec, lines, path)
    root = parsed.kwargs.get("root")
    try:
        if root is not None and not Path(str(root)).expanduser().exists():
            raise ValueError(f"root: {root} does not exist")
        if "root" not in data.REGISTRY.parameters(parsed.name):
            data.create(parsed)
    except (ValueError, TypeError) as err:
        raise _fail(lines, path, str(err).splitlines()[0]) from None
    return parsed


def _list(raw: dict, key: str, lines: _Lines, default: Any = None, at: str = "") -> list:
    path = f"{at}.{key}" if at else key
    value = raw.get(key, default)
    if value is None:
        raise _fail(lines, path, "missing; expected a list")
    if not isinstance(value, list) or not value:
        raise _fail(lines, path, f"expected a non-empty list, got {value!r}")
    return value


def resolve(raw: Any, lines: _Lines | None = None) -> BenchSpec:
    """Validate a parsed spec completely and expand it into runs."""
    lines = lines or _Lines("spec")
    if not isinstance(raw, dict):
        raise _fail(lines, "(top)", "expected a mapping with datasets, methods, ...")
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise _fail(lines, unknown[0], f"unknown key; valid: {', '.join(TOP_KEYS)}")
    seeds = _declared_check(SpecFile, "seeds", raw.get("seeds", [0]), lines, "seeds")
    train = raw.get("train", {})
    if not isinstance(train, dict):
        raise _fail(lines, "train", f"expected a mapping such as {{epochs: 30}}, got {train!r}")
    train = dict(train)
    for k in train:
        if k not in TRAIN_KEYS:
            raise _fail(
                lines, f"train.{k}", f"unknown training option; valid: {', '.join(TRAIN_KEYS)}"
            )
    # each key by its declaration on TrainConfig, the schedule by its registry: no whole
    # config is built, so nothing the sweep does not name (a default dataset, model or
    # device) is checked here (issue 67 §4)
    for k, v in train.items():
        train[k] = _declared_check(TrainConfig, k, v, lines, f"train.{k}")
    if "schedule" in train:
        _checked(SCHEDULES, train["schedule"], lines, "train.schedule")
    defaults = TrainConfig()
    train = {
        k: train.get(k, getattr(defaults, k))
        for k in TRAIN_KEYS
        if k in train or k not in LATER_TRAIN_KEYS
    }
    post = _specs(raw, "posthoc", lines)
    sizes = _declared_check(
        SpecFile,
        "calibration_sizes",
        raw.get("calibration_sizes", ["all"]),
        lines,
        "calibration_sizes",
    )
    record = _declared_check(SpecFile, "record", raw.get("record", False), lines, "record")
    methods = []
    names: set[str] = set()
    for i, m in enumerate(_list(raw, "methods", lines)):
        methods.append(_check_method(m, lines, f"methods[{i}]", names))
        twice = sorted(set(methods[-1]["posthoc"]) & set(post), key=str)
        if twice:
            raise _fail(lines, f"methods[{i}].posthoc", f"{twice[0]} is in the spec's posthoc list")
    runs, where = [], {}
    for i, d in enumerate(_list(raw, "datasets", lines)):
        for run in _entry_runs(
            d, lines, f"datasets[{i}]", methods, seeds, train, post, sizes, record
        ):
            if run.key in where:
                what = f"{run.model} on {run.dataset} (method {run.method}, seed {run.seed})"
                raise _fail(lines, f"datasets[{i}]", f"{what} is also in {where[run.key]}")
            where[run.key] = f"datasets[{i}]"
            runs.append(run)
    order = [m["name"] for m in methods]
    baseline = _declared_check(SpecFile, "baseline", raw.get("baseline"), lines, "baseline")
    baseline = order[0] if baseline is None else baseline  # none (null or absent): the first
    if baseline not in order:
        raise _fail(
            lines, "baseline", f"{baseline!r} is not a method name; one of: " + ", ".join(order)
        )
    name = _declared_check(SpecFile, "name", raw.get("name", "bench"), lines, "name")
    about = _declared_check(SpecFile, "about", raw.get("about", ""), lines, "about")
    _declared_check(SpecFile, "measured", raw.get("measured", ""), lines, "measured")
    return BenchSpec(name, runs, lines.source, order, baseline, about)


def _specs(raw: dict, key: str, lines: _Lines, at: str = "") -> list[Spec]:
    """A list of post-hoc specs (may be absent or empty), each checked, none twice."""
    path = f"{at}.{key}" if at else key
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise _fail(lines, path, f"expected a list of post-hoc specs, got {value!r}")
    specs = [_checked(posthoc.REGISTRY, p, lines, f"{path}[{i}]") for i, p in enumerate(value)]
    for i, spec in enumerate(specs):
        if spec in specs[:i]:
            raise _fail(lines, f"{path}[{i}]", f"{spec} is listed twice")
    return specs


def _logits_files(pattern: Any, lines: _Lines, where: str) -> list[str]:
    """The logits files an entry names (a path or a glob), each checked readable now."""
    if not isinstance(pattern, str) or not pattern:
        raise _fail(lines, where, f"expected a path or glob of logits files, got {pattern!r}")
    found = sorted(glob.glob(str(Path(pattern).expanduser())))
    if not found:
        raise _fail(lines, where, f"no file matches {pattern!r}")
    for f in found:
        try:  # the check every run's fit makes, so that a bad file fails here, not later
            check_fit_data(*load_split(f, "test"))
        except (ValueError, TypeError) as err:
            raise _fail(lines, where, f"{f}: {str(err).splitlines()[0]}") from None
    return found


def _network(model: Any, lines: _Lines, where: str) -> tuple[Spec, str | None]:
    """(model spec, checkpoint or None) of one ``models`` item: a spec string, or a mapping
    ``{model: SPEC, checkpoint: FILE}`` for a pretrained network."""
    if isinstance(model, dict):
        bad = sorted(set(model) - {"model", "checkpoint"})
        if bad or "model" not in model or "checkpoint" not in model:
            raise _fail(lines, where, "expected a model spec or {model: SPEC, checkpoint: FILE}")
        path = model["checkpoint"]
        if not isinstance(path, str):
            raise _fail(lines, f"{where}.checkpoint", f"expected a file name, got {path!r}")
        try:
            checked = checkpoint_file(path)
        except CheckpointError as err:
            raise _fail(lines, f"{where}.checkpoint", str(err)) from None
        spec = _checked(models.REGISTRY, model["model"], lines, f"{where}.model")
        return spec, str(checked)
    return _checked(models.REGISTRY, model, lines, where), None


def _entry_runs(
    d: Any,
    lines: _Lines,
    where: str,
    methods: list[dict[str, Any]],
    seeds: list[int],
    train: dict[str, Any],
    post: list[str],
    sizes: list[int | None],
    record: bool,
) -> list[RunSpec]:
    """The runs of one ``datasets`` entry: its networks × its methods × its seeds."""
    if not isinstance(d, dict) or ("data" in d) == ("logits" in d):
        raise _fail(lines, where, "expected a mapping with either 'data' and 'models' or 'logits'")
    bad = sorted(set(d) - set(ENTRY_KEYS))
    if bad:
        raise _fail(lines, f"{where}.{bad[0]}", f"unknown key; valid: {', '.join(ENTRY_KEYS)}")
    if "seeds" in d:
        seeds = _declared_check(DatasetEntry, "seeds", d["seeds"], lines, f"{where}.seeds")
    names = [m["name"] for m in methods]
    chosen = d.get("methods", names)
    if not isinstance(chosen, list) or not chosen or any(n not in names for n in chosen):
        raise _fail(lines, f"{where}.methods", f"expected a list of method names among {names}")
    extra = _specs(d, "posthoc", lines, where)
    twice = sorted(set(extra) & set(post), key=str)
    if twice:
        raise _fail(lines, f"{where}.posthoc", f"{twice[0]} is in the spec's posthoc list")
    if "logits" in d:
        for key in ("models", "splits"):
            if key in d:
                raise _fail(lines, f"{where}.{key}", "a logits entry has no models or splits")
        fraction = _declared_check(
            DatasetEntry,
            "calibration_fraction",
            d.get("calibration_fraction", 0.5),
            lines,
            f"{where}.calibration_fraction",
        )
        networks = [(f, None) for f in _logits_files(d["logits"], lines, f"{where}.logits")]
        dataset = None
    else:
        if "calibration_fraction" in d:
            raise _fail(lines, f"{where}.calibration_fraction", "belongs to a logits entry")
        dataset = _check_data(d["data"], lines, f"{where}.data")
        splits = tuple(
            _check_data(s, lines, f"{where}.splits[{j}]")
            for j, s in enumerate(d.get("splits") or [])
        )
        if "models" not in d:
            raise _fail(lines, where, "missing 'models': a list of model specs")
        networks = [
            _network(m, lines, f"{where}.models[{j}]")
            for j, m in enumerate(_list(d, "models", lines, at=where))
        ]
    runs = []
    for model, checkpoint in networks:
        given = dataset is None or checkpoint is not None
        for method in (m for m in methods if m["name"] in chosen):
            at = f"methods[{names.index(method['name'])}]"
            if given and (str(method["loss"]) != "ce" or method["mixup"]):
                raise _fail(
                    lines,
                    at,
                    f"{where} holds given networks (not trained here); "
                    f"method {method['name']!r} sets a loss or mixup",
                )
            if dataset is None and method["stage2"]:
                raise _fail(
                    lines,
                    at,
                    f"{where} holds logits files, without a network for "
                    f"stage 2 ({method['stage2']})",
                )
            for seed in seeds:
                common = dict(
                    method=method["name"],
                    loss=method["loss"],
                    mixup=method["mixup"],
                    stage2=method["stage2"],
                    seed=seed,
                    train=train,
                    posthoc=tuple(post) + tuple(extra) + method["posthoc"],
                    calibration_sizes=tuple(sizes),
                    record=record,
                )
                if dataset is None:
                    stem = Path(model).stem
                    name, _, net = stem.partition("_")
                    runs.append(
                        RunSpec(
                            dataset=Spec(name),
                            model=Spec(net or stem),
                            splits=(),
                            logits=model,
                            calibration_fraction=float(fraction),
                            **common,
                        )
                    )
                else:
                    runs.append(
                        RunSpec(
                            dataset=dataset,
                            model=model,
                            splits=splits,
                            checkpoint=checkpoint,
                            **common,
                        )
                    )
    return runs


def _check_method(m: Any, lines: _Lines, where: str, names: set[str]) -> dict[str, Any]:
    if not isinstance(m, dict):
        raise _fail(lines, where, "expected a mapping with name, loss, mixup, stage2, posthoc")
    bad = sorted(set(m) - set(METHOD_KEYS))
    if bad:
        raise _fail(lines, f"{where}.{bad[0]}", f"unknown key; valid: {', '.join(METHOD_KEYS)}")
    loss = _checked(losses.REGISTRY, m.get("loss", "ce"), lines, f"{where}.loss")
    mixup = _declared_check(MethodEntry, "mixup", m.get("mixup", 0.0), lines, f"{where}.mixup")
    stage2 = m.get("stage2")
    if stage2 is not None:
        stage2 = _checked(posthoc.REGISTRY, stage2, lines, f"{where}.stage2")
    plain = str(m.get("loss", "ce")) + (f"+mixup{mixup}" if mixup else "")
    given = _declared_check(MethodEntry, "name", m.get("name"), lines, f"{where}.name")
    name = given or plain + (f"+{stage2}" if stage2 else "")
    if name in names:
        raise _fail(lines, f"{where}.name", f"method name {name!r} is used twice")
    names.add(name)
    extra = tuple(_specs(m, "posthoc", lines, where))
    return {"name": name, "loss": loss, "mixup": float(mixup), "stage2": stage2, "posthoc": extra}
