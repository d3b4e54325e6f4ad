"""Settings declared once, on the parameter itself: its name, type and default are the
signature's, what it means and the values it takes ride in ``typing.Annotated``.

>>> from typing import Annotated
>>> def fit(*, tol: Annotated[float, Setting("Stop when |g| is below this", Bounds(0, 1))] = 1e-9):
...     ...
>>> declarations(fit)["tol"].text()
'Stop when |g| is below this (a number in [0, 1]).'
>>> check_declared(fit, {"tol": 2})
Traceback (most recent call last):
...
ValueError: tol: expected a number in [0, 1], got 2

From that one declaration come the check at the boundary (:meth:`Declared.check`, which
the registries, ``Method.check_settings`` and ``Loss`` (through :func:`check_declared`) and
``TrainConfig.check`` run), the docstring's
Parameters section (:func:`parameters_section`), the CLI's option help and ``calibkit
methods``' listing. A setting several functions share is declared once as a type alias
(``NBins = Annotated[int, Setting(...)]``). docs/architecture.md says why this is not
pydantic.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any


def _numpy(kind: str) -> type | None:
    """NumPy's ``kind`` (``bool_``, ``generic``) where NumPy is imported, else None: a value
    cannot be a NumPy scalar then, and ``calibkit --help`` stays free of NumPy's import."""
    np = sys.modules.get("numpy")
    return None if np is None else getattr(np, kind)


def is_flag(value: Any) -> bool:
    """What a true-or-false setting takes: Python's or NumPy's booleans, nothing else."""
    np_bool = _numpy("bool_")
    return isinstance(value, bool) or (np_bool is not None and isinstance(value, np_bool))


def is_number(value: Any, *, integer: bool = False) -> bool:
    """One rule for what a number setting takes, everywhere a setting enters (issue 65 §3):
    Python's and NumPy's integers, and where not ``integer`` their floats of any width too;
    never a boolean, a tensor or a string."""
    kind = numbers.Integral if integer else numbers.Real
    return isinstance(value, kind) and not is_flag(value)


def plain(value: Any) -> Any:
    """A NumPy scalar as the Python number it holds (for a spec's text and JSON); anything
    else as it is."""
    generic = _numpy("generic")
    return value.item() if generic is not None and isinstance(value, generic) else value


@dataclass(frozen=True)
class Bounds:
    """The values a number setting takes: an integer (``integer``) or a finite number, in
    [``low``, ``high``], either end open. Its text is the setting's error, CLI help and doc."""

    low: float
    high: float
    integer: bool = False
    low_open: bool = False
    high_open: bool = False

    def __str__(self) -> str:
        if self.integer:
            return f"an integer in {self.low:,}..{self.high:,}"
        low, high = "([)"[0 if self.low_open else 1], ")]"[0 if self.high_open else 1]
        return f"a number in {low}{_number(self.low)}, {_number(self.high)}{high}"

    def check(self, name: str, value: Any) -> int | float:
        """``value`` (an int, or a float where not ``integer``), or a one-line ``ValueError``
        naming ``name``."""
        if not is_number(value, integer=self.integer) or not self._within(value):
            raise ValueError(f"{name}: expected {self}, got {_short(value)}")
        return int(value) if self.integer else float(value)

    def _within(self, v: float) -> bool:
        try:
            if not math.isfinite(float(v)):
                return False
        except OverflowError:  # an integer of hundreds of digits
            return False
        above = v > self.low if self.low_open else v >= self.low
        below = v < self.high if self.high_open else v <= self.high
        return above and below


@dataclass(frozen=True)
class OneOf:
    """The values a text setting takes: one of ``choices`` (or None, where ``or_none``: the
    annotation admits None)."""

    choices: tuple[str, ...]
    #: None is a choice too (``none`` in a spec)
    or_none: bool = False

    def __str__(self) -> str:
        return "one of " + ", ".join(map(repr, self.choices)) + (" or none" if self.or_none else "")

    def check(self, name: str, value: Any) -> str:
        """``value``, or a one-line ``ValueError`` naming ``name`` and the choices."""
        if not isinstance(value, str) or value not in self.choices:
            raise ValueError(f"{name}: expected {self}; got {value!r}")
        return value


class Values(typing.Protocol):
    """The values a setting takes: :class:`Bounds`, :class:`OneOf`, or any object whose text
    says them and whose ``check`` returns the value (normalised) or raises a one-line
    ``ValueError`` naming the setting."""

    def check(self, name: str, value: Any) -> Any: ...


@dataclass(frozen=True)
class Setting:
    """What a setting means (``help``, a sentence) and the values it takes (``values``; a
    bool-typed setting takes True or False and a str-typed one any text, without saying
    so), for ``typing.Annotated``."""

    help: str
    values: Values | None = None


#: the most bins a binned metric or map takes: more bins than that hold at most a sample or
#: two each, while their tables grow with the bins (times the classes for classwise ECE)
MAX_BINS = 100_000

#: settings many functions share, each declared once
NBins = Annotated[int, Setting("Number of bins", Bounds(1, MAX_BINS, integer=True))]
Seed = Annotated[int, Setting("Seed of every random choice", Bounds(0, 2**63 - 1, integer=True))]
SeedCount = Annotated[
    int,
    Setting("Number of seeds, each a fit (or a split) of its own", Bounds(1, 1000, integer=True)),
]
#: the rows of one split that calibrate when it is divided (the bench's logits files, compare)
CalibrationShare = Annotated[
    float,
    Setting(
        "Share of the rows that calibrate, stratified by class (the rest test)",
        Bounds(0, 1, low_open=True, high_open=True),
    ),
]
#: the most epochs and the largest batch a training loop accepts: beyond, it never ends
COUNT = Bounds(1, 1_000_000, integer=True)
Epochs = Annotated[int, Setting("Training epochs", COUNT)]
BatchSize = Annotated[int, Setting("Mini-batch size", COUNT)]
Momentum = Annotated[float, Setting("SGD momentum", Bounds(0, 1, high_open=True))]
#: any positive rate: the fit's own divergence check reports a rate too large for the data
LearningRate = Annotated[
    float, Setting("SGD learning rate", Bounds(0, math.inf, low_open=True, high_open=True))
]

#: a parameter without a default
REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Declared:
    """One declared setting: its name, annotation (without ``Annotated``), default
    (:data:`REQUIRED` where none) and :class:`Setting`."""

    name: str
    annotation: Any
    default: Any
    setting: Setting

    def text(self) -> str:
        """What it means and, where bounded, the values it takes: one sentence."""
        help = self.setting.help.rstrip(".")
        values = self.setting.values
        return f"{help} ({values})." if values is not None else f"{help}."

    def check(self, value: Any) -> Any:
        """``value`` checked (and normalised: an int bound gives an int, a number a float);
        None where the annotation admits it."""
        if value is None and _admits_none(self.annotation):
            return None
        if self.setting.values is not None:
            return self.setting.values.check(self.name, value)
        kinds = set(typing.get_args(self.annotation)) or {self.annotation}
        if kinds - {type(None)} == {bool}:  # bool, or bool | None (None returned above)
            if not is_flag(value):
                raise ValueError(f"{self.name}: expected true or false, got {value!r}")
            return bool(value)
        if kinds - {type(None)} == {str} and not isinstance(value, str):  # str, str | None
            raise ValueError(f"{self.name}: expected a text, got {_short(value)}")
        return value


def _admits_none(annotation: Any) -> bool:
    return annotation is type(None) or (
        typing.get_origin(annotation) in (typing.Union, types.UnionType)
        and type(None) in typing.get_args(annotation)
    )


def _target(obj: Any) -> Callable:
    """The callable whose parameters a class or function declares: a class's ``__init__``
    (its own or the one it inherits), or the function itself."""
    return obj.__init__ if inspect.isclass(obj) else obj


@functools.cache
def declarations(obj: Any) -> dict[str, Declared]:
    """Every declared setting of a function, a class's ``__init__`` or a dataclass, by
    name, in signature order: the keyword parameters (fields) whose annotation is
    ``Annotated[type, Setting(...)]``."""
    if dataclasses.is_dataclass(obj):
        hints = typing.get_type_hints(obj, include_extras=True)
        found = {}
        for f in dataclasses.fields(obj):
            default = f.default if f.default is not dataclasses.MISSING else REQUIRED
            if f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            found[f.name] = _declared(f.name, hints.get(f.name), default)
        return {k: v for k, v in found.items() if v is not None}
    fn = _target(obj)
    hints = _hints(fn)
    found = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self":
            declared = _declared(p.name, hints.get(p.name), p.default)
            if declared is not None:
                found[p.name] = declared
    return found


def _hints(fn: Callable) -> dict[str, Any]:
    """``fn``'s annotations evaluated; where one names what only type checkers import
    (``torch`` under ``TYPE_CHECKING``), the others alone (such a one declares nothing)."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError:
        hints = {}
        for name, text in getattr(fn, "__annotations__", {}).items():
            try:
                hints[name] = eval(text, fn.__globals__) if isinstance(text, str) else text
            except NameError:
                continue
        return hints


def _declared(name: str, hint: Any, default: Any) -> Declared | None:
    if typing.get_origin(hint) is not typing.Annotated:
        return None
    base, *extras = typing.get_args(hint)
    setting = next((e for e in extras if isinstance(e, Setting)), None)
    return None if setting is None else Declared(name, base, default, setting)


def check_declared(obj: Any, given: Mapping[str, Any], *, who: str = "") -> dict[str, Any]:
    """Every declared setting of ``obj`` (its default, or the value ``given``) checked
    against its declaration, by name; a setting ``obj`` does not declare is a ``TypeError``
    naming ``who`` (default: ``obj``'s name). Raises the first failing setting's one-line
    ``ValueError``."""
    declared = declarations(obj)
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise TypeError(f"{who or obj.__name__} has no setting {unknown[0]!r}")
    values = {}
    for name, d in declared.items():
        value = given.get(name, d.default)
        values[name] = value if value is REQUIRED else d.check(value)
    return values


def type_text(annotation: Any) -> str:
    """An annotation as the Parameters section writes it: ``float or sequence of float``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is typing.Literal:
        return " or ".join(map(repr, typing.get_args(annotation)))
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "any"
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, Sequence, Iterable):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        kind = "iterable" if origin is Iterable else "sequence"
        return kind + (f" of {type_text(args[0])}" if args else "")
    return getattr(annotation, "__name__", str(annotation))


def parameters_section(obj: Any, pad: str = "    ") -> list[str]:
    """The NumPy-style Parameters section of every declared setting of ``obj``: type,
    default, meaning and values, indented by ``pad``; empty where it declares none."""
    declared = declarations(obj)
    if not declared:
        return []
    lines = ["", f"{pad}Parameters", f"{pad}----------"]
    for d in declared.values():
        lines += parameter_lines(d, pad)
    return lines


def parameter_lines(d: Declared, pad: str = "    ") -> list[str]:
    """One declared setting's entry in a Parameters section: its name, type and default,
    then what it means and the values it takes."""
    default = "" if d.default is REQUIRED else f", default {d.default!r}"
    return [f"{pad}{d.name} : {type_text(d.annotation)}{default}", *wrapped(d.text(), pad)]


def wrapped(text: str, pad: str) -> list[str]:
    """A description's lines, indented under its name and wrapped at 88 columns."""
    return textwrap.wrap(text, 88, initial_indent=pad + "    ", subsequent_indent=pad + "    ")


def _number(x: float) -> str:
    """A bound as text: ``0.5``, ``100``, ``1e6``."""
    return f"{x:g}".replace("e+0", "e").replace("e+", "e")


def _short(value: Any) -> str:
    """A value as an error quotes it: its repr, cut short where long."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def checks_declared(fn: Callable) -> Callable:
    """Decorator: every declared setting of ``fn`` that a call passes is checked against its
    declaration (:meth:`Declared.check`, the one check the registries use too) and handed
    on as checked (an int bound gives an int, a flag a bool), before ``fn`` runs; the body
    trusts them. Undeclared arguments (the data) pass as they are.

    The checked function's ``trusting`` is ``fn`` itself, for a caller whose settings were
    checked where they entered (a command's declared options, a metric's own checked
    keywords handed to :func:`~calibkit.metrics.prepare`), so that each is checked once."""
    declared = declarations(fn)
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            if name in declared:
                bound.arguments[name] = declared[name].check(value)
        return fn(*bound.args, **bound.kwargs)

    wrapper.trusting = fn  # type: ignore[attr-defined]
    return wrapper
