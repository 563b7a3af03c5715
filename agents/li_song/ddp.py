"""DDP-MAB with the GIS protocol (Li and Song, Algorithms 2 and 3), on any connected graph.

After each epoch every agent floods its privatized epoch mean y^_i(r) through the graph with the
ADV/REQ/DATA negotiation of GIS, one hop per slot (D9): in hop h every agent with vectors it received
in hop h - 1 (its own in hop 0) advertises their origin ids to all neighbours (ADV); a neighbour that
lacks an advertised vector requests it from the lowest-id advertiser (REQ, D21); the advertiser sends
it (DATA). The three messages of a hop travel in the same slot, so a hop's links are the edges with
an advertisement (``used_links``: the spec's #{(i, j): h = 0 or max(ecc(i), ecc(j)) >= h}). After hop h
an agent holds every vector from distance <= h + 1, so the round takes d_G hops and every agent
receives every other vector exactly once (M(M - 1) DATA rows). The free synchronisation barrier (D23)
ends the round when every list is complete; then every agent aggregates the same M vectors (y-bar,
D4) and eliminates, so all copies of I_r agree. Hop 0 goes at the boundary after the epoch (free,
D9); during the d_G - 1 slots of the other hops every agent pulls its local empirical best arm (D11);
see :mod:`agents.li_song.engine` for the time model.

Privacy. An agent needs its own privatized vector to aggregate, and a DP wrapper never returns the
noised value to its sender, so DDP-MAB draws its Laplace noise itself (``noise="agent"``: scale
1/(M epsilon n_r), one draw per agent and epoch) and declares its own DATA ``Privatized`` with the
guarantee M epsilon (a DP wrapper accounts it once; epochs compose in parallel). Relays forward the
originator's values unchanged (``Privatized()``, no charge, never re-noised). With ``epsilon=None`` the
vectors are raw and declared ``Sensitive``: a noising wrapper would then change them in transit, which
the receivers detect and report.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from agents.configured import option_names
from agents.li_song.engine import LiSongConfig, LiSongPopulation, aggregate_values, epoch_mean_privacy
from fedbandit_envs.channel import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.privacy import FieldPrivacy, Privatized, Public, declare_message_kinds
from fedbandit_envs.core import AgentContext
from fedbandit_envs.topology import Topology

declare_message_kinds("adv", "req", "data")  # public vocabulary under a DP wrapper

__all__ = ["DDPMAB", "gis_requests"]

#: Declarations of the id-only messages and of relayed vectors.
ID_PRIVACY = {"origin": Public()}
RELAY_PRIVACY: dict[str, FieldPrivacy] = {
    "origin": Public(),
    "mean": Privatized(description="y^ of another agent, relayed unchanged"),
}


def gis_requests(adjacency: np.ndarray, advertised: np.ndarray, held: np.ndarray) -> tuple[np.ndarray, ...]:
    """The REQ messages of one GIS hop (D21).

    Args:
        adjacency: (M, M) bool agent graph.
        advertised: (M, M) bool, ``advertised[i, g]``: agent i advertises origin g this hop.
        held: (M, M) bool, ``held[j, g]``: agent j already holds origin g's vector.

    Returns:
        (requester, advertiser, origin) index arrays: j requests g from its lowest-id neighbour that
        advertised g, for every g that j lacks.
    """
    candidates = adjacency[:, :, None] & advertised[None, :, :]  # (requester j, advertiser i, origin g)
    needed = candidates.any(axis=1) & ~held
    requester, origin = np.nonzero(needed)
    advertiser = candidates.argmax(axis=1)[requester, origin]
    return requester, advertiser, origin


class DDPMAB(LiSongPopulation):
    """DDP-MAB over a connected graph with the GIS protocol (Algorithms 2 and 3; Cor. 1 with a round cap).

    Keywords: the :class:`LiSongConfig` fields in :attr:`options`. Each agent adds Lap(1/(M epsilon n_r)) to
    its epoch means itself (``noise="agent"`` is fixed; see the module docstring).
    """

    options = option_names(LiSongConfig, "participation", "noise", "hybrid_aggregation")
    fixed = MappingProxyType({"noise": "agent"})

    def check_topology(self, topology: Topology) -> None:
        """GIS needs a connected agent graph."""
        if not topology.is_connected():
            raise ValueError(
                f"DDP-MAB needs a connected agent graph, but topology {topology.name!r} has "
                f"{len(topology.components())} components; use e.g. 'complete', 'ring', 'star' or 'erdos_renyi'"
            )

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The engine's tables, the agent x agent GIS sets and the agents^3 request candidates of one hop.

        :func:`gis_requests` peaks at about twice the (agents, agents, agents) bool table (measured).
        """
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        return {
            **super().memory_parts(context),
            "GIS held and fresh sets (replicas x agents x agents x 1 B, 2 tables)": 2.0 * b * m * m,
            "vectors and their sums (replicas x agents x arms x 8 B, 2 tables)": 16.0 * b * m * k,
            "GIS request candidates of one hop (agents x agents x agents x 1 B, twice: the table and its argmax)": 2.0
            * m**3
            + 8.0 * m * m,
        }

    def reset(self, context: AgentContext) -> None:
        """Empty GIS lists; per-origin sums of the privatized vectors."""
        super().reset(context)
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.adjacency = [topology.adjacency for topology in context.topologies]
        self.held = np.zeros((b, m, m), bool)
        self.fresh = np.zeros((b, m, m), bool)
        self.vectors = np.zeros((b, m, k))
        self.totals = np.zeros((b, m, k))

    def _epoch_done(self, f: int, slot: int, means: np.ndarray) -> None:
        arms = np.flatnonzero(self.states[f].active)
        self.vectors[f] = 0.0
        self.vectors[f][:, arms] = means
        self.held[f] = self.fresh[f] = np.eye(len(means), dtype=bool)
        if self.held[f].all():  # a single agent: nothing to exchange
            self._complete(f, slot)

    def _hop(self, b: int) -> list[MessageBatch]:
        """ADV, REQ and DATA of replica ``b``'s current hop."""
        state = self.states[b]
        arms, plan = np.flatnonzero(state.active), state.current_plan()
        advertiser, advertised = np.nonzero(self.fresh[b])
        requester, source, origin = gis_requests(self.adjacency[b], self.fresh[b], self.held[b])
        own = source == origin

        def rows(kind, senders, recipients, payload, privacy) -> MessageBatch:
            return MessageBatch(kind, np.full(len(senders), b), senders, recipients, payload, privacy=privacy)

        ids = lambda values: {"origin": values.astype(np.int32)}  # noqa: E731
        batches = [
            rows("adv", advertiser, np.full(len(advertiser), NEIGHBOURS), ids(advertised), ID_PRIVACY),
            rows("req", requester, source, ids(origin), ID_PRIVACY),
            rows(
                "data",
                source[~own],
                requester[~own],
                {**ids(origin[~own]), "mean": self.vectors[b][origin[~own]][:, arms]},
                RELAY_PRIVACY,
            ),
        ]
        count = int(own.sum())
        if count:
            payload = {
                **ids(origin[own]),
                "mean": self.vectors[b][origin[own]][:, arms],
                "n": np.full(count, plan.pulls, np.int32),
                "epoch": np.full(count, plan.round, np.int32),
            }
            privacy = epoch_mean_privacy(self.agent_noise, self.message_epsilon, ID_PRIVACY)
            batches.append(rows("data", source[own], requester[own], payload, privacy))
        return [batch for batch in batches if len(batch)]

    def _receive(self, slot: int, inbox: list[MessageBatch], feds: np.ndarray) -> None:
        received = np.zeros((len(self.held),) + self.held.shape[1:], bool)
        for batch in inbox:
            if batch.kind == "data":
                self._deliver(batch, received)
        for b in feds.tolist():
            self.held[b] |= received[b]
            self.fresh[b] = received[b]
            if self.held[b].all():
                self._complete(b, slot)

    def _deliver(self, batch: MessageBatch, received: np.ndarray) -> None:
        """Mark delivered vectors; a vector changed in transit (a noising wrapper) is an error."""
        origin = batch.payload["origin"].astype(np.int64)
        received[batch.replica, batch.recipient, origin] = True
        for b in np.unique(batch.replica).tolist():
            rows = batch.replica == b
            arms = np.flatnonzero(self.states[b].active)
            if not np.array_equal(batch.payload["mean"][rows], self.vectors[b][origin[rows]][:, arms]):
                raise ValueError(
                    "a DDP-MAB vector changed in transit: DDP-MAB agents add their Laplace noise themselves "
                    "(they must aggregate their own noised vector), so do not let a DP wrapper noise them; "
                    "give DDP-MAB an epsilon (its vectors are then Privatized and only accounted)"
                )

    def _complete(self, b: int, slot: int) -> None:
        """Every list is complete (the barrier): every agent aggregates the same M vectors and eliminates."""
        state = self.states[b]
        arms = np.flatnonzero(state.active)
        self.totals[b][:, arms] += state.current_plan().pulls * self.vectors[b][:, arms]
        values = np.zeros(len(state.active))
        values[arms] = aggregate_values(
            self.totals[b][:, arms],
            self.vectors[b][:, arms],
            state.current_plan().samples,
            self.num_agg,
            self.config.aggregate,
        )
        survivors, commit = state.decide(values)
        self._finish(b, slot, survivors, commit, values)
