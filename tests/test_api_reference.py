"""The API reference cannot go stale: every module has an entry, every entry a module, every page a nav item.

The site itself is built by ``mkdocs build --strict`` in ``.ci/run``; these checks need no docs tools, except
the last ones, which test the docs hooks and skip without the ``docs`` extra.
"""

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

from fedbandit_envs.cli import _parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
PACKAGES = ("fedbandit_envs", "agents", "wrappers")
DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", flags=re.M)


def _module_names() -> list[str]:
    """Every public module and package of the three import packages, found on disk."""
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            if not any(part.startswith("_") for part in parts):
                names.append(".".join(parts))
    return names


def _directives() -> dict[str, list[str]]:
    """The objects named by ``::: name`` in the reference pages, with the pages naming them."""
    found: dict[str, list[str]] = {}
    for page in sorted(REFERENCE.rglob("*.md")):
        for name in DIRECTIVE.findall(page.read_text()):
            found.setdefault(name, []).append(str(page.relative_to(DOCS)))
    return found


def _load_hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_walk_finds_the_packages():
    names = _module_names()
    assert {"fedbandit_envs", "fedbandit_envs.protocol", "agents.li_song.engine", "wrappers.dp.tree"} <= set(names)


def test_every_module_has_a_reference_entry():
    documented = _directives()
    missing = [name for name in _module_names() if name not in documented]
    assert not missing, f"add a '::: <module>' entry for these modules to a page under docs/reference/: {missing}"


def test_every_module_is_documented_once():
    twice = {name: pages for name, pages in _directives().items() if len(pages) > 1}
    assert not twice, f"these modules have more than one reference entry: {twice}"


def test_every_reference_entry_names_a_module():
    modules = set(_module_names())
    stale = [name for name in _directives() if name not in modules]
    assert not stale, f"these reference entries name no module (renamed or removed?): {stale}"


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [str(page.relative_to(DOCS)) for page in sorted(DOCS.rglob("*.md"))]
    missing = [page for page in pages if not re.search(rf"(^|\s){re.escape(page)}\s*$", nav, flags=re.M)]
    assert not missing, f"add these pages to the nav of mkdocs.yml: {missing}"


def test_cli_page_lists_every_subcommand_and_option():
    cli = _load_hook("cli_reference")
    assert cli.PLACEHOLDER in (REFERENCE / "cli.md").read_text()
    parser = _parser()
    markdown = cli.cli_markdown(parser)
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert re.findall(r"^## `fedbandit (\w+)`$", markdown, flags=re.M) == list(subcommands)
    for name, sub in subcommands.items():
        section = markdown.split(f"## `fedbandit {name}`", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for option in action.option_strings:
                assert option == "-h" or option == "--help" or f"`{option}" in section, (name, option)


def test_cli_markdown_escapes_help_text():
    cli = _load_hook("cli_reference")
    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers(dest="command")
    sub = commands.add_parser("go", help="go somewhere")
    sub.add_argument("--out", default="results", help="writes <root>/a|b *here*")
    sub.add_argument("--name", required=True, help="a name")
    sub.add_argument("--count", type=int, default=0, help="how many")
    rows = [line for line in cli.cli_markdown(parser).splitlines() if line.startswith("| `")]
    assert rows == [
        r"| `--out OUT` | `results` | writes &lt;root&gt;/a\|b \*here\* |",
        "| `--name NAME` |  | a name (required) |",
        "| `--count COUNT` | `0` | how many |",
    ]


def test_grouped_arguments_are_split_per_name():
    pytest.importorskip("griffe")
    conventions = _load_hook("griffe_project")
    unchanged_tail = ["    seed: a seed.", "", "Attributes:", "    a, b: left as written."]
    grouped = ["    num_agents,", "        horizon: the problem (see", "        the config)."]
    docstring = "\n".join(["Summary.", "", "Args:", *grouped, *unchanged_tail])
    assert conventions.split_grouped_args(docstring).splitlines() == [
        "Summary.",
        "",
        "Args:",
        "    num_agents: the problem (see",
        "        the config).",
        "    horizon: the problem (see",
        "        the config).",
        *unchanged_tail,
    ]


def test_sphinx_roles_become_optional_references():
    griffe = pytest.importorskip("griffe")
    conventions = _load_hook("griffe_project")
    module = griffe.Module("protocol", filepath=ROOT / "fedbandit_envs" / "protocol.py")
    module.parent = griffe.Module("fedbandit_envs")
    text = "See :class:`Population`, :class:`~fedbandit_envs.core.Step` and :attr:`the slot <Nothing.here>`."
    assert conventions.roles_to_references(text, module) == (
        'See <autoref identifier="fedbandit_envs.protocol.Population" optional><code>Population</code></autoref>, '
        '<autoref identifier="fedbandit_envs.core.Step" optional><code>Step</code></autoref> and '
        '<autoref identifier="Nothing.here" optional><code>the slot</code></autoref>.'
    )


def test_literal_block_markers_become_colons():
    pytest.importorskip("griffe")
    conventions = _load_hook("griffe_project")
    text = "A family registers once::\n\n    register_family(...)\n\nThe ``a::b`` name::keeps its colons."
    assert conventions.literal_block_markers(text) == (
        "A family registers once:\n\n    register_family(...)\n\nThe ``a::b`` name::keeps its colons."
    )
