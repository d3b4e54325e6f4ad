"""Each adapter imports its library lazily: without it, importing the adapter fails with the
one-line install hint (simulated by hiding the library from the import system)."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize(
    "module,library,extra",
    [
        ("calibkit.adapters.torchmetrics", "torchmetrics", "torchmetrics"),
        ("calibkit.adapters.lightning", "lightning", "lightning"),
    ],
)
def test_missing_library_gives_the_install_hint(monkeypatch, module, library, extra):
    for name in list(sys.modules):
        if name == library or name.startswith(f"{library}."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, library, None)  # `import library` now raises ImportError
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'calibkit\[{extra}\]'$"):
        importlib.import_module(module)
