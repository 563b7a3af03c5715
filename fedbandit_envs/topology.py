"""Communication graphs among agents, optionally with a server node.

A :class:`Topology` is an immutable, undirected graph on agents ``0..M-1`` (the *agent graph*), plus a
boolean mask of the agents that have a link to a **server** node. The server pulls no arms; in messages it
is addressed by the module constant :data:`SERVER`.

Three communication structures of the literature are covered:

* master-worker (:func:`server`): every agent talks to the server, no agent-agent links;
* decentralized (:func:`complete`, :func:`ring`, :func:`path`, :func:`star`, :func:`grid`,
  :func:`erdos_renyi`, :func:`regular`, :func:`from_adjacency`): an agent graph, no server;
* hybrid (:func:`hybrid`): disjoint components whose *sink* agents are the only ones linked to the server
  (Li & Song, D20: the sink is the lowest-id agent of minimum eccentricity).

Graph utilities (BFS distances, eccentricity, diameter, centre, BFS parent trees, power graphs) and the
expected gossip matrix with its second-largest eigenvalue (Zhu et al., section 1.3) are methods of
:class:`Topology`. All index arrays are ``int64``, masks are ``bool``, neighbour lists are sorted, and every
array stored on or cached by a topology is read-only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, get_args

import networkx as nx
import numpy as np

from fedbandit_envs.frozen import frozen
from fedbandit_envs.validation import check_choice, check_int, check_keywords, check_real

#: Recipient id of the server node in messages.
SERVER: int = -1

#: Edge-activation models accepted by :meth:`Topology.gossip_matrix` (both spellings of "neighbour").
GossipActivation = Literal["uniform_edge", "node_then_neighbour", "node_then_neighbor"]
GOSSIP_ACTIVATIONS: tuple[str, ...] = get_args(GossipActivation)

#: A graph kind accepted by name in :func:`build_topology`.
TopologyName = Literal["server", "star", "complete", "ring", "path", "grid", "erdos_renyi", "regular"]
TOPOLOGY_KINDS: tuple[str, ...] = get_args(TopologyName)

#: The parameters each named kind accepts (see :func:`build_topology`).
TOPOLOGY_PARAMS: dict[str, tuple[str, ...]] = {
    "server": (),
    "star": ("centre",),
    "complete": (),
    "ring": (),
    "path": (),
    "grid": ("rows", "cols"),
    "erdos_renyi": ("p", "max_tries"),
    "regular": ("degree", "max_tries"),
}

#: The kinds drawn from the ``topology`` stream at reset.
RANDOM_TOPOLOGY_KINDS: tuple[str, ...] = ("erdos_renyi", "regular")


# ---------------------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------------------


def _check_rng(rng: Any, name: str = "rng") -> np.random.Generator:
    """Return ``rng`` if it is a numpy Generator, else raise a TypeError naming ``name``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), got {rng!r}")
    return rng


def _as_bool_array(values: Any, name: str) -> np.ndarray:
    """Convert a bool or 0/1 numeric array-like to a fresh bool array, or raise naming ``name``."""
    array = np.asarray(values)
    if array.dtype == bool:
        return array.copy()
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"{name} must hold bool or 0/1 numbers, got dtype {array.dtype}")
    if not np.all((array == 0) | (array == 1)):
        raise ValueError(f"{name} must contain only 0/1 (or bool) entries; binarise it first, e.g. {name} != 0")
    return array.astype(bool)


def _as_adjacency(matrix: Any, name: str) -> np.ndarray:
    """Validate a square, symmetric, loop-free 0/1 matrix with at least one row; return it as bool."""
    adjacency = _as_bool_array(matrix, name)
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(f"{name} must be a square (M, M) matrix, got shape {adjacency.shape}")
    if adjacency.shape[0] < 1:
        raise ValueError(f"{name} must describe at least one agent, got shape {adjacency.shape}")
    if not np.array_equal(adjacency, adjacency.T):
        raise ValueError(f"{name} must be symmetric (undirected graph); use {name} | {name}.T to symmetrise")
    if adjacency.diagonal().any():
        loops = np.flatnonzero(adjacency.diagonal()).tolist()
        raise ValueError(f"{name} must have a zero diagonal (no self loops), but agents {loops} link to themselves")
    return adjacency


# ---------------------------------------------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class Topology:
    """Undirected communication graph among agents, optionally with a server.

    Attributes:
        adjacency: ``(M, M)`` bool, symmetric, zero diagonal: the agent-agent links.
        server_links: ``(M,)`` bool: which agents have a link to the server (all False means no server).
        name: A short label, e.g. ``"complete"``, ``"ring"``, ``"server"``, ``"hybrid"``.

    Both arrays are copied and made read-only on construction, so a topology never changes. Equality is
    identity (``eq=False``); compare ``adjacency`` and ``server_links`` explicitly if needed.
    """

    adjacency: np.ndarray
    server_links: np.ndarray
    name: str

    def __post_init__(self) -> None:
        adjacency = frozen(_as_adjacency(self.adjacency, "adjacency"))
        server_links = _as_bool_array(self.server_links, "server_links")
        if server_links.shape != (adjacency.shape[0],):
            raise ValueError(
                f"server_links must have shape ({adjacency.shape[0]},) to match adjacency, got {server_links.shape}"
            )
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty str, got {self.name!r}")
        object.__setattr__(self, "adjacency", adjacency)
        object.__setattr__(self, "server_links", frozen(server_links))

    def __repr__(self) -> str:
        return (
            f"Topology(name={self.name!r}, num_agents={self.num_agents}, num_edges={self.num_edges}, "
            f"has_server={self.has_server})"
        )

    # -- size and local structure ---------------------------------------------------------------------

    @property
    def num_agents(self) -> int:
        """Number of agents M (the server is not counted)."""
        return int(self.adjacency.shape[0])

    @property
    def has_server(self) -> bool:
        """Whether at least one agent is linked to a server node."""
        return bool(self.server_links.any())

    @property
    def sinks(self) -> np.ndarray:
        """Sorted global indices of the server-linked agents (the sinks of a hybrid topology)."""
        return self._sinks

    @cached_property
    def _sinks(self) -> np.ndarray:
        return frozen(np.flatnonzero(self.server_links).astype(np.int64))

    @property
    def num_edges(self) -> int:
        """Number of undirected agent-agent edges."""
        return int(self._edges.shape[0])

    def edges(self) -> np.ndarray:
        """Agent-agent edges as an ``(E, 2)`` int64 array with ``i < j``, lexicographically sorted."""
        return self._edges

    @cached_property
    def _edges(self) -> np.ndarray:
        rows, cols = np.nonzero(np.triu(self.adjacency, k=1))
        return frozen(np.stack([rows, cols], axis=1).astype(np.int64).reshape(-1, 2))

    def neighbours(self, i: int) -> np.ndarray:
        """Sorted int64 indices of the agents adjacent to agent ``i`` (the server is not included)."""
        return self._neighbour_lists[self._check_agent(i, "i")]

    @cached_property
    def _neighbour_lists(self) -> tuple[np.ndarray, ...]:
        return tuple(frozen(np.flatnonzero(row).astype(np.int64)) for row in self.adjacency)

    def degree(self) -> np.ndarray:
        """Number of agent neighbours of every agent, ``(M,)`` int64."""
        return self._degree

    @cached_property
    def _degree(self) -> np.ndarray:
        return frozen(self.adjacency.sum(axis=1).astype(np.int64))

    def _check_agent(self, i: Any, name: str) -> int:
        index = check_int(name, i, 0)
        if index >= self.num_agents:
            raise ValueError(f"{name} must be an agent index in [0, {self.num_agents - 1}], got {index}")
        return index

    # -- connectivity -----------------------------------------------------------------------------------

    @cached_property
    def _agent_graph(self) -> nx.Graph:
        graph = nx.Graph()
        graph.add_nodes_from(range(self.num_agents))
        graph.add_edges_from(self._edges.tolist())
        return graph

    def components(self) -> list[np.ndarray]:
        """Connected components of the agent graph, each sorted, ordered by their smallest member."""
        return list(self._components)

    @cached_property
    def _components(self) -> tuple[np.ndarray, ...]:
        groups = [np.array(sorted(c), dtype=np.int64) for c in nx.connected_components(self._agent_graph)]
        groups.sort(key=lambda group: int(group[0]))
        return tuple(frozen(group) for group in groups)

    def component_of(self) -> np.ndarray:
        """Index (into :meth:`components`) of the component of every agent, ``(M,)`` int64."""
        return self._component_of

    @cached_property
    def _component_of(self) -> np.ndarray:
        labels = np.empty(self.num_agents, dtype=np.int64)
        for index, members in enumerate(self._components):
            labels[members] = index
        return frozen(labels)

    def is_connected(self) -> bool:
        """Whether the agent graph is connected (a single agent counts as connected)."""
        return len(self._components) == 1

    # -- distances ----------------------------------------------------------------------------------------

    def distances(self) -> np.ndarray:
        """BFS hop distances between agents, ``(M, M)`` int64, ``-1`` where unreachable."""
        return self._distances

    @cached_property
    def _distances(self) -> np.ndarray:
        dist = np.full((self.num_agents, self.num_agents), -1, dtype=np.int64)
        for source, lengths in nx.all_pairs_shortest_path_length(self._agent_graph):
            targets = np.fromiter(lengths.keys(), dtype=np.int64, count=len(lengths))
            dist[source, targets] = np.fromiter(lengths.values(), dtype=np.int64, count=len(lengths))
        return frozen(dist)

    def eccentricity(self) -> np.ndarray:
        """Largest hop distance from every agent to an agent of its own component, ``(M,)`` int64."""
        return self._eccentricity

    @cached_property
    def _eccentricity(self) -> np.ndarray:
        return frozen(self._distances.max(axis=1))

    def _require_connected(self, what: str) -> None:
        if not self.is_connected():
            raise ValueError(
                f"{what} needs a connected agent graph, but topology {self.name!r} has "
                f"{len(self._components)} components; use components() and eccentricity() per component"
            )

    def diameter(self) -> int:
        """Largest hop distance between two agents; raises ValueError if the agent graph is disconnected."""
        self._require_connected("diameter()")
        return int(self._eccentricity.max())

    def centre(self) -> np.ndarray:
        """Sorted agents of minimum eccentricity (needs a connected agent graph)."""
        self._require_connected("centre()")
        return np.flatnonzero(self._eccentricity == self._eccentricity.min()).astype(np.int64)

    def ball(self, i: int, radius: int) -> np.ndarray:
        """Sorted agents within hop distance ``<= radius`` of agent ``i`` (``i`` included)."""
        row = self._distances[self._check_agent(i, "i")]
        radius = check_int("radius", radius, 0)
        return np.flatnonzero((row >= 0) & (row <= radius)).astype(np.int64)

    def power_graph(self, gamma: int) -> Topology:
        """The gamma-th power: agents i != j are linked iff their hop distance is at most ``gamma``.

        Server links are kept unchanged. ``power_graph(1)`` has the same edges as this topology.
        """
        gamma = check_int("gamma", gamma, 1)
        dist = self._distances
        return Topology((dist >= 1) & (dist <= gamma), self.server_links, f"{self.name}^{gamma}")

    def bfs_parents(self, root: int) -> np.ndarray:
        """Parents on a BFS shortest-path tree towards ``root`` (Li & Song, D22).

        The parent of an agent is its lowest-id neighbour that is one hop closer to ``root``. The entry is
        ``-1`` for ``root`` itself and for agents outside the component of ``root``.
        """
        dist = self._distances[self._check_agent(root, "root")]
        parents = np.full(self.num_agents, -1, dtype=np.int64)
        for agent in np.flatnonzero(dist > 0):
            neighbours = self._neighbour_lists[agent]
            closer = neighbours[dist[neighbours] == dist[agent] - 1]
            parents[agent] = closer[0]
        return parents

    # -- spectral quantities ----------------------------------------------------------------------------

    def laplacian(self) -> np.ndarray:
        """Graph Laplacian ``L = D - A`` of the agent graph, ``(M, M)`` float64."""
        adjacency = self.adjacency.astype(np.float64)
        return np.diag(adjacency.sum(axis=1)) - adjacency

    def gossip_matrix(self, activation: str = "uniform_edge") -> np.ndarray:
        """Expected pairwise-gossip matrix W-bar (Zhu et al., section 1.3), ``(M, M)`` float64.

        ``"uniform_edge"``: one edge drawn uniformly per round, ``W = I - L / (2|E|)``.
        ``"node_then_neighbour"`` (also spelled ``"node_then_neighbor"``): a uniform agent wakes and picks a
        uniform neighbour, ``W = I - (1/(2M)) sum_i sum_{j in N_i} (1/d_i) (e_i - e_j)(e_i - e_j)^T``.
        """
        if activation not in GOSSIP_ACTIVATIONS:
            raise ValueError(f"activation must be one of {GOSSIP_ACTIVATIONS}, got {activation!r}")
        if self.num_edges == 0:
            raise ValueError(
                f"gossip_matrix() needs at least one agent-agent edge, but topology {self.name!r} has none"
            )
        identity = np.eye(self.num_agents)
        if activation == "uniform_edge":
            return identity - self.laplacian() / (2.0 * self.num_edges)
        return identity - _node_then_neighbour_laplacian(self.adjacency) / (2.0 * self.num_agents)

    def lambda_2(self, activation: str = "uniform_edge") -> float:
        """Second-largest eigenvalue of :meth:`gossip_matrix` (it is < 1 iff the agent graph is connected)."""
        eigenvalues = np.linalg.eigvalsh(self.gossip_matrix(activation))
        return float(eigenvalues[-2])

    # -- export -------------------------------------------------------------------------------------------

    def to_networkx(self) -> nx.Graph:
        """A fresh networkx Graph: agents ``0..M-1`` and, if there is a server, a node ``"server"``."""
        graph = self._agent_graph.copy()
        graph.graph["name"] = self.name
        if self.has_server:
            graph.add_node("server")
            graph.add_edges_from(("server", int(agent)) for agent in self._sinks)
        return graph


def _node_then_neighbour_laplacian(adjacency: np.ndarray) -> np.ndarray:
    """Laplacian of the weights ``1/d_i + 1/d_j`` on every edge (isolated agents contribute nothing)."""
    adjacency = adjacency.astype(np.float64)
    degree = adjacency.sum(axis=1)
    pick = np.divide(adjacency, degree[:, None], out=np.zeros_like(adjacency), where=degree[:, None] > 0)
    weights = pick + pick.T
    return np.diag(weights.sum(axis=1)) - weights


def hybrid_sinks(topology: Topology) -> np.ndarray:
    """Sorted global indices of the server-linked agents of ``topology`` (same as ``topology.sinks``)."""
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a Topology, got {type(topology).__name__}")
    return topology.sinks


def require_server_links(algorithm: str, topology: Topology) -> None:
    """Refuse ``topology`` unless every agent has a server link (for an algorithm whose agents all use the server)."""
    if not topology.server_links.all():
        raise ValueError(
            f"{algorithm} needs every agent linked to the server, got topology {topology.name!r}; use topology='server'"
        )


# ---------------------------------------------------------------------------------------------------------
# Deterministic constructors
# ---------------------------------------------------------------------------------------------------------


def _no_server(num_agents: int) -> np.ndarray:
    return np.zeros(num_agents, dtype=bool)


def _from_edges(num_agents: int, edges: Sequence[tuple[int, int]], name: str) -> Topology:
    adjacency = np.zeros((num_agents, num_agents), dtype=bool)
    for i, j in edges:
        adjacency[i, j] = adjacency[j, i] = True
    return Topology(adjacency, _no_server(num_agents), name)


def server(num_agents: int) -> Topology:
    """Master-worker: every agent is linked to the server, no agent-agent links."""
    num_agents = check_int("num_agents", num_agents, 1)
    return Topology(np.zeros((num_agents, num_agents), dtype=bool), np.ones(num_agents, dtype=bool), "server")


def star(num_agents: int, centre: int = 0) -> Topology:
    """Star agent graph whose hub is agent ``centre`` (no server); needs ``num_agents >= 2``."""
    num_agents = check_int("num_agents", num_agents, 2, hint=" (a star needs a hub and a leaf)")
    centre = check_int("centre", centre, 0)
    if centre >= num_agents:
        raise ValueError(f"centre must be an agent index in [0, {num_agents - 1}], got {centre}")
    return _from_edges(num_agents, [(centre, leaf) for leaf in range(num_agents) if leaf != centre], "star")


def complete(num_agents: int) -> Topology:
    """Complete agent graph (every pair linked); a single agent has no edges."""
    num_agents = check_int("num_agents", num_agents, 1)
    adjacency = ~np.eye(num_agents, dtype=bool)
    return Topology(adjacency, _no_server(num_agents), "complete")


def ring(num_agents: int) -> Topology:
    """Cycle ``0 - 1 - ... - (M-1) - 0``; needs ``num_agents >= 3``."""
    num_agents = check_int("num_agents", num_agents, 3, hint=" (a ring needs 3 agents; use a path or a complete graph)")
    return _from_edges(num_agents, [(i, (i + 1) % num_agents) for i in range(num_agents)], "ring")


def path(num_agents: int) -> Topology:
    """Path ``0 - 1 - ... - (M-1)``; a single agent has no edges."""
    num_agents = check_int("num_agents", num_agents, 1)
    return _from_edges(num_agents, [(i, i + 1) for i in range(num_agents - 1)], "path")


def grid(rows: int, cols: int) -> Topology:
    """4-neighbour ``rows x cols`` grid; the agent in row ``r``, column ``c`` has index ``r * cols + c``."""
    rows = check_int("rows", rows, 1)
    cols = check_int("cols", cols, 1)
    edges = [(r * cols + c, r * cols + c + 1) for r in range(rows) for c in range(cols - 1)]
    edges += [(r * cols + c, (r + 1) * cols + c) for r in range(rows - 1) for c in range(cols)]
    return _from_edges(rows * cols, edges, "grid")


def from_adjacency(matrix: Any, server_links: Any = None, name: str = "custom") -> Topology:
    """Topology from any square, symmetric, loop-free 0/1 (or bool) matrix.

    ``server_links`` is an optional ``(M,)`` 0/1 mask of server-linked agents (default: no server).
    """
    adjacency = _as_adjacency(matrix, "matrix")
    links = _no_server(adjacency.shape[0]) if server_links is None else server_links
    return Topology(adjacency, links, name)


def hybrid(components: Sequence[Topology], sinks: Sequence[int] | None = None) -> Topology:
    """Disjoint union of connected component graphs, each linked to the server through one sink agent.

    Agents are renumbered consecutively in the given order (component ``q`` occupies the next
    ``components[q].num_agents`` indices). ``sinks[q]`` is a *local* index into component ``q``; the default
    is the lowest-id agent of minimum eccentricity (Li & Song, D20). Only sinks are linked to the server.
    """
    components = _check_components(components)
    local_sinks = _check_sinks(components, sinks)
    sizes = [component.num_agents for component in components]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    total = int(offsets[-1])
    adjacency = np.zeros((total, total), dtype=bool)
    server_links = np.zeros(total, dtype=bool)
    for component, start, sink in zip(components, offsets[:-1], local_sinks, strict=True):
        stop = start + component.num_agents
        adjacency[start:stop, start:stop] = component.adjacency
        server_links[start + sink] = True
    return Topology(adjacency, server_links, "hybrid")


def _check_components(components: Any) -> list[Topology]:
    if isinstance(components, Topology) or not isinstance(components, Sequence):
        raise TypeError("components must be a sequence (list or tuple) of Topology objects")
    components = list(components)
    if not components:
        raise ValueError("components must contain at least one Topology")
    for q, component in enumerate(components):
        if not isinstance(component, Topology):
            raise TypeError(f"components[{q}] must be a Topology, got {type(component).__name__}")
        if component.has_server:
            raise ValueError(f"components[{q}] already has server links; pass agent-only graphs (e.g. complete, path)")
        if not component.is_connected():
            raise ValueError(f"components[{q}] must be a connected agent graph, got {component!r}")
    return components


def _check_sinks(components: list[Topology], sinks: Any) -> list[int]:
    if sinks is None:
        return [int(component.centre()[0]) for component in components]
    if not isinstance(sinks, Sequence | np.ndarray) or len(sinks) != len(components):
        raise ValueError(f"sinks must hold one local agent index per component ({len(components)}), got {sinks!r}")
    checked = []
    for q, (component, sink) in enumerate(zip(components, sinks, strict=True)):
        checked.append(component._check_agent(sink, f"sinks[{q}]"))
    return checked


# ---------------------------------------------------------------------------------------------------------
# Random constructors
# ---------------------------------------------------------------------------------------------------------


def _sample_connected(sample: Callable[[], np.ndarray], max_tries: int, failure: str, name: str) -> Topology:
    """Draw adjacency matrices with ``sample`` until one is connected; raise ValueError after ``max_tries``."""
    max_tries = check_int("max_tries", max_tries, 1)
    for _ in range(max_tries):
        adjacency = sample()
        topology = Topology(adjacency, _no_server(adjacency.shape[0]), name)
        if topology.is_connected():
            return topology
    raise ValueError(f"no connected graph in max_tries={max_tries} draws: {failure}")


def erdos_renyi(num_agents: int, p: float, rng: np.random.Generator, max_tries: int = 1000) -> Topology:
    """Erdos-Renyi G(M, p), resampled until connected (Li & Song, D18).

    The upper triangle is drawn from ``rng``, so a fixed seed gives a fixed graph.
    """
    num_agents = check_int("num_agents", num_agents, 1)
    p = check_real("p", p, 0.0, 1.0)
    rng = _check_rng(rng)
    upper = np.triu(np.ones((num_agents, num_agents), dtype=bool), k=1)

    def sample() -> np.ndarray:
        drawn = (rng.random((num_agents, num_agents)) < p) & upper
        return drawn | drawn.T

    hint = f"p={p} is too small for num_agents={num_agents}; use a larger p, e.g. p >= 2 ln(M) / M"
    return _sample_connected(sample, max_tries, hint, "erdos_renyi")


def _check_degree(num_agents: int, degree: int) -> tuple[int, int]:
    """``(num_agents, degree)`` as ints after checking a ``degree``-regular graph on ``num_agents`` can exist."""
    num_agents = check_int("num_agents", num_agents, 1)
    degree = check_int("degree", degree, 0)
    if degree >= num_agents:
        raise ValueError(f"degree must be < num_agents={num_agents}, got {degree}")
    if (num_agents * degree) % 2:
        raise ValueError(
            f"num_agents * degree must be even for a regular graph, got {num_agents} * {degree}; "
            "change degree or num_agents"
        )
    return num_agents, degree


def regular(num_agents: int, degree: int, rng: np.random.Generator, max_tries: int = 1000) -> Topology:
    """Uniform random ``degree``-regular graph (networkx, seeded from ``rng``), resampled until connected."""
    num_agents, degree = _check_degree(num_agents, degree)
    rng = _check_rng(rng)

    def sample() -> np.ndarray:
        graph = nx.random_regular_graph(degree, num_agents, seed=int(rng.integers(2**63)))
        return nx.to_numpy_array(graph, nodelist=range(num_agents), dtype=bool)

    hint = f"degree={degree} is too small to connect num_agents={num_agents}; use a larger degree"
    return _sample_connected(sample, max_tries, hint, "regular")


# ---------------------------------------------------------------------------------------------------------
# Factory
# ---------------------------------------------------------------------------------------------------------


def square_factors(num_agents: int) -> tuple[int, int]:
    """The most square factorisation ``(rows, cols)`` of ``num_agents`` with ``rows <= cols``."""
    num_agents = check_int("num_agents", num_agents, 1)
    rows = max(r for r in range(1, math.isqrt(num_agents) + 1) if num_agents % r == 0)
    return rows, num_agents // rows


def default_erdos_renyi_p(num_agents: int) -> float:
    """Li & Song's default edge probability ``min(1, 2 ln M / M)`` (D18)."""
    num_agents = check_int("num_agents", num_agents, 1)
    return min(1.0, 2.0 * math.log(num_agents) / num_agents)


def _grid_shape(num_agents: int, rows: int | None, cols: int | None) -> tuple[int, int]:
    if rows is None and cols is None:
        return square_factors(num_agents)
    if rows is None:
        cols = check_int("cols", cols, 1)
        rows = num_agents // cols
    elif cols is None:
        rows = check_int("rows", rows, 1)
        cols = num_agents // rows
    if rows * cols != num_agents:
        raise ValueError(f"rows * cols must equal num_agents={num_agents}, got rows={rows}, cols={cols}")
    return rows, cols


def _build_named(kind: str, num_agents: int, rng: np.random.Generator | None, params: dict[str, Any]) -> Topology:
    check_keywords(f"topology {kind!r}", params, TOPOLOGY_PARAMS[kind])
    if kind in ("server", "complete", "ring", "path"):
        return {"server": server, "complete": complete, "ring": ring, "path": path}[kind](num_agents)
    if kind == "star":
        return star(num_agents, **params)
    if kind == "grid":
        return grid(*_grid_shape(num_agents, params.get("rows"), params.get("cols")))
    if rng is None:
        raise ValueError(f"rng is required for the random topology {kind!r}; pass numpy.random.default_rng(seed)")
    if kind == "erdos_renyi":
        p = params.pop("p", default_erdos_renyi_p(num_agents))
        return erdos_renyi(num_agents, p, rng, **params)
    if "degree" not in params:
        raise ValueError("degree is required for topology 'regular'; pass e.g. degree=3")
    return regular(num_agents, rng=rng, **params)


def check_topology(spec: str | Topology | np.ndarray, num_agents: int, **params: Any) -> Topology | None:
    """Validate a topology spec without drawing a random graph (for constructors: errors at construction).

    Names get a "did you mean", parameters are checked per kind; the deterministic kinds, a Topology and an
    adjacency array are built (building is their check) and the built topology is returned, for checks that
    need the graph (gossip); for ``"erdos_renyi"`` and ``"regular"`` the parameters are checked (whether a draw
    is connected is known only when the graph is drawn at reset) and None is returned.
    """
    num_agents = check_int("num_agents", num_agents, 1)
    if isinstance(spec, str) and check_choice("topology", spec, TOPOLOGY_KINDS) in RANDOM_TOPOLOGY_KINDS:
        check_keywords(f"topology {spec!r}", params, TOPOLOGY_PARAMS[spec])
        if "max_tries" in params:
            check_int("max_tries", params["max_tries"], 1)
        if spec == "erdos_renyi":
            check_real("p", params.get("p", 1.0), 0.0, 1.0)
        elif "degree" not in params:
            raise ValueError("degree is required for topology 'regular'; pass e.g. degree=3")
        else:
            _check_degree(num_agents, params["degree"])
        return None
    if not isinstance(spec, str | Topology | np.ndarray):
        raise TypeError(f"topology must be a name, a Topology or an adjacency array, got {type(spec).__name__}")
    try:
        return build_topology(spec, num_agents, **params)
    except (TypeError, ValueError) as error:
        label = f"topology {spec!r}" if isinstance(spec, str) else "topology"
        if str(error).startswith(label):  # it names the topology already
            raise
        raise type(error)(f"{label}: {error}") from None


def build_topology(
    spec: str | Topology | np.ndarray,
    num_agents: int,
    rng: np.random.Generator | None = None,
    **params: Any,
) -> Topology:
    """Build the topology of an environment from a name, a ready Topology or an adjacency array.

    Args:
        spec: One of :data:`TOPOLOGY_KINDS`, a :class:`Topology` (its size must be ``num_agents``) or an
            ``(M, M)`` adjacency array (``params`` may then give ``server_links`` and ``name``).
        num_agents: Number of agents M.
        rng: Generator for the random kinds ``"erdos_renyi"`` and ``"regular"`` (required for those).
        **params: Kind-specific options: ``star``: ``centre``; ``grid``: ``rows``/``cols`` (default: the
            most square factorisation of M); ``erdos_renyi``: ``p`` (default ``min(1, 2 ln M / M)``) and
            ``max_tries``; ``regular``: ``degree`` (required) and ``max_tries``.
    """
    num_agents = check_int("num_agents", num_agents, 1)
    if rng is not None:
        _check_rng(rng)
    if isinstance(spec, Topology):
        check_keywords("a Topology", params, ())
        topology = spec
    elif isinstance(spec, np.ndarray):
        check_keywords("an adjacency array", params, ("server_links", "name"))
        topology = from_adjacency(spec, **params)
    elif isinstance(spec, str):
        return _build_named(check_choice("spec", spec, TOPOLOGY_KINDS), num_agents, rng, dict(params))
    else:
        raise TypeError(f"spec must be a str, a Topology or a numpy adjacency array, got {type(spec).__name__}")
    if topology.num_agents != num_agents:
        raise ValueError(f"num_agents={num_agents} does not match the given topology's {topology.num_agents} agents")
    return topology
