"""CDP-MAB (Li and Song, Algorithm 1) and its communication-constrained variant (Sec. IV-B, Thm. 2).

Master-worker: after each exploration epoch the round's participants upload their epoch means to the
server (:class:`CDPServer`, hosted by the environment), which aggregates, eliminates and broadcasts
the new active set within the same slot (free downlink, D9/D10). Cost per round: c1 per uploading
agent, c1 N in total (spec RC-C1).

Privacy. Each agent uploads its epoch-r means x^_i(r) over I_{r-1}, declared ``Sensitive`` with
sensitivity 1/n_r and the epoch as partition key, so a DP wrapper noises every epoch mean exactly once
(``LaplaceMessageDP(env, epsilon, calibration="paper", n_agg=N)`` adds Lap(1/(N epsilon n_r)) and
charges N epsilon per epoch, which compose in parallel). The server keeps, per agent, the sum
sum_j n_j y^_i(j) of everything it received, so y-bar_i(r) = that sum / S(r) is post-processing and no
value is ever noised twice. Under partial participation an agent selected in round r uploads every
epoch mean it has not uploaded yet (each noised once, at its first upload), so the server's y-bar_i(r)
covers epochs 1..r as in the paper, where every agent privatizes every epoch (D12). With
``noise="agent"`` the agents draw that noise themselves (one draw per agent and epoch) and declare the
means ``Privatized`` with the guarantee N epsilon.
"""

from __future__ import annotations

import numpy as np

from agents.configured import option_names
from agents.li_song.engine import (
    LiSongConfig,
    LiSongPopulation,
    LiSongServer,
    aggregate_values,
    epoch_mean_privacy,
)
from agents.li_song.schedules import participants
from fedbandit_envs.channel import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.privacy import FieldPrivacy, Privatized, Public, declare_message_kinds
from fedbandit_envs.core import AgentContext
from fedbandit_envs.topology import SERVER, Topology, require_server_links

declare_message_kinds("pooled", "upload")  # public vocabulary under a DP wrapper

__all__ = ["CDPMAB", "CDPServer", "first_rows", "pooled_broadcast"]


#: Declarations of the server's broadcast: the aggregate and what the server decides from it are post-processing of
#: the agents' private uploads; the counts (N times the epoch's pulls), the participants (drawn from the server's own
#: stream) and the round are public.
POOLED_PRIVACY: dict[str, FieldPrivacy] = {
    "counts": Public(),
    "sums": Privatized(description="aggregate of the agents' private epoch means"),
    "active": Privatized(description="arms kept by elimination on the private aggregate"),
    "participants": Public(),
    "commit": Privatized(description="arm committed to on the private aggregate"),
    "round": Public(),
}


def pooled_broadcast(
    replicas: list[int],
    counts: np.ndarray,
    sums: np.ndarray,
    active: np.ndarray,
    selected: np.ndarray,
    commit: list[int],
    rounds: list[int],
) -> MessageBatch:
    """The server's free broadcast: pooled counts and sums (the aggregate), I_r, the next participants, commit.

    ``counts``/``sums``/``active`` are (n, K), ``selected`` (n, M); one row per replica, sent to every
    server-linked agent. The pooled mean of arm k is ``sums[k] / counts[k]`` (the privatized aggregate).
    """
    rows = len(replicas)
    return MessageBatch(
        kind="pooled",
        replica=np.asarray(replicas, np.int64),
        sender=np.full(rows, SERVER),
        recipient=np.full(rows, NEIGHBOURS),
        payload={
            "counts": counts,
            "sums": sums,
            "active": active,
            "participants": selected,
            "commit": np.asarray(commit, np.int64),
            "round": np.asarray(rounds, np.int64),
        },
        privacy=POOLED_PRIVACY,
    )


def first_rows(batch: MessageBatch) -> dict[int, int]:
    """Replica -> the first row of ``batch`` delivered in that replica."""
    replicas, rows = np.unique(batch.replica, return_index=True)
    return dict(zip(replicas.tolist(), rows.tolist()))


class CDPServer(LiSongServer):
    """The CDP-MAB server: aggregates the participants' uploads, eliminates, broadcasts I_r (D9, D12)."""

    def reset(self, context: AgentContext, rngs: list[np.random.Generator]) -> None:
        """Round 1 for every replica; draw P_1 from the server stream when N < M."""
        b, m = context.num_replicas, context.num_agents
        self.num_agg = participants(self.config.participation, m)
        self.start_rounds(context, self.num_agg, m)
        self.rngs = rngs
        self._announce = self.num_agg < m
        if self._announce:
            self.selected = np.stack([self._draw(replica) for replica in range(b)])

    def _draw(self, replica: int) -> np.ndarray:
        """A uniform N-subset of the agents, without replacement, from the server stream (D12)."""
        chosen = np.zeros(self.selected.shape[1], bool)
        chosen[self.rngs[replica].choice(len(chosen), self.num_agg, replace=False)] = True
        return chosen

    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        """Add the uploads; close every replica whose participants have all uploaded."""
        if not inbox and not self._announce:
            return []
        replies = []
        if self._announce:
            self._announce = False
            replicas = list(range(len(self.states)))
            replies.append(self._broadcast(replicas, [0] * len(replicas)))
        for batch in inbox:
            if batch.kind == "upload":
                self._add(batch)
        done = [b for b, state in enumerate(self.states) if state.plan and np.all(self.received[b] >= self.selected[b])]
        for b in done:
            self._close(b)
        if done:
            replies.append(self._broadcast(done, [self.states[b].completed for b in done]))
        return replies

    def _add(self, batch: MessageBatch) -> None:
        order = np.lexsort((batch.payload["epoch"], batch.sender, batch.replica))
        for row in order.tolist():
            b, i = int(batch.replica[row]), int(batch.sender[row])
            state = self.states[b]
            arms = np.flatnonzero(state.active)
            mean = batch.payload["mean"][row]
            self.totals[b, i, arms] += batch.payload["n"][row] * mean
            if int(batch.payload["epoch"][row]) == state.completed + 1:
                self.latest[b, i, arms] = mean
                self.received[b, i] = True

    def _close(self, b: int) -> None:
        state, chosen = self.states[b], self.selected[b]
        arms = np.flatnonzero(state.active)
        values = np.zeros(len(state.active))
        values[arms] = aggregate_values(
            self.totals[b, chosen][:, arms],
            self.latest[b, chosen][:, arms],
            state.current_plan().samples,
            self.num_agg,
            self.config.aggregate,
        )
        survivors, commit = state.decide(values)
        self.counts[b, arms] = self.num_agg * state.current_plan().samples
        self.sums[b, arms] = values[arms] * self.counts[b, arms]
        state.advance(survivors, commit, values)
        self.received[b] = False
        state.plan = None
        if state.exploring:
            state.begin_epoch()
            if self.num_agg < len(chosen):
                self.selected[b] = self._draw(b)

    def _broadcast(self, replicas: list[int], rounds: list[int]) -> MessageBatch:
        return pooled_broadcast(
            replicas,
            self.counts[replicas],
            self.sums[replicas],
            np.stack([self.states[b].active for b in replicas]),
            self.selected[replicas],
            [self.states[b].commit for b in replicas],
            rounds,
        )


class CDPMAB(LiSongPopulation):
    """CDP-MAB (Algorithm 1) with the round cap R and participation rate p of Sec. IV-B.

    Needs a topology in which every agent is linked to the server (``topology="server"``). The server
    is :class:`CDPServer` (``make_coordinator``).

    Keywords: the :class:`LiSongConfig` fields in :attr:`options` (not ``hybrid_aggregation``). Give the DP wrapper
    the same epsilon and calibration with ``n_agg = ceil(p M)``, or run through :func:`agents.li_song.run`, which
    takes them from the wrapper; a fresh uniform N-subset uploads each round (D12, D27: no cap implied).
    """

    options = option_names(LiSongConfig, "hybrid_aggregation")

    def make_coordinator(self) -> CDPServer:
        """The aggregating server."""
        return CDPServer(self.config)

    def n_agg(self, num_agents: int) -> int:
        """N = ceil(p M) (D12)."""
        return participants(self.config.participation, num_agents)

    def check_topology(self, topology: Topology) -> None:
        """Every agent needs a server link."""
        require_server_links("CDP-MAB", topology)

    def reset(self, context: AgentContext) -> None:
        """Start round 1; every agent participates until the server announces P_1 (when N < M)."""
        super().reset(context)
        b, m = context.num_replicas, context.num_agents
        self.selected = np.ones((b, m), bool)
        self.uploaded = np.zeros((b, m), np.int64)
        self.epoch_means: list[list[tuple[int, int, np.ndarray]]] = [[] for _ in range(b)]

    def _epoch_done(self, f: int, slot: int, means: np.ndarray) -> None:
        plan, arms = self.states[f].current_plan(), np.flatnonzero(self.states[f].active)
        full = np.zeros((len(means), self.context.num_arms))
        full[:, arms] = means
        self.epoch_means[f].append((plan.round, plan.pulls, full))

    def _messages(self, slot: int, feds: np.ndarray) -> list[MessageBatch]:
        return [self._uploads(int(b)) for b in feds if self.uploaded[b].max() < self.states[b].current_plan().round]

    def _uploads(self, b: int) -> MessageBatch:
        """Every selected agent's epoch means not uploaded yet, over the current active arms."""
        arms = np.flatnonzero(self.states[b].active)
        senders, epochs, pulls, means = [], [], [], []
        for i in np.flatnonzero(self.selected[b]).tolist():
            for epoch, n, full in self.epoch_means[b]:
                if epoch > self.uploaded[b, i]:
                    senders.append(i)
                    epochs.append(epoch)
                    pulls.append(n)
                    means.append(full[i, arms])
            self.uploaded[b, i] = self.states[b].current_plan().round
        rows = len(senders)
        return MessageBatch(
            kind="upload",
            replica=np.full(rows, b),
            sender=np.asarray(senders),
            recipient=np.full(rows, SERVER),
            payload={
                "mean": np.asarray(means),
                "n": np.asarray(pulls, np.int32),
                "epoch": np.asarray(epochs, np.int32),
            },
            privacy=epoch_mean_privacy(self.agent_noise, self.message_epsilon),
        )

    def _receive(self, slot: int, inbox: list[MessageBatch], feds: np.ndarray) -> None:
        for batch in inbox:
            if batch.kind != "pooled":
                continue
            self.selected[batch.replica, batch.recipient] = batch.payload["participants"][
                np.arange(len(batch)), batch.recipient
            ]
            for b, row in first_rows(batch).items():
                if batch.payload["round"][row] > 0 and b in feds:
                    self._adopt(b, slot, batch, row)

    def _adopt(self, b: int, slot: int, batch: MessageBatch, row: int) -> None:
        """Take the server's outcome: I_r, the commit arm and the pooled means."""
        counts = batch.payload["counts"][row]
        values = np.divide(batch.payload["sums"][row], counts, out=np.zeros(len(counts)), where=counts > 0)
        self._finish(b, slot, batch.payload["active"][row], int(batch.payload["commit"][row]), values)
