"""MkDocs hook: the table of every registered algorithm's options, generated from the config dataclasses.

A page that contains :data:`PLACEHOLDER` gets it replaced by
:func:`fedbandit_envs.algorithms.options_markdown`, so the page lists exactly the keywords, types, defaults
and field documentation of the registered algorithms. ``mkdocs.yml`` loads this file under ``hooks:``.
"""

from __future__ import annotations

from typing import Any

#: The marker a page carries where the generated tables go.
PLACEHOLDER = "<!-- fedbandit-algorithm-options -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace :data:`PLACEHOLDER` with the options of every registered algorithm (MkDocs event)."""
    if PLACEHOLDER not in markdown:
        return markdown
    from fedbandit_envs.algorithms import options_markdown

    return markdown.replace(PLACEHOLDER, options_markdown())
