"""The site's hooks on their own, without a build (the build's tests are in
tests/test_docs_site.py, which CI runs with the slow set)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_link_mentions_keeps_code_blocks_links_and_unknown_pages_as_written(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "_hooks"))
    from doc_links import link_mentions

    pages = {"real.md": "real/", "bench.md": "bench/"}
    html = (
        "<p>see docs/real.md and <code>docs/bench.md</code>, not docs/none.md nor "
        "../docs/real.md</p><pre><code>calibkit bench --doc docs/real.md</code></pre>"
        '<a href="x">docs/real.md</a><img alt="docs/real.md">'
    )
    out = link_mentions(html, "cli/", pages)
    assert out == (
        '<p>see <a href="../real/">docs/real.md</a> and <code><a href="../bench/">'
        "docs/bench.md</a></code>, not docs/none.md nor ../docs/real.md</p>"
        "<pre><code>calibkit bench --doc docs/real.md</code></pre>"
        '<a href="x">docs/real.md</a><img alt="docs/real.md">'
    )
