"""One registry per family (datasets, models, losses, schedules, calibrators) and one spec
syntax, parsed once into a frozen :class:`Spec`.

Grammar (the same in Python, on the command line and in a YAML bench spec)::

    spec   := name [":" param ("," param)*]
    param  := key "=" value
    value  := number | true | false | none | 'quoted' | "quoted" | [value, ...] | bare text

Bare text runs to the next top-level ``,``; ``/`` has no meaning, so a path needs no
quoting. A list is written in brackets; commas inside brackets or quotes do not split.
Keys may use ``-`` for ``_``. Quote a string that starts with ``[`` or a quote, or that
holds a ``,``. In a shell, quote a spec with brackets.

>>> parse_spec("ms-odir:folds=5,average_folds=true,lambdas=[0.1,1]")
Spec(name='ms-odir', params=(('folds', 5), ('average_folds', True), ('lambdas', (0.1, 1))))
>>> str(parse_spec("folder:root=data/cifar,mean=[0.5, 0.5, 0.5]"))
'folder:root=data/cifar,mean=[0.5,0.5,0.5]'
>>> parse_spec("cifar10:root='a,b'").kwargs
{'root': 'a,b'}

A registry checks a spec against the factory's signature (names, and the types its
annotations give) without building anything: :meth:`Registry.check`. Values that need more
than a type (a range, a choice) are checked against the settings' declarations
(:mod:`calibkit._settings`), or by the factory's ``check_settings`` classmethod where it
has one (the calibrators', which also checks what ties settings together).
"""

from __future__ import annotations

import ast
import difflib
import inspect
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ._settings import declarations, is_flag, is_number, plain

T = TypeVar("T")

#: the parameters of every family's ``create``, described once for its docstring
SPEC_PARAMETERS: dict[str, tuple[str, str]] = {
    "spec": (
        "str or Spec",
        "``name:key=value,...`` (:mod:`calibkit._registry`'s grammar); a checked spec is trusted.",
    ),
    "overrides": ("keyword arguments", "Settings that win over the spec's."),
}

_WORDS = {"true": True, "false": False, "none": None, "null": None}


class SpecError(ValueError):
    """A spec that does not parse or does not fit its registry (one line)."""


def _split(text: str, spec: str) -> list[str]:
    """``text`` split at top-level commas (not inside brackets or quotes)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise SpecError(f"spec {spec!r}: a ']' without its '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if quote or depth:
        raise SpecError(f"spec {spec!r}: an unclosed {'quote' if quote else '['}")
    parts.append(text[start:])
    return parts


def split_specs(text: str) -> list[str]:
    """A comma-separated list of specs, in the spec grammar: a top-level item that reads
    ``key=value`` continues the spec before it, any other item starts a new one, so
    ``"dir-odir:folds=5,average_folds=true,ts"`` is two specs, not three."""
    specs: list[str] = []
    for item in _split(text, text):
        head = item.split(":", 1)[0]
        if "=" in head and specs:
            specs[-1] += "," + item
        elif "=" in head:
            raise SpecError(f"{text!r}: {item.strip()!r} is a setting with no method before it")
        elif item.strip():
            specs.append(item.strip())
    return specs


def _value(text: str, spec: str) -> Any:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        return tuple(_value(p, spec) for p in _split(inner, spec)) if inner.strip() else ()
    if text[:1] in ("'", '"'):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise SpecError(f"spec {spec!r}: a badly quoted string {text}") from None
    if text.lower() in _WORDS:
        return _WORDS[text.lower()]
    try:
        number = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return number if isinstance(number, int | float) else text


def _text(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, str):
        plain = value == value.strip() and not set(value) & set(",[]'\"") and value
        return value if plain and _value(value, "") == value else repr(value)
    return repr(value)


@dataclass(frozen=True, eq=False)
class Spec:
    """A parsed spec: a name and its parameters in written order (lists as tuples). Two
    specs are equal when their name and parameters are, checked or not (:class:`CheckedSpec`
    equals its text's parse)."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        """The parameters as keyword arguments."""
        return dict(self.params)

    def with_params(self, **params: Any) -> Spec:
        """This spec with ``params`` set (added, or replaced in place); not checked."""
        merged = self.kwargs | params
        return Spec(self.name, tuple((k, _frozen(v)) for k, v in merged.items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Spec):
            return NotImplemented
        return (self.name, self.params) == (other.name, other.params)

    def __hash__(self) -> int:
        return hash((self.name, self.params))

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_text(v)}" for k, v in self.params)


@dataclass(frozen=True, eq=False)
class CheckedSpec(Spec):
    """A spec that :meth:`Registry.check` checked: its type is the mark. ``family`` names
    the registry that checked it and ``settings`` is what the factory's ``check_settings``
    made of it (every setting normalised; None where the factory has no such check). Later
    layers take it as given: the same registry's :meth:`~Registry.check` and
    :meth:`~Registry.create` do not check it again."""

    family: str = ""
    settings: Any = field(default=None, repr=False)


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list | tuple) else value


def parse_spec(spec: str | Spec) -> Spec:
    """Parse ``name:key=value,...`` (see the module docstring); a :class:`Spec` is returned
    as it is."""
    if isinstance(spec, Spec):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(f"spec: expected a name such as 'ts' or 'focal:gamma=3', got {spec!r}")
    name, _, rest = spec.strip().partition(":")
    params: dict[str, Any] = {}
    for item in _split(rest, spec) if rest.strip() else []:
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key.isidentifier():
            raise SpecError(f"spec {spec!r}: expected key=value, got {item.strip()!r}")
        if key in params:
            raise SpecError(f"spec {spec!r}: {key} is given twice")
        params[key] = _value(value, spec)
    if not name.strip():
        raise SpecError(f"spec {spec!r}: no name before ':'")
    return Spec(name.strip(), tuple(params.items()))


def _accepts(annotation: Any, value: Any) -> bool:
    """Whether ``value`` fits a (simple) annotation; unknown annotations accept anything."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(a, value) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return is_flag(value)
    if annotation in (int, float):
        return is_number(value, integer=annotation is int)
    if annotation is str:
        return isinstance(value, str)
    if origin in (tuple, list, Sequence) or annotation in (tuple, list):
        return isinstance(value, tuple | list)
    return True


class Registry(Generic[T]):
    """Named constructors of one family, created from specs."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._items: dict[str, Callable[..., T]] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._items:
                raise ValueError(f"{self.family} {name!r} is registered twice")
            self._items[name] = factory
            return factory

        return deco

    def alias(self, name: str, *others: str) -> None:
        """Let ``others`` (names people know from other libraries: ``temperature``,
        ``histogram``, ``dirichlet``) stand for the registered ``name``. A spec is read with
        its canonical name, so two spellings of one method are one run."""
        for other in others:
            key = _folded(other)
            if self._aliases.get(key, name) != name or other in self._items:
                raise ValueError(f"{self.family} alias {other!r} names two methods")
            self._aliases[key] = name

    def aliases(self, name: str) -> list[str]:
        """The aliases of the registered ``name``, sorted."""
        return sorted(k for k, v in self._aliases.items() if v == name)

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._items)

    def canonical(self, name: str) -> str:
        """The registered name that ``name`` is or stands for (aliases are matched without
        case, ``_`` or spaces: ``TemperatureScaling`` is ``ts``); one line naming the
        nearest names where there is none."""
        if name in self._items:
            return name
        folded = _folded(name)
        if folded in self._aliases:
            return self._aliases[folded]
        known = {n: n for n in self._items} | {a: t for a, t in self._aliases.items()}
        close = difflib.get_close_matches(folded, list(known), n=3, cutoff=0.6)
        targets = list(dict.fromkeys(known[c] for c in close))
        hint = f"; did you mean {' or '.join(targets)}?" if targets else ""
        raise SpecError(
            f"unknown {self.family} {name!r}{hint} (choose one of: {', '.join(self.names())})"
        )

    def __contains__(self, name: str) -> bool:
        return name in self._items or _folded(name) in self._aliases

    def factory(self, name: str) -> Callable[..., T]:
        """The constructor registered as ``name`` (or that ``name`` is an alias of)."""
        return self._items[self.canonical(name)]

    def parameters(self, name: str) -> list[str]:
        """The keyword parameters ``name`` accepts."""
        return list(self._signature(name))

    def defaults(self, name: str) -> dict[str, str]:
        """Each keyword parameter of ``name`` with its default in the spec grammar
        (``"required"`` where there is none)."""
        sig = inspect.signature(self.factory(name))
        return {
            p.name: "required" if p.default is p.empty else _text(p.default)
            for p in sig.parameters.values()
            if p.kind is p.KEYWORD_ONLY
        }

    def help(self, name: str) -> dict[str, str]:
        """Each declared setting of ``name`` with what it means and the values it takes
        (:mod:`calibkit._settings`), one sentence each."""
        return {k: d.text() for k, d in declarations(self.factory(name)).items()}

    def _signature(self, name: str) -> dict[str, Any]:
        factory = self.factory(name)
        target = factory.__init__ if inspect.isclass(factory) else factory
        try:
            hints = typing.get_type_hints(target)
        except (NameError, TypeError):
            hints = {}
        sig = inspect.signature(factory)
        return {
            p.name: hints.get(p.name, p.annotation)
            for p in sig.parameters.values()
            if p.kind is p.KEYWORD_ONLY
        }

    def check(self, spec: str | Spec, **overrides: Any) -> CheckedSpec:
        """The parsed spec, checked against the registry without building anything: the
        name, the parameter names, their types, and each value against its declaration (or
        the factory's ``check_settings``, which covers them).
        The result is a :class:`CheckedSpec`; given back without ``overrides``, it is
        returned as it is."""
        return self._check(spec, {k: plain(v) for k, v in overrides.items()})

    def seeded(self, spec: str | Spec, seed: int) -> CheckedSpec:
        """``spec``, checked (a checked one is trusted), with ``seed`` (a non-negative int,
        checked by the caller where it entered) as its ``seed`` where the factory takes one
        and the spec sets none: a sweep's seeds vary every random choice of a run, a
        method's too. Still checked: a seed is any non-negative int to every factory that
        takes one."""
        spec = self.check(spec)
        if "seed" not in self._signature(spec.name) or "seed" in spec.kwargs:
            return spec
        settings = None if spec.settings is None else spec.settings | {"seed": seed}
        return CheckedSpec(spec.name, (*spec.params, ("seed", seed)), self.family, settings)

    def _check(self, spec: str | Spec, overrides: dict[str, Any]) -> CheckedSpec:
        """:meth:`check`'s spec."""
        trusted = isinstance(spec, CheckedSpec) and spec.family == self.family
        if trusted and not overrides:
            return spec  # checked where it entered: trusted
        parsed = parse_spec(spec)
        name = self.canonical(parsed.name)
        if name != parsed.name:
            parsed = Spec(name, parsed.params)
        if overrides:
            parsed = parsed.with_params(**overrides)
        signature = self._signature(parsed.name)
        # a checked spec's own parameters are trusted; only what overrides it is new
        new = list(overrides.items()) if trusted else list(parsed.params)
        for key, value in new:
            if key not in signature:
                raise SpecError(
                    f"{self.family} {parsed.name!r} has no parameter {key!r}; "
                    f"valid: {', '.join(signature) or 'none'}"
                )
            if not _accepts(signature[key], value):
                raise SpecError(
                    f"{self.family} {parsed.name!r}: {key}={_text(value)} is not "
                    f"{_describe(signature[key])}"
                )
        factory = self._items[parsed.name]
        check = getattr(factory, "check_settings", None)
        try:
            if check is not None:
                settings = check(**parsed.kwargs)
            else:  # the factory's declarations (calibkit._settings) are its whole check
                declared = declarations(factory)
                for key, value in new:
                    if key in declared:
                        declared[key].check(value)
                settings = None
        except (TypeError, ValueError) as err:
            raise SpecError(f"{self.family} {parsed.name!r}: {err}") from None
        return CheckedSpec(parsed.name, parsed.params, self.family, settings)

    def create(self, spec: str | Spec, **overrides: Any) -> T:
        """Build the object a spec names; ``overrides`` win over the spec's values."""
        parsed = self._check(spec, overrides)
        return self._items[parsed.name](**parsed.kwargs)


def _folded(name: str) -> str:
    """A name as aliases are matched: lower case, without ``-``, ``_`` or spaces."""
    return "".join(c for c in name.lower() if c not in "-_ ")


def _describe(annotation: Any) -> str:
    """'a float or a sequence' for ``float | Sequence[float]``, and so on."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(annotation)))
    if annotation is type(None):
        return "none"
    origin = typing.get_origin(annotation) or annotation
    text = {tuple: "list", list: "list", Sequence: "sequence"}.get(origin)
    text = text or getattr(origin, "__name__", str(origin)).lower()
    return f"an {text}" if text[0] in "aeiou" else f"a {text}"
