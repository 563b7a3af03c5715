"""Faithful keys: text that identifies a setting so that two settings with the same key give the same results.

Used wherever results are reused by key: the reference runs cached by :func:`fedbandit_envs.run.run`
and the cells of a sweep (:func:`fedbandit_envs.bench.jobs.cell_id`). A value has a faithful form when it is
plain data (numbers, text, booleans, None, lists, tuples and mappings of them), a numpy scalar or array
(its values), a :class:`~fedbandit_envs.topology.Topology` (its name, agents, edges and server links, or
its repr if registered with :func:`key_topology_by_repr`), a
function or class that its ``"module:qualname"`` imports back to, or a ``functools.partial`` of such a
function with arguments that have one. Lambdas, functions defined inside another function (closures),
bound methods of objects and other objects have none: two of them can differ while their names agree.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbandit_envs.topology import Topology

#: repr -> the one topology keyed by its repr (see :func:`key_topology_by_repr`).
_TOPOLOGIES_BY_REPR: dict[str, Topology] = {}


class UnfaithfulValue(ValueError):
    """A value with no faithful form (see the module docstring); the message names it and how to give one."""


def import_path(value: Any) -> str | None:
    """``"module:qualname"`` of a function or class if importing that path gives back ``value``, else None.

    Lambdas (``<lambda>``), closures (``factory.<locals>.f``) and methods bound to an object are not given
    back by their path, so they get None.
    """
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return f"{module}:{qualname}" if found is value or (callable(found) and found == value) else None


def key_topology_by_repr(topology: Topology) -> Topology:
    """Key ``topology`` by its ``repr`` (name, agents, edges, server) instead of its structure; returns it.

    The catalogue's own topologies are registered so, because sweeps once identified every topology by its
    repr and their stored cells stay reusable. Only this structure is keyed by the repr; another topology
    with the same repr is keyed by its structure.

    Raises:
        ValueError: another structure with the same repr is registered already.
    """
    known = _TOPOLOGIES_BY_REPR.setdefault(repr(topology), topology)
    if not _same_structure(known, topology):
        raise ValueError(f"another topology with the repr {topology!r} is keyed by its repr already; rename one")
    return topology


def _same_structure(first: Topology, second: Topology) -> bool:
    return (
        first.name == second.name
        and np.array_equal(first.adjacency, second.adjacency)
        and np.array_equal(first.server_links, second.server_links)
    )


def faithful_form(value: Any) -> Any:
    """The JSON-friendly faithful form of a value JSON cannot hold (a ``default=`` for :func:`json.dumps`).

    Raises:
        UnfaithfulValue: ``value`` has no faithful form.
    """
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Topology):
        known = _TOPOLOGIES_BY_REPR.get(repr(value))
        if known is not None and _same_structure(known, value):
            return repr(value)
        return {
            "topology": value.name,
            "num_agents": value.num_agents,
            "edges": value.edges().tolist(),
            "sinks": value.sinks.tolist(),
        }
    if isinstance(value, functools.partial):
        return {"partial": faithful_form(value.func), "args": list(value.args), "keywords": dict(value.keywords)}
    if callable(value) and hasattr(value, "__qualname__"):
        path = import_path(value)
        if path is None:
            raise UnfaithfulValue(
                f"{value!r} is not identified by its name {getattr(value, '__module__', '?')}:{value.__qualname__} "
                "(a lambda, a function defined inside another one, a bound method); define it at the top level of a "
                "module (def name(...): ...) and pass that, or functools.partial of it"
            )
        return path
    raise UnfaithfulValue(f"{value!r} ({type(value).__name__}) has no faithful form")


def faithful_key(value: Any) -> str | None:
    """Deterministic JSON of ``value`` (sorted keys, :func:`faithful_form` for other objects), None if unfaithful."""
    try:
        return json.dumps(value, sort_keys=True, default=faithful_form)
    except (UnfaithfulValue, TypeError):  # TypeError: a mapping key that is not text or a number
        return None
