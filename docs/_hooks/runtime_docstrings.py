"""A griffe extension for the API reference: a public function's or class's docstring as
Python sees it at run time, its Sphinx roles shown as code. calibkit's ``documented``
decorator (``calibkit._docs``) adds the Parameters and Returns sections when the module is
imported, from one table per family, so a static reading of the source would show
neither."""

from __future__ import annotations

import importlib
import inspect
import re

import griffe

#: a Sphinx role in a docstring (``:func:`~calibkit.metrics.ece```), shown as code: the
#: last component where Sphinx's ``~`` asks for it
_ROLE = re.compile(r":(?:func|mod|data|class|meth|attr|exc|obj):`(~?)([^`]+)`")


def _plain(doc: str) -> str:
    return _ROLE.sub(
        lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", doc
    )


def _runtime(path: str) -> object | None:
    module, _, name = path.rpartition(".")
    while module:
        try:
            obj = importlib.import_module(module)
        except ImportError:
            module, _, outer = module.rpartition(".")
            name = f"{outer}.{name}"
            continue
        for part in name.split("."):
            obj = getattr(obj, part, None)
        return obj
    return None


class RuntimeDocstrings(griffe.Extension):
    """Replace a function's or class's docstring with the one it has once imported."""

    def _update(self, item: griffe.Object) -> None:
        obj = _runtime(item.path)
        # its own docstring only: inspect.getdoc would hand a calibrator's __init__ the text
        # of torch.nn.Module.__init__ ("Initialize internal Module state")
        own = getattr(obj, "__doc__", None) if obj is not None else None
        doc = _plain(inspect.cleandoc(own)) if isinstance(own, str) else None
        if doc and (item.docstring is None or doc != item.docstring.value):
            # parsed as NumPy's layout (mkdocs.yml) also where no static docstring named a
            # parser: an inherited method's sections rendered as one run-on paragraph
            item.docstring = griffe.Docstring(doc, parent=item, parser="numpy")

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        self._update(func)

    def on_class_instance(self, *, cls: griffe.Class, **kwargs) -> None:
        self._update(cls)
