r"""Text that came from a user, a spec or a store, made inert for the format it is written
into: one function per output format, used by every writer, so that a name can never become
markup, a table cell, a heading or a script.

- :func:`md_text`: Markdown prose, headings and table cells. HTML's special characters
  become entities (``<script>`` is shown, never run, by a renderer with raw HTML on),
  Markdown's punctuation is backslash-escaped (``*``, ``_``, ``[``, ``|``, ``$`` …: no
  emphasis, link, math or extra table cell), and a line break or control character becomes
  a space (a name cannot end a table row or start a heading).
- :func:`html_text`: HTML text and attribute values (``html.escape`` with quotes).
- :func:`comment_text`: a name inside an HTML comment (the ``--doc`` section markers):
  nothing that could end or open a comment (``-->``, ``--!>``, ``<!--``, any ``--``).
- :func:`term_text`: a terminal line: control characters (escape sequences that move the
  cursor or recolour the screen) shown as ``\x1b``-style codes. The CLI's console prints
  with rich's markup off, so ``[red]`` stays text.

Figures need none: they are drawn with matplotlib's mathtext off (``text.parse_math``).

>>> print(md_text("<script>x</script> | **b**"))
&lt;script&gt;x&lt;/script&gt; \| \*\*b\*\*
>>> print(comment_text("x --><script>"))
x%20-%2D%3E%3Cscript%3E
>>> print(term_text("ce\x1b[2J"))
ce\x1b[2J
"""

from __future__ import annotations

import html
import re

#: C0 and C1 control characters, DEL and the Unicode line and paragraph separators
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: Markdown's punctuation that can make markup inside a line, once ``<`` and line breaks
#: are gone: emphasis, code, links and images (``[``), table cells, math, strike-through,
#: pandoc's superscript and attributes (``#``, ``-`` or ``+`` act only at a line's start,
#: which a name never is here)
_MD_PUNCT = re.compile(r"([\\`*_{}\[\]|~$^])")


class Strong(str):
    """A table cell that calibkit itself sets in bold (a best value, a verdict that holds),
    written ``**text**`` as the terminal and ``--json`` show it. Writers read a cell as bold
    only by this type, never by its text: a name that reads ``**x**`` is a plain ``str``."""


def md_text(text: object) -> str:
    """``text`` as literal Markdown: it renders as itself in a paragraph, heading or table
    cell, in CommonMark, GitHub's Markdown, pandoc and MkDocs, raw HTML on or off."""
    flat = _CONTROL.sub(" ", str(text))
    return _MD_PUNCT.sub(r"\\\1", html.escape(flat, quote=False))


def html_text(text: object) -> str:
    """``text`` as literal HTML text or attribute value (quotes escaped)."""
    return html.escape(str(text), quote=True)


#: what a name keeps as itself inside a comment; a ``-`` is kept where it follows no ``-``
_COMMENT_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:+=@/,")


def comment_text(text: object) -> str:
    """``text`` to write inside an HTML comment: every other character percent-encoded as
    its UTF-8 bytes, so that no ``--`` (which ends or breaks a comment), ``<`` or ``>``
    can appear; a preset's name such as ``train-cifar-gpu`` reads as itself."""
    out: list[str] = []
    for ch in str(text):
        keep = ch in _COMMENT_SAFE or (ch == "-" and not (out and out[-1] == "-"))
        out.append(ch if keep else "".join(f"%{b:02X}" for b in ch.encode()))
    return "".join(out)


def _shown(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def term_text(text: object) -> str:
    """``text`` for a terminal: every control character shown as its escape code."""
    return _CONTROL.sub(_shown, str(text))
