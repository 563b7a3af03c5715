"""Gossip_UCB and Fed_UCB (spec zhu-gossip-ucb): exact identities, messages, privacy, data, RC-checks at CI scale.

The λ₂ table of spec §5.2 (complete, ring, path, star at N = 3, 5, 10) and the properties of W-bar (T2) are tested
in tests/test_topology.py (``test_lambda2_uniform_edge_table``, ``test_gossip_matrix_properties``); here the gossip
matrices are the ones the channel and the agents realise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from agents.zhu import FedUCB, GossipUCB, default_alpha1, dp_bonus, gossip_bonus
from fedbandit_envs import topology as topo
from fedbandit_envs.bench.catalogue.zhu import (
    CI_DP_BONUS_SCALE,
    SCENARIOS,
    diabetes_scenario,
    run_main_rounds,
    run_scenario,
    zhu_checkpoints,
    zhu_instance,
)
from fedbandit_envs.channel import Channel, ChannelConfig
from fedbandit_envs.core import Step
from fedbandit_envs.data import (
    ARM_DRUGS,
    diabetes_means,
    load_diabetes_csv,
    standin_means,
    synthetic_diabetes_columns,
    write_diabetes_csv,
)
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.instances import BanditInstance
from fedbandit_envs.metrics import summarize
from fedbandit_envs.privacy.mechanisms import dyadic_blocks
from fedbandit_envs.run import run
from wrappers.dp import LaplaceMessageDP

# N = 4 agents on a ring (|E| = 4), M = 3 arms, Gaussian observations: small enough for step-by-step checks.
SMALL = {
    "num_agents": 4,
    "num_arms": 3,
    "horizon": 303,
    "topology": "ring",
    "gossip": "uniform_edge",
    "reward_model": "gaussian",
    "instance": "heterogeneous",
    "instance_seed": 1,
}


def drive(population, env_kwargs: dict, seeds: list[int], callback: Callable | None = None, wrap=None):
    """Play the population on the batched core (the loop of run_batched); call ``callback(slot, pop, fb, core)``."""
    env = FederatedMAB(**env_kwargs)
    if wrap is not None:
        env = wrap(env)
    core = env.unwrapped.core
    feedback = core.reset(seeds, hooks=env.message_hooks())
    population.reset(core.context)
    arms = []
    for slot in range(core.config.horizon):
        feedback = core.play(population.act(core.current_step()))
        population.observe(feedback)
        arms.append(feedback.arms.copy())
        if callback is not None:
            callback(slot, population, feedback, core)
    return core, np.stack(arms)


def trajectory(population, env_kwargs: dict, seeds: list[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Arms of every slot and ϑ after every slot."""
    thetas: list[np.ndarray] = []
    _, arms = drive(population, env_kwargs, seeds, lambda s, p, f, c: thetas.append(p.theta.copy()))
    return arms, thetas


# ------------------------------------------------------------------------------------------- exact identities
def test_fed_ucb_with_infinite_epsilon_is_gossip_ucb_bit_for_bit() -> None:
    # T11 / RC1: same actions, same ϑ (exact equality) and the same messages on the ledger.
    seeds = [3, 4, 5]
    gossip = GossipUCB()
    fed = FedUCB(epsilon=math.inf)
    arms_g, theta_g = trajectory(gossip, SMALL, seeds)
    arms_f, theta_f = trajectory(fed, SMALL, seeds)
    np.testing.assert_array_equal(arms_g, arms_f)
    assert all(np.array_equal(a, b) for a, b in zip(theta_g, theta_f))
    assert not fed._trees.noise_draws.any()  # ε = ∞: zero draws (T8)
    assert fed._message_privacy() is None  # no privacy claimed without noise


def test_trajectories_do_not_depend_on_alpha1() -> None:
    # T10: α₁ in {0, 64/N^17, 64N/17} gives identical trajectories.
    n = SMALL["num_agents"]
    runs = [trajectory(GossipUCB(alpha1=a), SMALL, [7]) for a in (0.0, default_alpha1(n), 64 * n / 17)]
    for arms, thetas in runs[1:]:
        np.testing.assert_array_equal(arms, runs[0][0])
        assert all(np.array_equal(a, b) for a, b in zip(thetas, runs[0][1]))


def test_reported_indices_add_alpha1() -> None:
    # α₁ enters only the reported index (spec §2.3): equal states, indices shifted by exactly the α₁ difference.
    low, high = GossipUCB(alpha1=0.0), GossipUCB(alpha1=1.5)
    for population in (low, high):
        drive(population, {**SMALL, "horizon": 40}, [1])
    np.testing.assert_allclose(high.indices(37) - low.indices(37), 1.5, rtol=0, atol=1e-12)
    expected = low.theta + np.sqrt(2 * SMALL["num_agents"] * math.log(37) / low.counts)
    np.testing.assert_allclose(low.indices(37), expected, rtol=1e-15)
    with pytest.raises(ValueError, match="main round"):
        low.indices(0)


@pytest.mark.parametrize(
    ("population", "activation"),
    [
        (GossipUCB(), "uniform_edge"),
        (GossipUCB(), "node_then_neighbour"),
        (FedUCB(epsilon=1.0), "uniform_edge"),
        (FedUCB(epsilon=2.0, profile="paper_literal"), "uniform_edge"),
    ],
    ids=["gossip", "gossip_node_then_neighbour", "fed_strict", "fed_paper_literal"],
)
def test_sum_of_theta_equals_sum_of_local_means_and_invariants(population, activation: str) -> None:
    # T3 at every slot (also with the noisy means of Fed_UCB), T7 (Σ_k n = M + t), T5 (Lemma 2), T6 (Lemma 3).
    # T5 uses the stricter pre-pull count n⁻(t) = n(t-1) against ñ(t+1), computed in the act of round t.
    n, m = SMALL["num_agents"], SMALL["num_arms"]
    worst, previous = [], {}

    def check(slot, pop, feedback, core):
        est = pop.estimates()
        pre_pull, previous["counts"] = previous.get("counts"), est["counts"]
        if slot < m:
            return
        t = slot - m + 1
        gap = np.abs(est["theta"].sum(axis=1) - est["means"].sum(axis=1))
        worst.append(gap.max() / max(1.0, np.abs(est["means"]).max()))
        np.testing.assert_array_equal(est["counts"].sum(axis=2), m + t)
        assert np.all(pre_pull > est["max_counts"] - 3 * m * n)
        spread = est["counts"].max(axis=1) - est["counts"].min(axis=1)
        assert np.all(spread < (3 * m + 1) * n)

    drive(population, {**SMALL, "gossip": activation}, [0, 1], check)
    assert max(worst) < 1e-12  # measured: about 1e-15 (round-off only)


def test_gossip_update_is_the_pairwise_averaging_matrix() -> None:
    # T1, realised by the agents: ϑ(t) = W(t) ϑ(t-1) + (X̃(t) - X̃(t-1)), W(t) = I - ½ (e_i - e_j)(e_i - e_j)ᵀ for the
    # announced edge; W(t) is symmetric, doubly stochastic, idempotent, with spectrum {0, 1, ..., 1}.
    n, m = SMALL["num_agents"], SMALL["num_arms"]
    state = {"partners": None, "theta": None, "means": None}
    checked = [0]

    def check(slot, pop, feedback, core):
        if slot >= m:
            for b in range(feedback.arms.shape[0]):
                (i, j) = np.flatnonzero(state["partners"][b] >= 0)
                e = np.zeros(n)
                e[i], e[j] = 1.0, -1.0
                w = np.eye(n) - 0.5 * np.outer(e, e)
                np.testing.assert_array_equal(w, w.T)
                np.testing.assert_allclose(w.sum(axis=0), 1.0, atol=0)
                np.testing.assert_array_equal(w @ w, w)
                np.testing.assert_allclose(np.linalg.eigvalsh(w), [0.0] + [1.0] * (n - 1), atol=1e-12)
                expected = w @ state["theta"][b] + (pop.means[b] - state["means"][b])
                np.testing.assert_allclose(pop.theta[b], expected, rtol=0, atol=1e-14)
                checked[0] += 1
        state.update(partners=feedback.partners.copy(), theta=pop.theta.copy(), means=pop.means.copy())

    drive(GossipUCB(), SMALL, [2, 3], check)
    assert checked[0] == 2 * (SMALL["horizon"] - m)


@pytest.mark.parametrize("activation", ["uniform_edge", "node_then_neighbour"])
@pytest.mark.statistical
def test_mean_of_channel_gossip_matrices_is_w_bar(activation: str) -> None:
    # S1: the mean of W(t) over 10^5 channel draws equals W-bar (max-entry error < 0.01). Each entry is a mean of
    # 10^5 values in [0, 1]; its standard error is below 0.0016, so 0.01 is more than 6 standard errors.
    replicas, draws, graph = 1000, 100, topo.path(5)
    channel = Channel(ChannelConfig(gossip=activation))
    channel.reset([graph] * replicas, [np.random.default_rng(s) for s in range(replicas)])
    n = graph.num_agents
    removed = np.zeros((n, n))  # sum over draws of ½ (e_i - e_j)(e_i - e_j)ᵀ
    for _ in range(draws):
        partners = channel.sample_gossip_partners()
        for i, j in np.nonzero(partners >= 0)[1].reshape(-1, 2):
            removed[[i, j], [i, j]] += 0.5
            removed[[i, j], [j, i]] -= 0.5
    mean = np.eye(n) - removed / (replicas * draws)
    assert np.abs(mean - graph.gossip_matrix(activation)).max() < 0.01


@pytest.mark.parametrize("graph", [topo.path(5), topo.ring(6), topo.star(5)], ids=["P5", "C6", "S5"])
@pytest.mark.statistical
def test_randomized_gossip_contracts_at_rate_lambda_2(graph) -> None:
    # S2 (Boyd et al.): pure pairwise averaging over uniformly drawn edges (the agents' update with no bandit
    # increment, checked exactly above) gives E||x(t) - x̄1||² <= λ₂^t ||x(0) - x̄1||² for t <= 30, with 2·10^4
    # Monte-Carlo paths and a 5 % tolerance; Σ_i x_i is preserved. Measured worst ratio (MC mean / bound): 0.73-0.99.
    rng = np.random.default_rng(11)
    paths, n = 20_000, graph.num_agents
    edges = graph.edges()
    x = np.tile(rng.normal(size=n), (paths, 1))
    total, start = x.sum(axis=1), ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1).mean()
    lam = graph.lambda_2()
    rows = np.arange(paths)
    for t in range(1, 31):
        i, j = edges[rng.integers(len(edges), size=paths)].T
        avg = (x[rows, i] + x[rows, j]) / 2
        x[rows, i] = avg
        x[rows, j] = avg
        error = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1).mean()
        assert error <= 1.05 * lam**t * start
    np.testing.assert_allclose(x.sum(axis=1), total, rtol=0, atol=1e-12)


def binary_tree(num_agents: int) -> topo.Topology:
    """The heap-shaped binary tree on ``num_agents`` agents (parent of i is (i - 1) // 2)."""
    adjacency = np.zeros((num_agents, num_agents), bool)
    for child in range(1, num_agents):
        adjacency[child, (child - 1) // 2] = adjacency[(child - 1) // 2, child] = True
    return topo.from_adjacency(adjacency, name="binary_tree")


@pytest.mark.parametrize(
    "graph", [topo.path(6), topo.ring(6), topo.star(6), binary_tree(6)], ids=["path", "cycle", "star", "tree"]
)
def test_lemma_1_information_propagation(graph) -> None:
    # T4 on the agents' own ñ: ñ_{i,k}(t+1) = max_h n⁻_{h,k}(t - d_{h,i}); n⁻(s) = n(s - 1), n(s) = 1 for s <= 0.
    env = {**SMALL, "num_agents": 6, "topology": graph, "horizon": 123}
    m = env["num_arms"]
    history: list[np.ndarray] = []  # n after warm-up (index 0) and after each round
    ntil: list[np.ndarray] = []

    def record(slot, pop, feedback, core):
        if slot == m - 1:
            history.append(pop.counts[0].copy())
        elif slot >= m:
            ntil.append(pop.max_counts[0].copy())  # ñ(t+1), computed in round t
            history.append(pop.counts[0].copy())

    drive(GossipUCB(), env, [4], record)
    distances = graph.distances()
    assert distances.max() >= 2  # information takes several rounds to cross the graph
    for t in range(1, len(ntil) + 1):
        expected = [np.max([history[max(t - 1 - distances[h, i], 0)][h] for h in range(6)], axis=0) for i in range(6)]
        np.testing.assert_array_equal(ntil[t - 1], expected)


# ------------------------------------------------------------------------------------------- confidence bounds
def test_confidence_bound_reference_values() -> None:
    # T9 (N = 3, α₁ = 64/3^17): C(n=10, t=100); C̃ with n=100, t=1000, T=10^4, ε=1 in both profiles.
    a1 = default_alpha1(3)
    assert a1 == pytest.approx(4.9559e-7, rel=1e-4)
    assert gossip_bonus(3, math.log(100), np.array(10.0)) + a1 == pytest.approx(1.662259, abs=1e-6)
    literal = 1.0 / math.log(1e4)  # ε′ = ε / ln T
    strict = 1.0 / 14  # ε′ = ε / (floor(log2(10001)) + 1)
    lt = math.log(1000)
    assert dp_bonus(3, lt, np.array(100.0), literal, log_n_floor=False) + a1 == pytest.approx(65.538676, abs=1e-5)
    assert dp_bonus(3, lt, np.array(100.0), strict) + a1 == pytest.approx(99.618072, abs=1e-5)
    assert dp_bonus(3, lt, np.array(1.0), strict) + a1 == pytest.approx(4642.016012, abs=1e-5)
    assert dp_bonus(3, lt, np.array(2.0), strict) + a1 == pytest.approx(2321.010239, abs=1e-5)
    # the D12 pitfall of the literal formula: n = 1 gets a smaller bonus than n = 2. At n = 1, ln n = 0 and the bound
    # is sqrt(2·3·ln 1000) = sqrt(41.446532) = 6.437898 (the spec prints 6.437880, a typo of its own formula).
    assert dp_bonus(3, lt, np.array(1.0), literal, log_n_floor=False) + a1 == pytest.approx(6.437898, abs=1e-6)
    assert dp_bonus(3, lt, np.array(2.0), literal, log_n_floor=False) == pytest.approx(1271.27, abs=0.01)
    # C̃ >= C, and C̃ -> C as ε -> ∞
    counts = np.arange(1.0, 50.0)
    for eps_prime in (0.1, 1.0, 10.0):
        assert np.all(dp_bonus(3, lt, counts, eps_prime) >= gossip_bonus(3, lt, counts))
    np.testing.assert_allclose(dp_bonus(3, lt, counts, 1e9), gossip_bonus(3, lt, counts), rtol=1e-12)


def test_fed_ucb_uses_the_trees_epsilon_prime() -> None:
    horizon = 10_000
    env = {**SMALL, "num_agents": 3, "topology": "complete", "horizon": horizon + 3}
    strict, literal = FedUCB(epsilon=1.0), FedUCB(epsilon=1.0, profile="paper_literal")
    core = FederatedMAB(**env).core
    core.reset([0])
    strict.reset(core.context)
    literal.reset(core.context)
    assert strict.eps_prime == pytest.approx(1 / 14)  # L = floor(log2(T + 1)) + 1 = 14 (D10)
    assert literal.eps_prime == pytest.approx(1 / math.log(horizon))  # ε / ln T
    assert strict.privacy_report()["epsilon_guaranteed"] == pytest.approx(1.0)
    # paper-literal: stream of T records (raw init), 14 levels of ε′ = 1/ln T: about 1.52 ε
    assert literal.privacy_report()["epsilon_guaranteed"] == pytest.approx(14 / math.log(horizon))


# ------------------------------------------------------------------------------------------- tree mechanism
def test_fed_ucb_means_are_tree_noisy_prefix_sums() -> None:
    # T8 as used by Fed_UCB: each (agent, arm) tree holds s = t + 1 records up to its last pull (init at s = 1);
    # X̃ = (exact prefix + noises of the prefix's dyadic blocks) / n; only blocks holding an observation are noised
    # (D13); the exact sum equals S.
    n, m = SMALL["num_agents"], SMALL["num_arms"]
    pulls: list[np.ndarray] = []
    fed = FedUCB(epsilon=1.0, clip_for_dp=(-3.0, 3.0))
    drive(fed, SMALL, [5], lambda s, p, f, c: pulls.append(f.arms[0].copy()))
    pulls_arr = np.stack(pulls)  # (slots, N); stream index of slot s >= m is s - m + 2, warm-up pulls are s = 1
    trees = fed._trees
    assert trees.levels == (SMALL["horizon"] - m + 1).bit_length()
    for i in range(n):
        for k in range(m):
            tree = i * m + k  # replica 0
            count = int(trees.counts[tree])
            slots = np.flatnonzero(pulls_arr[m:, i] == k)
            observed = {1, *(slots + 2).tolist()}
            assert count == max(observed)
            assert trees.exact_sums[tree] == fed.sums[0, i, k]
            noises = trees.node_noises(tree)
            noisy = trees.noisy_sums[tree]
            assert noisy - trees.exact_sums[tree] == pytest.approx(sum(noises.values()), abs=1e-12)
            assert fed.means[0, i, k] == noisy / fed.counts[0, i, k]
            blocks = dyadic_blocks(count)
            assert len(blocks) == bin(count).count("1") <= count.bit_length()
            for first, last in noises:
                assert (first, last) in blocks
                assert any(first <= s <= last for s in observed)  # D13: no noise on empty blocks
            # every block holding an observation is noised (D13), so the noise is that of the whole decomposition
            assert set(noises) == {block for block in blocks if any(block[0] <= s <= block[1] for s in observed)}


def test_dp_init_noised_or_raw() -> None:
    # D11: the strict profile noises X(0) (stream index 1); paper-literal sends the raw first sample.
    m = SMALL["num_arms"]
    init = {}

    def grab(name):
        def callback(slot, pop, feedback, core):
            if slot == m - 1:
                init[name] = (pop.means.copy(), pop.sums.copy())

        return callback

    drive(FedUCB(epsilon=1.0), {**SMALL, "horizon": 10}, [1], grab("strict"))
    drive(FedUCB(epsilon=1.0, profile="paper_literal"), {**SMALL, "horizon": 10}, [1], grab("raw"))
    means, sums = init["raw"]
    np.testing.assert_array_equal(means, sums)
    means, sums = init["strict"]
    np.testing.assert_array_equal(init["strict"][1], init["raw"][1])  # same observations
    assert np.all(means != sums)  # every init mean carries its s = 1 noise


# ------------------------------------------------------------------------------------------- messages and ledger
@pytest.mark.parametrize("population", [GossipUCB(), FedUCB(epsilon=1.0)], ids=["gossip", "fed"])
def test_ledger_counts_two_theta_and_two_e_counts_per_round(population) -> None:
    # §2.6 from the ledger: per main round 2 theta (2M float64) and 2|E| counts (2|E|M int64); warm-up sends nothing.
    env = {**SMALL, "num_agents": 5, "num_arms": 4, "horizon": 64, "record_messages": True}
    n, m, num_edges = 5, 4, 5
    dtypes = {}

    def grab(slot, pop, feedback, core):
        dtypes.update({b.kind: next(iter(b.payload.values())).dtype for b in feedback.inbox})

    core, _ = drive(population, env, [9], grab)
    records = core.channel.ledger.records()
    rounds = env["horizon"] - m
    for slot in range(env["horizon"]):
        here = records["slot"] == slot
        kinds = records["kind"][here]
        if slot < m:
            assert not here.any()
            continue
        assert (kinds == "theta").sum() == 2 and (kinds == "counts").sum() == 2 * num_edges
        assert np.all(records["scalars"][here] == m) and np.all(records["bytes"][here] == 8 * m)
        pair = records["sender"][here][kinds == "theta"]
        assert sorted(pair) == sorted(records["recipient"][here][kinds == "theta"])
    ledger = core.channel.ledger
    assert ledger.kind_messages["theta"][0] == 2 * rounds
    assert ledger.kind_messages["counts"][0] == 2 * num_edges * rounds
    assert ledger.kind_bytes["theta"][0] == 2 * m * rounds * 8
    assert ledger.kind_bytes["counts"][0] == 2 * num_edges * m * rounds * 8
    assert ledger.scalars[0] == (2 + 2 * num_edges) * m * rounds
    assert dtypes == {"theta": np.float64, "counts": np.int64}
    assert n == env["num_agents"]


def test_counts_over_the_gossip_edge_only() -> None:
    # D6 option: ñ only over the active edge -> 2 counts and 2 theta per round.
    core, _ = drive(GossipUCB(count_sync="gossip_edge_only"), SMALL, [2])
    rounds = SMALL["horizon"] - SMALL["num_arms"]
    assert core.channel.ledger.kind_messages["counts"][0] == 2 * rounds
    assert core.channel.ledger.kind_messages["theta"][0] == 2 * rounds


@pytest.mark.parametrize("count_sync", ["neighbours", "gossip_edge_only"])
def test_max_counts_follow_the_delivered_counts_when_copies_drop(count_sync: str) -> None:
    # ñ(t+1) = max(n⁻(t), ñ_j received so far): rebuilt here from every delivered ``counts`` copy; drops and jitter
    # change which copies arrive, so the inbox header changes from slot to slot.
    n, m = SMALL["num_agents"], SMALL["num_arms"]
    env = {**SMALL, "drop_prob": 0.3, "latency_jitter": 1, "horizon": 120}
    received = np.ones((2, n, n, m))  # [b, i, j]: the largest ñ_j agent i has received
    expected = {}
    checked = [0]

    def check(slot, pop, feedback, core):
        if slot >= m:
            np.testing.assert_array_equal(pop.max_counts, expected["max_counts"])
            checked[0] += 1
        for batch in feedback.inbox:
            if batch.kind == "counts":
                for b, j, i, value in zip(batch.replica, batch.sender, batch.recipient, batch.payload["counts"]):
                    received[b, i, j] = np.maximum(received[b, i, j], value)
        expected["max_counts"] = np.maximum(pop.counts, received.max(axis=2))

    core, _ = drive(GossipUCB(count_sync=count_sync), env, [4, 5], check)
    assert checked[0] == env["horizon"] - m
    assert core.channel.ledger.totals()["dropped"] > 0


def test_arm_choice_follows_the_definition_with_ties_and_lagging_arms() -> None:
    # D14, D15, D29: an agent with arms in A = {k : n⁻_k < ñ_k(t) - N} pulls the member of A with the largest policy
    # key; otherwise the arm of largest key among the maximisers of ϑ + C, exact ties included.
    n, m = SMALL["num_agents"], SMALL["num_arms"]
    core = FederatedMAB(**SMALL).unwrapped.core
    core.reset([0, 1, 2])
    pop = GossipUCB()
    pop.reset(core.context)
    rng = np.random.default_rng(3)
    pop.counts[...] = rng.integers(1, 4, (3, n, m))
    pop.theta[...] = rng.choice([0.25, 0.5], (3, n, m))  # round 1 has no bonus (ln 1 = 0): many exact ties
    pop.max_counts[...] = pop.counts
    pop.max_counts[1, 2, 1] += n + 1  # one lagging arm
    pop.max_counts[2, 3, [0, 2]] += n + 5  # two lagging arms
    lagging = pop.counts < pop.max_counts - n
    index = pop.theta + gossip_bonus(n, math.log(1), pop.counts)
    arms = pop.act(Step(m, partners=core.partners)).arms  # main round t = 1 draws the first block of policy keys
    keys = pop._keys[:, 0]
    expected = np.empty((3, n), np.int64)
    for b, i in np.ndindex(3, n):
        best = np.flatnonzero(index[b, i] == index[b, i].max())
        pool = np.flatnonzero(lagging[b, i]) if lagging[b, i].any() else best
        expected[b, i] = pool[np.argmax(keys[b, i, pool])]
    np.testing.assert_array_equal(arms, expected)
    assert lagging.any(axis=-1).sum() == 2
    assert (index == index.max(axis=-1, keepdims=True)).sum(axis=-1).max() == m  # a three-way tie is among them


# ------------------------------------------------------------------------------------------- paths and privacy
def curves(results) -> dict:
    keys = ("group_regret", "messages", "scalars", "bytes", "cost")
    return {(r["seed"], r["slot"]): tuple(r[k] for k in keys) for r in results.curves}


@pytest.mark.parametrize("algorithm", ["gossip_ucb", "fed_ucb"])
def test_batched_replica_equals_single_pettingzoo_run(algorithm: str) -> None:
    env = {**SMALL, "horizon": 60}
    checkpoints = list(range(1, 61))
    batched = run(algorithm, env, [21, 22, 23], checkpoints=checkpoints, batched=True)
    for seed in (21, 23):
        single = run(algorithm, env, [seed], checkpoints=checkpoints, batched=False)
        assert {k: v for k, v in curves(batched).items() if k[0] == seed} == curves(single)


def test_dp_wrapper_accounts_fed_ucb_without_noising_twice() -> None:
    env = {**SMALL, "reward_model": "bernoulli", "horizon": 40}
    plain = trajectory(FedUCB(epsilon=2.0), env, [8])
    wrapped_pop = FedUCB(epsilon=2.0)
    thetas: list[np.ndarray] = []
    core, arms = drive(
        wrapped_pop, env, [8], lambda s, p, f, c: thetas.append(p.theta.copy()), lambda e: LaplaceMessageDP(e, 0.5)
    )
    np.testing.assert_array_equal(arms, plain[0])
    assert all(np.array_equal(a, b) for a, b in zip(thetas, plain[1]))
    spent = core.message_hooks[0].epsilon_spent()
    np.testing.assert_allclose(spent, 2.0)  # the declared ε, charged once per agent (not per message)
    report = wrapped_pop.privacy_report()
    assert report["valid"] and report["mechanism"] == "binary_tree_laplace" and report["levels"] == 6
    assert report["eps_prime"] == pytest.approx(2.0 / 6)  # T + 1 = 38 records: 6 levels


def test_privacy_report_validity() -> None:
    core = FederatedMAB(**SMALL).core  # Gaussian rewards: unbounded
    core.reset([0])
    checks = {
        "unclipped gaussian": (FedUCB(epsilon=1.0), False),
        "clipped": (FedUCB(epsilon=1.0, clip_for_dp=(0.0, 1.0)), True),
        "raw init": (FedUCB(epsilon=1.0, clip_for_dp=(0.0, 1.0), dp_init="raw"), False),
    }
    for name, (population, valid) in checks.items():
        population.reset(core.context)
        assert population.privacy_report()["valid"] is valid, name
        declared = population._message_privacy()["theta"]
        assert declared.account_key == "fed_ucb_input_stream"
        assert ("nominal" in declared.description) is (not valid), name


def test_gossip_ucb_is_refused_by_a_strict_dp_wrapper() -> None:
    # Gossip_UCB sends raw statistics; it declares nothing, so a DP wrapper in strict mode refuses it.
    with pytest.raises(ValueError, match="undeclared"):
        drive(GossipUCB(), {**SMALL, "horizon": 6}, [0], wrap=lambda e: LaplaceMessageDP(e, 1.0))


# ------------------------------------------------------------------------------------------- bad input
def test_bad_input_is_rejected_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="num_agents >= 3"):
        drive(GossipUCB(), {**SMALL, "num_agents": 2, "topology": "complete"}, [0])
    for eps in (0.0, -1.0):
        with pytest.raises(ValueError, match="epsilon must be > 0"):
            FedUCB(epsilon=eps)
    with pytest.raises(ValueError, match="connected agent graph with at least one edge"):
        drive(GossipUCB(), {**SMALL, "topology": "server", "gossip": None}, [0])
    disconnected = topo.hybrid([topo.path(2), topo.path(2)])
    with pytest.raises(ValueError, match="connected"):
        drive(FedUCB(), {**SMALL, "topology": disconnected, "gossip": None}, [0])
    with pytest.raises(ValueError, match="gossip='uniform_edge'"):
        drive(GossipUCB(), {**SMALL, "gossip": None}, [0])
    with pytest.raises(ValueError, match="horizon > num_arms"):
        drive(GossipUCB(), {**SMALL, "horizon": 3}, [0])
    with pytest.raises(ValueError, match="profile"):
        FedUCB(profile="loose")
    with pytest.raises(ValueError, match="clip_for_dp"):
        FedUCB(clip_for_dp=(1.0, 0.0))
    with pytest.raises(ValueError, match="count_sync"):
        GossipUCB(count_sync="all")
    with pytest.raises(TypeError, match="epsilon"):
        FedUCB(epsilon="1")


# ------------------------------------------------------------------------------------------- instances and data
def test_synthetic_instance_qualifies() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        means = zhu_instance(rng, 3, 5, min_gap=0.05)
        instance = BanditInstance(means)
        assert len({tuple(np.argsort(-row)) for row in means}) == 3
        assert np.any(instance.local_best_arms != instance.best_arm)
        assert instance.min_gap >= 0.05
    with pytest.raises(ValueError, match="min_gap"):
        zhu_instance(rng, 3, 5, min_gap=1.5)


def test_diabetes_loader_on_a_generated_file(tmp_path) -> None:
    # A hand-made file of the UCI schema: 6 records, 2 agents (contiguous halves).
    columns = {drug: ["No"] * 6 for drugs in ARM_DRUGS for drug in drugs}
    columns["metformin"] = ["Steady", "Up", "No", "Down", "No", "Steady"]
    columns["glipizide"] = ["No", "Steady", "Steady", "No", "Up", "No"]  # sulfonylurea
    columns["insulin"] = ["Steady"] * 6
    columns["pioglitazone"] = ["Up", "No", "No", "No", "No", "Steady"]
    columns["acarbose"] = ["No", "No", "Down", "Steady", "No", "No"]  # "other"
    columns["readmitted"] = [">30", "NO", ">30", "<30", ">30", ">30"]
    path = write_diabetes_csv(tmp_path / "diabetic_data.csv", columns)
    header = path.read_text().splitlines()[0].split(",")
    assert len(header) == 50 and header[-1] == "readmitted"
    records = load_diabetes_csv(path)
    np.testing.assert_array_equal(records.rewards, [1, 0, 1, 0, 1, 1])
    # agent 0 = records 0-2, agent 1 = records 3-5; arms: metformin, sulfonylureas, insulin, TZD, other
    expected = np.array([[1 / 2, 1 / 2, 2 / 3, 1.0, 1.0], [1 / 2, 1.0, 2 / 3, 1.0, 0.0]])
    np.testing.assert_allclose(diabetes_means(path, num_agents=2), expected)
    shuffled = records.split_means(2, "random", seed=3)
    np.testing.assert_allclose(shuffled, records.split_means(2, "random", seed=3))
    with pytest.raises(ValueError, match="no record eligible"):
        records.split_means(3)  # records 2-3 of the middle third hold no TZD
    with pytest.raises(ValueError, match="no diabetes CSV"):
        load_diabetes_csv(tmp_path / "missing.csv")
    del columns["readmitted"]
    with pytest.raises(ValueError, match="readmitted"):
        load_diabetes_csv(write_diabetes_csv(tmp_path / "broken.csv", columns))


def test_generated_schema_file_round_trips_and_standin_has_local_bias(tmp_path) -> None:
    columns = synthetic_diabetes_columns(3000, np.random.default_rng(0))
    path = write_diabetes_csv(tmp_path / "synthetic.csv", columns)
    from_file = diabetes_means(path)
    np.testing.assert_array_equal(from_file, load_diabetes_csv(path).split_means())
    scenario = diabetes_scenario(path).at_scale("ci")  # the §4.3 experiment on a user's file
    np.testing.assert_array_equal(scenario.env_kwargs["instance"], from_file)
    assert scenario.env_kwargs["reward_model"] == "bernoulli" and scenario.env_kwargs["topology"] == "complete"
    standin = BanditInstance(standin_means())
    assert standin.means.shape == (3, 5) and np.all((standin.means > 0.1) & (standin.means < 0.7))
    assert np.any(standin.local_best_arms != standin.best_arm)  # RC7: local bias under the contiguous split


# ------------------------------------------------------------------------------------------- RC-checks, CI scale
@pytest.mark.statistical
def test_rc2_rc3_gossip_sublinear_and_local_ucb_linear_and_worse() -> None:
    # CI-3x5 (T = 2·10^4, 5 seeds, INSTANCE_SEED = 4). Measured per-trial R(T)/R(T/2): Gossip_UCB 1.19-1.24 (mean
    # 1.21, threshold 1.6), local UCB1 1.72-2.07 (mean 1.95, threshold 1.8); mean R(T): 551 against 2507 (4.6x, >= 2).
    scenario = SCENARIOS["zhu/sa_collaboration"]
    results = run_scenario(scenario, "ci")
    for claim in scenario.claims:
        verdict = claim.check(results)
        assert verdict.passed, verdict.evidence


@pytest.mark.statistical
def test_rc4_rc6_regret_decreases_with_epsilon_short_horizon() -> None:
    # The S-A CI twin (CI-3x5, dp_bonus_scale = 1e-3, labelled in the rows) shortened to T = 5000 to keep the default
    # run fast; the full T = 2·10^4 check with RC5 is in test_zhu_reproduction.py. Measured mean R(T) over 5 seeds:
    # ε=1: 931 (918-963), ε=2: 694 (658-721), ε=5: 412 (356-442), ε=∞: 353 (323-375); the closest RC4 step
    # (ε=5 against ∞) is 3.4 standard errors of the difference, so the 2-SE rule cannot excuse an inversion.
    scenario = SCENARIOS["zhu/sa_epsilon"].at_scale("ci")
    short = replace(scenario, env_kwargs={**scenario.env_kwargs, "horizon": 5005}, checkpoints=zhu_checkpoints(5000, 5))
    results = run_scenario(short, scale=None)
    assert {row["dp_bonus_scale"] for row in results.curves} == {CI_DP_BONUS_SCALE}
    for claim in scenario.claims[:2]:  # monotone_in_epsilon (RC4), infinity_lowest (RC6)
        verdict = claim.check(results)
        assert verdict.passed, verdict.evidence


def test_the_scenarios_checkpoint_slot_m_whatever_the_horizon() -> None:
    """The claims read the regret from slot M (D19): the runner places the checkpoints from the horizon it is given."""
    env = {**SMALL, "horizon": 3 + 100}
    results = run_main_rounds("gossip_ucb", env, [0], checkpoints=4, reference=None)
    assert sorted({row["slot"] for row in results.curves}) == [3, 28, 53, 78, 103] == list(zhu_checkpoints(100, 3, 4))
    assert all(scenario.runner.endswith(":run_main_rounds") for scenario in SCENARIOS.values())
    with pytest.raises(ValueError, match=r"from slot M = 3 .* the first checkpoint must be 3, got 50"):
        run_main_rounds("gossip_ucb", env, [0], checkpoints=[50, 103])
    scenario = replace(SCENARIOS["zhu/sb_epsilon"].at_scale("ci"), seeds=1)
    short = replace(scenario, env_kwargs={**scenario.env_kwargs, "horizon": 210}, sweep={"alg.epsilon": (math.inf,)})
    assert min(row["slot"] for row in run_scenario(short, scale=None).curves) == 10  # M = 10 arms in S-B


def test_rc9_reporting_format() -> None:
    # RC9: the curve is the mean over trials of the agent-averaged cumulative pseudo-regret; the band is the per-t
    # min and max over trials. Every Zhu scenario's report draws that figure.
    for scenario in SCENARIOS.values():
        (figure,) = [f for f in scenario.figures if f.name == "rc9_regret"]
        assert (figure.x, figure.y, figure.band) == ("slot", "mean_regret", "minmax")
    results = run(GossipUCB, {**SMALL, "horizon": 60}, [0, 1, 2], checkpoints=4)
    for row in results.curves:
        agents = [r["regret"] for r in results.agents if (r["seed"], r["slot"]) == (row["seed"], row["slot"])]
        assert len(agents) == SMALL["num_agents"] and row["mean_regret"] == pytest.approx(np.mean(agents), rel=1e-12)
    summary = summarize(results.curves, "mean_regret", by=("algorithm", "slot"))
    assert len(summary) == 4
    for point in summary.to_dict("records"):
        trials = [r["mean_regret"] for r in results.curves if r["slot"] == point["slot"]]
        assert point["n"] == 3 and point["mean"] == pytest.approx(np.mean(trials), rel=1e-12)
        assert (point["min"], point["max"]) == (min(trials), max(trials))


@pytest.mark.parametrize(
    ("finals", "passed"),
    [
        # X(1) = 40, X(2) = 20, X(5) = 8: exactly the paper's 1/epsilon, the lower edges.
        ({1.0: 50.0, 2.0: 30.0, 5.0: 18.0, math.inf: 10.0}, True),
        # X(1)/X(2) = 40/20.5 < 2: the excess falls more slowly than 1/epsilon.
        ({1.0: 50.0, 2.0: 30.5, 5.0: 18.0, math.inf: 10.0}, False),
        # X(1)/X(5) = 40/8.1 < 5.
        ({1.0: 50.0, 2.0: 30.0, 5.0: 18.1, math.inf: 10.0}, False),
        # X(1)/X(2) = 40/11 > 3.5: above the spec's upper edge.
        ({1.0: 50.0, 2.0: 21.0, 5.0: 14.0, math.inf: 10.0}, False),
        # X(1)/X(5) = 40/2.5 = 16 > 15.
        ({1.0: 50.0, 2.0: 25.0, 5.0: 12.5, math.inf: 10.0}, False),
    ],
)
def test_rc5_bands_are_the_paper_inverse_epsilon_below_and_the_spec_above(monkeypatch, finals, passed) -> None:
    from fedbandit_envs.bench.catalogue import zhu

    monkeypatch.setattr(zhu, "epsilon_finals", lambda results, algorithm: {e: np.array([v]) for e, v in finals.items()})
    verdict = zhu.inverse_epsilon_claim().check(None)  # type: ignore[arg-type]
    assert verdict.passed is passed
    excess = {e: finals[e] - finals[math.inf] for e in (1.0, 2.0, 5.0)}
    for e in (2.0, 5.0):
        ratio = excess[1.0] / excess[e]
        assert verdict.values["excess_ratios"][e] == ratio
        assert verdict.values["exponents"][e] == math.log(ratio) / math.log(e)
