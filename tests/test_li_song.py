"""Li and Song's algorithms: the exact checks of spec section 5, protocols, privacy, equivalence, bad input."""

import math
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy import stats

from agents.li_song import (
    CDPMAB,
    DDPMAB,
    HDPMAB,
    LiSongMAB,
    SingleMAB,
    bounds,
    epoch_plan,
    find_sink_agents,
    hybrid_topology,
    participants,
    run,
    target_accuracy,
)
from agents.li_song.engine import COMMUNICATE, aggregate_values
from agents.li_song.schedules import algorithm_epsilon, eliminate
from fedbandit_envs.algorithms import make_algorithm, registered_algorithms
from fedbandit_envs.bench import names
from fedbandit_envs.core import message_phases
from fedbandit_envs.families.mab.views import FederatedClientEnv
from fedbandit_envs.run import build_env
from fedbandit_envs.run import run as plain_run
from fedbandit_envs.topology import from_adjacency, ring
from wrappers.dp import LaplaceMessageDP


def laplace(n_agg, epsilon=1.0, calibration="paper"):
    return lambda env: LaplaceMessageDP(env, epsilon=epsilon, calibration=calibration, n_agg=n_agg)


def play(population, env_kwargs, seeds=(0,), wrappers=(), on_step=None):
    """Run a population by hand on a (wrapped) core, with boundary hops; returns the core and the (T, B, M) arms."""
    env, _ = build_env(population, population, env_kwargs, wrappers)
    core = env.unwrapped.core
    core.reset(list(seeds), hooks=env.message_hooks())
    population.reset(core.context)
    arms = []
    for t in range(core.config.horizon):
        feedback = core.play(population.act(core.current_step()))
        population.observe(feedback)
        message_phases(core, population)
        arms.append(feedback.arms.copy())
        if on_step is not None:
            on_step(t, population, feedback)
    return core, np.array(arms)


# --------------------------------------------------------------------------------------------- schedules (5.1, 5.2)
GOLDEN = [  # n_agg, K, T, eps, r, #I, accuracy, S(r-1) | term1, term2, S, n, C, 1/b
    ((50, 100, 1e5, 1.0, 1, 100, 0.5, 0), (11.6464, 0.2730, 12, 12, 0.125989, 600)),
    ((50, 100, 1e5, 0.1, 1, 100, 0.5, 0), (11.6464, 2.7301, 12, 12, 0.151584, 60)),
    ((50, 100, 1e5, 1.0, 2, 40, 0.25, 12), (47.7889, 1.1329, 48, 36, 0.063838, 1800)),
    ((participants(0.2, 50), 100, 1e5, 1.0, 1, 100, 0.5, 0), (58.2321, 3.0524, 59, 59, 0.130651, 590)),
    ((50, 100, 1e5, 1.0, 1, 100, 0.01 ** (1 / 5), 0), (18.3710, 0.3429, 19, 19, 0.099662, 950)),
    ((5, 10, 1e5, 0.1, 1, 10, 0.5, 0), (101.7277, 80.6881, 102, 102, 0.223716, 51)),
]


@pytest.mark.parametrize(("args", "expected"), GOLDEN)
def test_golden_schedule_values(args, expected):
    n_agg, k, horizon, eps, r, active, accuracy, previous = args
    plan = epoch_plan(r, n_agg, k, int(horizon), eps, active, accuracy, previous)
    term1, term2, samples, pulls, radius, inverse_scale = expected
    assert plan.term1 == pytest.approx(term1, abs=5e-5)
    assert plan.term2 == pytest.approx(term2, abs=5e-5)
    assert (plan.samples, plan.pulls) == (samples, pulls)
    assert plan.radius == pytest.approx(radius, abs=5e-7)
    assert plan.noise_scale == pytest.approx(1 / inverse_scale, rel=1e-12)


def test_accuracy_schedules_and_participants():
    assert [target_accuracy(r) for r in (1, 2, 3)] == [0.5, 0.25, 0.125]
    assert [target_accuracy(r, 2, 0.01) for r in (1, 2)] == pytest.approx([0.1, 0.01], rel=1e-12)
    five = [target_accuracy(r, 5, 0.01) for r in range(1, 6)]
    assert five == pytest.approx([0.398107, 0.158489, 0.063096, 0.025119, 0.01], abs=5e-7)
    assert target_accuracy(5, 5, 0.01) == 0.01  # Delta~_R = Delta exactly
    assert participants(0.7, 10) == 7 and participants(0.2, 50) == 10 and participants(1.0, 50) == 50
    assert participants(0.01, 50) == 1
    # D2: S(r) >= S(r-1) + 1 even when the target would shrink
    assert epoch_plan(3, 50, 100, 10**5, None, 2, 0.5, 100).samples == 101


def test_an_epoch_longer_than_the_horizon_is_capped_at_it():
    # D8 truncates an epoch at T: n_r <= T, also where a tiny epsilon makes S*(r) overflow int64 or a float
    for eps in (1e-20, 1e-300):
        plan = epoch_plan(1, 3, 3, 30, eps, 3, 0.5, 5)
        assert plan.term2 > 2**63 and (plan.samples, plan.pulls) == (35, 30)
    uncapped = epoch_plan(1, 3, 3, 10**6, 1e-3, 3, 0.5, 0)
    assert uncapped.pulls == math.ceil(uncapped.term2) < 10**6


@pytest.mark.parametrize("name", ["cdp_mab", "ddp_mab", "hdp_mab"])
def test_a_tiny_epsilon_explores_to_the_horizon(name):
    env = {"num_agents": 3, "num_arms": 3, "horizon": 30, "topology": "complete" if name == "ddp_mab" else "server"}
    tiny, small = (plain_run(lambda eps=eps: make_algorithm(name, epsilon=eps), env, [0]) for eps in (1e-300, 1e-12))
    assert tiny.curves[-1]["group_regret"] == small.curves[-1]["group_regret"]


def test_elimination_keeps_the_argmax_and_shrinks():
    rng = np.random.default_rng(0)
    for _ in range(200):
        values = rng.random(rng.integers(1, 30))
        keep = eliminate(values, rng.random() * 0.1)
        assert keep[np.argmax(values)] and keep.sum() >= 1
    assert eliminate(np.array([0.75, 0.5, 0.625]), 0.125).tolist() == [True, False, True]  # a gap of exactly 2C removes


def test_aggregates_weighted_unweighted_and_epoch_only():
    totals = np.array([[6.0, 3.0], [2.0, 4.0]])  # two sources: sums of n_j y^(j) over S = 2 samples
    latest = np.array([[1.0, 0.5], [0.25, 1.0]])
    assert aggregate_values(totals, latest, 2, 4).tolist() == [1.0, 0.875]  # (6 + 2) / (4 * 2), (3 + 4) / 8
    assert aggregate_values(totals, latest, 2, 4, "yhat").tolist() == [0.3125, 0.375]  # (1 + 0.25) / 4
    sizes = np.array([3.0, 1.0])  # unweighted mean of component means (D5, Alg. 5 line 14)
    assert aggregate_values(totals, latest, 2, 4, "ybar", sizes).tolist() == [(6 / 3 + 2) / 4, (3 / 3 + 4) / 4]


def test_after_the_cap_commit_or_round_robin():
    env = {"num_agents": 3, "num_arms": 6, "horizon": 3000, "instance": [0.5, 0.5, 0.49, 0.48, 0.1, 0.0]}
    for after_cap in ("commit", "round_robin"):
        population = CDPMAB(rounds=1, delta_schedule_base=0.5, after_cap=after_cap)
        core, arms = play(population, env)
        row, state = population.round_log[0][0], population.states[0]
        tail = arms[row["end_slot"] + 1 :, 0]
        survivors = np.flatnonzero(state.active)
        assert state.completed == 1 and len(survivors) > 1 and len(tail) > 100
        if after_cap == "commit":  # D7: the best aggregate among the survivors, for every agent
            best = survivors[np.argmax(state.values[survivors])]
            assert np.all(tail == best)
        else:
            assert np.all(tail == survivors[np.arange(len(tail)) % len(survivors)][:, None])


def test_exploitation_arm_sources():
    """D11: in hop slots each agent pulls its own non-private best; ``last_global`` pulls the previous aggregate's."""
    env = {
        "num_agents": 8,
        "num_arms": 6,
        "horizon": 3000,
        "topology": "ring",
        "instance": [0.6, 0.59, 0.58, 0.45, 0.3, 0.2],  # close arms: local estimates differ between agents
    }
    for source in ("local", "last_global"):
        population = DDPMAB(exploit_source=source)
        _, arms = play(population, env)
        second = population.round_log[0][1]
        hop_arms = arms[second["explore_end"] + 1 : second["end_slot"] + 1, 0]
        assert len(hop_arms) == 3 and np.all(hop_arms == hop_arms[0])  # the same arm in every hop slot (d_G - 1)
        if source == "last_global":
            previous = population.round_log[0][0]
            assert previous["survivors"] > 1 and np.all(hop_arms[0] == hop_arms[0, 0])
        else:
            assert len(set(hop_arms[0].tolist())) > 1  # local estimates differ between agents


# --------------------------------------------------------------------------------------------- privacy (5.3, 5.4, 5.14)
M50 = {"num_agents": 50, "num_arms": 100, "c1": 25.0, "instance_seed": 0}


@pytest.mark.parametrize("noise", ["wrapper", "agent"])
def test_laplace_scale_and_accountant(noise):
    """(y^ - x^) n_agg eps n_r is Lap(1) (KS, 5000 draws); the accountant reports n_agg eps = 25."""
    population = CDPMAB(epsilon=0.5, noise=noise)
    pulls = epoch_plan(1, 50, 100, 1000, 0.5, 100, 0.5, 0).pulls
    core, _ = play(population, {**M50, "horizon": 1000}, wrappers=[laplace(50, 0.5)])
    server = core.coordinator
    assert server.states[0].completed == 1 and population.round_log[0][0]["pulls"] == pulls == 9
    xhat = population.explore_sums[0] / pulls
    yhat = server.totals[0] / pulls
    residual = ((yhat - xhat) * 50 * 0.5 * pulls).ravel()
    assert stats.kstest(residual, "laplace").pvalue > 0.001
    assert np.all(core.message_hooks[0].epsilon_spent()[0] == 25.0)


def test_strict_calibration_uses_epsilon_over_n_agg():
    population = CDPMAB(epsilon=2.0, privacy_calibration="strict")
    core, _ = play(population, {**M50, "horizon": 1500}, wrappers=[laplace(1, 2.0, "strict")])
    plan = population.round_log[0][0]
    expected = epoch_plan(1, 50, 100, 1500, 2.0 / 50, 100, 0.5, 0)
    assert core.coordinator.states[0].completed == 1 and expected.term2 > 0.5 * expected.term1
    assert (plan["pulls"], plan["noise_scale"]) == (expected.pulls, expected.noise_scale)
    assert expected.noise_scale == pytest.approx(1 / (2.0 * expected.pulls))  # Lap(1/(eps n_r)): eps-DP per message
    xhat = population.explore_sums[0] / expected.pulls
    residual = ((core.coordinator.totals[0] / expected.pulls - xhat) * 2.0 * expected.pulls).ravel()
    assert stats.kstest(residual, "laplace").pvalue > 0.001
    assert np.all(core.message_hooks[0].epsilon_spent()[0] == 2.0)


def test_a_strict_epsilon_that_underflows_among_the_agents_is_refused():
    assert algorithm_epsilon(5e-324, "paper", 4) == 5e-324
    with pytest.raises(ValueError, match=r"divided among 4 agents .* is 0\.0"):
        algorithm_epsilon(5e-324, "strict", 4)


def test_without_noise_ybar_is_the_non_private_mean():
    population = CDPMAB(epsilon=None)
    core, _ = play(population, {"num_agents": 4, "num_arms": 5, "horizon": 4000, "instance_seed": 1})
    state = core.coordinator.states[0]
    assert state.completed >= 2
    assert np.allclose(core.coordinator.totals[0] / state.samples, population.explore_sums[0] / state.samples)


def test_each_epoch_mean_is_noised_once_under_partial_participation():
    """Every (agent, epoch) reaches the server once; y-bar covers epochs 1..r; N epsilon is charged per epoch."""
    env = {
        "num_agents": 10,
        "num_arms": 4,
        "horizon": 20000,
        "instance": [0.5, 0.47, 0.45, 0.4],
        "record_messages": True,
    }
    population = CDPMAB(participation=0.3)
    core, _ = play(population, env, wrappers=[laplace(3)])
    records = core.channel.ledger.records()
    uploads = records["kind"] == "upload"
    rounds = core.coordinator.states[0].completed
    assert rounds >= 3
    assert np.all(records["link_cost"][uploads] <= 1.0) and core.channel.ledger.cost[0] == 3 * rounds
    accountant = core.message_hooks[0].accountants[0]
    spent = core.message_hooks[0].epsilon_spent()[0]
    for agent in range(10):
        events = accountant.summary(agent)["num_events"]
        # at most one release per epoch (never re-noised), composed sequentially by the wrapper: N epsilon = 3 each
        assert events <= rounds and spent[agent] == pytest.approx(3.0 * events, rel=1e-12)


# --------------------------------------------------------------------------------------------- time line (5.5)
@pytest.mark.parametrize("instance_seed", [1, 6])  # 3 rounds then a commit; 3 rounds then a partial epoch
def test_slot_conservation_and_balanced_epochs(instance_seed):
    population = CDPMAB(epsilon=1.0)
    env = {"num_agents": 5, "num_arms": 6, "horizon": 6000, "instance_seed": instance_seed}
    core, arms = play(population, env)
    log = population.round_log[0]
    used = 0  # slots accounted for so far: sum over rounds of #I_{r-1} n_r + t_delay (t_delay = 0 for CDP)
    for row in log:
        assert row["explore_start"] == used
        explored = arms[row["explore_start"] : row["explore_end"] + 1, 0]
        if "end_slot" not in row:  # the partial epoch at the horizon
            assert row["explore_end"] >= 5999
            used += len(explored)
            break
        assert row["hops"] == 1 and row["delay"] == 0 and len(explored) == row["num_active"] * row["pulls"]
        for agent in range(5):
            counts = np.bincount(explored[:, agent], minlength=6)
            assert sorted(counts[counts > 0]) == [row["pulls"]] * row["num_active"]
        used += len(explored) + row["delay"]
    commit = arms[used:, 0]
    assert sum("end_slot" in row for row in log) == 3 and used + len(commit) == 6000
    if len(commit):
        assert population.states[0].commit >= 0 and np.all(commit == population.states[0].commit)


def test_cdp_cost_is_c1_n_rounds_and_rounds_at_most_r():
    env = {"num_agents": 50, "num_arms": 10, "horizon": 30000, "c1": 25.0, "instance_seed": 0}
    for p, per_round in ((1.0, 1250), (0.2, 250), (0.8, 1000)):
        results = run(lambda p=p: CDPMAB(participation=p, noise="agent"), env, [0, 1], checkpoints=3)
        for row in results.curves:
            assert row["cost"] == per_round * row["rounds_done"]
        assert results.curves[-1]["rounds_done"] >= 2
    capped = run(lambda: CDPMAB(rounds=2, delta_schedule_base=0.2, noise="agent"), env, [0], checkpoints=1)
    assert capped.curves[0]["rounds_done"] == 2 and capped.curves[0]["cost"] == 2 * 1250


# --------------------------------------------------------------------------------------------- GIS (5.7, 5.8, 5.10)
@pytest.mark.parametrize("first_hop_free", [True, False])
@pytest.mark.parametrize(("graph", "links", "diameter"), [("star", 98, 2), ("complete", 1225, 1), ("ring", 1250, 25)])
def test_gis_per_round_links_hops_and_deliveries(graph, links, diameter, first_hop_free):
    env = {"num_agents": 50, "num_arms": 3, "horizon": 2500, "topology": graph, "link_accounting": "graph_edges"}
    population = DDPMAB(first_hop_free=first_hop_free)
    core, _ = play(population, {**env, "instance_seed": 0})
    log = [row for row in population.round_log[0] if "end_slot" in row]
    ledger = core.channel.ledger
    # hops = d_G; t_delay = d_G - 1 with the free first hop (D9), d_G without it
    delay = diameter - 1 if first_hop_free else diameter
    assert len(log) >= 1 and all(row["hops"] == diameter and row["delay"] == delay for row in log)
    for row, following in zip(log, population.round_log[0][1:]):
        assert following["explore_start"] == row["explore_end"] + delay + 1  # the next epoch starts after t_delay
    assert ledger.links[0] == links * len(log) == ledger.link_cost[0]
    assert ledger.kind_messages["data"][0] == 50 * 49 * len(log)  # every vector delivered once per agent


def test_gis_hop_semantics_and_used_links_formula_on_a_random_graph():
    env = {"num_agents": 30, "num_arms": 3, "horizon": 2000, "topology": "erdos_renyi", "topology_seed": 4}
    topology = build_env(DDPMAB(), DDPMAB(), env)[0].unwrapped.core
    topology.reset([0])
    graph = topology.topologies[0]
    distance, eccentricity, edges = graph.distances(), graph.eccentricity(), graph.edges()

    checked = []

    def check(t, population, feedback):
        if population.phase[0] == COMMUNICATE:
            hop = population.round_hops[0] - 1
            assert np.array_equal(population.held[0], distance <= hop + 1)
            checked.append(hop)

    population = DDPMAB()
    core, _ = play(population, {**env, "instance_seed": 0}, on_step=check)
    d = graph.diameter()
    # checked after every hop but the last (the round is then over); hop 0 runs at the boundary of the epoch's end
    assert d >= 3 and set(checked) == set(range(0, d - 1))
    rounds = sum("end_slot" in row for row in population.round_log[0])
    per_hop = [
        np.sum((h == 0) | (np.maximum(eccentricity[edges[:, 0]], eccentricity[edges[:, 1]]) >= h)) for h in range(d)
    ]
    assert rounds >= 1 and core.channel.ledger.links[0] == rounds * sum(per_hop) <= rounds * d * len(edges)


# --------------------------------------------------------------------------------------------- SAC (5.7, Table II)
TABLE2_LAYOUTS = {  # sizes, graph, graph_edges per round, used_links per round (c1 = 50, c2 = 1)
    "case1": ([20] * 5, "complete", 1200, 345),
    "case2": ([53, 24, 10, 6, 7], "complete", 1985, 345),
    "case3": ([100], "complete", 5000, 149),
    "case5": ([20] * 5, "star", 345, 345),
    "case6": ([1] * 100, "complete", 5000, 5000),
}


@pytest.mark.parametrize("case", sorted(TABLE2_LAYOUTS))
def test_hybrid_per_round_costs_in_both_modes(case):
    sizes, graph, graph_edges, used_links = TABLE2_LAYOUTS[case]
    topology = hybrid_topology(100, sizes, graph)
    plan = find_sink_agents(topology)
    assert np.array_equal(plan.sinks, topology.sinks)
    env = {"num_agents": 100, "num_arms": 3, "horizon": 1500, "topology": topology, "c1": 50.0, "instance_seed": 0}
    for mode, per_round in (("graph_edges", graph_edges), ("used_links", used_links)):
        population = HDPMAB()
        core, _ = play(population, {**env, "link_accounting": mode})
        log = [row for row in population.round_log[0] if "end_slot" in row]
        # hops = max_q ecc_q(SA_q), and 1 for single-agent components (the sinks' upload is the round's only hop)
        hops = max(plan.hops.max(), 1)
        assert len(log) >= 1 and all(row["hops"] == hops and row["delay"] == plan.delay() for row in log)
        assert core.channel.ledger.cost[0] == per_round * len(log)
        forwards = core.channel.ledger.kind_messages.get("forward", np.zeros(1))[0]
        assert forwards == plan.depth.sum() * len(log)  # payload-hops = sum_i sd(i, SA_q) (App. F)


def test_find_sink_agents_on_random_components():
    topology = hybrid_topology(40, [20, 20], "erdos_renyi", np.random.default_rng(3))
    plan = find_sink_agents(topology)
    eccentricity = topology.eccentricity()
    for members, sink, hops in zip(plan.components, plan.sinks, plan.hops):
        assert sink == members[np.argmin(eccentricity[members])]  # the lowest-id centre (D20)
        assert hops == eccentricity[sink] == plan.depth[members].max()
    assert plan.delay() == max(plan.hops.max() - 1, 0) and plan.delay(first_hop_free=False) == plan.hops.max()
    for agent in range(40):
        if plan.parent[agent] >= 0:
            assert plan.depth[plan.parent[agent]] == plan.depth[agent] - 1


# --------------------------------------------------------------------------------------------- CRN identities (5.9)
CRN = {"num_agents": 10, "num_arms": 8, "horizon": 8000, "instance_seed": 4, "reward_tape": True, "c1": 1.0}
KEYS = ("group_regret", "cost", "epsilon_max", "rounds_done")


def curves(results, keys=KEYS):
    return [tuple(row[k] for k in keys) for row in results.curves]


def test_ddp_on_complete_graph_equals_cdp():
    seeds, checkpoints = [0, 1, 2], list(range(500, 8001, 500))
    cdp = run(lambda: CDPMAB(noise="agent"), CRN, seeds, checkpoints, wrappers=[laplace(10)])
    ddp = run(DDPMAB, {**CRN, "topology": "complete"}, seeds, checkpoints, wrappers=[laplace(10)])
    assert curves(cdp, ("group_regret", "epsilon_max", "rounds_done")) == curves(
        ddp, ("group_regret", "epsilon_max", "rounds_done")
    )
    assert cdp.curves[-1]["rounds_done"] >= 3


def server_estimates(population, env_kwargs, seed):
    """The server's noisy arm estimates after every round of one run (copies, in order)."""
    rounds = []

    def record(t, population, feedback):
        values = population.states[0].values
        if values is not None and (not rounds or not np.array_equal(values, rounds[-1])):
            rounds.append(values.copy())

    play(population, env_kwargs, [seed], [laplace(10)], on_step=record)
    return rounds


def test_hybrid_case6_equals_cdp_bit_for_bit():
    """Table II case 6 (every agent its own sink) is CDP-MAB, under the same noise by construction.

    The agents draw the Laplace noise themselves (``noise="agent"``: the engine's per-replica stream, one draw per
    agent and epoch in the same order in both protocols; the wrapper only accounts), so the server's noisy
    estimates, the eliminations, regret, cost and privacy agree bit for bit. Wrapper noise would not do: its
    streams are keyed by message kind (``upload`` vs ``sink_upload``), so the server's estimates differ (by up
    to 2.3e-3 on seed 0 here) and only the elimination outcomes could coincide.
    """
    seeds, checkpoints = [0, 1, 2], list(range(500, 8001, 500))
    hybrid = {**CRN, "topology": hybrid_topology(10, [1] * 10)}
    cdp = run(lambda: CDPMAB(noise="agent"), CRN, seeds, checkpoints, wrappers=[laplace(10)])
    hdp = run(lambda: HDPMAB(noise="agent"), hybrid, seeds, checkpoints, wrappers=[laplace(10)])
    assert curves(cdp) == curves(hdp)
    assert [(r["seed"], r["agent"], r["regret"]) for r in cdp.agents] == [
        (r["seed"], r["agent"], r["regret"]) for r in hdp.agents
    ]
    assert cdp.curves[-1]["rounds_done"] >= 3 and cdp.curves[-1]["epsilon_max"] > 0
    for seed in seeds:
        central = server_estimates(CDPMAB(noise="agent"), CRN, seed)
        hybrid_rounds = server_estimates(HDPMAB(noise="agent"), hybrid, seed)
        assert len(central) >= 3 and len(central) == len(hybrid_rounds)
        assert all(np.array_equal(a, b) for a, b in zip(central, hybrid_rounds))


def test_one_component_hybrid_equals_ddp_on_the_complete_graph():
    """§5 item 9: HDP with one complete component (Q = 1) is DDP on the complete graph, run by run.

    Both draw the Laplace noise in the engine (``noise="agent"``, DDP's only mode), so the noise is the same by
    construction; regret, rounds, delay and privacy spent agree bit for bit at every checkpoint.
    """
    seeds, checkpoints = [0, 1, 2], list(range(500, 8001, 500))
    keys = ("group_regret", "rounds_done", "delay_slots", "epsilon_max")
    hybrid = {**CRN, "topology": hybrid_topology(10, [10])}
    hdp = run(lambda: HDPMAB(noise="agent"), hybrid, seeds, checkpoints, wrappers=[laplace(10)])
    ddp = run(DDPMAB, {**CRN, "topology": "complete"}, seeds, checkpoints, wrappers=[laplace(10)])
    assert curves(hdp, keys) == curves(ddp, keys)
    assert hdp.curves[-1]["rounds_done"] >= 3


@pytest.mark.parametrize(
    ("sizes", "graph"), [([5, 5], "complete"), ([6, 3, 1], "complete"), ([10], "complete"), ([5, 5], "star")]
)
def test_zero_delay_hybrid_cases_equal_cdp(sizes, graph):
    """RC-Y4: Table II's cases 1, 2, 3 and 5 (every component one hop from its sink) have t_delay = 0 and the
    weighted aggregate of CDP, so their regret trajectories equal CDP-MAB's (1e-9 relative)."""
    seeds, checkpoints = [0, 1, 2], list(range(500, 8001, 500))
    cdp = run(CDPMAB, CRN, seeds, checkpoints, wrappers=[laplace(10)])
    hdp = run(
        HDPMAB, {**CRN, "topology": hybrid_topology(10, sizes, graph)}, seeds, checkpoints, wrappers=[laplace(10)]
    )
    keys = ("group_regret", "rounds_done", "delay_slots")
    for a, b in zip(curves(cdp, keys), curves(hdp, keys)):
        assert a[0] == pytest.approx(b[0], rel=1e-9) and a[1:] == b[1:]
    assert cdp.curves[-1]["rounds_done"] >= 3 and cdp.curves[-1]["delay_slots"] == 0


@pytest.mark.parametrize("first_hop_free", [True, False])
def test_one_hop_structures_delay_like_cdp(first_hop_free):
    """HDP with one complete component (the sink uploads in the hop's boundary) and DDP on the complete graph
    take one hop per round, like CDP: no delay with the free first hop (D9), one slot without it."""
    kwargs = {"first_hop_free": first_hop_free}
    rows = [
        run(lambda: HDPMAB(**kwargs), {**CRN, "topology": hybrid_topology(10, [10])}, [0], checkpoints=1).curves[0],
        run(lambda: DDPMAB(**kwargs), {**CRN, "topology": "complete"}, [0], checkpoints=1).curves[0],
        run(lambda: CDPMAB(**kwargs), CRN, [0], checkpoints=1).curves[0],
    ]
    rounds = rows[0]["rounds_done"]
    assert rounds >= 3 and all(row["rounds_done"] == rounds for row in rows)
    assert all(row["delay_slots"] == (0 if first_hop_free else rounds) for row in rows)


# --------------------------------------------------------------------------------------------- batched == PettingZoo
SMALL = {"num_agents": 6, "num_arms": 5, "horizon": 2500, "instance_seed": 2}
ALGORITHMS_UNDER_TEST = [
    ("cdp", CDPMAB, "server", 6),
    ("cdp_partial_wrapper", lambda: CDPMAB(participation=0.5), "server", 3),
    ("cdp_partial_agent", lambda: CDPMAB(participation=0.5, noise="agent"), "server", 3),
    ("ddp_ring", DDPMAB, "ring", 6),
    ("hdp", HDPMAB, hybrid_topology(6, [1, 2, 3], "path"), 6),
    ("single", SingleMAB, "server", 6),
    ("structure_hybrid", LiSongMAB, hybrid_topology(6, [3, 3], "star"), 6),
]


@pytest.mark.parametrize(("name", "factory", "topology", "n_agg"), ALGORITHMS_UNDER_TEST)
@pytest.mark.parametrize("private", [False, True])
def test_batched_replica_equals_pettingzoo_run(name, factory, topology, n_agg, private):
    env = {**SMALL, "topology": topology}
    wrappers = [laplace(n_agg)] if private else []
    checkpoints = list(range(100, 2501, 100))
    keys = ("group_regret", "messages", "copies", "bytes", "links", "cost", "rounds_done", "delay_slots")
    batched = run(factory, env, [3, 4], checkpoints, batched=True, wrappers=wrappers)
    single = run(factory, env, [4], checkpoints, batched=False, wrappers=wrappers)
    got = [tuple(r[k] for k in keys) for r in batched.curves if r["seed"] == 4]
    assert got == [tuple(r[k] for k in keys) for r in single.curves]
    if private:
        assert [r["epsilon_max"] for r in batched.curves if r["seed"] == 4] == [r["epsilon_max"] for r in single.curves]
    assert single.curves[-1]["rounds_done"] >= 1


# --------------------------------------------------------------------------------------------- registration, view
def test_registered_algorithms_and_scenarios():
    assert isinstance(make_algorithm("cdp_mab"), CDPMAB)
    assert isinstance(make_algorithm("ddp_mab"), DDPMAB)
    assert isinstance(make_algorithm("hdp_mab"), HDPMAB)
    assert {"cdp_mab", "ddp_mab", "hdp_mab"} <= set(registered_algorithms("mab"))
    expected = {
        "fig4_epsilon",
        "fig5_participation",
        "fig6_rounds",
        "fig7_tradeoff",
        "fig8_heterogeneous",
        "fig9_graphs5",
        "fig10_graphs",
        "fig11_hybrid",
        "fig12_heterogeneous_structures",
        "table1_graph_costs",
        "table2_used_links",
    }
    assert {f"li_song/{name}" for name in expected} <= set(names())


def test_federated_client_view_with_cdp_peers():
    env = FederatedClientEnv(num_agents=4, num_arms=5, horizon=800, peer_algorithm="cdp_mab", instance_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)
    observation, _ = env.reset(seed=2)
    assert not observation[-10:].any()  # no pooled statistics before the first round
    rng = np.random.default_rng(0)
    for _ in range(800):
        observation, reward, terminated, truncated, info = env.step(int(rng.integers(5)))
    assert truncated and not terminated
    assert env.coordinator.states[0].completed >= 1  # the peers' rounds complete although client 0 plays randomly
    assert observation[-10:].any() and info["messages_sent"] == env.coordinator.states[0].completed


# --------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("p", [0.0, -0.1, 1.5])
def test_bad_participation(p):
    with pytest.raises(ValueError, match="participation"):
        CDPMAB(participation=p)


@pytest.mark.parametrize("rounds", [0, -2])
def test_bad_round_cap(rounds):
    with pytest.raises(ValueError, match="rounds"):
        CDPMAB(rounds=rounds)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.inf, math.nan])
def test_bad_epsilon(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        DDPMAB(epsilon=epsilon)


def test_disconnected_graph_for_ddp():
    adjacency = ring(4).adjacency.copy()
    disconnected = np.zeros((8, 8), bool)
    disconnected[:4, :4] = disconnected[4:, 4:] = adjacency
    with pytest.raises(ValueError, match="connected agent graph"):
        run(DDPMAB, {"num_agents": 8, "num_arms": 3, "horizon": 10, "topology": from_adjacency(disconnected)}, [0])


def test_hybrid_components_must_cover_the_agents():
    with pytest.raises(ValueError, match="cover the 10 agents exactly once"):
        hybrid_topology(10, [3, 3])
    with pytest.raises(ValueError, match="repeated"):
        hybrid_topology(4, [[0, 1], [1, 2, 3]])
    with pytest.raises(TypeError, match="all sizes or all agent lists"):
        hybrid_topology(4, [2, [2, 3]])
    with pytest.raises(ValueError, match="one sink"):
        run(HDPMAB, {"num_agents": 6, "num_arms": 3, "horizon": 10, "topology": "ring"}, [0])


def test_other_bad_configurations():
    with pytest.raises(ValueError, match="server"):
        run(CDPMAB, {"num_agents": 4, "num_arms": 3, "horizon": 10, "topology": "ring"}, [0])
    with pytest.raises(ValueError, match="oracle"):  # the plain runner cannot resolve Delta (D6)
        plain_run(lambda: CDPMAB(rounds=3), {"num_agents": 4, "num_arms": 3, "horizon": 10}, [0])
    with pytest.raises(ValueError, match="instance_seed"):
        run(lambda: CDPMAB(rounds=3), {"num_agents": 4, "num_arms": 3, "horizon": 10}, [0, 1])
    with pytest.raises(ValueError, match="n_agg"):
        run(CDPMAB, {"num_agents": 4, "num_arms": 3, "horizon": 10}, [0], wrappers=[laplace(2)])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        run(CDPMAB, {"num_agents": 2, "num_arms": 3, "horizon": 10, "reward_model": "gaussian"}, [0])
    with pytest.raises(ValueError, match="after_cap"):
        CDPMAB(after_cap="never")
    with pytest.raises(ValueError, match="delta_schedule_base"):
        CDPMAB(rounds=2, delta_schedule_base=1.5)


# --------------------------------------------------------------------------------------------- bound shapes (5.16)
def test_theorem_bound_shapes_spot_values():
    """§5 item 16: the O(.) shapes of Theorems 1-4 with unit constants, checked by hand at K = 3, T = 100, M = 4.

    log(K T log T) = log(1381.55) = 7.23096; Theorem 1: max{7.23096 (1/0.5 + 1/0.25), 3 log(100) sqrt(7.23096) /
    (2 eps)} = max{43.386, 18.575 / eps}. Theorem 2 (R = 2, p = 0.5): min{4, 100 / 0.5^1.5} max{log(1200) 6,
    2 sqrt(log 1200) / 2} = 4 x 42.540.
    """
    gaps = [0.0, 0.5, 0.25]
    assert bounds.cdp_regret_shape(gaps, 100, 4, 1.0) == pytest.approx(43.38577, rel=1e-6)
    assert bounds.cdp_regret_shape(gaps, 100, 4, 0.1) == pytest.approx(185.75264, rel=1e-6)
    grid = bounds.cdp_regret_shape(gaps, np.array([100.0, 1000.0]), 4, np.array([[1.0], [0.1]]))
    assert grid.shape == (2, 2) and grid[0, 0] == pytest.approx(43.38577, rel=1e-6)
    assert bounds.constrained_cdp_regret_shape(gaps, 100, 4, 1.0, 0.5, 2) == pytest.approx(170.16184, rel=1e-6)
    assert bounds.ddp_regret_shape(gaps, 100, 4, 1.0, diameter=3) == pytest.approx(43.38577 + 4 * 2, rel=1e-6)
    assert bounds.hdp_regret_shape(gaps, 100, 4, 1.0, [1, 3, 2]) == pytest.approx(43.38577 + 4 * 2, rel=1e-6)
    costs = bounds.cost_shapes(
        100, 4, c1=25, c2=1, diameter=2, degrees=[3] * 4, component_diameters=[1, 2], num_components=2
    )
    log_t = np.log(100)
    assert costs["cdp"] == pytest.approx(100 * log_t) and costs["ddp"] == pytest.approx(12 * log_t)
    assert costs["hdp"] == pytest.approx(58 * log_t)
    with pytest.raises(ValueError, match="at least one positive"):
        bounds.cdp_regret_shape([0.0, 0.0], 100, 4, 1.0)
    with pytest.raises(ValueError, match="participation must be in"):
        bounds.constrained_cdp_regret_shape(gaps, 100, 4, 1.0, 0.0, 2)


def test_bind_refuses_a_wrapper_epsilon_without_its_calibration():
    with pytest.raises(ValueError, match="calibration with its epsilon"):
        CDPMAB(noise="wrapper").bind(num_agents=4, epsilon=1.0)
