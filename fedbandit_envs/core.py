"""Data exchanged between the simulation core and algorithms (replica axis first, then agents)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.seeding import SeedStreams
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


def _read_only(array: np.ndarray | None) -> np.ndarray | None:
    """A read-only view of ``array`` that follows its later in-place updates (None stays None)."""
    if array is None:
        return None
    view = array.view()
    view.setflags(write=False)
    return view


class ObservedRecords:
    """The env's own count of the records (observed rewards) each agent holds: facts a DP wrapper may trust.

    A read-only view over arrays the core updates in place, so it always shows the counts at the moment
    it is read (a message hook reads it while the slot's messages are privatized). Only the core writes
    them; nothing a learner sends changes them.

    Args:
        agent_counts: (B, M) rewards each agent has observed so far.
        arm_counts: (B, M, K) rewards each agent has observed per arm, or None where arms have no identity
            (linear contexts) or records are not per arm.
        record_widths: (B, M, K) width of the range of one record per (agent, entry) that the env can
            vouch for (procurement: a producer's capacity), or None.
    """

    def __init__(
        self,
        agent_counts: np.ndarray,
        arm_counts: np.ndarray | None = None,
        record_widths: np.ndarray | None = None,
    ) -> None:
        self._agent_counts = _read_only(agent_counts)
        self._arm_counts = _read_only(arm_counts)
        self._record_widths = _read_only(record_widths)

    @property
    def has_arm_counts(self) -> bool:
        """Whether this family counts records per arm."""
        return self._arm_counts is not None

    @property
    def has_record_widths(self) -> bool:
        """Whether this family knows the range of one record per entry."""
        return self._record_widths is not None

    def agent_counts(self, replica: int) -> np.ndarray:
        """(M,) rewards observed by each agent of ``replica`` so far (read-only)."""
        return self._agent_counts[replica]

    def arm_counts(self, replica: int) -> np.ndarray:
        """(M, K) rewards observed per agent and arm in ``replica`` (read-only); ValueError if not counted."""
        if self._arm_counts is None:
            raise ValueError("this environment does not count observed rewards per arm")
        return self._arm_counts[replica]

    def record_widths(self, replica: int) -> np.ndarray:
        """(M, K) width of one record's range per agent and entry (read-only); ValueError if not known."""
        if self._record_widths is None:
            raise ValueError("this environment does not know the range of one record per entry")
        return self._record_widths[replica]


def reset_hooks(
    hooks: Sequence[Any], context: AgentContext, streams: Sequence[SeedStreams], records: ObservedRecords
) -> None:
    """Start an episode for each message hook, then hand the hooks that ask for it the env's record counts.

    A hook reads the counts through its optional ``attach_records(records)`` method (see
    :class:`ObservedRecords`); hooks without it are only reset.
    """
    for hook in hooks:
        hook.reset(context, streams)
        attach = getattr(hook, "attach_records", None)
        if attach is not None:
            attach(records)


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
