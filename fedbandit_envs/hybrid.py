"""Hybrid topologies (Li and Song, Table II) and their sink agents (Find Sink Agents, Algorithm 4).

A hybrid topology is a set of agent components, each a connected graph, whose sinks are linked to the
server. The sink of a component is an agent of minimum eccentricity in it; the plan lists every
component with its sink and the hops each agent is from it. HDP-MAB routes over the plan; scenarios
use it to price a round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedbandit_envs.topology import (
    Topology,
    complete,
    default_erdos_renyi_p,
    erdos_renyi,
    from_adjacency,
    path,
    ring,
    star,
)

__all__ = ["COMPONENT_GRAPHS", "SinkPlan", "find_sink_agents", "hybrid_topology", "sink_plan"]

#: Graph kinds of :func:`hybrid_topology` components (star: the hub is the component's lowest id).
COMPONENT_GRAPHS = ("complete", "star", "erdos_renyi", "ring", "path")


@dataclass(frozen=True)
class SinkPlan:
    """The output of Find Sink Agents (Alg. 4) for a hybrid topology.

    Attributes:
        components: the agents of each component (sorted; components ordered by their lowest agent).
        sinks: (Q,) the sink agent SA_q of each component.
        hops: (Q,) ecc_q(SA_q), the convergecast hops of each component (0 for a single agent).
        parent: (M,) parent of each agent on the BFS tree towards its sink (-1 for sinks, D22).
        depth: (M,) sd(i, SA_q), the hop distance of each agent to its sink.
        height: (M,) height of each agent's subtree in that tree (leaves 0).
    """

    components: tuple[np.ndarray, ...]
    sinks: np.ndarray
    hops: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    height: np.ndarray

    def delay(self, first_hop_free: bool = True) -> int:
        """Exploitation slots of a round: max_q max(ecc_q(SA_q) - 1, 0) with a free first hop (D9).

        Without it every hop costs a slot, and a round of single-agent components (no hop) still
        spends one slot on the sinks' upload: max_q max(ecc_q(SA_q), 1) (project decision P1).
        """
        hops = int(self.hops.max())
        return max(hops - 1, 0) if first_hop_free else max(hops, 1)


def sink_plan(topology: Topology, sinks: Sequence[int] | np.ndarray) -> SinkPlan:
    """The SAC trees of ``topology`` towards the given sinks (one agent per connected component)."""
    components = topology.components()
    given = np.asarray(sinks, np.int64)
    component_of = topology.component_of()
    if len(given) != len(components) or sorted(component_of[given].tolist()) != list(range(len(components))):
        raise ValueError(
            f"HDP-MAB needs exactly one sink (server-linked agent) per connected component: the topology has "
            f"{len(components)} components and sinks {given.tolist()}; build it with hybrid_topology()"
        )
    ordered = given[np.argsort(component_of[given])]
    distances = topology.distances()
    parent = np.full(topology.num_agents, -1, np.int64)
    depth = np.zeros(topology.num_agents, np.int64)
    for members, sink in zip(components, ordered.tolist()):
        tree = topology.bfs_parents(sink)
        parent[members] = tree[members]
        depth[members] = distances[sink, members]
    height = np.zeros(topology.num_agents, np.int64)
    for agent in np.argsort(-depth, kind="stable").tolist():  # deepest first: children before parents
        if parent[agent] >= 0:
            height[parent[agent]] = max(height[parent[agent]], height[agent] + 1)
    hops = np.array([depth[members].max() for members in components], np.int64)
    return SinkPlan(tuple(components), ordered, hops, parent, depth, height)


def find_sink_agents(topology: Topology) -> SinkPlan:
    """Alg. 4: each component's sink is its lowest-id agent of minimum eccentricity (a centre, D20)."""
    eccentricity = topology.eccentricity()
    sinks = [int(members[np.argmin(eccentricity[members])]) for members in topology.components()]
    return sink_plan(topology, sinks)


def _groups(num_agents: int, components: Sequence[int] | Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Agent groups from component sizes (consecutive blocks) or explicit agent lists; must partition the agents."""
    if len(components) == 0:
        raise ValueError("components must list at least one component (sizes or agent lists)")
    sizes = [c for c in components if isinstance(c, int | np.integer) and not isinstance(c, bool)]
    if sizes and len(sizes) != len(components):
        raise TypeError(f"components must be all sizes or all agent lists, got {list(components)!r}")
    if sizes:
        if any(c < 1 for c in sizes):
            raise ValueError(f"component sizes must be >= 1, got {list(components)}")
        bounds = np.cumsum([0, *sizes])
        groups = [np.arange(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    else:
        groups = [np.sort(np.asarray(c, np.int64)) for c in components]
    members = np.concatenate(groups)
    missing = sorted(set(range(num_agents)) - set(members.tolist()))
    repeated = sorted({int(a) for a in members if np.sum(members == a) > 1})
    outside = sorted({int(a) for a in members if not 0 <= a < num_agents})
    if missing or repeated or outside:
        raise ValueError(
            f"components must cover the {num_agents} agents exactly once: missing {missing[:10]}, "
            f"repeated {repeated[:10]}, out of range {outside[:10]}"
        )
    return groups


def hybrid_topology(
    num_agents: int,
    components: Sequence[int] | Sequence[Sequence[int]],
    graph: str = "complete",
    rng: np.random.Generator | None = None,
) -> Topology:
    """A hybrid topology (Table II): component graphs, the server linked to each component's sink (Alg. 4).

    Args:
        num_agents: M; the components must cover agents 0..M-1 exactly once.
        components: component sizes (consecutive agent blocks, e.g. ``[20] * 5``) or lists of agent ids.
        graph: the graph of every component, one of :data:`COMPONENT_GRAPHS` (``"erdos_renyi"`` uses
            p = min(1, 2 ln M_q / M_q), resampled until connected, D18).
        rng: the generator of random component graphs.
    """
    if graph not in COMPONENT_GRAPHS:
        raise ValueError(f"graph must be one of {COMPONENT_GRAPHS}, got {graph!r}")
    if graph == "erdos_renyi" and rng is None:
        raise ValueError("graph='erdos_renyi' needs rng=numpy.random.default_rng(seed)")
    adjacency = np.zeros((num_agents, num_agents), bool)
    for group in _groups(num_agents, components):
        size = len(group)
        if size == 1:
            continue
        if graph == "erdos_renyi" and rng is not None:  # rng is required for erdos_renyi (checked above)
            sub = erdos_renyi(size, default_erdos_renyi_p(size), rng)
        else:
            kind = "path" if graph == "ring" and size < 3 else graph
            sub = {"complete": complete, "star": star, "ring": ring, "path": path}[kind](size)
        adjacency[np.ix_(group, group)] = sub.adjacency
    layout = from_adjacency(adjacency, name="hybrid")
    server_links = np.zeros(num_agents, bool)
    server_links[find_sink_agents(layout).sinks] = True
    return from_adjacency(adjacency, server_links, "hybrid")
