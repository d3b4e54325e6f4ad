"""JSON Schemas (draft 2020-12) of every command's ``--json`` output, shipped inside the
package (README.md beside them says which command each describes). Every output is an
object with ``"schema_version": SCHEMA_VERSION``; the version rises when a shape changes
incompatibly.

>>> from calibkit import schemas
>>> schemas.load("fit")["properties"]["schema_version"]
{'$ref': 'common.schema.json#/$defs/schema_version'}
>>> "compare" in schemas.commands()
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
HERE = Path(__file__).resolve().parent


def path(name: str) -> Path:
    """The schema file of a command (or of ``common``, the shared pieces)."""
    file = HERE / f"{name}.schema.json"
    if not file.exists():
        raise ValueError(f"no JSON schema named {name!r}; there are: {', '.join(commands())}")
    return file


def load(name: str) -> dict[str, Any]:
    """The schema of a command, as a dict (it refers to ``common.schema.json`` by ``$ref``)."""
    return json.loads(path(name).read_text())


def commands() -> list[str]:
    """The names of every schema, ``common`` included."""
    return sorted(p.name.removesuffix(".schema.json") for p in HERE.glob("*.schema.json"))
