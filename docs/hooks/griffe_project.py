"""Griffe extension: read four conventions of this project's docstrings and signatures as written.

* **Grouped arguments.** An ``Args:`` entry may document several parameters at once,
  ``num_agents, num_arms, horizon: the problem``, and its names may wrap onto the next line. Google-style
  parsing takes one name per entry, so each group is split into one entry per name, all with the group's
  description; every name is then checked against the signature as usual.
* **Derived signatures.** Some classes build their signature at class creation (``__signature__``: the
  algorithms of ``agents.configured`` and the hook wrappers of ``wrappers.chain``; or their ``__init__``'s, from
  ``fedbandit_envs.validation.forwards_keywords``: the linear environments), which static analysis cannot see.
  Such a class gets an ``__init__`` with the signature ``inspect.signature`` reports, so its page shows the
  keywords it really takes.
* **Sphinx roles.** Docstrings cross-reference with ``:class:`Name```, ``:meth:`~pkg.mod.Class.method```,
  ``:attr:`title <target>``` and the like. Each becomes an optional cross-reference: a link where the target
  is documented, plain code where it is not (a private or external name). A relative name is looked up from
  the docstring's object outwards, as Python would find it, and linked under the path where it is defined.

* **Literal blocks.** A paragraph that ends in ``::`` introduces an indented code block, as in
  reStructuredText; the block renders as code and the marker as a single colon.

``mkdocs.yml`` loads this file as an extension of the mkdocstrings Python handler.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from typing import Any

import griffe

#: The import packages documented by the reference (names under them are taken as absolute).
PACKAGES = ("fedbandit_envs", "agents", "wrappers")
#: Section titles of the Google style that list parameters.
ARGS_TITLES = ("Args:", "Arguments:", "Parameters:", "Params:")

_ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc|const):`(?P<short>~?)(?:(?P<title>[^`<]+)<)?(?P<target>[^`<>]+)>?`"
)
_NAME_LIST = re.compile(r"^[A-Za-z_]\w*(?:,\s*[A-Za-z_]\w*)*,?$")
_LITERAL_MARKER = re.compile(r"(?<=\S)::\n\n")
_MISSING = object()


def split_grouped_args(text: str) -> str:
    """``text`` with every grouped entry of its argument sections split into one entry per name."""
    lines = text.splitlines()
    out: list[str] = []
    section_indent: int | None = None  # indentation of the argument section's title, while in one
    entry_indent: int | None = None  # indentation of its entries
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped in ARGS_TITLES:
            section_indent, entry_indent = indent, None
        elif stripped and section_indent is not None and indent <= section_indent:
            section_indent = None
        elif stripped and section_indent is not None:
            entry_indent = indent if entry_indent is None else entry_indent
            names, description, consumed = _group_at(lines, index) if indent == entry_indent else ([], "", 1)
            if len(names) > 1:
                continuation = _continuation(lines, index + consumed, entry_indent)
                for name in names:
                    out.append(f"{' ' * entry_indent}{name}: {description}".rstrip())
                    out.extend(continuation)
                index += consumed + len(continuation)
                continue
        out.append(line)
        index += 1
    return "\n".join(out)


def _group_at(lines: list[str], index: int) -> tuple[list[str], str, int]:
    """The names, the first description line and the number of lines taken by the entry starting at ``index``."""
    head = lines[index].strip()
    consumed = 1
    while _NAME_LIST.match(head) and head.endswith(",") and index + consumed < len(lines):
        head = f"{head} {lines[index + consumed].strip()}"
        consumed += 1
    names_part, sep, description = head.partition(":")
    if not sep or not _NAME_LIST.match(names_part.strip()):
        return [], "", 1
    names = [name.strip() for name in names_part.split(",") if name.strip()]
    return names, description.strip(), consumed


def _continuation(lines: list[str], start: int, entry_indent: int) -> list[str]:
    """The lines after ``start`` that continue an entry's description (indented deeper than the entry)."""
    taken = []
    for line in lines[start:]:
        if line.strip() and len(line) - len(line.lstrip()) <= entry_indent:
            break
        taken.append(line)
    while taken and not taken[-1].strip():
        taken.pop()
    return taken


def literal_block_markers(text: str) -> str:
    """``text`` with each ``::`` that ends a paragraph before a code block read as ``:``."""
    return _LITERAL_MARKER.sub(":\n\n", text)


def roles_to_references(text: str, scope: griffe.Object) -> str:
    """``text`` with its Sphinx roles replaced by optional cross-references, looked up from ``scope``."""

    def reference(match: re.Match[str]) -> str:
        title, target = match["title"], match["target"].strip().removesuffix("()").lstrip(".")
        title = title.strip() if title else target.rsplit(".", 1)[-1] if match["short"] else target
        identifier = html.escape(_identifier(target, scope))
        return f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'

    return _ROLE.sub(reference, text)


def _identifier(target: str, scope: griffe.Object) -> str:
    """The path where ``target``, named in a docstring of ``scope``, is defined (``target`` if not found)."""
    if target.split(".", 1)[0] in PACKAGES:
        candidates = [target]
    else:
        start: griffe.Object | None = scope if isinstance(scope, (griffe.Class, griffe.Module)) else scope.parent
        candidates = []
        while start is not None:
            candidates.append(f"{start.path}.{target}")
            start = start.parent
    for candidate in candidates:
        path = _defined_at(candidate)
        if path is not None:
            return path
    return target


def _defined_at(path: str) -> str | None:
    """The path where the object importable as ``path`` is defined (None if nothing is importable there)."""
    found = _import(path)
    if found is _MISSING:
        return None
    if inspect.ismodule(found):
        return found.__name__
    module, qualname = getattr(found, "__module__", None), getattr(found, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        return f"{module}.{qualname}"
    parent, _, name = path.rpartition(".")
    parent_path = _defined_at(parent) if parent else None
    return f"{parent_path}.{name}" if parent_path else path


def _import(path: str) -> Any:
    """The object importable as the dotted ``path`` (its longest importable module, then attributes)."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for part in parts[split:]:
                found = getattr(found, part)
        except AttributeError:
            return _MISSING
        return found
    return _MISSING


def _derived_init(cls: griffe.Class) -> griffe.Function | None:
    """An ``__init__`` with the signature a class or its own ``__init__`` declares through ``__signature__``.

    None if neither declares one. An ``__init__`` gets one from :func:`fedbandit_envs.validation.forwards_keywords`.
    """
    runtime = _import(cls.path)
    if not inspect.isclass(runtime):
        return None
    init = vars(runtime).get("__init__")
    if "__signature__" not in vars(runtime) and "__signature__" not in getattr(init, "__dict__", {}):
        return None
    parameters = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
    for parameter in inspect.signature(runtime).parameters.values():
        annotation = parameter.annotation
        if not isinstance(annotation, str):  # postponed annotations (PEP 563) are already source text
            annotation = None if annotation is inspect.Parameter.empty else inspect.formatannotation(annotation)
        parameters.append(
            griffe.Parameter(
                parameter.name,
                kind=griffe.ParameterKind(parameter.kind.description),
                annotation=annotation,
                default=None if parameter.default is inspect.Parameter.empty else repr(parameter.default),
            )
        )
    return griffe.Function("__init__", parameters=griffe.Parameters(*parameters), lineno=cls.lineno)


class ProjectConventions(griffe.Extension):
    """Split grouped ``Args:`` entries, read reST markup, give derived signatures their ``__init__``."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Apply both conventions to every object of a loaded package (griffe event)."""
        self._visit(pkg)

    def _visit(self, obj: griffe.Object) -> None:
        if obj.docstring is not None:
            text = literal_block_markers(split_grouped_args(obj.docstring.value))
            obj.docstring.value = roles_to_references(text, obj)
        if isinstance(obj, griffe.Class):
            init = _derived_init(obj)
            if init is not None:
                obj.set_member("__init__", init)
        for member in list(obj.members.values()):
            if not member.is_alias:
                self._visit(member)
