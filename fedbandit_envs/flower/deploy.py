"""A federation as a Flower app project, for a deployment with a SuperLink and SuperNodes (``flwr run``).

In a deployment the ``ServerApp`` and the ``ClientApp`` are loaded by Flower's own processes from the app
project's ``[tool.flwr.app.components]``, so they are module-level objects here (:data:`server`,
:data:`client`) that build the :class:`~fedbandit_envs.flower.agent.FederationSpec` of a run from its run
config (``algorithm``, ``env-kwargs`` as JSON, ``seed``; optionally ``label``, ``checkpoints`` and
``wrappers``). The server writes the run's :class:`~fedbandit_envs.flower.apps.FlowerRun` as a pickle to
the run config's ``result-path`` when it is set (the ``ServerApp`` runs in a process of the SuperLink, not
the caller's). :func:`write_app` writes the app project; ``docs/deploying-with-flower.md`` gives the
commands.

The run config's ``wrappers`` names the message wrappers (DP) as values, resolved from the fixed table
:data:`WRAPPERS` by :func:`wrappers_from_config`: nothing is evaluated and no path from a run config is
imported.
"""

from __future__ import annotations

import inspect
import json
import pickle
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, get_args

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedbandit_envs.algorithms import load_object
from fedbandit_envs.flower.agent import FederationSpec
from fedbandit_envs.flower.apps import client_app, drive
from fedbandit_envs.validation import check_int

__all__ = ["WRAPPERS", "client", "server", "spec_from_run_config", "wrappers_from_config", "write_app"]

#: The message wrappers a run config may name, by name: the project's DP wrappers (loaded when named).
WRAPPERS: Mapping[str, str] = MappingProxyType(
    {
        "laplace": "wrappers.dp:LaplaceMessageDP",
        "gaussian": "wrappers.dp:GaussianMessageDP",
        "tree": "wrappers.dp:TreeMessageDP",
    }
)

WrapperEntries = str | Sequence[Mapping[str, Any]]

#: The app project's ``pyproject.toml``; ``{config}`` is its default run config.
_PYPROJECT = """[project]
name = "fedbandit-federation"
version = "1.0.0"
description = "A fedbandit-envs population as a Flower federation"
license = "MIT"
dependencies = []

[tool.flwr.app]
publisher = "fedbandit"

[tool.flwr.app.components]
serverapp = "fedbandit_envs.flower.deploy:server"
clientapp = "fedbandit_envs.flower.deploy:client"

[tool.flwr.app.config]
{config}
"""


def _keywords(wrapper: type) -> set[str] | None:
    """The keywords ``wrapper`` takes after ``env`` (its ``**options`` TypedDict's keys included); None: any.

    A wrapper that builds its hook from its arguments (a ``hook_class``) takes the hook class's.
    """
    hook = getattr(wrapper, "hook_class", None)
    parameters = list(inspect.signature(hook or wrapper, eval_str=True).parameters.values())
    names: set[str] = set()
    for parameter in parameters if hook is not None else parameters[1:]:
        if parameter.kind is parameter.VAR_KEYWORD:
            typed = [a for a in get_args(parameter.annotation) if hasattr(a, "__optional_keys__")]
            if not typed:
                return None
            names |= set(typed[0].__required_keys__) | set(typed[0].__optional_keys__)
        elif parameter.kind is not parameter.VAR_POSITIONAL:
            names.add(parameter.name)
    return names


def _value(text: str) -> Any:
    """A keyword's value written in a run config: JSON (numbers, true/false/null, lists), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _entries(value: WrapperEntries) -> list[tuple[str, dict[str, Any]]]:
    """(name, keywords) of each wrapper of a run config's ``wrappers`` value, in order."""
    if not isinstance(value, str):
        raw: Any = list(value)
    elif value.strip().startswith("["):
        raw = json.loads(value)
    else:
        entries = []
        for part in filter(None, (p.strip() for p in value.split(";"))):
            name, _, arguments = part.partition(":")
            kwargs = {}
            for item in filter(None, (a.strip() for a in arguments.split(","))):
                key, equals, text = item.partition("=")
                if not equals:
                    raise ValueError(f"a wrapper keyword must be written key=value, got {item!r} in {part!r}")
                kwargs[key.strip()] = _value(text.strip())
            entries.append((name.strip(), kwargs))
        return entries
    if not isinstance(raw, list) or not all(isinstance(e, Mapping) and isinstance(e.get("name"), str) for e in raw):
        raise ValueError(
            f'wrappers as JSON must be a list of {{"name": ..., "kwargs": {{...}}}} objects, got {value!r}'
        )
    for entry in raw:
        if not isinstance(entry.get("kwargs", {}), Mapping) or set(entry) - {"name", "kwargs"}:
            raise ValueError(f'a wrapper entry has a "name" and a "kwargs" object only, got {dict(entry)!r}')
    return [(entry["name"], dict(entry.get("kwargs", {}))) for entry in raw]


def wrappers_from_config(value: WrapperEntries) -> tuple[Callable[[Any], Any], ...]:
    """The message wrappers a run config names, as functions ``env -> wrapped env``, in order (innermost first).

    ``value`` is ``"name:key=value,key=value"`` (several separated by ``;``; a value is read as JSON, e.g.
    ``1.0``, ``6``, ``true``, else as text), or a JSON list (or a list) of ``{"name": ..., "kwargs": {...}}``;
    empty: no wrapper. Names are those of :data:`WRAPPERS`; ``ValueError`` names an unknown wrapper or
    keyword. Fault wrappers are not offered (see
    :data:`~fedbandit_envs.flower.agent.CLIENT_WRAPPER_KINDS`).
    """
    factories = []
    for name, kwargs in _entries(value):
        if name not in WRAPPERS:
            raise ValueError(
                f"unknown wrapper {name!r} in the run config; the wrappers are {sorted(WRAPPERS)} (the DP wrappers: "
                "a fault wrapper cannot run on a Flower federation, see CLIENT_WRAPPER_KINDS)"
            )
        wrapper = load_object(WRAPPERS[name])
        allowed = _keywords(wrapper)
        if allowed is not None and set(kwargs) - allowed:
            unknown = sorted(set(kwargs) - allowed)
            raise ValueError(f"the wrapper {name!r} takes no keyword {unknown}; its keywords are {sorted(allowed)}")
        factories.append(partial(wrapper, **kwargs))
    return tuple(factories)


def spec_from_run_config(config: Mapping[str, Any]) -> FederationSpec:
    """The :class:`FederationSpec` of a run config.

    Keys: ``algorithm``, ``env-kwargs`` (a JSON object), ``seed``; optionally ``label`` and ``wrappers``
    (see :func:`wrappers_from_config`).
    """
    missing = [key for key in ("algorithm", "env-kwargs", "seed") if key not in config]
    if missing:
        raise ValueError(f"the run config needs {missing}; write the app with write_app(folder, ...)")
    env_kwargs = json.loads(str(config["env-kwargs"]))
    if not isinstance(env_kwargs, dict):
        raise ValueError(f"the run config's 'env-kwargs' must be a JSON object, got {config['env-kwargs']!r}")
    label = str(config["label"]) if config.get("label") else None
    wrappers = wrappers_from_config(str(config.get("wrappers", "")))
    return FederationSpec(str(config["algorithm"]), env_kwargs, int(config["seed"]), wrappers, label)


def write_app(
    folder: str | Path,
    algorithm: str,
    env_kwargs: Mapping[str, Any],
    seed: int,
    result_path: str | Path = "",
    label: str = "",
    checkpoints: int = 20,
    wrappers: WrapperEntries = "",
) -> Path:
    """Write the Flower app project of a run into ``folder`` (created if needed); return its ``pyproject.toml``.

    Args:
        folder: the app project's folder, given to ``flwr run``.
        algorithm: a registered algorithm name.
        env_kwargs: the environment's keyword arguments (JSON-serialisable).
        seed: the run's seed.
        result_path: where the ``ServerApp`` writes the run's :class:`FlowerRun` (pickle); empty: nowhere.
        label: the ``algorithm`` column of the results (empty: the algorithm's name).
        checkpoints: how many evenly spaced checkpoints the result tables have.
        wrappers: the message wrappers (DP), as :func:`wrappers_from_config` reads them.
    """
    check_int("checkpoints", checkpoints, 1)
    config: dict[str, Any] = {"algorithm": algorithm, "env-kwargs": json.dumps(dict(env_kwargs)), "seed": seed}
    config.update({"label": label, "checkpoints": checkpoints, "result-path": str(result_path)})
    config["wrappers"] = wrappers if isinstance(wrappers, str) else json.dumps([dict(w) for w in wrappers])
    spec_from_run_config(config).world(wrapped=True)  # the app's run is built here first: its errors show now
    lines = "\n".join(f"{key} = {json.dumps(value)}" for key, value in config.items())
    path = Path(folder) / "pyproject.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_PYPROJECT.format(config=lines))
    return path


server = ServerApp()


@server.main()
def _main(grid: Grid, context: Context) -> None:
    """Drive the federation of the run config; write its :class:`FlowerRun` to ``result-path`` if set."""
    run = drive(grid, spec_from_run_config(context.run_config), int(context.run_config.get("checkpoints", 20)))
    target = str(context.run_config.get("result-path", ""))
    if target:  # written whole, then renamed, so a reader never sees part of it
        partial = Path(f"{target}.part")
        partial.write_bytes(pickle.dumps(run))
        partial.replace(target)


client = ClientApp()


@client.query()
def _query(msg: Message, context: Context) -> Message:
    """Answer with the ``ClientApp`` of the run config's federation."""
    return client_app(spec_from_run_config(context.run_config))(msg, context)
