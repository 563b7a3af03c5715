"""The agents' and the privacy package's caches equal their plain reference versions bit for bit.

For each subsystem with a cache (Li-Wang's deferred refreshes and shared server bases, Dubey's flooding layout
reuse, Zhu's ``BinaryTreeBank``, Li-Song's phase views) hypothesis draws random workloads (seeds, sizes, graphs,
epsilons, horizons) and plays each twice: as it is, and in the reference mode
(:func:`fedbandit_envs.reference.reference_mode`). The two fingerprints (regret at checkpoints and per agent, the
ledger, privacy spent, digests of every recorded row; ``tests/fingerprints/record.py``) must be equal, and so must
the population's state at the end (the statistics the caches stand for, brought up to date on both sides).
The examples are derandomised (a fixed sequence) and few, so the tier's time stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fingerprints.record import Call, Case, differences, fingerprint_of, run_case
from hypothesis import given
from hypothesis import strategies as st
from property_settings import reproducible

from fedbandit_envs.privacy.mechanisms import BinaryTreeBank
from fedbandit_envs.reference import reference_active, reference_mode

#: Runs per subsystem (each example plays its workload twice).
EXAMPLES = 8
PROPERTY = reproducible(EXAMPLES)

SEEDS = st.lists(st.integers(0, 2**16), min_size=1, max_size=3, unique=True).map(tuple)
GRAPHS = st.one_of(
    st.sampled_from([{"topology": "ring"}, {"topology": "complete"}]),
    st.floats(0.3, 0.9).map(lambda p: {"topology": "erdos_renyi", "topology_params": {"p": round(p, 3)}}),
)


State = Callable[[Any], dict[str, np.ndarray]]


def assert_reference_equal(case: Case, state: State) -> None:
    """The case's fingerprint and ``state(population)`` with the caches and in the reference mode: equal exactly."""
    assert not reference_active()
    fast_run = run_case(case, "batched")
    with reference_mode():
        plain_run = run_case(case, "batched")
    found = differences(fingerprint_of(case, *fast_run), fingerprint_of(case, *plain_run))
    assert not found, f"{case.spec()}\n  " + "\n  ".join(str(d) for d in found[:10])
    fast, plain = state(fast_run[1][-1][1]), state(plain_run[1][-1][1])
    assert fast.keys() == plain.keys()
    for name in fast:
        np.testing.assert_array_equal(fast[name], plain[name], err_msg=f"{name} of {case.spec()}")


def draw_sizes(draw: st.DrawFn, agents: tuple[int, int], arms: tuple[int, int], horizon: tuple[int, int]) -> dict:
    """M, K and T of a MAB case, drawn in that order from the inclusive ranges given."""
    return {
        "num_agents": draw(st.integers(*agents)),
        "num_arms": draw(st.integers(*arms)),
        "horizon": draw(st.integers(*horizon)),
    }


# ---------------------------------------------------------------------------------------------------- Li and Wang
@st.composite
def li_wang_cases(draw: st.DrawFn) -> Case:
    """Async-LinUCB (gamma 1 to inf, both registrations), Sync-LinUCB or Async-LinUCB-AM on a random linear env."""
    n, d = draw(st.integers(2, 10)), draw(st.integers(2, 5))
    env: dict[str, Any] = {
        "num_clients": n,
        "num_arms": draw(st.integers(2, 5)),
        "dimension": d,
        "horizon": draw(st.integers(20, 160)),
        "arrival": draw(st.sampled_from(["uniform", "zipf"])),
        "active_per_slot": draw(st.integers(1, min(2, n))),
    }
    algorithm = draw(st.sampled_from(["async_linucb", "sync_linucb", "async_linucb_am"]))
    params: dict[str, Any] = {
        "pack_symmetric": draw(st.booleans()),
        "alpha_mode": draw(st.sampled_from(["theory", "theory_upper"])),  # theory_upper reads the counts
    }
    if algorithm == "sync_linucb":
        params["threshold"] = draw(st.sampled_from([0.0, 0.2, 1.0, 5.0]))
    else:
        params["gamma"] = draw(st.sampled_from([1.0, 1.3, 2.0, 5.0, math.inf]))
        params["registration"] = draw(st.sampled_from(["lazy", "eager"]))
    if algorithm == "async_linucb_am":  # d = d_g + the largest local dimension
        g = draw(st.integers(1, d - 1))
        local = draw(st.lists(st.integers(0, d - g), min_size=n, max_size=n))
        local[draw(st.integers(0, n - 1))] = d - g
        env.update(mode="heterogeneous", global_dimension=g, local_dimensions=local)
        params["am_init"] = draw(st.sampled_from(["warmup", "ridge"]))
    wrappers = (("drops", {"prob": 0.2}),) if draw(st.booleans()) else ()
    return Case("li_wang", "linear", algorithm, env, params, wrappers, draw(SEEDS))


def ridge_state(stats: Any, prefix: str) -> dict[str, np.ndarray]:
    """Every client's statistics after a refresh of all of them (and, with a buffer, its upload-trigger base)."""
    rows, clients = (index.reshape(-1) for index in np.indices(stats.ld.shape))
    stats.refresh(rows, clients)
    names = ["v", "b", "count", "inv", "ld"]
    if hasattr(stats, "ld_w"):
        stats.log_ratio(rows, clients)
        names += ["dv", "db", "dcount", "ld_w"]
    return {f"{prefix}.{name}": getattr(stats, name) for name in names}


def li_wang_state(population: Any) -> dict[str, np.ndarray]:
    """The clients' global (and AM local) statistics and, for Async, the server's aggregate and per-client bases."""
    state = ridge_state(population.stats, "stats")
    if hasattr(population, "local"):
        state.update(ridge_state(population.local, "local"), theta_g=population.theta_g, theta_l=population.theta_l)
    server = population.server
    state.update({f"server.{name}": getattr(server, name) for name in ("v", "b", "count")})
    if hasattr(server, "base_ld"):
        state.update(
            {f"server.{name}": getattr(server, name) for name in ("base_v", "base_b", "base_count", "base_ld")}
        )
    return state


# -------------------------------------------------------------------------------------------------- Dubey and Pentland
@st.composite
def dubey_cases(draw: st.DrawFn) -> Case:
    """Private, cooperative or byzantine-proof flooding UCB on a random graph, sometimes with message drops."""
    env = {
        **draw_sizes(draw, (3, 8), (2, 5), (30, 150)),
        "instance_seed": draw(st.integers(0, 100)),
        **draw(GRAPHS),
    }
    algorithm = draw(st.sampled_from(["dubey_private_ucb", "dubey_cooperative_ucb", "dubey_byzantine_ucb"]))
    params: dict[str, Any] = {"gamma": draw(st.integers(1, 3))}
    if algorithm == "dubey_private_ucb":
        params["dp_eps"] = draw(st.sampled_from([0.1, 0.25, 0.5, 1.0]))
        params["count_field"] = draw(st.sampled_from(["released", "current"]))
    wrappers = (("drops", {"prob": 0.2}),) if draw(st.booleans()) else ()
    return Case("dubey", "mab", algorithm, env, params, wrappers, draw(SEEDS))


def dubey_state(population: Any) -> dict[str, np.ndarray]:
    """The pooled statistics of the flooded records (the byzantine agents keep samples instead: none)."""
    if not hasattr(population, "pooled_counts"):
        return {}
    return {"pooled_counts": population.pooled_counts, "pooled_sums": population.pooled_sums}


# ---------------------------------------------------------------------------------------------------- Zhu et al.
@st.composite
def zhu_cases(draw: st.DrawFn) -> Case:
    """Fed_UCB (one ``BinaryTreeBank`` of every agent's trees) with random epsilons, splits and gossip."""
    env = {
        **draw_sizes(draw, (3, 6), (2, 4), (40, 200)),
        "topology": draw(st.sampled_from(["ring", "complete"])),
        "gossip": draw(st.sampled_from(["uniform_edge", "node_then_neighbour"])),
        "reward_model": "gaussian",
        "instance": "heterogeneous",
        "instance_seed": draw(st.integers(0, 100)),
    }
    params = {
        "epsilon": draw(st.sampled_from([0.2, 1.0, 5.0, math.inf])),
        "eps_split": draw(st.sampled_from(["levels", "ln_T"])),
        "noise_on_empty": draw(st.booleans()),
        "dp_bonus_scale": 1e-3,
    }
    return Case("zhu", "mab", "fed_ucb", env, params, (), draw(SEEDS))


def zhu_state(population: Any) -> dict[str, np.ndarray]:
    """Every tree's count, exact and noisy sum and number of draws."""
    bank = population._trees
    return {name: getattr(bank, name) for name in ("counts", "exact_sums", "noisy_sums", "noise_draws")}


@PROPERTY
@given(
    num_trees=st.integers(1, 40),
    num_streams=st.integers(1, 6),
    positions=st.integers(1, 400),
    epsilon=st.sampled_from([0.3, 1.0, math.inf]),
    noise_on_empty=st.booleans(),
    split=st.sampled_from(["levels", "ln_T"]),
    seed=st.integers(0, 2**16),
)
def test_tree_bank_equals_its_reference_on_random_schedules(
    num_trees: int, num_streams: int, positions: int, epsilon: float, noise_on_empty: bool, split: str, seed: int
) -> None:
    """Every return value and diagnostic of the array bank equals the per-tree bank built in the reference mode."""
    streams = min(num_streams, num_trees)
    stream_of_tree = np.arange(num_trees) % streams

    def bank() -> BinaryTreeBank:
        rngs = None if math.isinf(epsilon) else [np.random.default_rng([seed, s]) for s in range(streams)]
        return BinaryTreeBank(num_trees, epsilon, positions + 1, 2.0, split, noise_on_empty, rngs, stream_of_tree)

    fast = bank()
    with reference_mode():
        plain = bank()
    schedule = np.random.default_rng(seed)
    for position in range(positions):
        listed = schedule.permutation(num_trees)[: schedule.integers(0, num_trees + 1)]
        values = schedule.uniform(-1.0, 1.0, len(listed))
        np.testing.assert_array_equal(fast.add(listed, position, values), plain.add(listed, position, values))
    for name in ("counts", "exact_sums", "noise_draws", "noisy_sums"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(plain, name), err_msg=name)
    assert [fast.node_noises(r) for r in range(num_trees)] == [plain.node_noises(r) for r in range(num_trees)]


# ---------------------------------------------------------------------------------------------------- Li and Song
@st.composite
def li_song_cases(draw: st.DrawFn) -> Case:
    """CDP, DDP or HDP elimination with the paper's Laplace wrapper on random close-arm instances."""
    m = draw(st.integers(3, 6))
    algorithm = draw(st.sampled_from(["cdp_mab", "ddp_mab", "hdp_mab"]))
    env: dict[str, Any] = {
        "num_agents": m,
        "num_arms": 3,
        "horizon": draw(st.integers(300, 1500)),
        "instance": [0.7, round(draw(st.floats(0.45, 0.65)), 3), 0.3],
        "instance_seed": draw(st.integers(0, 100)),
        "reward_tape": True,
    }
    if algorithm == "ddp_mab":
        env["topology"] = draw(st.sampled_from(["ring", "complete"]))
    if algorithm == "hdp_mab":
        sizes = (1, m - 1) if draw(st.booleans()) else (m,)
        env.update(topology=Call("agents.li_song:hybrid_topology", (m, sizes, "path")), c1=50.0)
    laplace = ("laplace", {"epsilon": 1.0, "calibration": "paper", "n_agg": m})
    return Case("li_song", "li_song", algorithm, env, {}, (laplace,), draw(SEEDS))


def li_song_state(population: Any) -> dict[str, np.ndarray]:
    """The federations' phases, epoch ends and arm orders, and the agents' reward sums."""
    names = ("phase", "end", "order", "commit", "round_hops", "epoch_sums", "explore_sums", "exploit")
    return {name: getattr(population, name) for name in names}


# ---------------------------------------------------------------------------------------------------- every subsystem
#: Each cached subsystem: its random cases and the population state compared beyond the fingerprint.
CACHED = {
    "li_wang_lazy_refresh_and_shared_bases": (li_wang_cases(), li_wang_state),
    "dubey_flooding_layout_reuse": (dubey_cases(), dubey_state),
    "zhu_tree_bank_in_a_run": (zhu_cases(), zhu_state),
    "li_song_cached_phase_views": (li_song_cases(), li_song_state),
}


@pytest.mark.parametrize("subsystem", list(CACHED))
@PROPERTY
@given(data=st.data())
def test_cached_subsystem_equals_the_reference_mode(subsystem: str, data: st.DataObject) -> None:
    """A random case runs bit-identically with the subsystem's caches and in the reference mode (state included)."""
    cases, state = CACHED[subsystem]
    assert_reference_equal(data.draw(cases, label="case"), state)
