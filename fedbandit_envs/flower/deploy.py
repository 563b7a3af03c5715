"""A federation as a Flower app project, for a deployment with a SuperLink and SuperNodes (``flwr run``).

In a deployment the ``ServerApp`` and the ``ClientApp`` are loaded by Flower's own processes from the app
project's ``[tool.flwr.app.components]``, so they are module-level objects here (:data:`server`,
:data:`client`) that build the :class:`~fedbandit_envs.flower.agent.FederationSpec` of a run from its run
config (``algorithm``, ``env-kwargs`` as JSON, ``seed``; optionally ``label`` and ``checkpoints``). The
server writes the run's :class:`~fedbandit_envs.flower.apps.FlowerRun` as a pickle to the run config's
``result-path`` when it is set (the ``ServerApp`` runs in a process of the SuperLink, not the caller's).
:func:`write_app` writes the app project; ``docs/deploying-with-flower.md`` gives the commands. Message
wrappers (DP) are not expressible in a run config and are not part of a deployed run.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedbandit_envs.flower.agent import FederationSpec
from fedbandit_envs.flower.apps import client_app, drive
from fedbandit_envs.validation import check_int

__all__ = ["client", "server", "spec_from_run_config", "write_app"]

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


def spec_from_run_config(config: Mapping[str, Any]) -> FederationSpec:
    """The :class:`FederationSpec` of a run config: ``algorithm``, ``env-kwargs`` (JSON object), ``seed``, ``label``."""
    missing = [key for key in ("algorithm", "env-kwargs", "seed") if key not in config]
    if missing:
        raise ValueError(f"the run config needs {missing}; write the app with write_app(folder, ...)")
    env_kwargs = json.loads(str(config["env-kwargs"]))
    if not isinstance(env_kwargs, dict):
        raise ValueError(f"the run config's 'env-kwargs' must be a JSON object, got {config['env-kwargs']!r}")
    label = str(config["label"]) if config.get("label") else None
    return FederationSpec(str(config["algorithm"]), env_kwargs, seed=int(config["seed"]), label=label)


def write_app(
    folder: str | Path,
    algorithm: str,
    env_kwargs: Mapping[str, Any],
    seed: int,
    result_path: str | Path = "",
    label: str = "",
    checkpoints: int = 20,
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
    """
    check_int("checkpoints", checkpoints, 1)
    config: dict[str, Any] = {"algorithm": algorithm, "env-kwargs": json.dumps(dict(env_kwargs)), "seed": seed}
    config.update({"label": label, "checkpoints": checkpoints, "result-path": str(result_path)})
    spec_from_run_config(config)
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
