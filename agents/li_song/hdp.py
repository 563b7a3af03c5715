"""HDP-MAB with Find Sink Agents and the SAC protocol (Li and Song, Algorithms 4 and 5).

The agents form Q disjoint connected components; in each, one *sink* agent is linked to the server.
:func:`find_sink_agents` (Alg. 4) picks each component's lowest-id centre (D20) and a BFS
shortest-path tree towards it (parent = lowest-id closer neighbour, D22); :func:`hybrid_topology`
builds the environment's topology with the server linked to those sinks.

A round (one hop per boundary, D9): in hop h every non-sink agent forwards to its parent the vectors
it has not forwarded yet (its own privatized epoch mean in hop 0, those received in hop h - 1 later),
as raw (origin, y^) pairs, so payload-hops are sum_i sd(i, SA_q) (App. F). A sink whose component is
complete uploads the component's sum and size to the server in the same boundary (spec 2.4 step 2.4;
SINK_UPLOAD: its own epoch mean and the sum of the relayed ones); the server (:class:`HDPServer`)
waits for every sink, aggregates sample-weighted (D5: sum_q s_q / M, the CDP aggregate) or unweighted,
eliminates and broadcasts (free downlink) to the sinks; the agents of a component learn I_r through
the free synchronisation broadcast (spec 2.4 step 2.5, D23). A round takes max_q ecc_q(SA_q) hops and
delays the next epoch by :meth:`SinkPlan.delay` slots (0 for Table II's cases 1, 2, 3, 5 and 6 with the
default free first hop, which then equal CDP-MAB with p = 1); see :mod:`agents.li_song.engine` for the
time model.

Privacy as in CDP-MAB: an agent's own epoch mean leaves it once (to its parent, or in its sink's
upload) declared ``Sensitive`` (the DP wrapper noises it once) or, with ``noise="agent"``,
``Privatized``; relays and sums of relayed values are ``Privatized()`` post-processing.
"""

from __future__ import annotations

import numpy as np

from agents.configured import option_names
from agents.li_song.cdp import first_rows, pooled_broadcast
from agents.li_song.engine import (
    LiSongConfig,
    LiSongPopulation,
    LiSongServer,
    aggregate_values,
    epoch_mean_privacy,
)
from fedbandit_envs.channel import MessageBatch
from fedbandit_envs.channel.privacy import FieldPrivacy, Privatized, Public, declare_message_kinds
from fedbandit_envs.core import AgentContext, Phase
from fedbandit_envs.hybrid import COMPONENT_GRAPHS, SinkPlan, find_sink_agents, hybrid_topology, sink_plan
from fedbandit_envs.topology import SERVER, Topology

declare_message_kinds("forward", "sink_upload")  # public vocabulary under a DP wrapper

__all__ = ["COMPONENT_GRAPHS", "HDPMAB", "HDPServer", "SinkPlan", "find_sink_agents", "hybrid_topology", "sink_plan"]

RELAY_PRIVACY: dict[str, FieldPrivacy] = {
    "origin": Public(),
    "mean": Privatized(description="y^ of another agent, relayed unchanged"),
}


class HDPServer(LiSongServer):
    """The HDP-MAB server: waits for every sink's upload, aggregates (D5), eliminates, broadcasts to the sinks."""

    def reset(self, context: AgentContext, rngs: list[np.random.Generator]) -> None:
        """Read each replica's components and sinks; start round 1."""
        self.plans = [sink_plan(t, np.flatnonzero(t.server_links)) for t in context.topologies]
        self.component = [{int(s): q for q, s in enumerate(plan.sinks)} for plan in self.plans]
        self.sizes = [np.array([len(c) for c in plan.components], np.float64) for plan in self.plans]
        self.start_rounds(context, context.num_agents, max(len(plan.sinks) for plan in self.plans))

    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        """Add the sinks' uploads; close every replica whose sinks have all uploaded."""
        if not inbox:
            return []
        for batch in inbox:
            if batch.kind == "sink_upload":
                self._add(batch)
        done = []
        for b, plan in enumerate(self.plans):
            if self.states[b].plan is not None and self.received[b, : len(plan.sinks)].all():
                self._close(b)
                done.append(b)
        if not done:
            return []
        active = np.stack([self.states[b].active for b in done])
        commits = [self.states[b].commit for b in done]
        rounds = [self.states[b].completed for b in done]
        return [
            pooled_broadcast(done, self.counts[done], self.sums[done], active, self.selected[done], commits, rounds)
        ]

    def _add(self, batch: MessageBatch) -> None:
        for row in range(len(batch)):
            b = int(batch.replica[row])
            q = self.component[b][int(batch.sender[row])]
            arms = np.flatnonzero(self.states[b].active)
            component_sum = batch.payload["own"][row] + batch.payload["relayed"][row]
            self.totals[b, q, arms] += batch.payload["n"][row] * component_sum
            self.latest[b, q, arms] = component_sum
            self.received[b, q] = True

    def _close(self, b: int) -> None:
        state, q = self.states[b], len(self.plans[b].sinks)
        arms = np.flatnonzero(state.active)
        sizes = self.sizes[b] if self.config.hybrid_aggregation == "unweighted" else None
        values = np.zeros(len(state.active))
        values[arms] = aggregate_values(
            self.totals[b, :q][:, arms],
            self.latest[b, :q][:, arms],
            state.current_plan().samples,
            state.n_agg,
            self.config.aggregate,
            sizes,
        )
        survivors, commit = state.decide(values)
        self.counts[b, arms] = state.n_agg * state.current_plan().samples
        self.sums[b, arms] = values[arms] * self.counts[b, arms]
        state.advance(survivors, commit, values)
        self.received[b] = False
        state.plan = state.begin_epoch() if state.exploring else None


class HDPMAB(LiSongPopulation):
    """HDP-MAB (Algorithms 4 and 5; Cor. 2 with a round cap) on a hybrid topology.

    The environment's topology must give each connected component exactly one server-linked agent,
    its sink (build it with :func:`hybrid_topology`).

    Keywords: the :class:`LiSongConfig` fields in :attr:`options` (every agent uploads: no ``participation``).
    """

    options = option_names(LiSongConfig, "participation")

    def make_coordinator(self) -> HDPServer:
        """The server of the sinks."""
        return HDPServer(self.config)

    def check_topology(self, topology: Topology) -> None:
        """One server-linked sink per component (raises ValueError otherwise)."""
        sink_plan(topology, np.flatnonzero(topology.server_links))

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The engine's tables, the agent x agent convergecast sets and the per (agent, arm) vectors."""
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        return {
            **super().memory_parts(context),
            "convergecast pending and collected sets (replicas x agents x agents x 1 B, 2 tables)": 2.0 * b * m * m,
            "own and relayed vectors (replicas x agents x arms x 8 B, 2 tables)": 16.0 * b * m * k,
        }

    def reset(self, context: AgentContext) -> None:
        """SAC trees of every replica; empty convergecast state."""
        super().reset(context)
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.plans = [sink_plan(t, np.flatnonzero(t.server_links)) for t in context.topologies]
        self.own = np.zeros((b, m, k))
        self.vectors = np.zeros((b, m, k))
        self.pending = np.zeros((b, m, m), bool)
        self.collected = np.zeros((b, m, m), bool)
        self.uploaded = np.zeros((b, m), bool)

    def _epoch_done(self, f: int, slot: int, means: np.ndarray) -> None:
        arms, plan = np.flatnonzero(self.states[f].active), self.plans[f]
        self.own[f] = 0.0
        self.own[f][:, arms] = means
        is_sink = plan.parent < 0
        self.pending[f] = np.diag(~is_sink)
        self.collected[f] = False
        self.uploaded[f] = False

    def _hop(self, b: int) -> list[MessageBatch]:
        """FORWARD rows of the non-sinks holding unforwarded vectors, and the uploads of complete sinks."""
        state, plan = self.states[b], self.plans[b]
        arms, epoch = np.flatnonzero(state.active), state.current_plan()
        sender, origin = np.nonzero(self.pending[b])
        self.pending[b] = False
        own = sender == origin
        parent = plan.parent[sender]
        ids = origin.astype(np.int32)
        batches = [
            MessageBatch(
                "forward",
                np.full(int((~own).sum()), b),
                sender[~own],
                parent[~own],
                {"origin": ids[~own], "mean": self.vectors[b][origin[~own]][:, arms]},
                privacy=RELAY_PRIVACY,
            )
        ]
        count = int(own.sum())
        if count:
            payload = {
                "origin": ids[own],
                "mean": self.own[b][origin[own]][:, arms],
                "n": np.full(count, epoch.pulls, np.int32),
                "epoch": np.full(count, epoch.round, np.int32),
            }
            privacy = epoch_mean_privacy(self.agent_noise, self.message_epsilon, {"origin": Public()})
            batches.append(
                MessageBatch("forward", np.full(count, b), sender[own], parent[own], payload, privacy=privacy)
            )
        batches.append(self._uploads(b, arms))
        return [batch for batch in batches if len(batch)]

    def _uploads(self, b: int, arms: np.ndarray) -> MessageBatch:
        """SINK_UPLOAD of every sink whose component is complete: its own mean and the relayed sum."""
        plan, epoch = self.plans[b], self.states[b].current_plan()
        sinks, own, relayed, sizes = [], [], [], []
        for members, sink in zip(plan.components, plan.sinks.tolist()):
            others = members[members != sink]
            if self.uploaded[b, sink] or not self.collected[b, sink, others].all():
                continue
            self.uploaded[b, sink] = True
            sinks.append(sink)
            own.append(self.own[b, sink, arms])
            relayed.append(self.vectors[b][others][:, arms].sum(axis=0))
            sizes.append(len(members))
        rows = len(sinks)
        payload = {
            "own": np.reshape(own, (rows, len(arms))),
            "relayed": np.reshape(relayed, (rows, len(arms))),
            "members": np.asarray(sizes, np.int32),
            "n": np.full(rows, epoch.pulls, np.int32),
            "epoch": np.full(rows, epoch.round, np.int32),
        }
        privacy = epoch_mean_privacy(self.agent_noise, self.message_epsilon)
        privacy = {
            "own": privacy.pop("mean"),
            "relayed": Privatized(description="sum of the component's relayed y^"),
            "members": Public(),
            **privacy,
        }
        return MessageBatch("sink_upload", np.full(rows, b), sinks, np.full(rows, SERVER), payload, privacy=privacy)

    def send(self, phase: Phase) -> list[MessageBatch]:
        """The free first hop (see the engine); else the uploads of sinks whose component became complete."""
        batches = super().send(phase)
        if batches:
            return batches
        started = [b for b in self._communicating.tolist() if self.round_hops[b] > 0]
        uploads = [self._uploads(b, np.flatnonzero(self.states[b].active)) for b in started]
        uploads = [batch for batch in uploads if len(batch)]
        self._boundary_feds = np.array([int(batch.replica[0]) for batch in uploads], np.int64)
        return uploads

    def _receive(self, slot: int, inbox: list[MessageBatch], feds: np.ndarray) -> None:
        outcome: dict[int, tuple[MessageBatch, int]] = {}
        for batch in inbox:
            if batch.kind == "forward":
                self._deliver(batch)
            elif batch.kind == "pooled":
                outcome.update({b: (batch, row) for b, row in first_rows(batch).items()})
        for b, (batch, row) in outcome.items():
            if b in feds:
                counts = batch.payload["counts"][row]
                values = np.divide(batch.payload["sums"][row], counts, out=np.zeros(len(counts)), where=counts > 0)
                self._finish(b, slot, batch.payload["active"][row], int(batch.payload["commit"][row]), values)

    def _deliver(self, batch: MessageBatch) -> None:
        """Store forwarded vectors; sinks collect them, other agents queue them for their parent."""
        origin = batch.payload["origin"].astype(np.int64)
        for b in np.unique(batch.replica).tolist():
            rows = np.flatnonzero(batch.replica == b)
            arms = np.flatnonzero(self.states[b].active)
            recipient, came = batch.recipient[rows], origin[rows]
            self.vectors[b][came[:, None], arms[None, :]] = batch.payload["mean"][rows]
            is_sink = self.plans[b].parent[recipient] < 0
            self.collected[b, recipient[is_sink], came[is_sink]] = True
            self.pending[b, recipient[~is_sink], came[~is_sink]] = True
