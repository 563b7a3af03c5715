"""Tests for fedbandit_envs.topology."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from fedbandit_envs import topology as topo
from fedbandit_envs.topology import SERVER, Topology, build_topology

# ---------------------------------------------------------------------------------------------------------
# Construction: edge counts, degrees, symmetry
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topology", "num_edges", "degrees"),
    [
        (topo.complete(5), 10, [4] * 5),
        (topo.complete(1), 0, [0]),
        (topo.ring(6), 6, [2] * 6),
        (topo.path(4), 3, [1, 2, 2, 1]),
        (topo.path(1), 0, [0]),
        (topo.star(5), 4, [4, 1, 1, 1, 1]),
        (topo.star(4, centre=2), 3, [1, 1, 3, 1]),
        (topo.grid(2, 3), 7, [2, 3, 2, 2, 3, 2]),
        (topo.grid(3, 3), 12, [2, 3, 2, 3, 4, 3, 2, 3, 2]),
        (topo.server(4), 0, [0, 0, 0, 0]),
        (topo.server(1), 0, [0]),
    ],
)
def test_edge_counts_and_degrees(topology: Topology, num_edges: int, degrees: list[int]) -> None:
    assert topology.num_edges == num_edges
    assert topology.edges().shape == (num_edges, 2)
    np.testing.assert_array_equal(topology.degree(), degrees)
    assert topology.degree().dtype == np.int64
    assert topology.adjacency.dtype == bool
    np.testing.assert_array_equal(topology.adjacency, topology.adjacency.T)
    assert not topology.adjacency.diagonal().any()
    assert topology.num_agents == len(degrees)


@pytest.mark.parametrize(
    ("topology", "name", "has_server"),
    [
        (topo.server(3), "server", True),
        (topo.star(3), "star", False),
        (topo.complete(3), "complete", False),
        (topo.ring(3), "ring", False),
        (topo.path(3), "path", False),
        (topo.grid(1, 3), "grid", False),
    ],
)
def test_names_and_server_flag(topology: Topology, name: str, has_server: bool) -> None:
    assert topology.name == name
    assert topology.has_server is has_server
    assert topology.server_links.dtype == bool


def test_server_constant_and_server_topology() -> None:
    assert SERVER == -1
    t = topo.server(3)
    np.testing.assert_array_equal(t.server_links, [True, True, True])
    np.testing.assert_array_equal(t.sinks, [0, 1, 2])
    assert not t.is_connected()
    assert len(t.components()) == 3


def test_edges_sorted_lexicographically_with_i_less_than_j() -> None:
    edges = topo.ring(5).edges()
    assert edges.dtype == np.int64
    np.testing.assert_array_equal(edges, [[0, 1], [0, 4], [1, 2], [2, 3], [3, 4]])


def test_grid_index_convention() -> None:
    t = topo.grid(2, 3)  # 0 1 2 / 3 4 5
    np.testing.assert_array_equal(t.neighbours(1), [0, 2, 4])
    np.testing.assert_array_equal(t.neighbours(3), [0, 4])


def test_neighbours_sorted_int64() -> None:
    t = topo.star(5, centre=3)
    np.testing.assert_array_equal(t.neighbours(3), [0, 1, 2, 4])
    np.testing.assert_array_equal(t.neighbours(0), [3])
    assert t.neighbours(3).dtype == np.int64


def test_arrays_are_read_only_and_copied() -> None:
    matrix = np.array([[0, 1], [1, 0]])
    t = topo.from_adjacency(matrix)
    matrix[0, 1] = 0
    assert t.adjacency[0, 1]
    for array in (t.adjacency, t.server_links, t.edges(), t.degree(), t.distances(), t.neighbours(0)):
        with pytest.raises(ValueError):
            array[...] = 0
    with pytest.raises(AttributeError):
        t.name = "other"  # type: ignore[misc]


def test_from_adjacency_accepts_bool_and_server_links() -> None:
    matrix = np.array([[False, True, False], [True, False, True], [False, True, False]])
    t = topo.from_adjacency(matrix, server_links=[0, 1, 0], name="mine")
    assert t.name == "mine"
    assert t.has_server
    np.testing.assert_array_equal(t.sinks, [1])
    np.testing.assert_array_equal(topo.hybrid_sinks(t), [1])


# ---------------------------------------------------------------------------------------------------------
# Hybrid
# ---------------------------------------------------------------------------------------------------------


def test_hybrid_renumbers_and_picks_default_sinks() -> None:
    t = topo.hybrid([topo.complete(3), topo.path(5), topo.star(4, centre=2)])
    assert t.name == "hybrid"
    assert t.num_agents == 12
    assert t.num_edges == 3 + 4 + 3
    # complete(3): all central, lowest id 0; path(5): centre 2 -> 3 + 2; star hub 2 -> 8 + 2.
    np.testing.assert_array_equal(t.sinks, [0, 5, 10])
    np.testing.assert_array_equal(topo.hybrid_sinks(t), [0, 5, 10])
    np.testing.assert_array_equal(np.flatnonzero(t.server_links), [0, 5, 10])
    comps = t.components()
    np.testing.assert_array_equal(comps[0], [0, 1, 2])
    np.testing.assert_array_equal(comps[1], [3, 4, 5, 6, 7])
    np.testing.assert_array_equal(comps[2], [8, 9, 10, 11])
    np.testing.assert_array_equal(t.component_of(), [0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2])
    np.testing.assert_array_equal(t.neighbours(4), [3, 5])
    np.testing.assert_array_equal(t.neighbours(10), [8, 9, 11])


def test_hybrid_default_sink_lowest_id_on_ties() -> None:
    t = topo.hybrid([topo.path(4), topo.ring(4)])  # path(4) centre {1, 2}; ring all central
    np.testing.assert_array_equal(t.sinks, [1, 4])


def test_hybrid_explicit_sinks_are_local_indices() -> None:
    t = topo.hybrid([topo.path(3), topo.path(2)], sinks=[2, 1])
    np.testing.assert_array_equal(t.sinks, [2, 4])


def test_hybrid_singleton_components_recover_server() -> None:
    t = topo.hybrid([topo.complete(1)] * 4)
    np.testing.assert_array_equal(t.server_links, topo.server(4).server_links)
    assert t.num_edges == 0


@pytest.mark.parametrize(
    ("components", "sinks", "exc", "needle"),
    [
        ([], None, ValueError, "components"),
        (topo.path(3), None, TypeError, "components"),
        ([topo.path(3), "x"], None, TypeError, "components[1]"),
        ([topo.server(3)], None, ValueError, "components[0]"),
        ([topo.hybrid([topo.path(2), topo.path(2)])], None, ValueError, "components[0]"),
        ([topo.path(3)], [3], ValueError, "sinks[0]"),
        ([topo.path(3), topo.path(2)], [0], ValueError, "sinks"),
    ],
)
def test_hybrid_rejects_bad_input(components, sinks, exc: type[Exception], needle: str) -> None:
    with pytest.raises(exc, match=needle.replace("[", r"\[").replace("]", r"\]")):
        topo.hybrid(components, sinks)


# ---------------------------------------------------------------------------------------------------------
# Distances, eccentricity, diameter, centre
# ---------------------------------------------------------------------------------------------------------


def test_path_distances() -> None:
    t = topo.path(4)
    expected = [[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]]
    np.testing.assert_array_equal(t.distances(), expected)
    assert t.distances().dtype == np.int64
    np.testing.assert_array_equal(t.eccentricity(), [3, 2, 2, 3])
    assert t.diameter() == 3
    np.testing.assert_array_equal(t.centre(), [1, 2])


def test_ring_distances() -> None:
    t = topo.ring(6)
    np.testing.assert_array_equal(t.distances()[0], [0, 1, 2, 3, 2, 1])
    np.testing.assert_array_equal(t.eccentricity(), [3] * 6)
    assert t.diameter() == 3
    np.testing.assert_array_equal(t.centre(), np.arange(6))


def test_grid_distances() -> None:
    t = topo.grid(3, 3)
    np.testing.assert_array_equal(t.distances()[0], [0, 1, 2, 1, 2, 3, 2, 3, 4])
    np.testing.assert_array_equal(t.eccentricity(), [4, 3, 4, 3, 2, 3, 4, 3, 4])
    assert t.diameter() == 4
    np.testing.assert_array_equal(t.centre(), [4])


def test_star_distances() -> None:
    t = topo.star(5, centre=1)
    np.testing.assert_array_equal(t.distances()[1], [1, 0, 1, 1, 1])
    np.testing.assert_array_equal(t.distances()[0], [0, 1, 2, 2, 2])
    np.testing.assert_array_equal(t.eccentricity(), [2, 1, 2, 2, 2])
    assert t.diameter() == 2
    np.testing.assert_array_equal(t.centre(), [1])


def test_single_agent_is_connected_with_zero_diameter() -> None:
    t = topo.complete(1)
    assert t.is_connected()
    assert t.diameter() == 0
    np.testing.assert_array_equal(t.centre(), [0])


def test_disconnected_graph_distances_and_errors() -> None:
    t = topo.hybrid([topo.path(3), topo.complete(2)])
    assert not t.is_connected()
    np.testing.assert_array_equal(t.distances()[0], [0, 1, 2, -1, -1])
    np.testing.assert_array_equal(t.eccentricity(), [2, 1, 2, 1, 1])
    with pytest.raises(ValueError, match="connected"):
        t.diameter()
    with pytest.raises(ValueError, match="connected"):
        t.centre()


# ---------------------------------------------------------------------------------------------------------
# Power graph, ball, BFS parents
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("topology", [topo.path(6), topo.ring(7), topo.grid(3, 4), topo.star(5)])
def test_power_graph_of_diameter_is_complete(topology: Topology) -> None:
    powered = topology.power_graph(topology.diameter())
    np.testing.assert_array_equal(powered.adjacency, topo.complete(topology.num_agents).adjacency)
    np.testing.assert_array_equal(powered.server_links, topology.server_links)


def test_power_graph_one_is_identity_and_two_on_path() -> None:
    t = topo.path(5)
    np.testing.assert_array_equal(t.power_graph(1).adjacency, t.adjacency)
    squared = t.power_graph(2)
    assert squared.num_edges == 4 + 3
    np.testing.assert_array_equal(squared.neighbours(2), [0, 1, 3, 4])


def test_power_graph_keeps_server_links() -> None:
    t = topo.hybrid([topo.path(3), topo.path(3)])
    np.testing.assert_array_equal(t.power_graph(2).server_links, t.server_links)
    assert t.power_graph(2).num_edges == 6


@pytest.mark.parametrize(
    ("i", "radius", "expected"),
    [(0, 0, [0]), (0, 2, [0, 1, 2]), (3, 1, [2, 3, 4]), (3, 2, [1, 2, 3, 4, 5]), (6, 10, list(range(7)))],
)
def test_ball_on_path(i: int, radius: int, expected: list[int]) -> None:
    ball = topo.path(7).ball(i, radius)
    np.testing.assert_array_equal(ball, expected)
    assert ball.dtype == np.int64


def test_ball_stays_in_component() -> None:
    t = topo.hybrid([topo.path(2), topo.path(2)])
    np.testing.assert_array_equal(t.ball(0, 5), [0, 1])


def test_bfs_parents_lowest_id_rule_on_four_cycle() -> None:
    t = topo.ring(4)  # 0-1-2-3-0; agent 2 has closer neighbours 1 and 3
    np.testing.assert_array_equal(t.bfs_parents(0), [-1, 0, 1, 0])
    np.testing.assert_array_equal(t.bfs_parents(2), [1, 2, -1, 2])


def test_bfs_parents_grid_and_outside_component() -> None:
    np.testing.assert_array_equal(topo.grid(2, 2).bfs_parents(3), [1, 3, 3, -1])
    t = topo.hybrid([topo.path(3), topo.path(2)])
    np.testing.assert_array_equal(t.bfs_parents(2), [1, 2, -1, -1, -1])


def test_bfs_parents_form_shortest_path_tree() -> None:
    t = topo.erdos_renyi(20, 0.2, np.random.default_rng(3))
    parents = t.bfs_parents(7)
    dist = t.distances()[7]
    for agent in range(20):
        if agent == 7:
            continue
        assert t.adjacency[agent, parents[agent]]
        assert dist[parents[agent]] == dist[agent] - 1


# ---------------------------------------------------------------------------------------------------------
# Laplacian, gossip matrix, lambda_2
# ---------------------------------------------------------------------------------------------------------

#: Zhu spec section 5.2: lambda_2 under uniform edge activation, a row per topology, a column per N.
LAMBDA2_SIZES = (3, 5, 10)
LAMBDA2_ROWS = {
    "complete": (0.500000, 0.750000, 0.888889),
    "ring": (0.500000, 0.861803, 0.980902),
    "path": (0.750000, 0.952254, 0.994562),
    "star": (0.750000, 0.875000, 0.944444),
}
LAMBDA2_UNIFORM = {(kind, n): value for kind, row in LAMBDA2_ROWS.items() for n, value in zip(LAMBDA2_SIZES, row)}
CONSTRUCTORS = {"complete": topo.complete, "ring": topo.ring, "path": topo.path, "star": topo.star}


def closed_form_lambda2(kind: str, n: int) -> float:
    """Closed forms of Zhu spec section 1.3 (uniform edge activation)."""
    if kind == "complete":
        return 1 - 1 / (n - 1)
    if kind == "ring":
        return 1 - (1 - math.cos(2 * math.pi / n)) / n
    if kind == "path":
        return 1 - (1 - math.cos(math.pi / n)) / (n - 1)
    return 1 - 1 / (2 * (n - 1))


@pytest.mark.parametrize(("kind", "n"), sorted(LAMBDA2_UNIFORM))
def test_lambda2_uniform_edge_table(kind: str, n: int) -> None:
    value = CONSTRUCTORS[kind](n).lambda_2()
    assert round(value, 6) == pytest.approx(LAMBDA2_UNIFORM[kind, n], abs=1e-12)
    assert value == pytest.approx(closed_form_lambda2(kind, n), abs=1e-9)


@pytest.mark.parametrize("kind", sorted(CONSTRUCTORS))
@pytest.mark.parametrize("n", [4, 7, 12])
def test_lambda2_closed_forms(kind: str, n: int) -> None:
    assert CONSTRUCTORS[kind](n).lambda_2("uniform_edge") == pytest.approx(closed_form_lambda2(kind, n), abs=1e-9)


@pytest.mark.parametrize(("n", "expected"), [(5, 0.958114), (10, 0.995044)])
def test_lambda2_node_then_neighbour_on_paths(n: int, expected: float) -> None:
    t = topo.path(n)
    assert round(t.lambda_2("node_then_neighbour"), 6) == pytest.approx(expected, abs=1e-12)
    assert t.lambda_2("node_then_neighbor") == t.lambda_2("node_then_neighbour")


@pytest.mark.parametrize(
    "topology",
    [
        topo.complete(6),
        topo.ring(7),
        topo.star(6),
        topo.star(5, centre=3),
        topo.regular(8, 3, np.random.default_rng(0)),
    ],
)
def test_activation_models_agree_on_regular_graphs_and_stars(topology: Topology) -> None:
    np.testing.assert_allclose(
        topology.gossip_matrix("uniform_edge"), topology.gossip_matrix("node_then_neighbour"), atol=1e-12
    )


def test_node_then_neighbour_matrix_by_hand_on_path3() -> None:
    # Edge {0,1}: 1/3 (0 wakes) + 1/3 * 1/2 (1 wakes, picks 0) = 1/2; same for {1,2}; W = I - sum p_e/2 * B_e.
    expected = np.array([[0.75, 0.25, 0.0], [0.25, 0.5, 0.25], [0.0, 0.25, 0.75]])
    np.testing.assert_allclose(topo.path(3).gossip_matrix("node_then_neighbour"), expected, atol=1e-15)


def test_laplacian() -> None:
    expected = np.array([[1.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 1.0]])
    lap = topo.path(3).laplacian()
    assert lap.dtype == np.float64
    np.testing.assert_array_equal(lap, expected)


GOSSIP_GRAPHS = [
    topo.complete(5),
    topo.ring(6),
    topo.path(7),
    topo.star(6),
    topo.grid(3, 4),
    topo.erdos_renyi(15, 0.3, np.random.default_rng(5)),
]


@pytest.mark.parametrize("topology", GOSSIP_GRAPHS)
@pytest.mark.parametrize("activation", ["uniform_edge", "node_then_neighbour"])
def test_gossip_matrix_properties(topology: Topology, activation: str) -> None:
    w = topology.gossip_matrix(activation)
    n = topology.num_agents
    np.testing.assert_allclose(w, w.T, atol=1e-15)
    np.testing.assert_allclose(w.sum(axis=0), np.ones(n), atol=1e-12)
    np.testing.assert_allclose(w.sum(axis=1), np.ones(n), atol=1e-12)
    eigenvalues = np.linalg.eigvalsh(w)
    assert eigenvalues[0] >= -1e-12
    assert eigenvalues[-1] == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(w @ np.ones(n), np.ones(n), atol=1e-12)
    assert 0.0 < topology.lambda_2(activation) < 1.0


def test_lambda2_is_one_when_disconnected() -> None:
    t = topo.hybrid([topo.path(3), topo.path(2)])
    assert t.lambda_2() == pytest.approx(1.0, abs=1e-12)


def test_gossip_matrix_errors() -> None:
    with pytest.raises(ValueError, match="activation"):
        topo.ring(4).gossip_matrix("random_walk")
    with pytest.raises(ValueError, match="edge"):
        topo.server(4).gossip_matrix()
    with pytest.raises(ValueError, match="edge"):
        topo.complete(1).lambda_2()


# ---------------------------------------------------------------------------------------------------------
# Random graphs
# ---------------------------------------------------------------------------------------------------------


def test_erdos_renyi_connected_and_deterministic() -> None:
    first = topo.erdos_renyi(30, 0.15, np.random.default_rng(42))
    second = topo.erdos_renyi(30, 0.15, np.random.default_rng(42))
    other = topo.erdos_renyi(30, 0.15, np.random.default_rng(43))
    assert first.name == "erdos_renyi"
    assert first.is_connected()
    np.testing.assert_array_equal(first.adjacency, second.adjacency)
    assert not np.array_equal(first.adjacency, other.adjacency)
    assert not first.has_server


def test_erdos_renyi_extremes() -> None:
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(topo.erdos_renyi(6, 1.0, rng).adjacency, topo.complete(6).adjacency)
    assert topo.erdos_renyi(1, 0.0, rng).num_agents == 1


def test_erdos_renyi_hopeless_p_raises() -> None:
    with pytest.raises(ValueError, match=r"p=0\.0.*larger p"):
        topo.erdos_renyi(5, 0.0, np.random.default_rng(0), max_tries=50)


def test_regular_connected_and_deterministic() -> None:
    first = topo.regular(12, 3, np.random.default_rng(7))
    second = topo.regular(12, 3, np.random.default_rng(7))
    assert first.name == "regular"
    assert first.is_connected()
    np.testing.assert_array_equal(first.degree(), [3] * 12)
    np.testing.assert_array_equal(first.adjacency, second.adjacency)


def test_regular_hopeless_degree_raises() -> None:
    with pytest.raises(ValueError, match="degree"):
        topo.regular(6, 1, np.random.default_rng(0), max_tries=20)


# ---------------------------------------------------------------------------------------------------------
# networkx export
# ---------------------------------------------------------------------------------------------------------


def test_to_networkx_with_and_without_server() -> None:
    graph = topo.ring(5).to_networkx()
    assert set(graph.nodes) == set(range(5))
    assert graph.number_of_edges() == 5
    assert nx.is_connected(graph)

    hybrid = topo.hybrid([topo.path(3), topo.path(2)])
    graph = hybrid.to_networkx()
    assert "server" in graph
    assert sorted(graph.neighbors("server")) == [1, 3]
    assert graph.number_of_edges() == 3 + 2
    graph.add_edge(0, 4)  # a fresh copy: mutating it leaves the topology untouched
    assert not hybrid.adjacency[0, 4]
    assert hybrid.num_edges == 3


# ---------------------------------------------------------------------------------------------------------
# build_topology
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["server", "star", "complete", "ring", "path", "grid"])
def test_build_topology_named_deterministic(kind: str) -> None:
    t = build_topology(kind, 6)
    assert t.name == kind
    assert t.num_agents == 6


def test_build_topology_params() -> None:
    np.testing.assert_array_equal(build_topology("star", 4, centre=3).neighbours(3), [0, 1, 2])
    assert build_topology("grid", 12).num_edges == topo.grid(3, 4).num_edges
    np.testing.assert_array_equal(build_topology("grid", 12).adjacency, topo.grid(3, 4).adjacency)
    np.testing.assert_array_equal(build_topology("grid", 12, rows=2).adjacency, topo.grid(2, 6).adjacency)
    np.testing.assert_array_equal(build_topology("grid", 12, cols=2).adjacency, topo.grid(6, 2).adjacency)
    np.testing.assert_array_equal(build_topology("grid", 7).adjacency, topo.grid(1, 7).adjacency)


def test_square_factors_and_default_p() -> None:
    assert topo.square_factors(12) == (3, 4)
    assert topo.square_factors(16) == (4, 4)
    assert topo.square_factors(13) == (1, 13)
    assert topo.default_erdos_renyi_p(50) == pytest.approx(2 * math.log(50) / 50)
    assert topo.default_erdos_renyi_p(1) == 0.0
    assert topo.default_erdos_renyi_p(3) == pytest.approx(2 * math.log(3) / 3)


def test_build_topology_random_kinds() -> None:
    t = build_topology("erdos_renyi", 20, rng=np.random.default_rng(1))
    expected = topo.erdos_renyi(20, 2 * math.log(20) / 20, np.random.default_rng(1))
    np.testing.assert_array_equal(t.adjacency, expected.adjacency)
    t = build_topology("erdos_renyi", 10, rng=np.random.default_rng(1), p=0.5)
    np.testing.assert_array_equal(t.adjacency, topo.erdos_renyi(10, 0.5, np.random.default_rng(1)).adjacency)
    t = build_topology("regular", 10, rng=np.random.default_rng(2), degree=4)
    np.testing.assert_array_equal(t.degree(), [4] * 10)


def test_build_topology_passes_through_topologies_and_arrays() -> None:
    ring = topo.ring(5)
    assert build_topology(ring, 5) is ring
    t = build_topology(topo.path(3).adjacency.astype(int), 3)
    assert t.name == "custom"
    assert t.num_edges == 2
    t = build_topology(np.ones((2, 2)) - np.eye(2), 2, server_links=[1, 0], name="pair")
    assert t.name == "pair"
    np.testing.assert_array_equal(t.sinks, [0])


@pytest.mark.parametrize(
    ("call", "exc", "needle"),
    [
        (lambda: build_topology("nope", 5), ValueError, "spec"),
        (lambda: build_topology("erdos_renyi", 5), ValueError, "rng"),
        (lambda: build_topology("regular", 5, rng=np.random.default_rng(0)), ValueError, "degree"),
        (lambda: build_topology(topo.ring(4), 5), ValueError, "num_agents"),
        (lambda: build_topology(np.zeros((3, 3)), 4), ValueError, "num_agents"),
        (lambda: build_topology("grid", 12, rows=5), ValueError, "rows"),
        (lambda: build_topology("ring", 5, p=0.3), TypeError, "p"),
        (lambda: build_topology(3, 5), TypeError, "spec"),
        (lambda: build_topology("ring", 0), ValueError, "num_agents"),
        (lambda: build_topology("path", 3, rng=42), TypeError, "rng"),
    ],
)
def test_build_topology_errors(call, exc: type[Exception], needle: str) -> None:
    with pytest.raises(exc, match=needle):
        call()


def test_build_topology_unknown_lists_valid_kinds() -> None:
    with pytest.raises(ValueError) as info:
        build_topology("nope", 5)
    for kind in topo.TOPOLOGY_KINDS:
        assert kind in str(info.value)


# ---------------------------------------------------------------------------------------------------------
# Validation errors
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "exc", "needle"),
    [
        (lambda: topo.from_adjacency([[0, 1], [0, 0]]), ValueError, "matrix.*symmetric"),
        (lambda: topo.from_adjacency([[1, 0], [0, 0]]), ValueError, "matrix.*self loop"),
        (lambda: topo.from_adjacency(np.zeros((2, 3))), ValueError, "matrix.*square"),
        (lambda: topo.from_adjacency(np.zeros((0, 0))), ValueError, "matrix"),
        (lambda: topo.from_adjacency([[0, 2], [2, 0]]), ValueError, "matrix.*0/1"),
        (lambda: topo.from_adjacency([["a", "b"], ["b", "a"]]), TypeError, "matrix"),
        (lambda: topo.from_adjacency(np.zeros((2, 2)), server_links=[1, 0, 0]), ValueError, "server_links"),
        (lambda: Topology(np.array([[0, 1], [0, 0]]), np.zeros(2, bool), "x"), ValueError, "adjacency"),
        (lambda: Topology(np.zeros((2, 2)), np.zeros(2, bool), ""), TypeError, "name"),
        (lambda: topo.ring(2), ValueError, "num_agents"),
        (lambda: topo.star(1), ValueError, "num_agents"),
        (lambda: topo.star(3, centre=3), ValueError, "centre"),
        (lambda: topo.complete(0), ValueError, "num_agents"),
        (lambda: topo.path(2.5), TypeError, "num_agents"),
        (lambda: topo.server(True), TypeError, "num_agents"),
        (lambda: topo.grid(0, 3), ValueError, "rows"),
        (lambda: topo.erdos_renyi(5, -0.1, np.random.default_rng(0)), ValueError, "p"),
        (lambda: topo.erdos_renyi(5, 1.5, np.random.default_rng(0)), ValueError, "p"),
        (lambda: topo.erdos_renyi(5, 0.5, 0), TypeError, "rng"),
        (lambda: topo.erdos_renyi(5, 0.5, np.random.default_rng(0), max_tries=0), ValueError, "max_tries"),
        (lambda: topo.regular(5, 3, np.random.default_rng(0)), ValueError, "num_agents \\* degree"),
        (lambda: topo.regular(4, 4, np.random.default_rng(0)), ValueError, "degree"),
        (lambda: topo.ring(4).neighbours(4), ValueError, "i"),
        (lambda: topo.ring(4).bfs_parents(-1), ValueError, "root"),
        (lambda: topo.ring(4).ball(0, -1), ValueError, "radius"),
        (lambda: topo.ring(4).power_graph(0), ValueError, "gamma"),
        (lambda: topo.hybrid_sinks("ring"), TypeError, "topology"),
    ],
)
def test_bad_input_raises_with_argument_name(call, exc: type[Exception], needle: str) -> None:
    with pytest.raises(exc, match=needle):
        call()


def test_topology_equality_is_identity_and_repr_is_short() -> None:
    a, b = topo.ring(4), topo.ring(4)
    assert a != b
    assert a.__eq__(a) is True
    assert repr(a) == "Topology(name='ring', num_agents=4, num_edges=4, has_server=False)"
