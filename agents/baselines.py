"""Baseline learners: random, round-robin, independent UCB1, and full-sharing UCB with a server.

All are vectorised populations acting on (B, M) arrays; ties break to the lowest arm index, and
untried arms are tried first in the order ``i, i+1, ...`` (mod K) for agent ``i``, so that agents
of a federation spread their first pulls over the arms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.configured import Configured
from fedbandit_envs.algorithms import register_algorithm
from fedbandit_envs.channel import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.messages import GatheredPayload
from fedbandit_envs.channel.privacy import declare_message_kinds
from fedbandit_envs.core import Action, AgentContext, Feedback, Step
from fedbandit_envs.frozen import frozen, is_frozen
from fedbandit_envs.protocol import Coordinator, Population
from fedbandit_envs.reference import reference_active
from fedbandit_envs.topology import SERVER, require_server_links
from fedbandit_envs.validation import CheckedConfig

declare_message_kinds("pooled", "sample")  # public vocabulary under a DP wrapper

_INT64, _FLOAT64 = np.dtype(np.int64), np.dtype(np.float64)

__all__ = [
    "FullSharingCoordinator",
    "FullSharingUCB",
    "IndependentUCB1",
    "NoOptions",
    "Random",
    "RoundRobin",
    "ucb1_arms",
    "ucb1_tried_arms",
]

#: Slots per block of IndependentUCB1's table of ``2 ln t``.
LOG_BLOCK = 4096


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


def ucb1_tried_arms(counts: np.ndarray, sums: np.ndarray, two_log: np.ndarray | np.floating) -> np.ndarray:
    """:func:`ucb1_arms` when every agent has tried every arm (``counts >= 1``), given ``2 ln(total)``.

    The same floating-point operations on the same operands (so the same choices, bit for bit) without the
    untried test and the clamps, which change nothing once every count and total is at least 1. ``two_log`` is
    ``2.0 * log(total)``: a scalar when every agent's total is the same, else a (B, M, 1) array.
    """
    index = sums / counts
    index += np.sqrt(two_log / counts)
    return index.argmax(axis=-1)


class Random(Configured, Population, config=NoOptions):
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


class RoundRobin(Configured, Population, config=NoOptions):
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


class IndependentUCB1(Configured, Population, config=NoOptions):
    """Each agent runs UCB1 on its own rewards and never communicates (the papers' Single-MAB).

    Every agent pulls once per slot, so every agent's total is the number of slots observed: once every arm is
    tried, ``2 ln t`` is read from a table computed a block of slots at a time (the same ``np.log`` of the same
    int64 totals as :func:`ucb1_arms`) and the index takes :func:`ucb1_tried_arms`. In the reference mode
    (:mod:`fedbandit_envs.reference`) every slot takes :func:`ucb1_arms` on a (B, M) totals array.
    """

    families = ("mab",)

    def reset(self, context: AgentContext) -> None:
        """Zero the per-agent statistics."""
        shape = (context.num_replicas, context.num_agents, context.num_arms)
        self.counts = np.zeros(shape, np.int64)
        self.sums = np.zeros(shape)
        self.total = 0  # slots observed: every agent's number of pulls
        self._untried = True  # some agent has an untried arm
        self._two_log = np.empty(0)  # 2 ln(max(t, 1)) for t in [_log_start, _log_start + LOG_BLOCK)
        self._log_start = 0
        self._cells = (np.arange(shape[0] * shape[1]) * shape[2]).reshape(shape[:2])
        self._counts_flat, self._sums_flat = self.counts.reshape(-1), self.sums.reshape(-1)  # views

    def __setstate__(self, state: dict[str, object]) -> None:
        """Restore a copy (pickle, deepcopy) with flat views of its own statistics (a copy's arrays come apart)."""
        self.__dict__.update(state)
        if "counts" in state:
            self._counts_flat, self._sums_flat = self.counts.reshape(-1), self.sums.reshape(-1)

    def act(self, step: Step) -> Action:
        """UCB1 on the agent's own statistics."""
        if self._untried or reference_active():
            totals = np.full(self.counts.shape[:2], self.total, np.int64)
            return Action(ucb1_arms(self.counts, self.sums, totals))
        return Action(ucb1_tried_arms(self.counts, self.sums, self._two_log_of(self.total)))

    def _two_log_of(self, total: int) -> np.floating:
        """``2.0 * log(max(total, 1))``, from the table of the block of slots holding ``total``."""
        offset = total - self._log_start
        if not 0 <= offset < len(self._two_log):
            self._log_start = total - total % LOG_BLOCK
            totals = np.arange(self._log_start, self._log_start + LOG_BLOCK, dtype=np.int64)
            self._two_log = 2.0 * np.log(np.maximum(totals, 1))
            offset = total - self._log_start
        return self._two_log[offset]

    def observe(self, feedback: Feedback) -> None:
        """Add each agent's reward to its own statistics (flat indices: one cell per agent)."""
        cells = self._cells + feedback.arms
        self._counts_flat[cells] += 1
        self._sums_flat[cells] += feedback.rewards
        self.total += 1
        if self._untried:
            self._untried = bool(np.count_nonzero(self.counts) < self.counts.size)  # (a third of all()'s cost)


class FullSharingCoordinator(Coordinator):
    """Pools every sample it receives and broadcasts the pooled counts and sums every slot.

    Samples are added in the order received (``np.add.at`` on the flat cells, one float addition after
    another); the reference mode (:mod:`fedbandit_envs.reference`) adds them with ``np.add.at`` on (replica,
    arm) pairs.
    """

    def reset(self, context: AgentContext, rngs: list[np.random.Generator]) -> None:
        """Zero the pooled statistics of every replica."""
        b = context.num_replicas
        self.counts = np.zeros((b, context.num_arms), np.int64)
        self.sums = np.zeros((b, context.num_arms))
        # immutable header arrays, the same every slot: the channel reuses their checked routing without comparing
        self._replicas = frozen(np.arange(b))
        self._senders = frozen(np.full(b, SERVER))
        self._recipients = frozen(np.full(b, NEIGHBOURS))

    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        """Add the received samples; reply with one pooled-statistics broadcast per replica."""
        for batch in inbox:
            if batch.kind != "sample":
                continue
            self._add(batch.replica, batch.payload["arm"], batch.payload["reward"])
        payload = {"counts": self.counts, "sums": self.sums}  # the batch copies them
        return [MessageBatch("pooled", self._replicas, self._senders, self._recipients, payload)]

    def _add(self, replica: np.ndarray, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Add one count and the reward of each (replica, arm) row, in row order."""
        if not reference_active():
            try:
                cells = np.ravel_multi_index((replica, arms), self.counts.shape)
            except (TypeError, ValueError):  # arms out of range or not integers: the pair path raises or wraps
                pass
            else:
                np.add.at(self.counts.reshape(-1), cells, 1)
                np.add.at(self.sums.reshape(-1), cells, rewards)
                return
        np.add.at(self.counts, (replica, arms), 1)
        np.add.at(self.sums, (replica, arms), rewards)


class FullSharingUCB(Configured, Population, config=NoOptions):
    """Every agent sends each (arm, reward) to the server and plays UCB1 on the pooled statistics.

    The no-privacy, unlimited-communication reference. A reward is known only after its pull, so the
    sample of slot t is uploaded with the action of slot t + 1; the server pools it and broadcasts the
    pooled statistics in that same step. Needs a topology with server links (the default
    ``"server"``). An agent whose broadcast was lost keeps its last pooled statistics.

    While every agent of a replica holds the same statistics (at the start, and after a broadcast whose copies all
    carry their replica's row of the server's reply reached every agent of every replica in order), they are kept
    once per replica, as (B, 1, K) arrays, and the index is computed once per replica: the same operations on the
    same numbers as for each agent. Any other broadcast gives every agent its own copy again. A broadcast that
    reached every agent is adopted with one copy, and once every agent has tried every arm the index takes
    :func:`ucb1_tried_arms`; the reference mode (:mod:`fedbandit_envs.reference`) keeps a copy per agent, adopts
    every broadcast row by row and takes :func:`ucb1_arms`.
    """

    families = ("mab",)

    def make_coordinator(self) -> Coordinator:
        """The pooling server."""
        return FullSharingCoordinator()

    def reset(self, context: AgentContext) -> None:
        """Zero the pooled statistics every agent starts from (every agent must have a server link)."""
        for topology in context.topologies:
            require_server_links("FullSharingUCB", topology)
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self._shape = (b, m, k)
        self._pooled_shape = (b, k)  # the server's statistics
        self._shared = not reference_active()  # one row per replica, (B, 1, K), shared by its agents
        self._counts = np.zeros((b, 1 if self._shared else m, k), np.int64)
        self._sums = np.zeros(self._counts.shape)
        # immutable header arrays, the same every slot: the channel reuses their checked routing without comparing
        self._replica = frozen(np.repeat(np.arange(b), m))
        self._sender = frozen(np.tile(np.arange(m), b))
        self._recipient = frozen(np.full(b * m, SERVER))
        self._pending: list[MessageBatch] = []
        self._untried = True  # some agent has an untried arm
        # the header of a broadcast delivered to every agent of every replica: its rows follow (replica, agent)
        self._everyone = (self._replica.tobytes(), self._recipient.tobytes(), self._sender.tobytes())
        # the immutable header arrays and payload rows last found to be that header (and rows), known by identity
        self._everyone_arrays: tuple[np.ndarray, ...] = ()
        self._everyone_rows: np.ndarray | None = None

    @property
    def counts(self) -> np.ndarray:
        """(B, M, K) every agent's copy of the pooled counts (read-only)."""
        return np.broadcast_to(self._counts, self._shape)

    @property
    def sums(self) -> np.ndarray:
        """(B, M, K) every agent's copy of the pooled reward sums (read-only)."""
        return np.broadcast_to(self._sums, self._shape)

    def act(self, step: Step) -> Action:
        """UCB1 on the pooled statistics; upload the previous slot's samples."""
        if self._untried or reference_active():
            counts = self.counts
            arms = ucb1_arms(counts, self.sums, counts.sum(axis=-1))
        else:  # the same integer totals (exact in any order of addition); einsum reduces short rows faster
            totals = np.einsum("bmk->bm", self._counts)
            arms = ucb1_tried_arms(self._counts, self._sums, 2.0 * np.log(totals)[..., None])
            if self._shared:
                arms = arms.repeat(self._shape[1], axis=1)
        return Action(arms, self._pending)

    def observe(self, feedback: Feedback) -> None:
        """Queue this slot's samples for upload and adopt the pooled statistics broadcast in this step."""
        payload = {"arm": feedback.arms.reshape(-1), "reward": feedback.rewards.reshape(-1)}
        self._pending = [MessageBatch("sample", self._replica, self._sender, self._recipient, payload)]
        adopted = False
        for batch in feedback.inbox:
            if batch.kind == "pooled":
                self._adopt(batch)
                adopted = True
        if adopted:
            self._untried = bool(np.count_nonzero(self._counts) < self._counts.size)  # (a third of all()'s cost)

    def _adopt(self, batch: MessageBatch) -> None:
        """Replace the statistics of each recipient of ``batch`` with its row."""
        everyone = not reference_active() and self._reaches_everyone(batch)
        pooled = self._replica_rows(batch) if everyone else None
        if pooled is not None:
            self._counts, self._sums = pooled
            self._shared = True
            return
        self._unshare()
        counts, sums = batch.payload["counts"], batch.payload["sums"]
        if everyone:
            self._counts.reshape(len(batch), -1)[...] = counts
            self._sums.reshape(len(batch), -1)[...] = sums
        else:
            self._counts[batch.replica, batch.recipient] = counts
            self._sums[batch.replica, batch.recipient] = sums

    def _reaches_everyone(self, batch: MessageBatch) -> bool:
        """Whether the rows of ``batch`` go to every agent of every replica in (replica, agent) order.

        A batch holding the very immutable header arrays last found to be that header has it without comparing.
        """
        known = self._everyone_arrays
        if known and batch.replica is known[0] and batch.sender is known[1] and batch.recipient is known[2]:
            return True
        arrays = batch.replica, batch.sender, batch.recipient
        if len(batch) != len(self._replica) or batch.header_key() != self._everyone:
            return False
        self._everyone_arrays = arrays if all(map(is_frozen, arrays)) else ()
        return True

    def _replica_rows(self, batch: MessageBatch) -> tuple[np.ndarray, np.ndarray] | None:
        """The server's (B, 1, K) counts and sums if every copy of ``batch`` carries its replica's row, else None.

        ``batch`` reached every agent in (replica, agent) order; its copies are read from the server's reply
        without gathering them when each copy is row ``replica`` of int64 counts and float64 sums of shape (B, K),
        the values and types a copy per agent would hold.
        """
        payload = batch.payload
        if type(payload) is not GatheredPayload:  # (what the channel delivers; anything else takes the general path)
            return None
        if payload.rows is not self._everyone_rows:  # (the rows of a gathered payload are immutable)
            if payload.rows.tobytes() != self._everyone[0]:
                return None
            self._everyone_rows = payload.rows
        counts, sums = payload.source["counts"], payload.source["sums"]
        shape = self._pooled_shape
        if counts.shape != shape or sums.shape != shape or counts.dtype != _INT64 or sums.dtype != _FLOAT64:
            return None
        return counts[:, None, :], sums[:, None, :]

    def _unshare(self) -> None:
        """Give every agent its own (writable) copy of the statistics it holds."""
        if self._shared:
            m = self._shape[1]
            self._counts, self._sums = self._counts.repeat(m, axis=1), self._sums.repeat(m, axis=1)
            self._shared = False


register_algorithm("random", Random, config=NoOptions)
register_algorithm("round_robin", RoundRobin, config=NoOptions)
register_algorithm("independent_ucb1", IndependentUCB1, config=NoOptions)
register_algorithm("full_sharing_ucb", FullSharingUCB, config=NoOptions)
