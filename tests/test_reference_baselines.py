"""The baselines' fast paths equal their plain reference versions bit for bit.

``IndependentUCB1`` reads ``2 ln t`` from a table and skips the untried test once every arm is tried;
``FullSharingUCB`` adopts a broadcast that reached every agent with one copy and then skips the untried test;
its coordinator adds samples on flat cells. The reference mode (:func:`fedbandit_envs.reference.reference_mode`)
runs the plain versions (:func:`agents.baselines.ucb1_arms` every slot, row-by-row adoption, ``np.add.at`` on
(replica, arm) pairs). Random workloads with lost broadcasts (the agents that missed one keep their last pooled
statistics), latency with jitter (broadcasts out of order), dropped and delayed uploads must give equal
fingerprints and equal statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fingerprints.record import Case
from hypothesis import given
from hypothesis import strategies as st
from test_reference_agents import PROPERTY, SEEDS, assert_reference_equal

from agents.baselines import LOG_BLOCK, FullSharingCoordinator, IndependentUCB1, ucb1_arms, ucb1_tried_arms
from fedbandit_envs.channel import MessageBatch
from fedbandit_envs.core import AgentContext
from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.reference import reference_mode


@st.composite
def baseline_cases(draw: st.DrawFn) -> Case:
    """IndependentUCB1 or FullSharingUCB on a random MAB, with a lossy or late channel and fault wrappers."""
    env: dict[str, Any] = {
        "num_agents": draw(st.integers(1, 6)),
        "num_arms": draw(st.integers(2, 6)),
        "horizon": draw(st.integers(20, 150)),
        "instance": draw(st.sampled_from(["uniform", "heterogeneous"])),
        "reward_model": draw(st.sampled_from(["bernoulli", "gaussian", "beta"])),
        "instance_seed": draw(st.integers(0, 100)),
    }
    algorithm = draw(st.sampled_from(["independent_ucb1", "full_sharing_ucb"]))
    wrappers: tuple[tuple[str, dict[str, Any]], ...] = ()
    if algorithm == "full_sharing_ucb":
        env["drop_prob"] = draw(st.sampled_from([0.0, 0.0, 0.1, 0.5]))  # lost broadcasts: stale agents
        env["latency"] = draw(st.integers(0, 2))
        env["latency_jitter"] = draw(st.integers(0, 2))  # broadcasts overtaking each other
        wrappers = draw(
            st.sampled_from(
                [(), (("drops", {"prob": 0.3, "on_inactive": "ignore"}),), (("delays", {"delay": 1, "jitter": 1}),)]
            )
        )
    return Case("baselines", "mab", algorithm, env, {}, wrappers, draw(SEEDS))


def one_replica(num_agents: int, num_arms: int) -> AgentContext:
    """The context of one replica of a plain MAB."""
    core = FederatedMABCore(MABConfig(num_agents, num_arms, 1))
    core.reset([0])
    return core.context


def baseline_state(population: Any) -> dict[str, np.ndarray]:
    """Every agent's counts and reward sums (for FullSharingUCB: its copy of the pooled statistics)."""
    return {"counts": population.counts, "sums": population.sums}


@PROPERTY
@given(baseline_cases())
def test_baselines_fast_paths_equal_the_reference(case: Case) -> None:
    assert_reference_equal(case, baseline_state)


def test_tabulated_two_log_equals_the_log_of_every_agents_total() -> None:
    """Across block boundaries, the table's ``2 ln t`` is ``ucb1_arms``' value for a (B, M) totals array of t."""
    population = IndependentUCB1()
    population.reset(one_replica(3, 2))
    slots = [0, 1, 2, 3, LOG_BLOCK - 1, LOG_BLOCK, LOG_BLOCK + 1, 5 * LOG_BLOCK + 17, 3, 10**6 + 3, 2**31 + 5]
    for t in [*slots, *np.random.default_rng(0).integers(0, 10**7, 200).tolist()]:
        expected = 2.0 * np.log(np.maximum(np.full((7, 3), t, np.int64), 1))
        value = population._two_log_of(t)
        assert (expected == value).all(), t


def test_ucb1_tried_arms_equals_ucb1_arms_when_every_arm_is_tried() -> None:
    """Same choices on random tried statistics, with the totals shared by every agent or per agent, ties included."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        b, m, k = rng.integers(1, 6, size=3) + (0, 0, 1)
        counts = rng.integers(1, 40, size=(b, m, k))
        sums = rng.integers(0, 3, size=(b, m, k)) * counts / 2.0  # many equal means: ties
        totals = counts.sum(axis=-1)
        per_agent = ucb1_tried_arms(counts, sums, 2.0 * np.log(totals)[..., None])
        np.testing.assert_array_equal(per_agent, ucb1_arms(counts, sums, totals))
        shared = int(rng.integers(1, 1000))
        two_log = 2.0 * np.log(np.arange(shared, shared + 1))[0]
        np.testing.assert_array_equal(
            ucb1_tried_arms(counts, sums, two_log), ucb1_arms(counts, sums, np.full((b, m), shared))
        )


@pytest.mark.parametrize("arm", [-1, -5, 5, 7])
def test_the_coordinator_treats_out_of_range_arms_as_the_reference(arm: int) -> None:
    """An arm outside [0, K) (e.g. from a corrupted upload) wraps or raises exactly as ``np.add.at`` on pairs does."""
    outcomes = []
    for reference in (False, True):
        coordinator = FullSharingCoordinator()
        coordinator.reset(one_replica(2, 5), [])
        batch = MessageBatch("sample", [0, 0], [0, 1], [-1, -1], {"arm": [1, arm], "reward": [0.25, 0.5]})
        with reference_mode(reference):
            try:
                reply = coordinator.step(0, [batch])[0]
            except IndexError as error:
                outcomes.append(type(error))
            else:
                outcomes.append((reply.payload["counts"].tolist(), reply.payload["sums"].tolist()))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0] is IndexError) == (arm >= 5 or arm < -5)
