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
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

__all__ = [
    "ENTRY_POINT_GROUP",
    "AlgorithmSpec",
    "algorithm_name",
    "find_algorithm",
    "is_registered",
    "load_object",
    "make_algorithm",
    "register_algorithm",
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
    """

    name: str
    factory: Callable[[], Any]
    families: tuple[str, ...]


_REGISTRY: dict[str, AlgorithmSpec] = {}
_entry_points_loaded = False


def register_algorithm(
    name: str, factory: Callable[[], Any], families: str | Sequence[str] | None = None
) -> AlgorithmSpec:
    """Register ``factory`` under ``name``; registering a name again with another factory fails.

    ``families`` defaults to the factory's ``families`` attribute (a population class declares them once).
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
    spec = AlgorithmSpec(name, factory, families)
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
    """Import ``"package.module:attribute"``."""
    module_name, _, attribute = path.partition(":")
    if not attribute:
        raise ValueError(f"expected 'package.module:Attribute', got {path!r}")
    return getattr(importlib.import_module(module_name), attribute)


def resolve_factory(spec: str) -> Callable[..., Any]:
    """The factory of a registered name, or the object a ``"module:Class"`` path names."""
    return load_object(spec) if ":" in spec else find_algorithm(spec).factory


def is_registered(spec: Any) -> bool:
    """Whether ``spec`` is the name of a registered algorithm."""
    return isinstance(spec, str) and spec in registered_algorithms()


def make_algorithm(algorithm: Any) -> Any:
    """A fresh population from a registered name, a ``"module:Class"`` path, a class or a factory."""
    if isinstance(algorithm, str):
        return resolve_factory(algorithm)()
    if callable(algorithm):
        return algorithm()
    raise TypeError(f"algorithm must be a name, a 'module:Class' path or a factory, got {algorithm!r}")


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
