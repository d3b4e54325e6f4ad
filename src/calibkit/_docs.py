"""The Parameters and Returns sections of public docstrings (NumPy style), built from a
function's signature: a description shared by many functions (``scores``, ``labels``,
``n_bins``) is written once, in its family's table, and appended to each function's own
text, so an API reference lists every parameter and no text is copied from one function
to another.

>>> @documented({"x": ("float", "A number.")}, "float: twice ``x``.")
... def double(x):
...     '''Twice a number.'''
...     return 2 * x
>>> print(inspect.getdoc(double))
Twice a number.
<BLANKLINE>
Parameters
----------
x : float
    A number.
<BLANKLINE>
Returns
-------
float
    Twice ``x``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TypeVar

from ._settings import declarations, parameter_lines, parameters_section, wrapped

F = TypeVar("F", bound=Callable)
#: a parameter's (type, description), as the Parameters section prints it
Described = tuple[str, str]


def documented(shared: Mapping[str, Described], returns: str, **own: Described) -> Callable[[F], F]:
    """Append Parameters (every parameter of the function's signature: one whose annotation
    declares it (:mod:`calibkit._settings`) by its declaration, any other by ``own`` or
    else by ``shared``) and Returns (``returns``: "type: what") to the docstring. A
    parameter described nowhere raises ``KeyError`` when the module is imported."""

    def deco(fn: F) -> F:
        names = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
        declared = declarations(fn)
        missing = [n for n in names if n not in own and n not in shared and n not in declared]
        if missing:
            raise KeyError(f"{fn.__qualname__}: no description of {', '.join(missing)}")
        doc, pad = _lines_and_indent(fn.__doc__)
        lines = ["", f"{pad}Parameters", f"{pad}----------"] if names else []
        for name in names:
            if name in declared and name not in own:
                lines += parameter_lines(declared[name], pad)
                continue
            kind, text = own.get(name) or shared[name]
            lines += [f"{pad}{name} : {kind}", *wrapped(text, pad)]
        kind, _, what = returns.partition(": ")
        what = what[:1].upper() + what[1:]
        lines += ["", f"{pad}Returns", f"{pad}-------", f"{pad}{kind}", *wrapped(what, pad)]
        at = _examples_start(doc)
        head = doc[:at]
        while head and not head[-1].strip():
            head.pop()
        fn.__doc__ = "\n".join([*head, *lines, "", *doc[at:]]).rstrip() + "\n"
        return fn

    return deco


def documented_settings(cls: type) -> type:
    """Class decorator: append the Parameters section of the settings ``cls`` declares
    (:func:`calibkit._settings.parameters_section`) to its docstring, so the one
    declaration documents it too."""
    doc, pad = _lines_and_indent(cls.__doc__)
    at = _examples_start(doc, ("Attributes", "Examples"))
    head = doc[:at]
    while head and not head[-1].strip():
        head.pop()
    tail = ["", *doc[at:]] if at < len(doc) else []
    cls.__doc__ = "\n".join([*head, *parameters_section(cls, pad), *tail]).rstrip() + "\n"
    return cls


def _lines_and_indent(docstring: str | None) -> tuple[list[str], str]:
    """A docstring's lines and the indentation of its body (which its sections take)."""
    doc = (docstring or "").rstrip().splitlines()
    body = [ln for ln in doc[1:] if ln.strip()]
    pad = min((ln[: len(ln) - len(ln.lstrip())] for ln in body), key=len, default=" " * 4)
    return doc, pad


def _examples_start(doc: list[str], sections: tuple[str, ...] = ("Examples",)) -> int:
    """Where a docstring's first section of ``sections`` (or its first example) starts:
    NumPy's layout puts Parameters and Returns before Attributes and Examples; its length
    where it has none."""
    starts = (i for i, ln in enumerate(doc) if ln.strip() in sections or ln.strip()[:3] == ">>>")
    return next(starts, len(doc))
