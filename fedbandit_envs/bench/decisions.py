"""Spec codes ("D9", "RC-C2", "§5.7", "check 13") and their entries in ``docs/decisions/<paper>.md``.

Docstrings, claims and reports cite the implementation specs' numbered decisions, reproduction checks
and sections. Each paper's decisions doc gives every cited code an entry marked ``<a id="ANCHOR"></a>``
(:func:`anchor`), and reports render the codes of a claim as links to those entries
(:func:`linked_codes`).

Where the links point: the environment variable ``FEDBANDIT_DECISIONS_URL`` (a base URL or path
holding the ``<paper>.md`` files, e.g. a repository's ``.../blob/main/docs/decisions``) when set;
otherwise the ``docs/decisions`` folder of this source checkout, relative to the report's directory;
otherwise (an installed wheel has no docs) no links, the codes stay plain text.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fedbandit_envs.bench.tables import Link, RichText

#: The papers (as :attr:`Scenario.paper <fedbandit_envs.bench.scenarios.Scenario>` names them) and their docs.
DOCS = {
    "li_song": "li-song.md",
    "zhu": "zhu.md",
    "dubey_pentland": "dubey-pentland.md",
    "li_wang": "li-wang.md",
    "solanki": "solanki.md",
}
PAPERS = tuple(DOCS)

#: Environment variable overriding where decision links point.
URL_VARIABLE = "FEDBANDIT_DECISIONS_URL"

#: The decisions docs of this source checkout (absent when the package is installed from a wheel).
CHECKOUT_DOCS = Path(__file__).resolve().parents[2] / "docs" / "decisions"

_CODES = re.compile(
    r"(?:§\s?|\bspec section )(?P<section>\d+(?:\.\d+)*)(?:\s?[-–]\s?(?P<section_end>\d+(?:\.\d+)*))?"
    r"|\bchecks? (?P<check>\d+)(?![.\d])(?:\s?[-–]\s?(?P<check_end>\d+)(?![.\d]))?"
    r"|(?<![\w-])(?P<code>RC-?[A-Z]?\d{1,2}|D-?\d{1,2}|[PSTEI]\d{1,2})"
    r"(?:(?:-|–|\.\.)(?:RC-)?[A-Z]?-?(?P<code_end>\d{1,2}))?(?!\w)"
)
_ANCHORS = re.compile(r'<a id="([^"]+)"></a>')


def find_codes(text: str) -> list[tuple[int, str]]:
    """The spec codes cited in ``text`` as ``(position, code)``, ranges expanded ("D9-D11" -> D9, D10, D11).

    Codes are normalised: "spec section 6.3" -> "§6.3", "checks 13" -> "check 13". A code that is a whole
    quoted string (a test id such as ``"P5"``, the path graph) is not a citation.
    """
    found = []
    for match in _CODES.finditer(text):
        start, end = match.span()
        if match["section"]:
            found.append((start, f"§{match['section']}"))
            if match["section_end"]:
                found.append((start, f"§{match['section_end']}"))
        elif match["check"]:
            last = int(match["check_end"] or match["check"])
            found += [(start, f"check {n}") for n in range(int(match["check"]), last + 1)]
        else:
            if start > 0 and end < len(text) and text[start - 1] in "\"'" and text[end] == text[start - 1]:
                continue
            code = match["code"]
            split = re.fullmatch(r"(.*?)(\d+)", code)
            assert split is not None, "the code pattern ends in digits"
            prefix, first = split.groups()
            last = int(match["code_end"] or first)
            width = len(first) if first.startswith("0") else 0
            found += [(start, f"{prefix}{n:0{width}d}") for n in range(int(first), max(last, int(first)) + 1)]
    return found


def anchor(code: str) -> str:
    """The anchor of a code's entry: "D9" -> "d9", "RC-C2" -> "rc-c2", "§5.7" -> "sec-5-7", "check 2" -> "check-2"."""
    if code.startswith("§"):
        return "sec-" + code[1:].replace(".", "-")
    return code.lower().replace(" ", "-")


def doc_anchors(path: str | Path) -> set[str]:
    """The entry anchors (``<a id="..."></a>``) of a decisions doc."""
    return set(_ANCHORS.findall(Path(path).read_text(encoding="utf-8")))


def decisions_base(directory: str | Path) -> str | None:
    """Where links from a report written in ``directory`` point (see the module docstring), or None for no links."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        return url.rstrip("/")
    if CHECKOUT_DOCS.is_dir():
        return Path(os.path.relpath(CHECKOUT_DOCS, Path(directory).resolve())).as_posix()
    return None


def linked_codes(text: str, paper: str, base: str | None) -> RichText | str:
    """``text`` with each cited code of ``paper`` linked to ``<base>/<paper doc>#<anchor>``.

    Returns ``text`` unchanged when there is no ``base`` or ``paper`` has no decisions doc (e.g. ``"suite"``).
    """
    if base is None or paper not in DOCS:
        return text
    parts: list[str | Link] = []
    done = 0
    for match in _CODES.finditer(text):
        codes = find_codes(match.group())
        if not codes:
            continue
        parts += [text[done : match.start()], Link(match.group(), f"{base}/{DOCS[paper]}#{anchor(codes[0][1])}")]
        done = match.end()
    return RichText((*parts, text[done:])) if parts else text
