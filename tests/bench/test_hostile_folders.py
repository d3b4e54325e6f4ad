"""Issue 53 §1–2: nothing anyone else can plant. A symbolic link planted in an output
folder (a shared, group-writable one) is refused, naming it, and the file it points to is
left as it was; a name from a spec or a store is shown as written in report.md (rendered by a
real Markdown renderer with raw HTML on), in report.html (rendered by Chromium), in the
section ``--doc`` writes, in the figures and on the terminal: never as markup, a table cell
or a script."""

from __future__ import annotations

import html
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from calibkit._outputs import LinkRefused, atomic_write, file_lock, inside
from calibkit.bench._report import write_report
from calibkit.bench._store import ALL, Store, StoreError
from calibkit.bench._study import study_markdown
from tests.browser import headless
from tests.test_cli import run

from .rows import write

SPEC = """name: one
seeds: [1]
train: {epochs: 1}
datasets:
  - data: digits
    models: [mlp]
methods:
  - {name: CE, loss: ce}
posthoc: [ts]
"""


@pytest.fixture
def shared(tmp_path):
    """A group-writable output folder and, beside it, a file of the user's that a planted
    link points to."""
    victim = tmp_path / "thesis.tex"
    victim.write_text("three years of work\n")
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o2775)
    (tmp_path / "spec.yaml").write_text(SPEC)
    return out, victim


@pytest.mark.parametrize("planted", [".bench.lock", "results.sqlite.lock", "results.sqlite"])
def test_a_planted_link_in_the_bench_folder_is_refused_and_its_target_kept(shared, planted, capsys):
    out, victim = shared
    (out / planted).symlink_to(victim)
    code, _, err = run(["bench", str(out.parent / "spec.yaml"), "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{out / planted} is a symbolic link" in err and "nothing was written" in err
    assert victim.read_text() == "three years of work\n"
    assert (out / planted).is_symlink()  # the link itself is not replaced either


def test_a_planted_link_below_the_bench_folder_is_refused(shared, tmp_path, capsys):
    out, _ = shared
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "train").symlink_to(elsewhere)
    code, _, err = run(["bench", str(out.parent / "spec.yaml"), "-o", str(out)], capsys)
    assert code == 2 and "train is a symbolic link" in err and len(err.strip().splitlines()) == 1
    assert list(elsewhere.iterdir()) == []


def test_the_lock_is_never_opened_through_a_link_or_a_hard_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "soft.lock").symlink_to(victim)
    with (
        pytest.raises(LinkRefused, match=r"soft\.lock is a symbolic link"),
        file_lock(tmp_path / "soft.lock"),
    ):
        pass
    os.link(victim, tmp_path / "hard.lock")
    with (
        pytest.raises(LinkRefused, match="not a plain file of its own"),
        file_lock(tmp_path / "hard.lock"),
    ):
        pass
    assert victim.read_text() == "keep"
    with file_lock(tmp_path / "own.lock") as handle:  # a lock of its own still works
        handle.write("pid 1")
    assert (tmp_path / "own.lock").read_text() == "pid 1"


def test_atomic_writes_and_paths_inside_a_folder_refuse_links(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "out.calib").symlink_to(victim)
    with pytest.raises(LinkRefused, match=r"out\.calib is a symbolic link"):
        atomic_write(tmp_path / "out.calib", lambda p: Path(p).write_text("x"))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(LinkRefused):
        atomic_write(tmp_path / "dangling", lambda p: Path(p).write_text("x"))
    assert not (tmp_path / "nowhere").exists() and victim.read_text() == "keep"
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "figures").symlink_to(tmp_path)
    with pytest.raises(LinkRefused, match="figures is a symbolic link"):
        inside(tmp_path / "out", "figures", "a.png")
    with pytest.raises(ValueError, match="leaves the output folder"):
        inside(tmp_path / "out", "..", "a.png")
    # the folder the user named may be a link: that one the user made
    (tmp_path / "mine").symlink_to(tmp_path / "out", target_is_directory=True)
    assert inside(tmp_path / "mine", "report.md") == tmp_path / "mine" / "report.md"


#: names as someone hostile would write them into a spec or a store
HOSTILE = {
    "script": "<script>document.title='pwned'</script>",
    "img": "<img src=x onerror=\"document.title='pwned'\">",
    "pipe": "a | 99.99 | b",
    "newline": "CE\n| forged | 99.99 |",
    "rich": "[red]CE[/red] [/]",
    "math": r"$\foo$",
    "bold": "**0.5**",
    "escape": "CE\x1b[2J",
}


def _hostile_store(path):
    store = Store(path)
    for i, name in enumerate(HOSTILE.values()):
        for seed in (1, 2):
            run_ = {
                "key": f"k{i}-{seed}",
                "spec": {"loss": "ce", "stage2": None, "mixup": 0.0},
                "dataset": "digits",
                "model": "mlp",
                "method": name,
                "seed": seed,
            }
            metrics = [
                ("test", "uncalibrated", ALL, "ece", 0.2001 + i / 100),
                ("test", "uncalibrated", ALL, "accuracy", 0.9),
                ("test", "ts", ALL, "ece", 0.1),
                ("test", "ts", ALL, "temperature", 1.5),
            ]
            anomalies = [("ts", ALL, "temperature", f"detail {name}")]
            write(store, run_, metrics, anomalies=anomalies)
    store.set_sweep(list(HOSTILE.values()), HOSTILE["script"])
    return store


class Page(HTMLParser):
    """Every element of a page (``tags``) and its tables: each a list of rows, each row the
    text of its cells (``tables``; ``rows``: every table's rows, in order)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    @property
    def rows(self) -> list[list[str]]:
        return [row for table in self.tables for row in table]

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def rendered(markdown: str) -> Page:
    """``markdown`` rendered by markdown-it (CommonMark with GitHub's tables, raw HTML on)."""
    page = Page()
    page.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    return page


def _shown(name: str) -> str:
    """What a name reads as once rendered: line breaks become spaces."""
    return re.sub(r"[\x00-\x1f]", " ", name)


def test_hostile_names_render_as_text_in_report_md_and_the_doc_section(tmp_path):
    _hostile_store(tmp_path / "r.sqlite")
    write_report(tmp_path / "r.sqlite", tmp_path / "report")  # $\foo$ does not stop figures
    for markdown in (
        (tmp_path / "report" / "report.md").read_text(),
        study_markdown(tmp_path / "r.sqlite"),
    ):
        page = rendered(markdown)
        assert "script" not in page.tags and not {"em", "code"} & set(page.tags)
        assert page.tags.count("img") == markdown.count("](figures/")  # only the figures
        cells = {c for row in page.rows for c in row}
        missing = {_shown(n) for n in HOSTILE.values()} - cells
        assert not missing, missing  # every name, whole, in a cell of its own
    headline = rendered((tmp_path / "report" / "report.md").read_text()).rows
    first = next(i for i, r in enumerate(headline) if r[0] == "method")
    table = headline[first : first + 1 + len(HOSTILE)]
    assert all(len(r) == len(table[0]) for r in table)  # no cell added or lost
    numbers = {r[0]: r[1] for r in table[1:]}
    for i, name in enumerate(HOSTILE.values()):  # each name beside its own number
        assert numbers[_shown(name)].startswith(f"{20.01 + i:.2f}"), (name, numbers)


def test_hostile_names_stay_text_in_report_html_in_chromium(tmp_path):
    _hostile_store(tmp_path / "r.sqlite")
    write_report(tmp_path / "r.sqlite", tmp_path / "report")
    page = (tmp_path / "report" / "report.html").resolve()
    dom = headless("--virtual-time-budget=2000", "--dump-dom", page.as_uri())
    assert "pwned" not in dom.split("</title>")[0]  # no script ran
    tags = Page()
    tags.feed(dom)
    assert "script" not in tags.tags and tags.tags.count("img") == dom.count("data:image/png")
    assert html.escape(HOSTILE["script"], quote=False) in dom


def test_hostile_names_print_as_written_on_the_terminal(tmp_path, capsys):
    from calibkit.cli._bench import _print_bench_summary

    _hostile_store(tmp_path / "r.sqlite")
    summary = write_report(tmp_path / "r.sqlite", tmp_path / "report")
    counts = {"done": 1, "skipped": 0, "failed": 0}
    seconds = {"wall": 1.0, "sweep": 1.0, "report": 0.0, "workers": 1, "phases": {}}
    _print_bench_summary(summary, counts, tmp_path / "r.sqlite", "r.html", [], seconds)
    out = capsys.readouterr().out
    assert "[red]CE[/red] [/]" in out and "\x1b" not in out and "CE\\x1b[2J" in out


def test_a_report_into_a_folder_whose_figures_is_a_link_writes_nothing(tmp_path, capsys):
    _hostile_store(tmp_path / "r.sqlite")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "figures").symlink_to(elsewhere)
    code, _, err = run(
        ["report", str(tmp_path / "r.sqlite"), "-o", str(tmp_path / "report")], capsys
    )
    assert code == 2 and "figures is a symbolic link" in err and len(err.strip().splitlines()) == 1
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "report" / "report.md").exists()


def test_a_store_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "victim").write_text("keep")
    (tmp_path / "results.sqlite").symlink_to(tmp_path / "victim")
    with pytest.raises(StoreError, match="is a symbolic link"):
        Store(tmp_path / "results.sqlite")
    assert (tmp_path / "victim").read_text() == "keep"
