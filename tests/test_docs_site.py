"""Issue 57: the documentation site builds from the repository with warnings as errors
(MkDocs Material, mkdocstrings, the command-line page's hook; mkdocs.yml), offline: every
page of docs/, an API page per public name with its Parameters from the docstring as
Python sees it, and the command-line reference from the commands. Every image a page shows
is in the site."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built here, or the one ``.ci/run`` built from the ``[docs]`` extra alone in a
    virtual environment of its own (``CALIBKIT_BUILT_SITE``; issue 64 §2), which these tests
    then check instead of building it a second time."""
    if built := os.environ.get("CALIBKIT_BUILT_SITE"):
        assert (Path(built) / "index.html").is_file(), f"CALIBKIT_BUILT_SITE={built} holds no site"
        return Path(built)
    out = tmp_path_factory.mktemp("site")
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))


def test_the_api_reference_has_a_page_per_public_name_with_its_parameters(site):
    import calibkit.metrics

    for name in ("evaluate", "ece", "CalibrationMeter"):
        assert name in calibkit.metrics.__all__
        page = _text(site / "api" / "calibkit.metrics" / name / "index.html")
        assert "Parameters" in page, name
    evaluate = _text(site / "api" / "calibkit.metrics" / "evaluate" / "index.html")
    assert "n_bins" in evaluate and "EvaluationResult" in evaluate
    assert (site / "api" / "calibkit.posthoc" / "TemperatureScaling" / "index.html").exists()
    maccal = (site / "api" / "calibkit.posthoc" / "MacCal" / "index.html").read_text()
    assert 'href="../../../methods/#5-mac-cal"' in maccal  # what it implements (the anchor exists)


def test_a_class_page_shows_its_public_path_what_users_call_and_no_torch_text(site):
    """Issue 64 §4: TemperatureScaling's page was headed by its private module's path, gave
    torch.nn.Module's "Initialize internal Module state" as its constructor's text and
    showed neither fit, predict_proba, save nor temperature_."""
    path = site / "api" / "calibkit.posthoc" / "TemperatureScaling" / "index.html"
    html, page = path.read_text(), _text(path)
    assert "calibkit.posthoc.TemperatureScaling" in page
    assert "_temperature" not in page and "Initialize internal Module state" not in page
    for member in ("fit", "predict_proba", "save", "temperature_", "fit_report_", "Examples"):
        assert member in page, member
    assert "trust_settings" not in page and "invariant_problem" not in page  # the harness's
    assert "<table" in html  # Parameters and Attributes as tables
    fit = html.split('<h2 id="calibkit.posthoc._temperature.TemperatureScaling.fit"')[1]
    fit = fit.split("</table>")[0]
    assert "<table" in fit and "sample_weight" in fit  # an inherited method's, parsed too


def test_the_cli_reference_is_generated_from_the_commands(site):
    """Issue 64 §5: the page reads like --help: real defaults (no Sentinel.UNSET), each
    command's whole help, each example block a code block, one table row per option."""
    from click import Context

    from calibkit.cli import cli

    html = (site / "cli" / "index.html").read_text()
    page = _text(site / "cli" / "index.html")
    for command in ("evaluate", "compare", "bench", "train", "calibrate"):
        assert f"calibkit {command}" in page, command
    assert "UNSET" not in page and "Sentinel" not in page
    assert "[default: test]" in page and "[default: 1000]" in html
    assert "(an integer in 0..10,000,000)" in page  # a declared option's values, in its help
    assert "logits_&lt;split&gt;" in html and "[local&#124;ray]" in html  # text, one cell
    assert "calibkit evaluate calibkit-demo/digits_logits.npz --bootstrap 200" in page
    blocks = re.findall(r"<pre.*?</pre>", html, re.S)
    assert sum("calibkit bench train-cifar-paper --estimate" in b for b in blocks) == 1
    root = Context(cli, info_name="calibkit")
    for name in cli.list_commands(root):  # the option tables keep their columns
        for opt in cli.get_command(root, name).params:
            if opt.param_type_name == "option" and not opt.hidden:
                assert f"<code>{opt.opts[-1]}" in html or f"{opt.opts[-1]} " in page, opt.opts


def test_every_image_a_page_shows_is_in_the_site(site):
    missing = []
    for page in site.rglob("*.html"):
        for src in re.findall(r'<img[^>]+src="([^"#?]+)"', page.read_text()):
            local = not src.startswith(("http:", "https:", "data:"))
            if local and not (page.parent / src).resolve().exists():
                missing.append(f"{page.relative_to(site)}: {src}")
    assert missing == []


def test_the_gallery_runs_its_examples_and_shows_their_figures(site):
    examples = sorted(p.stem for p in (ROOT / "examples").glob("plot_*.py"))
    assert len(examples) >= 4
    for name in examples:
        page = (site / "generated" / "gallery" / name / "index.html").read_text()
        assert re.search(r'<img[^>]+src="[^"]*mkd_glr_' + name, page), name


def test_the_pages_open_in_headless_chromium_without_an_error(site):
    """Served over HTTP as a user's browser reads them: every request the pages make
    (styles, scripts, the search index, figures) is answered, none with an error, no page
    reports an error in its console (a font fetched from the network would: the site works
    offline), and the search finds "temperature"."""
    import functools
    import http.server
    import threading

    from tests.browser import chromium, open_page

    statuses: list[tuple[str, int]] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_request(self, code="-", size="-"):
            statuses.append((self.path, int(code)))

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(site))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    try:
        pages = {
            "?q=temperature": "matching documents",
            "api/calibkit.metrics/evaluate/": "n_bins",
            "generated/gallery/plot_evaluate/": "mkd_glr_plot_evaluate_001.png",
        }
        for path, expect in pages.items():
            page = open_page(chromium(), base + path, wait=4.0)
            assert expect in page.dom, path
            assert page.errors == [], path
    finally:
        server.shutdown()
    assert any("search_index.json" in p for p, _ in statuses)
    assert [(p, c) for p, c in statuses if c >= 400] == []


def test_a_page_named_by_its_path_is_a_link_and_the_changelog_and_404_are_there(site):
    """Issue 64 §8: ``docs/real.md`` in a page, a docstring or the help is a link on the
    site (code blocks and links as written); the repository's CHANGELOG.md is a page; the
    404 page carries the site's address."""
    plain = re.compile(r"(?<![\w/.-])docs/([a-z0-9_/-]+)\.md")
    kept = re.compile(r"<pre\b.*?</pre>|<a\b.*?</a>|<[^>]*>", re.DOTALL)
    left = []
    for page in site.rglob("*.html"):
        text = kept.sub(" ", page.read_text(encoding="utf-8"))
        left += [
            f"{page.relative_to(site)}: docs/{m}.md"
            for m in plain.findall(text)
            if (ROOT / "docs" / f"{m}.md").is_file()
        ]
    assert left == []
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert '<a href="../real/">docs/real.md</a>' in cli
    changelog = _text(site / "changelog" / "index.html")
    assert "Changelog" in changelog and "kull_probabilities" in changelog
    # site_url set: the 404 page's links are from the site's root, so they work from any
    # missing page's depth; the pages name their canonical address
    assert 'src="/assets/javascripts/' in (site / "404.html").read_text(encoding="utf-8")
    home = (site / "index.html").read_text(encoding="utf-8")
    assert '<link rel="canonical" href="http://127.0.0.1:8000/">' in home
