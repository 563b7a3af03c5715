"""Every spec code cited in the repository resolves to an entry of its paper's ``docs/decisions/<paper>.md``.

Docstrings, comments, tests, docs and catalogue claims cite the specs' decisions ("D9", "D-10", "P1"),
reproduction checks ("RC-C2", "RC-4", "RC1", "T4", "S3", "E1", "I2", "check 13") and sections ("§5.7").
The same code means different things in different specs, so each citation is attributed to a paper:
by the paper named on the same line before the code, else by the file (``agents/dubey.py`` is Dubey's),
else by the nearest paper named above it in the file. Each decisions doc marks an entry with
``<a id="ANCHOR"></a>``, where ``ANCHOR`` is :func:`fedbandit_envs.bench.decisions.anchor` of the code.

Run ``python tests/test_decisions_docs.py`` to list every citation (paper, code, file:line).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fedbandit_envs.bench.decisions import (
    CHECKOUT_DOCS,
    DOCS,
    PAPERS,
    URL_VARIABLE,
    anchor,
    decisions_base,
    doc_anchors,
    find_codes,
    linked_codes,
)
from fedbandit_envs.bench.tables import Link, RichText, html_cell

ROOT = Path(__file__).resolve().parents[1]

#: Files whose citations belong to one paper unless a line names another (path fragment -> paper).
FILE_PAPERS = {
    "dubey": "dubey_pentland",
    "flooding": "dubey_pentland",
    "li_song": "li_song",
    "li_wang": "li_wang",
    "linear": "li_wang",
    "replay": "li_wang",
    "zhu": "zhu",
    "diabetes": "zhu",
    "solanki": "solanki",
    "procurement": "solanki",
    "oracles": "solanki",
}

#: Not scanned: the decisions docs (their entries are checked through their anchors) and the code-scheme
#: module and this test, whose examples are not citations.
SKIPPED = ("docs/decisions/", "fedbandit_envs/bench/decisions.py", "tests/test_decisions_docs.py")

#: How a line names a paper.
PAPER_NAMES = {
    "li_song": r"li[-_ ]?song|li (?:&|and) song",
    "li_wang": r"li[-_ ]?wang|li (?:&|and) wang",
    "zhu": r"\bzhu",
    "dubey_pentland": r"dubey",
    "solanki": r"solanki",
}
NAMED = re.compile("|".join(f"(?P<{paper}>{pattern})" for paper, pattern in PAPER_NAMES.items()), re.I)


@dataclass(frozen=True)
class Citation:
    """One cited code: where it is, which paper it was attributed to (None: could not tell)."""

    path: str
    line: int
    code: str
    paper: str | None

    def where(self) -> str:
        """``path:line``."""
        return f"{self.path}:{self.line}"


def file_paper(path: str) -> str | None:
    """The paper a file belongs to by its path (None for shared files)."""
    for fragment, paper in FILE_PAPERS.items():
        if fragment in path:
            return paper
    return None


def scan_text(path: str, text: str) -> Iterator[Citation]:
    """The citations in one file's text (see the module docstring for the attribution rule)."""
    default = file_paper(path)
    above: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        names = [(m.start(), m.lastgroup) for m in NAMED.finditer(line)]
        for start, code in find_codes(line):
            before = [paper for position, paper in names if position < start]
            paper = before[-1] if before else default or above
            yield Citation(path, number, code, paper)
        if names:
            above = names[-1][1]


def repository_files(root: Path = ROOT) -> list[str]:
    """The tracked (and untracked, not ignored) files of the repository, relative to ``root``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return sorted(p for p in listed if p and (root / p).is_file())


def scan(root: Path = ROOT, paths: Iterable[str] | None = None) -> list[Citation]:
    """Every citation in the repository's files (or in ``paths``, relative to ``root``)."""
    found = []
    for path in repository_files(root) if paths is None else paths:
        if path.startswith(SKIPPED):
            continue
        try:
            text = (root / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary file cites nothing
            continue
        found += scan_text(path, text)
    return found


def unresolved(citations: Iterable[Citation], docs: Path) -> list[str]:
    """``path:line: code (paper): reason`` for every citation with no entry in its paper's decisions doc."""
    anchors = {paper: doc_anchors(docs / DOCS[paper]) for paper in PAPERS if (docs / DOCS[paper]).is_file()}
    problems = []
    for c in citations:
        if c.paper is None:
            problems.append(f"{c.where()}: {c.code}: no paper named on the line, by the file or above it")
        elif c.paper not in anchors:
            problems.append(f"{c.where()}: {c.code} ({c.paper}): missing {docs / DOCS[c.paper]}")
        elif anchor(c.code) not in anchors[c.paper]:
            problems.append(f"{c.where()}: {c.code} ({c.paper}): no entry #{anchor(c.code)} in {DOCS[c.paper]}")
    return problems


def test_every_cited_code_has_an_entry():
    citations = scan()
    assert len(citations) > 400  # the scanner finds the citations (about 440 when this test was written)
    problems = unresolved(citations, ROOT / "docs" / "decisions")
    assert not problems, "codes without a decisions entry:\n" + "\n".join(problems)


def test_every_paper_has_its_doc_and_the_index_lists_them():
    index = (ROOT / "docs" / "decisions" / "README.md").read_text()
    for paper in PAPERS:
        assert (ROOT / "docs" / "decisions" / DOCS[paper]).is_file()
        assert f"({DOCS[paper]})" in index


def test_a_fabricated_citation_fails_naming_file_line_and_code(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / DOCS["zhu"]).write_text('## <a id="d9"></a>D9 Log base\n\nNatural log.\n')
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "zhu.py").write_text(
        '"""Gossip (D9)."""\n\n# the tree uses D10 levels; Dubey-Pentland D9 is a different decision\n'
    )
    citations = scan(tmp_path, ["agents/zhu.py"])
    assert [(c.line, c.code, c.paper) for c in citations] == [
        (1, "D9", "zhu"),
        (3, "D10", "zhu"),
        (3, "D9", "dubey_pentland"),
    ]
    assert unresolved(citations, docs) == [
        "agents/zhu.py:3: D10 (zhu): no entry #d10 in zhu.md",
        f"agents/zhu.py:3: D9 (dubey_pentland): missing {docs / DOCS['dubey_pentland']}",
    ]


def test_a_shared_file_without_a_paper_name_is_reported(tmp_path):
    (tmp_path / "core.py").write_text("x = 1  # see RC-C2\n")
    assert unresolved(scan(tmp_path, ["core.py"]), tmp_path) == [
        "core.py:1: RC-C2: no paper named on the line, by the file or above it"
    ]


@pytest.mark.parametrize(
    ("line", "codes"),
    [
        ("(§2.3, §2.4, D9-D12)", ["§2.3", "§2.4", "D9", "D10", "D11", "D12"]),
        ("RC-H1..H3 and RC-D1..D4", ["RC-H1", "RC-H2", "RC-H3", "RC-D1", "RC-D2", "RC-D3", "RC-D4"]),
        ("§4.2 checks 13-14, check 3.8 us", ["§4.2", "check 13", "check 14"]),
        ("Li-Song §1.2-1.3, D-05/D-06 and RC1, RC-4", ["§1.2", "§1.3", "D-05", "D-06", "RC1", "RC-4"]),
        ("spec section 6.3 (T3-T5, E10, I4, S7)", ["§6.3", "T3", "T4", "T5", "E10", "I4", "S7"]),
        ('ids=["P5", "S5"], P2 and 1e-9, SE2, D9x', ["P2"]),
    ],
)
def test_find_codes(line, codes):
    assert [code for _, code in find_codes(line)] == codes


def test_anchor():
    assert [anchor(c) for c in ("D9", "D-10", "RC-C2", "RC4", "check 13", "§5.7", "§4")] == [
        "d9",
        "d-10",
        "rc-c2",
        "rc4",
        "check-13",
        "sec-5-7",
        "sec-4",
    ]


def test_linked_codes_and_their_html():
    text = linked_codes("adjacent pairs (RC-C2; D9-D10), §5", "li_song", "docs")
    assert text == RichText(
        (
            "adjacent pairs (",
            Link("RC-C2", "docs/li-song.md#rc-c2"),
            "; ",
            Link("D9-D10", "docs/li-song.md#d9"),
            "), ",
            Link("§5", "docs/li-song.md#sec-5"),
            "",
        )
    )
    assert (
        str(text)
        == "adjacent pairs ([RC-C2](docs/li-song.md#rc-c2); [D9-D10](docs/li-song.md#d9)), [§5](docs/li-song.md#sec-5)"
    )
    assert html_cell(linked_codes("a < b (D9)", "zhu", "x")) == 'a &lt; b (<a href="x/zhu.md#d9">D9</a>)'
    assert linked_codes("no codes here", "zhu", "x") == "no codes here"
    assert linked_codes("(D9)", "suite", "x") == "(D9)"  # no decisions doc for this paper
    assert linked_codes("(D9)", "zhu", None) == "(D9)"  # nowhere to link to


def test_decisions_base(tmp_path, monkeypatch):
    monkeypatch.setenv(URL_VARIABLE, "https://example.org/d/")
    assert decisions_base(tmp_path) == "https://example.org/d"
    monkeypatch.delenv(URL_VARIABLE)
    base = decisions_base(tmp_path)
    assert (tmp_path / base).resolve() == CHECKOUT_DOCS.resolve()
    monkeypatch.setattr("fedbandit_envs.bench.decisions.CHECKOUT_DOCS", tmp_path / "absent")
    assert decisions_base(tmp_path) is None


if __name__ == "__main__":
    for citation in scan():
        print(f"{citation.paper}\t{citation.code}\t{citation.where()}")
    sys.exit(1 if unresolved(scan(), ROOT / "docs" / "decisions") else 0)
