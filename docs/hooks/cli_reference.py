"""MkDocs hook: the command-line reference, generated from the ``fedbandit`` argparse parser at build time.

A page that contains :data:`PLACEHOLDER` gets it replaced by :func:`cli_markdown` of the real parser, so the
page lists exactly the subcommands and options the installed ``fedbandit`` command accepts (a usage block and a
table of arguments per subcommand). ``mkdocs.yml`` loads this file under ``hooks:``.
"""

from __future__ import annotations

import argparse
import html
import re
from typing import Any

#: The marker a page carries where the generated reference goes.
PLACEHOLDER = "<!-- fedbandit-cli-reference -->"

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|])")


def _escape(text: str) -> str:
    """Plain text made safe inside a Markdown table cell (HTML, emphasis, links and cell bars escaped)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(" ".join(text.split()), quote=False))


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """The (name, help, parser) of every subcommand of ``parser``, in the order they were added."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    """One Markdown table row per argument of ``parser`` (``--help`` and subcommand groups left out)."""
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            takes_value = action.nargs != 0
            value = f" {formatter._format_args(action, action.dest.upper())}" if takes_value else ""
            name = ", ".join(f"{option}{value}" for option in action.option_strings)
        else:
            name = formatter._format_args(action, action.dest)
        default = action.default
        unset = default is None or default is False or default is argparse.SUPPRESS or default in ([], {})
        shown_default = "" if unset or action.required else f"`{default}`"
        text = _escape(formatter._expand_help(action)) if action.help else ""
        if action.required and action.option_strings:
            text = f"{text} (required)" if text else "required"
        rows.append(f"| `{name}` | {shown_default} | {text} |")
    return rows


def cli_markdown(parser: argparse.ArgumentParser) -> str:
    """The command-line reference of ``parser`` as Markdown: one section per subcommand."""
    lines = [f"```text\n{parser.format_usage().strip()}\n```", ""]
    for name, summary, sub in _subcommands(parser):
        lines += [f"## `{parser.prog} {name}`", "", _escape(sub.description or summary), ""]
        lines += [f"```text\n{sub.format_usage().strip()}\n```", ""]
        rows = _argument_rows(sub)
        if rows:
            lines += ["| Argument | Default | Description |", "| --- | --- | --- |", *rows, ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace :data:`PLACEHOLDER` with the reference of the ``fedbandit`` parser (MkDocs event)."""
    if PLACEHOLDER not in markdown:
        return markdown
    from fedbandit_envs.cli import _parser

    return markdown.replace(PLACEHOLDER, cli_markdown(_parser()))
