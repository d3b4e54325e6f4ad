"""The sections of a bench spec file, each key declared once (:mod:`calibkit._settings`):
its type, default, meaning and values. :mod:`calibkit.bench._spec` takes the keys it
accepts and the checks of plain values from here, and :func:`spec_schema` writes the spec
file's JSON Schema (``calibkit/schemas/bench-spec.schema.json``, which editors use to
check a YAML spec as it is typed; a test keeps the file equal to what this module writes).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any

from .._settings import Bounds, CalibrationShare, Declared, OneOf, Setting, declarations
from ..training import TrainConfig

#: the training settings a spec's ``train`` section takes (TrainConfig's declarations)
TRAIN_KEYS = ("epochs", "batch_size", "lr", "momentum", "weight_decay", "schedule", "grad_clip")


class AllOrRows:
    """A calibration-set size: ``all``, or a number of rows (an integer >= 2)."""

    rows = Bounds(2, 2**31, integer=True)

    def __str__(self) -> str:
        return f"'all' or {self.rows}"

    def check(self, name: str, value: Any) -> int | None:
        """None for ``all``, else the number of rows; or a one-line ``ValueError``."""
        if value == "all":
            return None
        try:
            return self.rows.check(name, value)
        except ValueError:
            raise ValueError(f"{name}: expected {self}, got {value!r}") from None

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [{"const": "all"}, _bounded({"type": "integer"}, self.rows)]}


@dataclass(frozen=True)
class Items:
    """The values a list setting takes: at least ``min_items`` items, each ``item`` (its own
    check and schema), none twice. Its errors name the item (``seeds[1]: ...``)."""

    item: Any
    min_items: int = 1

    def __str__(self) -> str:
        return f"a {'non-empty ' if self.min_items else ''}list of {self.item}, none twice"

    def check(self, name: str, value: Any) -> list[Any]:
        """The checked items, or a one-line ``ValueError`` naming the first wrong one."""
        if not isinstance(value, list) or len(value) < self.min_items:
            raise ValueError(
                f"{name}: expected {'a non-empty' if self.min_items else 'a'} list, got {value!r}"
            )
        out = [self.item.check(f"{name}[{i}]", v) for i, v in enumerate(value)]
        for i, v in enumerate(out):
            if v in out[:i]:
                raise ValueError(f"{name}[{i}]: {value[i]!r} is listed twice")
        return out

    def schema(self) -> dict[str, Any]:
        item = self.item.schema() if hasattr(self.item, "schema") else _bounded({}, self.item)
        return {"type": "array", "items": item, "minItems": self.min_items, "uniqueItems": True}


class SpecText:
    """A registry spec written as text (``name:key=value``); the registry checks the rest,
    and refuses two texts of one spec (``ts`` and ``ts:t_max=100``), which a schema cannot
    see."""

    def __str__(self) -> str:
        return "specs such as 'name:key=value'"

    def check(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{name}: expected a spec such as 'name:key=value', got {value!r}")
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}


SEEDS = Items(Bounds(0, 2**63 - 1, integer=True))
SPECS = Items(SpecText(), min_items=0)


@dataclass
class MethodEntry:
    """One entry of ``methods``: a training method."""

    name: Annotated[
        str | None, Setting("The method's name in every table; none: made from the others")
    ] = None
    loss: Annotated[str, Setting("Loss spec (calibkit.losses), e.g. focal:gamma=3")] = "ce"
    mixup: Annotated[float, Setting("Mixup alpha, 0: off", Bounds(0, 100))] = 0.0
    stage2: Annotated[
        str | None,
        Setting("A calibration method fitted on the trained network (maccal: MaC-Cal)"),
    ] = None
    posthoc: Annotated[
        list[str],
        Setting("Post-hoc methods for this method's runs only, after the spec's posthoc", SPECS),
    ] = field(default_factory=list)


@dataclass
class DatasetEntry:
    """One entry of ``datasets``: networks trained or given on a dataset (``data`` and
    ``models``), or networks given by their logits files (``logits``)."""

    data: Annotated[str | None, Setting("Dataset spec (calibkit.data)")] = None
    models: Annotated[
        list[str | dict[str, str]],
        Setting("Model specs, or {model: SPEC, checkpoint: FILE} for a pretrained network"),
    ] = field(default_factory=list)
    splits: Annotated[
        list[str], Setting("Dataset specs evaluated beside the test split (shift, OOD)")
    ] = field(default_factory=list)
    logits: Annotated[
        str | None, Setting("A path or glob of logits files, each split per seed")
    ] = None
    calibration_fraction: CalibrationShare = 0.5
    methods: Annotated[list[str], Setting("This entry's methods, by name; none: all")] = field(
        default_factory=list
    )
    posthoc: Annotated[
        list[str], Setting("Post-hoc methods for this entry only, after the spec's", SPECS)
    ] = field(default_factory=list)
    seeds: Annotated[list[int], Setting("This entry's seeds; none: the spec's", SEEDS)] = field(
        default_factory=list
    )


@dataclass
class SpecFile:
    """A bench spec file's top level."""

    name: Annotated[str, Setting("The sweep's name")] = "bench"
    about: Annotated[
        str, Setting("One line on what the sweep runs, for `calibkit presets` and the report")
    ] = ""
    measured: Annotated[
        str,
        Setting(
            "How long the sweep took when it was last run, on what and where that is written "
            "(`calibkit presets` shows it; the bench does not read it)"
        ),
    ] = ""
    seeds: Annotated[list[int], Setting("Seeds every run is repeated with", SEEDS)] = field(
        default_factory=lambda: [0]
    )
    train: Annotated[dict[str, Any], Setting("Training settings every trained run shares")] = field(
        default_factory=dict
    )
    datasets: Annotated[list[DatasetEntry], Setting("Where the networks come from")] = field(
        default_factory=list
    )
    methods: Annotated[list[MethodEntry], Setting("The training methods")] = field(
        default_factory=list
    )
    posthoc: Annotated[
        list[str], Setting("Post-hoc methods fitted in every run (calibkit methods)", SPECS)
    ] = field(default_factory=list)
    calibration_sizes: Annotated[
        list[int | str],
        Setting("Calibration-set sizes (Rethinking Fig. 3)", Items(AllOrRows())),
    ] = field(default_factory=lambda: ["all"])
    record: Annotated[bool, Setting("Record learned epochs and gradient norms")] = False
    baseline: Annotated[
        str | None, Setting("The method every test compares with; none: the first")
    ] = None


def keys(section: type) -> tuple[str, ...]:
    """The keys a section takes, in declared order."""
    return tuple(declarations(section))


def spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a bench spec file, from the declarations."""
    train = {k: declarations(TrainConfig)[k] for k in TRAIN_KEYS}
    defs = {
        c.__name__: _object(c.__doc__ or "", declarations(c)) for c in (MethodEntry, DatasetEntry)
    }
    schema = _object(SpecFile.__doc__ or "", declarations(SpecFile))
    schema["properties"]["train"] = _object("Training settings every trained run shares.", train)
    schema["properties"]["datasets"]["minItems"] = 1
    schema["properties"]["methods"]["minItems"] = 1
    schema["required"] = ["datasets", "methods"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://calibkit.invalid/schemas/bench-spec.schema.json",
        "title": "calibkit bench spec file (YAML)",
        **schema,
        "$defs": defs,
    }


def _object(about: str, declared: dict[str, Declared]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": " ".join(about.split()),
        "additionalProperties": False,
        "properties": {k: _property(d) for k, d in declared.items()},
    }


def _property(d: Declared) -> dict[str, Any]:
    values = d.setting.values
    if hasattr(values, "schema"):
        return values.schema() | {"description": d.text()}
    return _bounded(_type(d.annotation) | {"description": d.text()}, values)


def _bounded(out: dict[str, Any], values: Any) -> dict[str, Any]:
    """``out`` with what :class:`Bounds` or :class:`OneOf` says in JSON Schema's words."""
    out = dict(out)
    if isinstance(values, Bounds):
        out.setdefault("type", "integer" if values.integer else "number")
        out["minimum" if not values.low_open else "exclusiveMinimum"] = values.low
        out["maximum" if not values.high_open else "exclusiveMaximum"] = values.high
    elif isinstance(values, OneOf):
        out["enum"] = list(values.choices) + ([None] if values.or_none else [])
    return out


def _type(annotation: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = []
        for kind in map(_type, args):
            if kind not in kinds:
                kinds.append(kind)
        return kinds[0] if len(kinds) == 1 else {"anyOf": kinds}
    if annotation is type(None):
        return {"type": "null"}
    if origin is list:
        return {"type": "array", "items": _type(args[0])}
    if origin is dict or annotation is dict:
        value = _type(args[1]) if args and args[1] is not Any else {}
        return {"type": "object", "additionalProperties": value or True}
    if annotation in (MethodEntry, DatasetEntry):
        return {"$ref": f"#/$defs/{annotation.__name__}"}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if annotation is Any:
        return {}
    # a spec field (str | Spec) has been split by the Union branch; Spec itself is text
    return {"type": "string"}
