"""The reward tape's kept blocks against the reference mode, which draws every pull's block afresh.

With ``reward_tape=True`` the n-th pull of (agent, arm) reads entry n of that cell's tape, drawn in blocks of
``NOISE_BLOCK`` from the cell's own seed sequence. The fast path keeps each cell's current block; the reference
mode redraws the block at every pull. Random workloads (replicas, agents, arms, pull patterns that cross block
boundaries, the switch turned on and off mid-episode) must give the same rewards bit for bit.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from property_settings import reproducible

from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.reference import reference_mode
from fedbandit_envs.rewards import NOISE_BLOCK
from fedbandit_envs.validation import MEMORY_LIMIT_VARIABLE, MemoryLimitError


def play_tape(config: MABConfig, seeds: list[int], arms: np.ndarray, reference_slots: frozenset[int]) -> np.ndarray:
    """Rewards (slots, B, M) of ``arms`` (slots, B, M) on a fresh core; the reference mode on in ``reference_slots``."""
    core = FederatedMABCore(config)
    core.reset(seeds)
    rewards = []
    for slot, chosen in enumerate(arms):
        with reference_mode(slot in reference_slots):
            rewards.append(core.step(chosen).rewards)
    return np.array(rewards)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[MABConfig, list[int], np.ndarray, frozenset[int]]:
    """A small tape config, its seeds, arms concentrated on few cells (so blocks fill) and mixed-mode slots."""
    replicas, agents, num_arms = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(2, 4))
    slots = draw(st.integers(NOISE_BLOCK + 10, 2 * NOISE_BLOCK + 60))
    noise = draw(st.sampled_from(["bernoulli", "gaussian"]))
    config = MABConfig(agents, num_arms, slots, reward_model=noise, reward_tape=True)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    favourite = rng.integers(num_arms, size=(replicas, agents))
    arms = np.where(rng.random((slots, replicas, agents)) < 0.8, favourite, rng.integers(num_arms, size=(slots, 1, 1)))
    switched = frozenset(int(s) for s in rng.choice(slots, size=draw(st.integers(0, slots // 4)), replace=False))
    seeds = draw(st.lists(st.integers(0, 2**16), min_size=replicas, max_size=replicas, unique=True))
    return config, seeds, arms.astype(np.int64), switched


@reproducible(12)
@given(workload=workloads())
def test_kept_tape_blocks_equal_the_reference_draws(workload):
    config, seeds, arms, switched = workload
    fast = play_tape(config, seeds, arms, frozenset())
    reference = play_tape(config, seeds, arms, frozenset(range(len(arms))))
    mixed = play_tape(config, seeds, arms, switched)
    np.testing.assert_array_equal(fast, reference)
    np.testing.assert_array_equal(mixed, reference)


def test_a_replica_of_a_batch_reads_the_tape_of_its_single_run():
    config = MABConfig(3, 2, 600, reward_tape=True)
    arms = np.random.default_rng(5).integers(2, size=(600, 2, 3))
    batched = play_tape(config, [11, 12], arms, frozenset())
    single = play_tape(config, [12], arms[:, 1:], frozenset())
    np.testing.assert_array_equal(batched[:, 1:], single)


def test_the_tape_is_counted_in_the_memory_estimate(monkeypatch):
    parts = MABConfig(50, 100, 10, reward_tape=True).memory_parts(20)
    assert parts["reward tape blocks"] == 20 * 50 * 100 * (NOISE_BLOCK + 1) * 8
    assert "reward tape blocks" not in MABConfig(50, 100, 10).memory_parts(20)
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "1")
    MABConfig(100, 1000, 10)  # fits without the tape
    with pytest.raises(MemoryLimitError, match=r"reward tape blocks 1\.91 GiB"):
        MABConfig(1000, 1000, 10, reward_tape=True)
