"""The counts issues 56 and 67 ask of calibkit's source, for one tree: lines of ``src/`` by
kind, names in the public modules' ``__all__`` lists, hand checks of a keyword in
``metrics/`` (a ``check_*`` call on a parameter of the function it sits in; a declared
setting is checked by ``checks_declared`` instead), keyword texts in ``@documented(...)``
calls, and the runtime path of one ``ece()`` call (files, functions, deepest calibkit
frame). Imports of another package's private module are a test's to count
(``tests/test_structure.py::test_no_package_imports_another_packages_private_module``: 0).

Kinds, by an AST walk: declarations (a parameter or field annotated ``Annotated[...]``, and
such aliases), checks (functions named ``check*``/``_check*``), docstring tables (the
``*_PARAMETERS`` dicts and ``@documented(...)`` arguments). A module is public when its file
name does not start with ``_`` (or it is a package's ``__init__``).

    python benchmarks/overhead/code_census.py                                # this checkout
    PYTHONPATH=<old tree>/src python benchmarks/overhead/code_census.py <old tree>/src/calibkit

An old tree (a ``git worktree``) has no compiled row scan: copy
``src/calibkit/metrics/_rowscan*.so`` into it first, or its ``ece()`` runs the PyTorch scan
and the path is not the same one. Last run (issue 67's closing note): 10 hand checks and 45
texts at 1adbb80, 5 and 43 at 1eaec44; ``ece()`` 8 files, 48 then 47 functions, 12 deep.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np


def line_kinds(root: Path) -> dict[str, int]:
    """Lines of every ``.py`` under ``root``, and of each kind."""
    kinds: dict[str, set] = {"declarations": set(), "checks": set(), "doc tables": set()}
    total = 0

    def mark(kind: str, f: Path, node: ast.AST) -> None:
        kinds[kind].update((f, i) for i in range(node.lineno, node.end_lineno + 1))

    for f in root.rglob("*.py"):
        text = f.read_text()
        total += len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.lstrip("_").startswith("check"):
                    mark("checks", f, node)
                for dec in node.decorator_list:
                    if isinstance(dec, ast.Call) and getattr(dec.func, "id", "") == "documented":
                        mark("doc tables", f, dec)
                for a in node.args.args + node.args.kwonlyargs:
                    if a.annotation is not None and "Annotated" in ast.unparse(a.annotation):
                        mark("declarations", f, a.annotation)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [getattr(t, "id", "") for t in targets]
                value = ast.unparse(node.value) if node.value is not None else ""
                annotation = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
                if any(n.endswith("_PARAMETERS") for n in names):
                    mark("doc tables", f, node)
                elif (
                    value.startswith("Annotated[")
                    or "Annotated[" in annotation
                    or "setting(" in value
                ):
                    mark("declarations", f, node)
    return {"total": total} | {k: len(v) for k, v in kinds.items()}


def public_names(root: Path) -> tuple[int, int]:
    """(names, lists): the ``__all__`` entries of the public modules under ``root``."""
    names = lists = 0
    for f in root.rglob("*.py"):
        if f.name.startswith("_") and f.name != "__init__.py":
            continue
        for node in ast.parse(f.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(getattr(t, "id", "") == "__all__" for t in targets):
                names += len(ast.literal_eval(node.value))
                lists += 1
    return names, lists


def ece_path() -> tuple[list[str], int, int]:
    """(files, functions, deepest calibkit frame) of one ``ece`` call on 1,000 rows."""
    from calibkit.metrics import ece

    z = np.random.default_rng(0).normal(size=(1000, 10)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 10, 1000)
    ece(z, y)  # imports and caches warm
    files, functions, depth = set(), set(), [0, 0]

    def profile(frame, event, arg):
        name = frame.f_code.co_filename
        if "calibkit" not in name or "site-packages/torch" in name:
            return
        if event == "call":
            depth[0] += 1
            depth[1] = max(depth)
            files.add(name.split("calibkit/")[-1])
            functions.add((name, frame.f_code.co_name))
        elif event == "return":
            depth[0] -= 1

    sys.setprofile(profile)
    ece(z, y)
    sys.setprofile(None)
    return sorted(files), len(functions), depth[1]


#: checks of data, not of a keyword setting
DATA_CHECKS = {"check_finite", "check_probabilities", "check_same_device", "check_fit_data"}


def hand_checks(root: Path) -> list[str]:
    """``file:function:check(parameter)`` for every ``check_*`` call in ``metrics/`` whose
    first argument is a parameter of the function it sits in."""
    found = []
    for f in sorted((root / "metrics").glob("*.py")):
        for fn in ast.walk(ast.parse(f.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            params = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs)} - {"self", "cls"}
            for node in ast.walk(fn):
                call = (
                    node.func.id
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    else ""
                )
                if call.startswith("check_") and call not in DATA_CHECKS and node.args:
                    first = node.args[0]
                    if isinstance(first, ast.Name) and first.id in params:
                        found.append(f"{f.name}:{fn.name}:{call}({first.id})")
    return found


def documented_texts(root: Path) -> int:
    """Keyword texts given to ``@documented(...)`` calls (a parameter described by hand)."""
    return sum(
        len(node.keywords)
        for f in root.rglob("*.py")
        for node in ast.walk(ast.parse(f.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "documented"
    )


def main(argv: list[str]) -> None:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[2] / "src" / "calibkit"
    kinds = line_kinds(root)
    print("src lines: " + ", ".join(f"{k} {v:,}" for k, v in kinds.items()))
    names, lists = public_names(root)
    print(f"public __all__: {names} names in {lists} lists")
    checks = hand_checks(root)
    print(f"hand checks of a keyword in metrics/: {len(checks)}: {checks}")
    print(f"keyword texts in @documented(...): {documented_texts(root)}")
    files, functions, deepest = ece_path()
    print(f"ece(): {len(files)} files, {functions} functions, {deepest} frames deep: {files}")


if __name__ == "__main__":
    main(sys.argv[1:])
