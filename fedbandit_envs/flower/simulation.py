"""Run a federation on Flower's simulation engine (Ray): one virtual SuperNode per agent."""

from __future__ import annotations

from typing import Any

from flwr.simulation import run_simulation

from fedbandit_envs.flower.agent import FederationSpec
from fedbandit_envs.flower.apps import FlowerRun, client_app, server_app

__all__ = ["run_flower"]

#: Ray resources of one client: two CPUs, so one client runs at a time on a 2-core machine.
DEFAULT_BACKEND: dict[str, Any] = {"client_resources": {"num_cpus": 2, "num_gpus": 0.0}}


def run_flower(
    spec: FederationSpec, checkpoints: int | Any = 20, backend_config: dict[str, Any] | None = None
) -> FlowerRun:
    """Run ``spec`` on Flower's simulation engine with one SuperNode per agent; return what the run produced.

    Args:
        spec: the run (algorithm, environment keywords, seed, wrappers).
        checkpoints: the result tables' checkpoints, as for :func:`fedbandit_envs.run.run`.
        backend_config: Flower's simulation backend configuration (default :data:`DEFAULT_BACKEND`).
    """
    _, env, _ = spec.world(wrapped=False)
    sink: dict[str, Any] = {}
    run_simulation(
        server_app(spec, sink, checkpoints),
        client_app(spec),
        num_supernodes=env.unwrapped.core.context.num_agents,
        backend_config=backend_config or DEFAULT_BACKEND,
    )
    if "error" in sink:
        raise sink["error"]
    if "run" not in sink:
        raise RuntimeError("the Flower simulation ended without a result; see Flower's log above")
    return sink["run"]
