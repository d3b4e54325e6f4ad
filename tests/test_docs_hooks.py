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


def test_an_example_whose_data_is_missing_is_named_with_what_it_needs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "_hooks"))
    from gallery_needs import missing_needs

    examples = tmp_path / "examples"
    examples.mkdir()
    (tmp_path / "data.npz").write_bytes(b"")
    (examples / "plot_here.py").write_text('"""x"""\n# gallery-needs: data.npz\n')
    (examples / "plot_gone.py").write_text('"""x"""\n# gallery-needs: ../nowhere/logits.npz\n')
    (examples / "plot_plain.py").write_text('"""x"""\nprint(1)\n')
    assert missing_needs(examples, tmp_path) == {"plot_gone.py": "../nowhere/logits.npz"}
    # the repository's own: the published table names the logits it reads
    assert "plot_published_table.py" in missing_needs(ROOT / "examples", tmp_path)
