"""Package attributes imported on first use (PEP 562), so that ``import calibkit`` and the
CLI's ``--help`` do not import PyTorch (issue 42 §5: ``calibkit --help`` under 0.3 s)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_attributes(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``where`` maps each name to the submodule
    (relative, e.g. ``".metrics"``) that defines it; a name equal to its submodule's last
    part is the submodule itself. The value is cached in the package's namespace."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(where[name], package)
        value = module if where[name].rsplit(".", 1)[-1] == name else getattr(module, name)
        importlib.import_module(package).__dict__[name] = value
        return value

    return __getattr__
