"""MkDocs hook: a mention of another page by its path in the repository (``docs/real.md``,
as the docstrings, the command-line help and the pages write it for a reader of the source
or a terminal) becomes a link to that page on the site. Mentions inside a code block (a
command such as ``--doc docs/real.md``) and inside an existing link stay as written; a
path that names no page of the site stays text."""

from __future__ import annotations

import re

from mkdocs.utils import get_relative_url

#: a page path, not part of a longer path or word (``../docs/x.md``, ``mydocs/x.md``)
MENTION = re.compile(r"(?<![\w/.-])docs/((?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+\.md)\b")
#: what is kept as written: code blocks, links, and the inside of any tag (its attributes)
KEPT = re.compile(r"<pre\b.*?</pre>|<a\b.*?</a>|<[^>]*>", re.DOTALL)


def link_mentions(html: str, here: str, pages: dict[str, str]) -> str:
    """``html`` with each mention of a page of ``pages`` (its source path under docs/ → its
    URL) made a link relative to ``here`` (the current page's URL)."""

    def linked(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            url = pages.get(m.group(1))
            if url is None:
                return m.group(0)
            return f'<a href="{get_relative_url(url, here)}">{m.group(0)}</a>'

        return MENTION.sub(one, text)

    out, at = [], 0
    for kept in KEPT.finditer(html):
        out.append(linked(html[at : kept.start()]))
        out.append(kept.group(0))
        at = kept.end()
    out.append(linked(html[at:]))
    return "".join(out)


def on_page_content(html, page, config, files):
    pages = {f.src_uri: f.url for f in files.documentation_pages()}
    return link_mentions(html, page.url, pages)
