"""Baseline learners: random, round-robin, independent UCB1, and full-sharing UCB with a server.

All are vectorised populations acting on (B, M) arrays; ties break to the lowest arm index, and
untried arms are tried first in the order ``i, i+1, ...`` (mod K) for agent ``i``, so that agents
of a federation spread their first pulls over the arms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit_envs.algorithms import register_algorithm
from fedbandit_envs.channel import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.privacy import declare_message_kinds
from fedbandit_envs.core import Action, AgentContext, Feedback, Step
from fedbandit_envs.protocol import Coordinator, Population
from fedbandit_envs.topology import SERVER
from fedbandit_envs.validation import CheckedConfig

declare_message_kinds("pooled", "sample")  # public vocabulary under a DP wrapper

__all__ = [
    "FullSharingCoordinator",
    "FullSharingUCB",
    "IndependentUCB1",
    "NoOptions",
    "Random",
    "RoundRobin",
    "ucb1_arms",
]


@dataclass(frozen=True)
class NoOptions(CheckedConfig):
    """The config of the baselines, which take no keywords: any keyword is refused with the list of none."""


def ucb1_arms(counts: np.ndarray, sums: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """UCB1 choices for (B, M, K) counts and reward sums and (B, M) total pulls.

    Index: ``sums / counts + sqrt(2 ln(total) / counts)``. An agent with untried arms pulls the first
    untried arm in its rotated order (agent ``i`` starts at arm ``i mod K``).
    """
    untried = counts == 0
    safe = np.maximum(counts, 1)
    index = sums / safe + np.sqrt(2.0 * np.log(np.maximum(totals, 1))[..., None] / safe)
    arms = index.argmax(axis=-1)
    if untried.any():
        num_agents, num_arms = counts.shape[1], counts.shape[2]
        rank = (np.arange(num_arms)[None, :] - np.arange(num_agents)[:, None]) % num_arms
        first_untried = np.where(untried, rank, num_arms).argmin(axis=-1)
        arms = np.where(untried.any(axis=-1), first_untried, arms)
    return arms


class Random(Population):
    """Every agent pulls a uniformly random arm every slot (from the algorithm's own stream)."""

    families = ("mab",)

    def reset(self, context: AgentContext) -> None:
        """Take one generator per replica."""
        self.context = context
        self.rngs = context.agent_rngs()

    def act(self, step: Step) -> Action:
        """Uniform arms, no messages."""
        k, m = self.context.num_arms, self.context.num_agents
        return Action(np.stack([rng.integers(k, size=m) for rng in self.rngs]))

    def observe(self, feedback: Feedback) -> None:
        """Nothing to learn."""


class RoundRobin(Population):
    """Agent ``i`` pulls arm ``(i + t) mod K`` in slot ``t``."""

    families = ("mab",)

    def reset(self, context: AgentContext) -> None:
        """Remember the shape of the problem."""
        self.context = context
        self._offsets = np.arange(context.num_agents)

    def act(self, step: Step) -> Action:
        """The cyclic arm of every agent, no messages."""
        slot = step.slot
        arms = (self._offsets + slot) % self.context.num_arms
        return Action(np.broadcast_to(arms, (self.context.num_replicas, self.context.num_agents)).copy())

    def observe(self, feedback: Feedback) -> None:
        """Nothing to learn."""


class IndependentUCB1(Population):
    """Each agent runs UCB1 on its own rewards and never communicates (the papers' Single-MAB)."""

    families = ("mab",)

    def reset(self, context: AgentContext) -> None:
        """Zero the per-agent statistics."""
        shape = (context.num_replicas, context.num_agents, context.num_arms)
        self.counts = np.zeros(shape, np.int64)
        self.sums = np.zeros(shape)
        self.totals = np.zeros(shape[:2], np.int64)
        self._cells = (np.arange(shape[0] * shape[1]) * shape[2]).reshape(shape[:2])

    def act(self, step: Step) -> Action:
        """UCB1 on the agent's own statistics."""
        return Action(ucb1_arms(self.counts, self.sums, self.totals))

    def observe(self, feedback: Feedback) -> None:
        """Add each agent's reward to its own statistics (flat indices: one cell per agent)."""
        cells = self._cells + feedback.arms
        self.counts.reshape(-1)[cells] += 1
        self.sums.reshape(-1)[cells] += feedback.rewards
        self.totals += 1


class FullSharingCoordinator(Coordinator):
    """Pools every sample it receives and broadcasts the pooled counts and sums every slot."""

    def reset(self, context: AgentContext, rngs: list[np.random.Generator]) -> None:
        """Zero the pooled statistics of every replica."""
        self.counts = np.zeros((context.num_replicas, context.num_arms), np.int64)
        self.sums = np.zeros((context.num_replicas, context.num_arms))

    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        """Add the received samples; reply with one pooled-statistics broadcast per replica."""
        for batch in inbox:
            if batch.kind != "sample":
                continue
            arms = batch.payload["arm"]
            np.add.at(self.counts, (batch.replica, arms), 1)
            np.add.at(self.sums, (batch.replica, arms), batch.payload["reward"])
        replicas = np.arange(len(self.counts))
        return [
            MessageBatch(
                kind="pooled",
                replica=replicas,
                sender=np.full(len(replicas), SERVER),
                recipient=np.full(len(replicas), NEIGHBOURS),
                payload={"counts": self.counts.copy(), "sums": self.sums.copy()},
            )
        ]


class FullSharingUCB(Population):
    """Every agent sends each (arm, reward) to the server and plays UCB1 on the pooled statistics.

    The no-privacy, unlimited-communication reference. A reward is known only after its pull, so the
    sample of slot t is uploaded with the action of slot t + 1; the server pools it and broadcasts the
    pooled statistics in that same step. Needs a topology with server links (the default
    ``"server"``). An agent whose broadcast was lost keeps its last pooled statistics.
    """

    families = ("mab",)

    def make_coordinator(self) -> Coordinator:
        """The pooling server."""
        return FullSharingCoordinator()

    def reset(self, context: AgentContext) -> None:
        """Zero every agent's copy of the pooled statistics."""
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.counts = np.zeros((b, m, k), np.int64)
        self.sums = np.zeros((b, m, k))
        self._replica = np.repeat(np.arange(b), m)
        self._sender = np.tile(np.arange(m), b)
        self._recipient = np.full(b * m, SERVER)
        self._pending: list[MessageBatch] = []

    def act(self, step: Step) -> Action:
        """UCB1 on the pooled statistics; upload the previous slot's samples."""
        arms = ucb1_arms(self.counts, self.sums, self.counts.sum(axis=-1))
        return Action(arms, self._pending)

    def observe(self, feedback: Feedback) -> None:
        """Queue this slot's samples for upload and adopt the pooled statistics broadcast in this step."""
        self._pending = [
            MessageBatch(
                kind="sample",
                replica=self._replica,
                sender=self._sender,
                recipient=self._recipient,
                payload={"arm": feedback.arms.reshape(-1), "reward": feedback.rewards.reshape(-1)},
            )
        ]
        for batch in feedback.inbox:
            if batch.kind == "pooled":
                self.counts[batch.replica, batch.recipient] = batch.payload["counts"]
                self.sums[batch.replica, batch.recipient] = batch.payload["sums"]


register_algorithm("random", Random, config=NoOptions)
register_algorithm("round_robin", RoundRobin, config=NoOptions)
register_algorithm("independent_ucb1", IndependentUCB1, config=NoOptions)
register_algorithm("full_sharing_ucb", FullSharingUCB, config=NoOptions)
