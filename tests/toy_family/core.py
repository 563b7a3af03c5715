"""The batched core of the toy "guess" family: M agents guess a hidden integer and share what they learn.

Every replica hides one integer ``h`` in ``0 .. N-1`` (drawn from the episode's ``instance`` stream). In a
slot every agent guesses (its "arm"); the core answers each guess with a hint (+1: higher, -1: lower, 0: hit),
a reward of 1 for a hit, and adds ``|guess - h|`` to the agent's regret. After every slot but the last a
``"report"`` phase lets agents tell their neighbours what they learnt; it is skipped when nobody sends.

The core is built from the shared pieces only: the channel and its ledger, the seed streams, the topology
builder, the message hooks, and the protocol's data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedbandit_envs.channel import Channel, ChannelConfig, CostModel, MessageBatch
from fedbandit_envs.core import (
    Action,
    AgentContext,
    ChannelCore,
    MessageHook,
    ObservedRecords,
    Phase,
    Step,
    start_episode,
)
from fedbandit_envs.seeding import SeedLike
from fedbandit_envs.topology import Topology, build_topology, check_topology
from fedbandit_envs.validation import check_int, check_int_array


@dataclass
class GuessFeedback:
    """What the agents learn from one slot, for every replica.

    Attributes:
        slot: the slot just played (0-based).
        arms: (B, M) the guesses.
        rewards: (B, M) 1.0 for a hit, else 0.0.
        hints: (B, M) +1 (the number is higher), -1 (lower) or 0 (hit).
    """

    slot: int
    arms: np.ndarray
    rewards: np.ndarray
    hints: np.ndarray


class GuessCore(ChannelCore):
    """B replicas of the guessing game on a costed channel.

    Args:
        num_agents: M >= 2.
        num_values: N >= 2: the hidden number lies in ``0 .. N-1``.
        horizon: T >= 1 slots.
        topology: the agents' graph (a name of :func:`~fedbandit_envs.topology.build_topology`).
        c2: the price of an agent-agent link used in a slot.
    """

    def __init__(self, num_agents: int, num_values: int, horizon: int, topology: str = "ring", c2: float = 1.0) -> None:
        self.num_agents = check_int("num_agents", num_agents, 2)
        self.num_values = check_int("num_values", num_values, 2)
        self.horizon = check_int("horizon", horizon, 1)
        check_topology(topology, self.num_agents)
        self.topology_spec = topology
        self.channel = Channel(ChannelConfig(CostModel(c2=c2)))

    def reset(self, seeds: Sequence[SeedLike], hooks: Sequence[MessageHook] = ()) -> None:
        """Start B = len(seeds) replicas, each on its own seed streams, with the episode's message hooks."""
        hooks, streams = start_episode(seeds, hooks, "a guess core")
        with self.resetting():
            b, m = len(streams), self.num_agents
            self.num_replicas = b
            self.hidden = np.array([s.generator("instance").integers(self.num_values) for s in streams])
            self.topologies: list[Topology] = [
                build_topology(self.topology_spec, m, s.generator("topology")) for s in streams
            ]
            context = AgentContext(
                num_agents=m,
                num_arms=self.num_values,
                horizon=self.horizon,
                topologies=tuple(self.topologies),
                reward_bounds=(0.0, 1.0),
                agent_seeds=tuple(s.sequence("agents") for s in streams),
            )
            self._observed = np.zeros((b, m), np.int64)
            self.open_episode(context, streams, hooks, ObservedRecords(self._observed))
            self.slot = 0
            self.regret = np.zeros((b, m))
            self.found = np.zeros((b, m), bool)

    # ------------------------------------------------------------------ the population protocol
    def current_step(self) -> Step:
        """The act phase of the current slot (every agent acts; there is nothing else to announce)."""
        return Step(self.slot)

    def play(self, action: Action) -> GuessFeedback:
        """Play the current slot with (B, M) guesses; messages are sent in the report phase, not here."""
        self.check_running()
        if action.messages:
            raise ValueError("guesses carry no messages; send them in the report phase that follows the slot")
        arms = np.asarray(action.arms)
        if arms.shape != (self.num_replicas, self.num_agents):
            raise ValueError(
                f"arms must have shape (replicas, agents) = {(self.num_replicas, self.num_agents)}, got {arms.shape}"
            )
        arms = check_int_array("a guess", arms, 0, self.num_values - 1).reshape(arms.shape)
        hints = np.sign(self.hidden[:, None] - arms)
        self.regret += np.abs(self.hidden[:, None] - arms)
        self.found = hints == 0
        self._observed += 1
        feedback = GuessFeedback(self.slot, arms, self.found.astype(np.float64), hints)
        self.slot += 1
        return feedback

    def first_phase(self) -> Phase | None:
        """The report phase after the slot just played (none after the last slot)."""
        return None if self.done else Phase(self.slot - 1, "report")

    def next_phase(self, phase: Phase, sent: bool) -> None:
        """A slot has one report phase."""
        return None

    def exchange(self, phase: Phase, messages: Sequence[MessageBatch]) -> list[MessageBatch]:
        """Route the report phase's messages: validate, apply the hooks, transmit and cost; return the copies."""
        return self.route(phase.slot, messages)
