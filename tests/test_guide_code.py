"""Issue 64 §3: every code block a user copies from the README, the home page, the tour and
the user guide runs as copied, in an empty folder, by Sybil (the library that runs
documentation examples; its Markdown parsers read the fences as MkDocs renders them).

A page's Python blocks run in order in one namespace, as a user following the page runs
them; its ``bash`` blocks run in the same folder, so a shell block works on the files an
earlier block made. A block that cannot run here (one that installs, or needs
``../shared``) carries Sybil's ``<!-- skip: next -->`` and says why in the page's own text.
The shell's ``calibkit`` starts warm (tests/warm_cli.py: the same entry point, forked from
a process that has imported PyTorch once), which halves the tour page's time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

from tests import warm_cli

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
    done = subprocess.run(
        ["bash", "-e", "-c", example.parsed], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"line {example.line}: {done.stderr[-2000:]}"


SYBIL = Sybil(
    parsers=[PythonCodeBlockParser(), CodeBlockParser("bash", _bash), SkipParser()],
)


@pytest.fixture(scope="module")
def warm_path(tmp_path_factory):
    """The PATH of the pages' shells: the warm ``calibkit``, then this Python's scripts."""
    server, bin_ = warm_cli.start(tmp_path_factory.mktemp("warm"))
    yield os.pathsep.join([str(bin_), str(Path(sys.executable).parent), os.environ["PATH"]])
    server.kill()
    server.wait()


@pytest.mark.parametrize("page", PAGES)
def test_every_block_of_the_page_runs_as_copied(page, tmp_path, monkeypatch, warm_path):
    monkeypatch.chdir(tmp_path)  # an empty folder, as a user's
    monkeypatch.setenv("PATH", warm_path)
    document = SYBIL.parse(ROOT / page)
    blocks = 0
    for example in document.examples():
        example.evaluate()
        blocks += (example.region.lexemes or {}).get("arguments") in ("python", "bash")
    assert blocks - document.text.count("<!-- skip: next") == PAGES[page]


@pytest.mark.parametrize("args", [["methods"], ["evaluate", "missing.npz"]])
def test_the_warm_calibkit_is_the_console_script(args, tmp_path, warm_path):
    """Same output, same status (2 and one line for a bad input), in the caller's folder."""
    runs = [
        subprocess.run(
            [str(Path(folder) / "calibkit"), *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        for folder in (warm_path.split(os.pathsep)[0], Path(sys.executable).parent)
    ]
    warm, cold = ((r.returncode, r.stdout, r.stderr) for r in runs)
    assert warm == cold
    assert warm[0] == (2 if args[0] == "evaluate" else 0)
