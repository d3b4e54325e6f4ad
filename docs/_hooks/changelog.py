"""MkDocs hook: the repository's CHANGELOG.md as the site's "Changelog" page, one source for
both. Its links into docs/ (written for a reader of the repository) are made the site's."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

#: a Markdown link's target under docs/, as the repository writes it
INTO_DOCS = re.compile(r"\]\(docs/")


def on_files(files, config):
    source = Path(config["config_file_path"]).parent / "CHANGELOG.md"
    text = INTO_DOCS.sub("](", source.read_text(encoding="utf-8"))
    files.append(File.generated(config, "changelog.md", content=text))
    return files
