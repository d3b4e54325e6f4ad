"""Issue 64 §3: every code block a user copies from the README, the home page, the tour and
the user guide runs as copied, in an empty folder, by Sybil (the library that runs
documentation examples; its Markdown parsers read the fences as MkDocs renders them).

A page's Python blocks run in order in one namespace, as a user following the page runs
them; its ``bash`` blocks run in the same folder, so a shell block works on the files an
earlier block made. A block that cannot run here (one that installs, or needs
``../shared``) carries Sybil's ``<!-- skip: next -->`` and says why in the page's own text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[1]
#: the pages whose blocks users copy, and how many runnable blocks each holds (a block that
#: stops being found, by a fence typo, fails here instead of silently not running)
PAGES = {
    "README.md": 1,
    "docs/index.md": 1,
    "docs/quickstart.md": 1,
    "docs/tour.md": 11,
    "docs/metrics.md": 4,
    "docs/posthoc.md": 4,
}


def _bash(example) -> None:
    """Run a shell block with bash -e in the page's folder, calibkit on the PATH."""
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-e", "-c", example.parsed],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, f"line {example.line}: {done.stderr[-2000:]}"


SYBIL = Sybil(
    parsers=[PythonCodeBlockParser(), CodeBlockParser("bash", _bash), SkipParser()],
)


@pytest.mark.parametrize("page", PAGES)
def test_every_block_of_the_page_runs_as_copied(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an empty folder, as a user's
    document = SYBIL.parse(ROOT / page)
    blocks = 0
    for example in document.examples():
        example.evaluate()
        blocks += (example.region.lexemes or {}).get("arguments") in ("python", "bash")
    assert blocks - document.text.count("<!-- skip: next") == PAGES[page]
