"""Every environment id of the suite, registered with PettingZoo and Gymnasium on import."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium
import pettingzoo


@dataclass(frozen=True)
class EnvEntry:
    """One registered id.

    Attributes:
        entry_point: ``"module:Class"`` of the environment.
        kwargs: default keyword arguments of the id.
        description: one line for listings and the README table.
        test_kwargs: keywords that make a small, fast instance (used by the conformance tests; must
            include ``horizon`` so an episode ends quickly).
    """

    entry_point: str
    kwargs: dict[str, Any]
    description: str
    test_kwargs: dict[str, Any] = field(default_factory=dict)


_SMALL_MAB = {"num_agents": 4, "num_arms": 3, "horizon": 60}

#: Multi-agent ids (``pettingzoo.make("parallel", id, **kwargs)``).
PARALLEL_ENVS: dict[str, EnvEntry] = {
    "fedbandit/FederatedMAB-v0": EnvEntry(
        "fedbandit_envs.envs.mab:FederatedMAB",
        {},
        "M agents, K Bernoulli arms, homogeneous U[0,1] means, server topology",
        _SMALL_MAB,
    ),
    "fedbandit/FederatedMABHeterogeneous-v0": EnvEntry(
        "fedbandit_envs.envs.mab:FederatedMAB",
        {"instance": "heterogeneous"},
        "per-agent means around exact global means (Li-Song D15), server topology",
        _SMALL_MAB,
    ),
    "fedbandit/GossipMAB-v0": EnvEntry(
        "fedbandit_envs.envs.mab:FederatedMAB",
        {"topology": "ring", "gossip": "uniform_edge", "instance": "heterogeneous"},
        "ring of agents, one uniformly random gossip edge announced per slot",
        _SMALL_MAB,
    ),
}

#: Single-agent Gymnasium ids (``gymnasium.make(id, **kwargs)``).
GYMNASIUM_ENVS: dict[str, EnvEntry] = {
    "fedbandit/LocalBandit-v0": EnvEntry(
        "fedbandit_envs.views:LocalBanditEnv",
        {},
        "one agent's local K-armed bandit: Discrete(K) action, flat Box observation",
        {"num_arms": 3, "horizon": 60},
    ),
    "fedbandit/FederatedClient-v0": EnvEntry(
        "fedbandit_envs.views:FederatedClientEnv",
        {},
        "client 0 of a federation whose other clients and server run a reference algorithm",
        {"num_agents": 4, "num_arms": 3, "horizon": 60},
    ),
}


def register_all() -> None:
    """Register every id (idempotent)."""
    for env_id, entry in PARALLEL_ENVS.items():
        if env_id not in pettingzoo.parallel_registry:
            pettingzoo.register("parallel", env_id, entry.entry_point, kwargs=entry.kwargs)
    for env_id, entry in GYMNASIUM_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=entry.entry_point, kwargs=entry.kwargs)


def pprint_registry() -> None:
    """Print every id of the suite with its description."""
    print("PettingZoo (pettingzoo.make('parallel', id, **kwargs)):")
    for env_id, entry in PARALLEL_ENVS.items():
        print(f"  {env_id:42s} {entry.description}")
    print("Gymnasium (gymnasium.make(id, **kwargs)):")
    for env_id, entry in GYMNASIUM_ENVS.items():
        print(f"  {env_id:42s} {entry.description}")
