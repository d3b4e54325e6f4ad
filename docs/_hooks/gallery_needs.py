"""MkDocs hook: a gallery example that needs data the repository does not ship says so in
a line ``# gallery-needs: PATH`` (PATH from the repository root, such as
``../shared/data/logits/resnet110_cifar10.npz``); where PATH is missing, the example is left
out of the build with that reason in the build's log, instead of failing it. The example's
own text says the same at its top, for a reader of the site built where the data is."""

from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.gallery_needs")

#: the line an example declares what it needs with
NEEDS = re.compile(r"^# gallery-needs: (\S+)\s*$", re.MULTILINE)


def missing_needs(examples: Path, root: Path) -> dict[str, str]:
    """{example file name: the first path it needs that is missing} under ``examples``."""
    out = {}
    for script in sorted(examples.glob("*.py")):
        for need in NEEDS.findall(script.read_text(encoding="utf-8")):
            if not (root / need).exists():
                out[script.name] = need
                break
    return out


def on_config(config):
    gallery = config.plugins.get("gallery")
    if gallery is None:
        return config
    root = Path(config["config_file_path"]).parent
    skipped = {}
    folders = gallery.config["examples_dirs"]
    for folder in [folders] if isinstance(folders, str) else folders:
        skipped |= missing_needs(root / folder, root)
    for name, need in skipped.items():
        log.info("gallery: %s left out of this build: it needs %s, not found", name, need)
    if skipped:
        names = "|".join(re.escape(n) for n in skipped)
        old = gallery.config.get("ignore_pattern") or r"__init__\.py"
        gallery.config["ignore_pattern"] = f"(?:{old})|(?:{names})"
    return config
