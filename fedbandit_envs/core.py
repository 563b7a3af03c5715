"""Data exchanged between the simulation core and algorithms (replica axis first, then agents)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.topology import Topology


@dataclass(frozen=True)
class AgentContext:
    """The public facts of an episode that an algorithm may use when it resets.

    Attributes:
        num_agents: M, the number of agents.
        num_arms: K, the number of arms.
        horizon: T, the number of slots (known to the agents, as in the papers).
        topologies: the communication graph of each replica (agents may read their neighbours).
        reward_bounds: the support of the rewards, e.g. (0, 1).
        agent_seeds: one SeedSequence per replica for the algorithm's own randomness (the ``agents``
            stream); a per-agent sequence is ``agent_seeds[b].spawn`` or ``SeedStreams.agent_sequence``.
    """

    num_agents: int
    num_arms: int
    horizon: int
    topologies: tuple[Topology, ...]
    reward_bounds: tuple[float, float]
    agent_seeds: tuple[np.random.SeedSequence, ...]

    @property
    def num_replicas(self) -> int:
        """B, the number of independent runs simulated together."""
        return len(self.topologies)

    def agent_rngs(self) -> list[np.random.Generator]:
        """One fresh Generator per replica on the algorithm's stream."""
        return [np.random.default_rng(seq) for seq in self.agent_seeds]


@dataclass
class Action:
    """The joint action of one slot: an arm per agent and replica, plus outgoing messages."""

    arms: np.ndarray
    messages: list[MessageBatch] = field(default_factory=list)


@dataclass
class Feedback:
    """What the agents receive from one step, for every replica.

    Attributes:
        slot: the slot just played (0-based).
        arms: (B, M) arms pulled.
        rewards: (B, M) rewards observed.
        inbox: copies delivered to agents in this step (explicit recipients, sorted by send order).
        partners: (B, M) gossip partner of each agent in the *next* slot, -1 for none.
    """

    slot: int
    arms: np.ndarray
    rewards: np.ndarray
    inbox: list[MessageBatch]
    partners: np.ndarray


#: Error texts of a step after the last slot: of an environment (its agents are gone) and of a core.
EPISODE_OVER = "the episode is over (or reset() was not called); call reset() first"
HORIZON_REACHED = "the horizon is reached; call reset() to start a new episode"

#: Exchanges one boundary may take (a peer hop and a server round trip need two; more means a loop).
MAX_BOUNDARY_EXCHANGES = 8


def exchange_at_boundary(
    population: Any, exchange: Callable[[list[MessageBatch]], list[MessageBatch]], slot: int
) -> None:
    """Run a population's message-only hops at the boundary after ``slot``.

    Asks ``population.boundary(slot)`` for messages, routes them with ``exchange`` (the core's, or the
    PettingZoo environment's) and hands the delivered copies to ``population.observe_boundary(slot,
    inbox)``, as long as the population has more to send (a peer hop can be followed by a server round
    trip in the same boundary). Populations without a ``boundary`` method send nothing. Callers skip this
    after the final slot.
    """
    boundary = getattr(population, "boundary", None)
    if boundary is None:
        return
    for _ in range(MAX_BOUNDARY_EXCHANGES):
        batches = boundary(slot)
        if not batches:
            return
        population.observe_boundary(slot, exchange(batches))
    raise RuntimeError(
        f"{type(population).__name__}.boundary() still had messages after {MAX_BOUNDARY_EXCHANGES} exchanges at "
        f"the boundary after slot {slot}; a boundary carries one hop and a server round trip"
    )
