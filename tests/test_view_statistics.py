"""The ``observation="statistics"`` form of the MAB views: per-arm statistics and UCB1 terms for RL learners."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest
from env_checks import gymnasium_check_env_without_warnings, sb3_check_env_without_warnings

import fedbandit_envs  # noqa: F401  (registers the ids)
from agents.baselines import ucb1_arms
from agents.sb3 import SB3Agent
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.families.mab.views import (
    FederatedClientEnv,
    LocalBanditEnv,
    PseudoRegretReward,
    arm_statistics_observation,
    statistics_observation_size,
)

VIEW_IDS = ["fedbandit/LocalBandit-v0", "fedbandit/FederatedClient-v0"]
STATS = {"num_arms": 4, "horizon": 30, "observation": "statistics"}


# ---------------------------------------------------------------------- the vector
def test_statistics_layout_exact():
    obs = arm_statistics_observation(np.array([1, 0, 3]), np.array([0.0, 0.0, 2.0]), slot=4, horizon=8)
    assert obs.dtype == np.float32 and obs.shape == (statistics_observation_size(3),) == (16,)
    cap = math.sqrt(2 * math.log(8))  # the largest bonus of an 8-slot episode
    bonus = [math.sqrt(2 * math.log(4) / 1), math.sqrt(2 * math.log(4) / 3)]  # arms 0 and 2, t = 4 pulls
    index = [0.0 + bonus[0], 2 / 3 + bonus[1]]  # arm 0 has the larger index
    expected = [
        *[1 / 8, 0, 3 / 8],  # counts / horizon
        *[0, 0, 2 / 3],  # empirical means
        *[bonus[0] / cap, 1, bonus[1] / cap],  # bonus / cap, 1 for the untried arm
        *[0, 0, index[1] - index[0]],  # index gap to the best tried arm, 0 for the untried arm
        *[0, 1, 0],  # untried flags
        4 / 8,  # slot / horizon
    ]
    np.testing.assert_allclose(obs, expected, rtol=1e-6)


def test_statistics_before_the_first_pull():
    obs = arm_statistics_observation(np.zeros(3), np.zeros(3), slot=0, horizon=10)
    np.testing.assert_array_equal(obs, [0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0])


def test_bonus_and_gap_scale_with_the_reward_width():
    counts, sums = np.array([2, 3]), np.array([1.0, 2.5])
    unit = arm_statistics_observation(counts, sums, slot=5, horizon=10, reward_bounds=(0.0, 1.0))
    wide = arm_statistics_observation(counts, sums * 4, slot=5, horizon=10, reward_bounds=(0.0, 4.0))
    np.testing.assert_allclose(wide[2:4], 4 * unit[2:4], rtol=1e-6)  # means in reward units
    np.testing.assert_allclose(np.delete(wide, [2, 3]), np.delete(unit, [2, 3]), rtol=1e-6)  # the rest is scale-free


def test_the_zero_gap_arm_is_the_ucb1_arm():
    rng = np.random.default_rng(3)
    for _ in range(200):
        counts = rng.integers(1, 20, size=6)
        sums = rng.random(6) * counts
        obs = arm_statistics_observation(counts, sums, slot=int(counts.sum()), horizon=200)
        gaps = obs[18:24]
        ucb1 = ucb1_arms(counts[None, None].astype(float), sums[None, None], counts.sum()[None, None])[0, 0]
        assert gaps.argmax() == ucb1 and gaps[ucb1] == 0.0 and (gaps <= 0).all()


@pytest.mark.parametrize(
    ("counts", "sums", "horizon", "word"), [([1, 2], [0.0], 5, "same length"), ([1], [1], 0, "horizon")]
)
def test_statistics_argument_errors(counts, sums, horizon, word):
    with pytest.raises(ValueError, match=word):
        arm_statistics_observation(np.array(counts), np.array(sums), slot=0, horizon=horizon)


# ---------------------------------------------------------------------- the views
@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_check_env_without_warnings(env_id):
    gymnasium_check_env_without_warnings(gymnasium.make(env_id, **STATS))


@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_sb3_check_env_and_vector_envs(env_id):
    env_util = pytest.importorskip("stable_baselines3.common.env_util")
    sb3_check_env_without_warnings(gymnasium.make(env_id, **STATS))
    single = gymnasium.make(env_id, **STATS).observation_space
    sb3_envs = env_util.make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=STATS)
    gym_envs = gymnasium.make_vec(env_id, num_envs=2, **STATS)
    first, _ = gym_envs.reset(seed=0)
    assert first.shape == sb3_envs.reset().shape == (2, *single.shape)
    for _ in range(40):  # beyond the horizon: the vector envs reset themselves
        stepped = sb3_envs.step(np.array([1, 2]))[0]
        assert all(single.contains(row) for row in stepped)


@pytest.mark.parametrize("reward_model", ["bernoulli", "gaussian"])
def test_observations_stay_in_the_space(reward_model):
    env = FederatedClientEnv(num_agents=3, reward_model=reward_model, **STATS)
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(30):
        obs, *_ = env.step(int(rng.integers(4)))
        assert env.observation_space.contains(obs)


def test_local_part_is_the_learners_statistics():
    k = 4
    for env in (LocalBanditEnv(**STATS), FederatedClientEnv(num_agents=3, **STATS)):
        env.reset(seed=5)
        for arm in (0, 1, 1, 3, 0, 0):
            obs, *_ = env.step(arm)
        np.testing.assert_array_equal(obs[:k], (np.array([3, 2, 0, 1]) / 30).astype(np.float32))
        want = arm_statistics_observation(env._stats.counts, env._stats.sums, slot=6, horizon=30)
        np.testing.assert_array_equal(obs[: statistics_observation_size(k)], want)
    assert obs.shape == (statistics_observation_size(k) + 2 * k,)  # then the pooled counts and means


def test_unknown_observation_is_refused():
    with pytest.raises(ValueError, match="observation must be one of 'local', 'statistics'.*did you mean 'statistics'"):
        gymnasium.make("fedbandit/LocalBandit-v0", observation="statistic")
    with pytest.raises(TypeError, match="observation"):
        FederatedClientEnv(observation=None)
    with pytest.raises(ValueError, match="observation"):
        SB3Agent(_RecordingModel(3), observation="stats")


# ---------------------------------------------------------------------- SB3Agent
class _RecordingModel:
    """A duck-typed model on the statistics observation: cycles through the arms and records its inputs."""

    def __init__(self, num_arms: int) -> None:
        self.observation_space = gymnasium.spaces.Box(-1, 1, shape=(statistics_observation_size(num_arms),))
        self.num_arms = num_arms
        self.inputs: list[np.ndarray] = []

    def predict(self, obs, deterministic=True):
        self.inputs.append(obs)
        return np.array(len(self.inputs) % self.num_arms), None


def test_sb3_agent_sees_the_statistics_observation():
    k, horizon = 3, 12
    model = _RecordingModel(k)
    env = FederatedMAB(num_agents=1, num_arms=k, horizon=horizon)
    observations, _ = env.reset(seed=4)
    agent = SB3Agent(model, observation="statistics")
    agent.reset(0, env.context, np.random.default_rng(0))
    view = LocalBanditEnv(num_arms=k, horizon=horizon, observation="statistics")
    expected = [view.reset(seed=4)[0]]
    while env.agents:
        arm = agent.act(observations["agent_0"])
        observations, *_ = env.step({"agent_0": arm})
        expected.append(view.step(arm)[0])
    assert len(model.inputs) == horizon
    for seen, want in zip(model.inputs, expected):
        np.testing.assert_array_equal(seen, want)


def test_sb3_agent_names_the_observation_when_the_shape_differs():
    env = FederatedMAB(num_agents=1, num_arms=3, horizon=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="observation='local' gives shape \\(11,\\)"):
        SB3Agent(_RecordingModel(3)).reset(0, env.context, np.random.default_rng(0))


# ---------------------------------------------------------------------- PseudoRegretReward
@pytest.mark.parametrize("env_id", [*VIEW_IDS, "fedbandit/LinearBandit-v0"])
def test_pseudo_regret_reward_replaces_only_the_reward(env_id):
    kwargs = {"num_arms": 4, "horizon": 30}
    plain, wrapped = gymnasium.make(env_id, **kwargs), PseudoRegretReward(gymnasium.make(env_id, **kwargs))
    np.testing.assert_array_equal(plain.reset(seed=3)[0], wrapped.reset(seed=3)[0])
    for arm in np.random.default_rng(1).integers(4, size=30):
        obs, _, terminated, truncated, info = plain.step(int(arm))
        wrapped_obs, reward, *flags, wrapped_info = wrapped.step(int(arm))
        np.testing.assert_array_equal(wrapped_obs, obs)
        assert (reward, flags) == (-info["instant_regret"], [terminated, truncated])
        assert wrapped_info.keys() == info.keys() and wrapped_info["pseudo_regret"] == info["pseudo_regret"]
    assert truncated


def test_pseudo_regret_reward_needs_instant_regret():
    env = PseudoRegretReward(gymnasium.make("CartPole-v1"))
    env.reset(seed=0)
    with pytest.raises(TypeError, match="instant_regret"):
        env.step(0)
