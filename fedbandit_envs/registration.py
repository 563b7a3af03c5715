"""Every environment id of the suite, registered with PettingZoo and Gymnasium on import."""

from __future__ import annotations

from typing import Any

import gymnasium
import pettingzoo

#: Multi-agent ids: id -> (entry point, default kwargs, one-line description).
PARALLEL_ENVS: dict[str, tuple[str, dict[str, Any], str]] = {
    "fedbandit/FederatedMAB-v0": (
        "fedbandit_envs.envs.mab:FederatedMAB",
        {},
        "M agents, K Bernoulli arms, homogeneous U[0,1] means, server topology",
    ),
    "fedbandit/FederatedMABHeterogeneous-v0": (
        "fedbandit_envs.envs.mab:FederatedMAB",
        {"instance": "heterogeneous"},
        "per-agent means around exact global means (Li-Song D15), server topology",
    ),
    "fedbandit/GossipMAB-v0": (
        "fedbandit_envs.envs.mab:FederatedMAB",
        {"topology": "ring", "gossip": "uniform_edge", "instance": "heterogeneous"},
        "ring of agents, one uniformly random gossip edge announced per slot",
    ),
}

#: Single-agent Gymnasium ids: id -> (entry point, default kwargs, one-line description).
GYMNASIUM_ENVS: dict[str, tuple[str, dict[str, Any], str]] = {
    "fedbandit/LocalBandit-v0": (
        "fedbandit_envs.views:LocalBanditEnv",
        {},
        "one agent's local K-armed bandit: Discrete(K) action, flat Box observation",
    ),
    "fedbandit/FederatedClient-v0": (
        "fedbandit_envs.views:FederatedClientEnv",
        {},
        "client 0 of a federation whose other clients and server run a reference algorithm",
    ),
}


def register_all() -> None:
    """Register every id (idempotent)."""
    for env_id, (entry_point, kwargs, _) in PARALLEL_ENVS.items():
        if env_id not in pettingzoo.parallel_registry:
            pettingzoo.register("parallel", env_id, entry_point, kwargs=kwargs)
    for env_id, (entry_point, kwargs, _) in GYMNASIUM_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=entry_point, kwargs=kwargs)


def pprint_registry() -> None:
    """Print every id of the suite with its description."""
    print("PettingZoo (pettingzoo.make('parallel', id, **kwargs)):")
    for env_id, (_, _, text) in PARALLEL_ENVS.items():
        print(f"  {env_id:42s} {text}")
    print("Gymnasium (gymnasium.make(id, **kwargs)):")
    for env_id, (_, _, text) in GYMNASIUM_ENVS.items():
        print(f"  {env_id:42s} {text}")
