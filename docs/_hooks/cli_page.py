"""MkDocs hook: the command-line reference (docs/cli.md's ``{{ cli_reference }}``), written
from the commands themselves as ``--help`` shows them: each command's whole help, its usage,
and its options with the defaults and ranges click prints (``get_help_record``), each
``\\b`` block (the examples, the metric list) as a code block.

Not mkdocs-click: with click 8.2 and later it shows the ``Sentinel.UNSET`` that click now
uses for "no default" (38 times on this page), cuts each summary at its first line and runs
the ``\\b`` blocks together into one paragraph (issue 64 §5)."""

from __future__ import annotations

import html
import inspect
import textwrap

import click

MARKER = "{{ cli_reference }}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, HTML's special characters and pipes as
    entities (``logits_<split>`` stays text; ``[local|ray]`` stays in one cell)."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "&#124;")


def help_markdown(text: str) -> str:
    """A command's help as Markdown: paragraphs reflowed, each ``\\b`` block verbatim in a
    code block, under its first line as a heading where that line ends with a colon."""
    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if not para.startswith("\b"):
            out.append(" ".join(para.split()))
            continue
        body = para.lstrip("\b").strip("\n")
        first, _, rest = body.partition("\n")
        if first.rstrip().endswith(":") and rest.strip():
            out += [f"**{first.strip()[:-1]}**", f"```text\n{textwrap.dedent(rest)}\n```"]
        else:
            out.append(f"```text\n{textwrap.dedent(body)}\n```")
    return "\n\n".join(out)


def command_markdown(group: click.Group, prog: str) -> str:
    """Every command of ``group``, in order, as ``--help`` shows it."""
    root = click.Context(group, info_name=prog)
    parts = []
    for name in group.list_commands(root):
        cmd = group.get_command(root, name)
        ctx = click.Context(cmd, info_name=name, parent=root, **cmd.context_settings)
        usage = " ".join([prog, name, *cmd.collect_usage_pieces(ctx)])
        rows = [
            f"| <code>{_cell(opts)}</code> | {_cell(help)} |"
            for p in cmd.get_params(ctx)
            if isinstance(p, click.Option) and (record := p.get_help_record(ctx))
            for opts, help in [record]
        ]
        parts += [
            f"## {prog} {name}",
            f"```text\n{usage}\n```",
            help_markdown(cmd.help or ""),
            "| Option | What it does |\n| --- | --- |\n" + "\n".join(rows),
        ]
    return "\n\n".join(parts) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    from calibkit.cli import cli

    return markdown.replace(MARKER, command_markdown(cli, "calibkit"))
