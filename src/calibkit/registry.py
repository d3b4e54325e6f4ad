"""One registry per family (calibrators, later losses and models) and one spec syntax.

A spec is ``name`` or ``name:key=value,key=value``; values are Python literals (numbers,
booleans, None, strings) or ``a/b/c`` lists, e.g. ``ts-grid:grid=rethinking`` or
``ms-odir:folds=5,average_folds=true``. The same string works in Python, on the command
line and in a YAML bench spec. Unknown names and bad parameters fail with the valid ones.
A value that starts with ``/``, ``~``, ``./`` or ``../`` is a path, not a list; quote any
other string that contains ``/`` or ``,``: ``folder:root='data/imagenet-v2'``.

>>> parse_spec("ms-odir:folds=5,average_folds=true,lambdas=0.1/1")
('ms-odir', {'folds': 5, 'average_folds': True, 'lambdas': [0.1, 1]})
>>> parse_spec("cifar10:root=~/data/cifar,val_size=5000")
('cifar10', {'root': '~/data/cifar', 'val_size': 5000})
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_WORDS = {"true": True, "false": False, "none": None, "null": None}


def _value(text: str) -> Any:
    text = text.strip()
    if text[:1] in ("'", '"') or text.startswith(("/", "~", "./", "../")):
        return (
            ast.literal_eval(text) if text[:1] in ("'", '"') else text
        )  # a quoted string or a path
    if "/" in text:
        return [_value(part) for part in text.split("/") if part.strip()]
    if text.lower() in _WORDS:
        return _WORDS[text.lower()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``name:key=value,...`` into the name and keyword arguments."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"spec: expected a name such as 'ts' or 'focal:gamma=3', got {spec!r}")
    name, _, rest = spec.strip().partition(":")
    kwargs: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"spec {spec!r}: expected key=value, got {item!r}")
        kwargs[key.strip().replace("-", "_")] = _value(value)
    return name.strip(), kwargs


class Registry(Generic[T]):
    """Named constructors of one family, created from spec strings."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._items: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._items:
                raise ValueError(f"{self.family} {name!r} is registered twice")
            self._items[name] = factory
            return factory

        return deco

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._items)

    def parameters(self, name: str) -> list[str]:
        """The keyword parameters ``name`` accepts."""
        sig = inspect.signature(self._items[name])
        return [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]

    def create(self, spec: str, **overrides: Any) -> T:
        """Build the object a spec names; ``overrides`` win over the spec's values."""
        name, kwargs = parse_spec(spec)
        if name not in self._items:
            raise ValueError(
                f"unknown {self.family} {name!r}; choose one of: {', '.join(self.names())}"
            )
        kwargs.update(overrides)
        allowed = self.parameters(name)
        bad = sorted(set(kwargs) - set(allowed))
        if bad:
            raise ValueError(
                f"{self.family} {name!r} has no parameter {', '.join(map(repr, bad))}; "
                f"valid: {', '.join(allowed) or 'none'}"
            )
        return self._items[name](**kwargs)
