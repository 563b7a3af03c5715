"""The algorithm registry: names, the families each algorithm supports, and how to build it.

Agent packages register their algorithms when they are imported::

    register_algorithm("my_ucb", MyUCB)  # the families are MyUCB.families, e.g. ("mab",)

``fedbandit_envs`` names no agent class: the reference agents (package ``agents``) and third-party
packages are found through the ``fedbandit_envs.algorithms`` entry point group, whose entries are
modules that register on import. Declare one in your package's ``pyproject.toml``::

    [project.entry-points."fedbandit_envs.algorithms"]
    my_package = "my_package.agents"

A spec that is not a registered name may be ``"module:Class"``, a class or any factory; such a
population may declare its families in its ``families`` attribute.

Each reference algorithm registers its configuration too: a frozen dataclass (usually a
:class:`~fedbandit_envs.validation.CheckedConfig`) whose fields are its constructor keywords, documented
once under ``Attributes:``. :func:`make_algorithm` and the scenarios check keywords through it before
building anything (:func:`check_algorithm_options`); :func:`options_markdown` renders the table of
every algorithm's options for the documentation::

    register_algorithm("my_ucb", MyUCB, config=MyUCBConfig)
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from fedbandit_envs.validation import check_keywords

__all__ = [
    "ENTRY_POINT_GROUP",
    "AlgorithmSpec",
    "algorithm_name",
    "check_algorithm_options",
    "config_field_docs",
    "find_algorithm",
    "is_registered",
    "load_object",
    "make_algorithm",
    "options_markdown",
    "register_algorithm",
    "registration_of",
    "registered_algorithms",
    "resolve_factory",
    "supported_families",
]

#: Entry point group of modules that register algorithms on import.
ENTRY_POINT_GROUP = "fedbandit_envs.algorithms"


@dataclass(frozen=True)
class AlgorithmSpec:
    """One registered algorithm.

    Attributes:
        name: the name used by ``run``, scenarios and the CLI.
        factory: builds a fresh population (a class or any callable without arguments).
        families: the families it runs on (``"mab"``, ``"linear"``, ``"procurement"``, ...).
        config: the frozen dataclass of its keywords (None: the keywords are not checked before construction).
    """

    name: str
    factory: Callable[[], Any]
    families: tuple[str, ...]
    config: type | None = None

    def keywords(self) -> tuple[str, ...]:
        """The keywords the algorithm takes: its constructor's, or its config's fields if it takes ``**kwargs``."""
        parameters = inspect.signature(self.factory).parameters.values()
        if self.config is not None and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return tuple(entry.name for entry in dataclasses.fields(self.config))
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return tuple(p.name for p in parameters if p.kind in kinds)

    def defaults(self) -> dict[str, Any]:
        """Each keyword's default: the constructor's, else (``**kwargs``) the config field's."""
        parameters = inspect.signature(self.factory).parameters
        fields = {entry.name: entry for entry in dataclasses.fields(self.config)} if self.config is not None else {}
        defaults = {}
        for keyword in self.keywords():
            parameter = parameters.get(keyword)
            if parameter is not None and parameter.default is not inspect.Parameter.empty:
                defaults[keyword] = parameter.default
            elif keyword in fields and fields[keyword].default is not dataclasses.MISSING:
                defaults[keyword] = fields[keyword].default
        return defaults

    def check_options(self, options: Mapping[str, Any]) -> Any:
        """The config of the keyword ``options`` (None without a config), or a clear error before construction.

        An unknown keyword raises a ``TypeError`` with a "did you mean"; a bad value raises the config's
        ``TypeError`` / ``ValueError`` naming the field. A factory with a ``make_config(**options)`` classmethod
        (:class:`agents.configured.Configured`) builds its config itself, with its own defaults and fixed values.
        """
        check_keywords(self.name, options, self.keywords())
        if self.config is None:
            return None
        make_config = getattr(self.factory, "make_config", None)
        return make_config(**options) if make_config is not None else self.config(**options)


_REGISTRY: dict[str, AlgorithmSpec] = {}
_entry_points_loaded = False


def register_algorithm(
    name: str,
    factory: Callable[..., Any],
    families: str | Sequence[str] | None = None,
    config: type | None = None,
) -> AlgorithmSpec:
    """Register ``factory`` under ``name``; registering a name again with another factory fails.

    ``families`` defaults to the factory's ``families`` attribute (a population class declares them once);
    ``config``, the dataclass of its keywords, to its ``config_class`` attribute (None: keywords unchecked).
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"an algorithm name is a non-empty string without ':', got {name!r}")
    if not callable(factory):
        raise TypeError(f"the factory of {name!r} must be callable, got {factory!r}")
    if families is None:
        families = getattr(factory, "families", ())
    families = (families,) if isinstance(families, str) else tuple(families)
    if not families or not all(isinstance(f, str) and f for f in families):
        raise ValueError(f"{name!r} must name at least one family, got {families!r}")
    if config is None:
        config = getattr(factory, "config_class", None)
    if config is not None and not dataclasses.is_dataclass(config):
        raise TypeError(f"the config of {name!r} must be a dataclass, got {config!r}")
    spec = AlgorithmSpec(name, factory, families, config)
    known = _REGISTRY.get(name)
    if known is not None and known != spec:
        raise ValueError(f"the algorithm name {name!r} is already registered for {known.factory!r}; choose another")
    _REGISTRY[name] = spec
    return spec


def _load_entry_points() -> None:
    """Import every module of the entry point group once (they register their algorithms)."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        entry.load()


def registered_algorithms(family: str | None = None) -> dict[str, AlgorithmSpec]:
    """Every registered algorithm by name (of ``family`` only, when given), sorted by name."""
    _load_entry_points()
    return {name: spec for name, spec in sorted(_REGISTRY.items()) if family is None or family in spec.families}


def find_algorithm(name: str) -> AlgorithmSpec:
    """The registered algorithm ``name``; a ValueError lists the known names."""
    _load_entry_points()
    if name not in _REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; use one of {sorted(_REGISTRY)} or 'module:Class'")
    return _REGISTRY[name]


def load_object(path: str) -> Any:
    """Import ``"package.module:attribute"``.

    Raises:
        ValueError: ``path`` is not of that form, names a module that does not exist (the message lists the folders
            searched and how to make the module importable), or an attribute the module does not have (the message
            lists the module's public names). A module that exists but fails to import raises its own error, e.g. a
            missing dependency.
    """
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected 'package.module:Attribute', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not (module_name + ".").startswith(error.name + "."):
            raise
        searched = [entry or os.getcwd() for entry in sys.path if Path(entry or ".").is_dir()]
        raise ValueError(
            f"cannot import module {module_name!r} of {path!r}: there is no module {error.name!r}; searched "
            f"{searched}. Make it importable: run from the directory that contains it, add that directory to "
            "PYTHONPATH (or pass it to the CLI's --path), or pip install your package"
        ) from error
    if not hasattr(module, attribute):
        public = sorted(name for name in vars(module) if not name.startswith("_"))
        raise ValueError(
            f"cannot import {path!r}: module {module_name!r} has no attribute {attribute!r}; it defines {public}"
        )
    return getattr(module, attribute)


def resolve_factory(spec: str) -> Callable[..., Any]:
    """The factory of a registered name, or the object a ``"module:Class"`` path names."""
    return load_object(spec) if ":" in spec else find_algorithm(spec).factory


def is_registered(spec: Any) -> bool:
    """Whether ``spec`` is the name of a registered algorithm."""
    return isinstance(spec, str) and spec in registered_algorithms()


def registration_of(factory: Any) -> AlgorithmSpec | None:
    """The registry entry whose factory is ``factory`` (a class reached through ``"module:Class"``), or None."""
    return next((spec for spec in registered_algorithms().values() if spec.factory is factory), None)


def check_algorithm_options(algorithm: Any, options: Mapping[str, Any]) -> Any:
    """Check the keywords ``options`` of ``algorithm`` (a name, a path or a factory) through its registered config.

    Returns the config (None for an algorithm without one, whose keywords its constructor checks). A
    ``"module:Class"`` path or a class is checked when it is a registered factory.
    """
    if isinstance(algorithm, str) and ":" not in algorithm:
        return find_algorithm(algorithm).check_options(options)
    factory = resolve_factory(algorithm) if isinstance(algorithm, str) else algorithm
    spec = registration_of(factory)
    return None if spec is None else spec.check_options(options)


def make_algorithm(algorithm: Any, **options: Any) -> Any:
    """A fresh population from a registered name, a ``"module:Class"`` path, a class or a factory.

    ``options`` are the algorithm's keywords, checked first by :func:`check_algorithm_options` (an unknown
    keyword gets a "did you mean"; a bad value a ``TypeError`` / ``ValueError`` naming the field).
    """
    if not (isinstance(algorithm, str) or callable(algorithm)):
        raise TypeError(f"algorithm must be a name, a 'module:Class' path or a factory, got {algorithm!r}")
    factory = resolve_factory(algorithm) if isinstance(algorithm, str) else algorithm
    if options:
        check_algorithm_options(algorithm, options)
    return factory(**options)


def supported_families(algorithm: Any, population: Any) -> tuple[str, ...]:
    """The families ``algorithm`` declares (registry entry, else the population's ``families``); () if none."""
    if isinstance(algorithm, str) and ":" not in algorithm:
        return find_algorithm(algorithm).families
    return tuple(getattr(population, "families", ()))


def algorithm_name(algorithm: Any) -> str:
    """A readable label for an algorithm spec."""
    if isinstance(algorithm, str):
        return algorithm
    return getattr(algorithm, "__name__", type(algorithm).__name__)


_ATTRIBUTE = re.compile(r"^(\s*)(\w+):\s*(.*)$")


def _attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> description from the ``Attributes:`` section of ``cls``'s own docstring."""
    docs: dict[str, str] = {}
    inside, indent, current = False, -1, ""
    for line in inspect.cleandoc(cls.__dict__.get("__doc__") or "").splitlines():
        if line.strip() == "Attributes:":
            inside = True
        elif inside and line and not line[0].isspace():
            break  # the next section
        elif inside:
            match = _ATTRIBUTE.match(line)
            if match and indent in (-1, len(match.group(1))):
                indent, current = len(match.group(1)), match.group(2)
                docs[current] = match.group(3)
            elif current and line.strip():
                docs[current] += " " + line.strip()
    return docs


def config_field_docs(config: type) -> dict[str, str]:
    """Field name -> its description, from the ``Attributes:`` sections of ``config`` and its base classes.

    A field is documented once, in the class that declares it; a subclass may document it again to override.
    """
    docs: dict[str, str] = {}
    for cls in reversed(config.__mro__):
        docs.update(_attribute_docs(cls))
    return docs


def _annotation_words(annotation: Any) -> str:
    """An annotation as text: unions as ``a | b``, without module prefixes."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " | ".join(map(_annotation_words, typing.get_args(annotation)))
    if annotation is type(None):
        return "None"
    return inspect.formatannotation(annotation).replace("typing.", "").replace("collections.abc.", "")


def _annotation_text(annotation: Any) -> str:
    """An annotation as Markdown code in a table cell."""
    return "`" + _annotation_words(annotation).replace("|", "\\|") + "`"


def options_markdown() -> str:
    """The options of every registered algorithm as Markdown: one table per algorithm (keyword, type, default, doc)."""
    lines: list[str] = []
    for name, spec in registered_algorithms().items():
        factory = spec.factory
        title = f"{getattr(factory, '__module__', '')}.{getattr(factory, '__qualname__', name)}"
        lines += [f"## `{name}`", "", f"`{title}`, families: {', '.join(spec.families)}.", ""]
        if spec.config is None:
            lines += ["No registered config: its keywords are checked by its constructor.", ""]
            continue
        config = spec.config.__module__ + "." + spec.config.__qualname__
        keywords = spec.keywords()
        if not keywords:
            lines += [f"No options (config `{config}`).", ""]
            continue
        defaults = spec.defaults()
        docs = config_field_docs(spec.config)
        hints = typing.get_type_hints(spec.config)
        lines += [f"Config `{config}`.", "", "| Keyword | Type | Default | Description |", "| --- | --- | --- | --- |"]
        for keyword in keywords:
            described = " ".join(docs.get(keyword, "").split()).replace("|", "\\|")
            shown = f"`{defaults[keyword]!r}`" if keyword in defaults else "required"
            lines.append(f"| `{keyword}` | {_annotation_text(hints[keyword])} | {shown} | {described} |")
        lines.append("")
    return "\n".join(lines)
