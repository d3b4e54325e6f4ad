"""MkDocs hook: one API reference page per public name of calibkit's package faces (their
``__all__``), each rendered from its docstring by mkdocstrings. The index, docs/api/index.md,
is the public contract kept by hand; tests/test_structure.py compares it with the faces."""

from __future__ import annotations

import importlib
import inspect
import typing

from mkdocs.structure.files import File

#: the package faces whose public names get a page each, as a user imports them
FACES = (
    "calibkit",
    "calibkit.metrics",
    "calibkit.posthoc",
    "calibkit.losses",
    "calibkit.training",
    "calibkit.models",
    "calibkit.data",
    "calibkit.io",
    "calibkit.plots",
    "calibkit.export",
    "calibkit.runs",
    "calibkit.bench",
    "calibkit.adapters.sklearn",
    "calibkit.adapters.torchmetrics",
    "calibkit.adapters.lightning",
)


def _names(face: str) -> list[str]:
    """The public names of ``face`` that are objects of their own (a type alias such as
    ``Callable[...]`` is documented where it is used)."""
    module = importlib.import_module(face)
    return [
        n
        for n in getattr(module, "__all__", ())
        if not n.startswith("_") and typing.get_origin(getattr(module, n)) is None
    ]


#: where docs/methods.md defines what a face's names implement (the paper's equations and
#: the defaults where the papers are silent), by face; a few names have their own section
DEFINED = {
    "calibkit.metrics": "1-metrics",
    "calibkit.posthoc": "2-post-hoc-calibrators",
    "calibkit.losses": "3-training-losses",
    "calibkit.training": "7-protocols",
}
DEFINED_BY_NAME = {"NeuralClamping": "4-neural-clamping", "MacCal": "5-mac-cal"}


def _definition(face: str, name: str) -> str:
    """A page's line linking to the methods it implements, or nothing."""
    anchor = DEFINED_BY_NAME.get(name) or DEFINED.get(face)
    if anchor is None:
        return ""
    return (
        f"What it implements, with the papers' equations: [Methods](../../methods.md#{anchor}).\n\n"
    )


def _defined_at(face: str, name: str) -> str:
    """Where mkdocstrings finds ``face.name``: a class's or function's defining module (a
    face may hand it out lazily, which a static reading cannot follow), else the face."""
    obj = getattr(importlib.import_module(face), name)
    if inspect.isclass(obj) or inspect.isfunction(obj):
        return f"{obj.__module__}.{obj.__qualname__}"
    return f"{face}.{name}"


#: public-named members that are the harness's hooks and class facts, not what a user
#: calls (docs/architecture.md, "Adding a calibrator"): left off the API pages
HARNESS = frozenset(
    {
        "about", "apply_on", "calibrated", "check_settings", "checked", "cross_validated",
        "expected_anomalies", "extra_repr", "fit_on", "fit_split", "get_extra_state",
        "incidental_settings", "invariant_problem", "learned", "level", "name",
        "nan_means_empty", "output", "preserves_argmax", "set_extra_state", "state_tensors",
        "stored_values", "trust_settings", "weighted",
    }
)  # fmt: skip


def _options(face: str, name: str) -> str:
    """The page's mkdocstrings options: no second heading (the page's title is the public
    path, not the defining private module's), and for a class the members a user calls,
    its own and those it inherits from calibkit's base classes (``fit``, ``predict_proba``,
    ``save``, ``load``), never ``torch.nn.Module``'s."""
    obj = getattr(importlib.import_module(face), name)
    lines = ["    options:", "      show_root_heading: false"]
    if inspect.isclass(obj):
        ours = [c for c in obj.__mro__ if c.__module__.startswith("calibkit")]
        members = sorted({m for c in ours for m in vars(c) if not m.startswith("_")} - HARNESS)
        inherited = sorted({m for c in ours[1:] for m in vars(c) if m in members})
        lines += [f"      members: {members}", f"      inherited_members: {inherited}"]
    return "\n".join(lines) + "\n"


def _pages() -> dict[str, list[str]]:
    """Face -> its public names that get a page (the top level's are its faces' names)."""
    return {
        face: [n for n in _names(face) if n != "__version__"]
        for face in FACES
        if face != "calibkit"
    }


def on_config(config):
    """The API reference's navigation: the index, then one section per face."""
    sections = [{"Overview": "api/index.md"}] + [
        {face: [{name: f"api/{face}/{name}.md"} for name in names]}
        for face, names in _pages().items()
    ]
    config["nav"] = [
        {"API reference": sections} if "API reference" in entry else entry
        for entry in config["nav"]
    ]
    return config


def on_files(files, config):
    """Add ``api/<face>/<name>.md`` for every public name (``api/index.md``, the list of
    them, is kept by hand: the public contract, which a test compares with the faces)."""
    for face, names in _pages().items():
        for name in names:
            page = (
                f"# `{face}.{name}`\n\n{_definition(face, name)}"
                f"::: {_defined_at(face, name)}\n{_options(face, name)}"
            )
            files.append(File.generated(config, f"api/{face}/{name}.md", content=page))
    return files
