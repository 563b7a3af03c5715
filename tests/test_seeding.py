"""Seed streams: independent, stable by name, and reward draws that no algorithm choice can change."""

import numpy as np
import pytest

from fedbandit_envs.envs.mab_core import FederatedMABCore, MABConfig
from fedbandit_envs.seeding import STREAM_NAMES, SeedStreams


def test_streams_are_distinct_and_reproducible():
    streams = SeedStreams.from_seed(42)
    draws = {name: streams.generator(name).random(4) for name in STREAM_NAMES}
    assert len({tuple(d) for d in draws.values()}) == len(STREAM_NAMES)
    again = SeedStreams.from_seed(42)
    for name in STREAM_NAMES:
        assert np.array_equal(again.generator(name).random(4), draws[name])
    assert not np.array_equal(SeedStreams.from_seed(43).generator("rewards").random(4), draws["rewards"])
    agent_draws = [np.random.default_rng(streams.agent_sequence(i)).random() for i in range(3)]
    assert len(set(agent_draws)) == 3


def test_bad_seed_and_stream_name():
    with pytest.raises(TypeError, match="seed"):
        SeedStreams.from_seed(-1)
    with pytest.raises(ValueError, match="unknown random stream"):
        SeedStreams.from_seed(0).generator("nope")


def play(arms_for_slot, reward_tape=False, horizon=40, **channel):
    core = FederatedMABCore(MABConfig(3, 4, horizon, instance=[0.2, 0.4, 0.6, 0.8], reward_tape=reward_tape))
    core.reset([9])
    arms, rewards = [], []
    for t in range(horizon):
        chosen = arms_for_slot(t)
        feedback = core.step(chosen[None, :])
        arms.append(chosen)
        rewards.append(feedback.rewards[0])
    return np.array(arms), np.array(rewards)


def test_reward_draws_do_not_depend_on_the_algorithm():
    # Slot noise is drawn independently of the arms: two different policies see the same noise, so
    # whenever they pull the same arm in the same slot they get the same reward.
    rng = np.random.default_rng(0)
    random_arms = rng.integers(4, size=(40, 3))
    arms_a, rewards_a = play(lambda t: random_arms[t])
    arms_b, rewards_b = play(lambda t: (np.arange(3) + t) % 4)
    same = arms_a == arms_b
    assert same.sum() > 10
    assert np.array_equal(rewards_a[same], rewards_b[same])


def test_reward_tape_gives_the_nth_pull_the_nth_draw():
    # Run A pulls arm 3 every slot; run B pulls arm 3 only on even slots. The n-th pull of arm 3 by
    # each agent gets the same reward in both runs.
    arms_a, rewards_a = play(lambda t: np.full(3, 3), reward_tape=True, horizon=600)
    arms_b, rewards_b = play(lambda t: np.full(3, 3 if t % 2 == 0 else 0), reward_tape=True, horizon=600)
    pulls_b = rewards_b[arms_b[:, 0] == 3]
    assert np.array_equal(rewards_a[: len(pulls_b)], pulls_b)  # crosses a 256-draw block boundary
