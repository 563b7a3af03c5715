"""Tests of the single-agent Gymnasium views and the stable-baselines3 agent."""

from __future__ import annotations

import pickle
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from env_checks import gymnasium_check_env_without_warnings, sb3_check_env_without_warnings
from view_checks import assert_step_is_checked

import fedbandit_envs  # noqa: F401  (registers the ids)
from agents.sb3 import SB3Agent
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.families.mab.views import (
    FederatedClientEnv,
    LocalBanditEnv,
    local_bandit_observation,
    local_observation_size,
)

VIEW_IDS = ["fedbandit/LocalBandit-v0", "fedbandit/FederatedClient-v0"]
SMALL = {"num_arms": 4, "horizon": 30}


def _long_view(env_id: str) -> gymnasium.Env:
    """The view ``env_id`` with 4 arms and 100 slots (room for every rollout of the determinism tests)."""
    return gymnasium.make(env_id, num_arms=4, horizon=100)


def _on_two_fresh_views(env_id: str, play):
    """What ``play(env)`` returns on two fresh views ``env_id`` (a seeded procedure must return the same twice)."""
    return [play(_long_view(env_id)) for _ in range(2)]


def _rollout(env: gymnasium.Env, actions: np.ndarray) -> tuple[list[np.ndarray], list[float], list[dict]]:
    observations, rewards, infos = [], [], []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(int(action))
        assert terminated is False
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
        if truncated:
            break
    return observations, rewards, infos


def _assert_same_rollout(a: tuple, b: tuple) -> None:
    assert len(a[0]) == len(b[0])
    for obs_a, obs_b in zip(a[0], b[0]):
        np.testing.assert_array_equal(obs_a, obs_b)
    assert a[1] == b[1]
    assert a[2] == b[2]


# ---------------------------------------------------------------------- API checkers
@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_gymnasium_check_env_without_warnings(env_id):
    env = gymnasium.make(env_id)
    gymnasium_check_env_without_warnings(env)
    env.close()


@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_sb3_check_env_without_warnings(env_id):
    sb3_check_env_without_warnings(gymnasium.make(env_id, **SMALL))


@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_ansi_render(env_id):
    env = gymnasium.make(env_id, render_mode="ansi", **SMALL)
    env.reset(seed=0)
    env.step(1)
    text = env.render()
    assert isinstance(text, str) and "slot 1/30" in text


# ---------------------------------------------------------------------- determinism
@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_same_seed_same_rollout(env_id):
    actions = np.random.default_rng(7).integers(4, size=50)

    def play(env):
        obs, _ = env.reset(seed=123)
        observations, rewards, infos = _rollout(env, actions)
        return [obs, *observations], rewards, infos

    runs = _on_two_fresh_views(env_id, play)
    _assert_same_rollout(runs[0], runs[1])
    other = _long_view(env_id)
    other.reset(seed=124)
    assert _rollout(other, actions)[1] != runs[0][1]


@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_unseeded_reset_continues_the_seeded_stream(env_id):
    actions = np.random.default_rng(3).integers(4, size=20)

    def play(env):
        env.reset(seed=5)
        env.reset()
        first = _rollout(env, actions)
        env.reset()
        return first, _rollout(env, actions)

    runs = _on_two_fresh_views(env_id, play)
    _assert_same_rollout(runs[0][0], runs[1][0])
    _assert_same_rollout(runs[0][1], runs[1][1])
    assert runs[0][0][1] != runs[0][1][1]


@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_pickle_round_trip_continues_identically(env_id):
    actions = np.random.default_rng(11).integers(4, size=40)
    env = _long_view(env_id)
    env.reset(seed=9)
    _rollout(env, actions[:10])
    clone = pickle.loads(pickle.dumps(env))
    _assert_same_rollout(_rollout(env, actions[10:]), _rollout(clone, actions[10:]))


# ---------------------------------------------------------------------- LocalBandit
def test_local_bandit_regret_bookkeeping():
    env = gymnasium.make("fedbandit/LocalBandit-v0", num_arms=3, horizon=20, instance=[0.2, 0.5, 0.9])
    _, info = env.reset(seed=0)
    assert info == {"pseudo_regret": 0.0, "instant_regret": 0.0}
    for _ in range(10):
        obs, reward, terminated, truncated, info = env.step(0)
        assert info["instant_regret"] == pytest.approx(0.7, abs=1e-12)
    # 0.9 - 0.2 is not exactly 0.7 in binary floating point, hence the 1e-12 tolerance.
    assert info["pseudo_regret"] == pytest.approx(0.7 * 10, abs=1e-12)
    assert obs[:3].tolist() == [1.0, 0.0, 0.0]
    assert obs[4] == pytest.approx(10 / 20)
    assert obs[-1] == pytest.approx(10 / 20)


def test_local_bandit_truncates_at_horizon():
    env = gymnasium.make("fedbandit/LocalBandit-v0", num_arms=2, horizon=3)
    env.reset(seed=0)
    flags = [env.step(0)[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_local_bandit_observation_layout():
    obs = local_bandit_observation(2, 1.0, np.array([1, 0, 3]), np.array([0.0, 0.0, 2.0]), slot=4, horizon=8)
    assert obs.dtype == np.float32
    assert obs.shape == (local_observation_size(3),)
    expected = [0, 0, 1, 1.0, 1 / 8, 0, 3 / 8, 0.0, 0.0, 2 / 3, 4 / 8]
    np.testing.assert_allclose(obs, expected, rtol=1e-6)
    start = local_bandit_observation(-1, 0.0, np.zeros(3), np.zeros(3), slot=0, horizon=8)
    assert not start.any()
    with pytest.raises(ValueError, match="last_arm"):
        local_bandit_observation(3, 0.0, np.zeros(3), np.zeros(3), 0, 8)


def test_view_argument_errors():
    with pytest.raises(TypeError, match="render_mode"):
        LocalBanditEnv(render_mode=1)
    with pytest.raises(TypeError, match="instance_params"):
        LocalBanditEnv(instance_params=[("h_max", 0.1)])
    with pytest.raises(ValueError, match="num_arms"):
        LocalBanditEnv(num_arms=1)
    assert_step_is_checked(LocalBanditEnv(num_arms=3, horizon=5), 3)


# ---------------------------------------------------------------------- FederatedClient
def test_federated_client_uploads_reach_the_server():
    env = FederatedClientEnv(num_agents=5, num_arms=10, horizon=20)
    obs, info = env.reset(seed=0)
    assert not obs[local_observation_size(10) :].any()
    # In slot 0 the UCB peers pull their first untried arms 1..4; the learner takes arm 9.
    _, reward, _, _, info = env.step(9)
    assert env.coordinator.counts[0, 9] == 0  # samples are uploaded one slot later
    obs, _, _, _, info = env.step(9)
    assert env.coordinator.counts[0, 9] == 1
    assert env.coordinator.sums[0, 9] == reward
    assert info["messages_sent"] == 1 and info["bytes_sent"] > 0 and info["cost"] == 1.0
    pooled = obs[local_observation_size(10) :]
    assert pooled.any()
    assert pooled[9] == pytest.approx(1 / (5 * 20))
    assert pooled[10 + 9] == pytest.approx(reward)
    assert info["group_pseudo_regret"] >= info["pseudo_regret"]


def test_federated_client_observation_contains_local_part():
    env = FederatedClientEnv(num_agents=3, num_arms=4, horizon=10)
    env.reset(seed=1)
    obs, reward, _, _, _ = env.step(2)
    k = 4
    assert obs.shape == (5 * k + 2,)
    assert obs[:k].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert obs[k] == reward


def test_federated_client_rejects_unknown_peer_algorithm():
    with pytest.raises(ValueError, match="full_sharing"):
        FederatedClientEnv(peer_algorithm="gossip_magic")
    with pytest.raises(TypeError, match="peer_algorithm"):
        gymnasium.make("fedbandit/FederatedClient-v0", peer_algorithm=None)


def test_import_boundaries():
    code = (
        "import sys, fedbandit_envs, fedbandit_envs.families.mab.views; assert 'agents' not in sys.modules; "
        "import agents.sb3; assert 'stable_baselines3' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------- SB3Agent
class _RecordingModel:
    """A duck-typed model: cycles through the arms and records its inputs."""

    def __init__(self, num_arms: int) -> None:
        self.observation_space = gymnasium.spaces.Box(0, 1, shape=(local_observation_size(num_arms),))
        self.num_arms = num_arms
        self.inputs: list[np.ndarray] = []

    def predict(self, obs, deterministic=True):
        self.inputs.append(obs)
        return np.array(len(self.inputs) % self.num_arms), None


def _drive(env: FederatedMAB, agents: dict, seed: int, steps: int) -> list[dict]:
    observations, _ = env.reset(seed=seed)
    rng = np.random.default_rng(0)
    for i, agent in enumerate(agents.values()):
        agent.reset(i, env.context, rng)
    played = []
    for _ in range(steps):
        actions = {a: agent.act(observations[a]) for a, agent in agents.items()}
        played.append(actions)
        observations, *_ = env.step(actions)
    return played


def test_sb3_agent_sees_the_local_bandit_observation():
    k, horizon = 3, 12
    model = _RecordingModel(k)
    env = FederatedMAB(num_agents=1, num_arms=k, horizon=horizon)
    played = _drive(env, {"agent_0": SB3Agent(model)}, seed=4, steps=horizon)
    local = LocalBanditEnv(num_arms=k, horizon=horizon)
    expected = [local.reset(seed=4)[0]]
    for actions in played[:-1]:
        expected.append(local.step(actions["agent_0"])[0])
    for seen, want in zip(model.inputs, expected):
        np.testing.assert_array_equal(seen, want)


def test_sb3_agent_checks_the_model():
    with pytest.raises(TypeError, match="predict"):
        SB3Agent(object())
    env = FederatedMAB(num_agents=1, num_arms=5, horizon=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="num_arms=5"):
        SB3Agent(_RecordingModel(3)).reset(0, env.context, np.random.default_rng(0))


# ---------------------------------------------------------------------- training smoke tests
def _check_model_plays_federation(model, num_arms: int, horizon: int) -> None:
    env = FederatedMAB(num_agents=3, num_arms=num_arms, horizon=horizon)
    agents = {a: SB3Agent(model) for a in env.possible_agents}
    for actions in _drive(env, agents, seed=0, steps=10):
        assert all(isinstance(arm, int) and 0 <= arm < num_arms for arm in actions.values())


@pytest.mark.parametrize("env_id", VIEW_IDS)
def test_ppo_trains_and_plays(env_id, sb3):
    env = gymnasium.make(env_id, num_arms=4, horizon=40)
    model = sb3.PPO("MlpPolicy", env, n_steps=64, batch_size=32, seed=0, device="cpu").learn(256)
    if env_id == "fedbandit/LocalBandit-v0":
        _check_model_plays_federation(model, num_arms=4, horizon=40)
    else:
        obs, _ = env.reset(seed=0)
        action, _ = model.predict(obs, deterministic=True)
        assert env.action_space.contains(int(action))


def test_dqn_trains_and_plays(sb3):
    env = gymnasium.make("fedbandit/LocalBandit-v0", num_arms=4, horizon=40)
    model = sb3.DQN("MlpPolicy", env, learning_starts=0, buffer_size=500, seed=0, device="cpu").learn(256)
    _check_model_plays_federation(model, num_arms=4, horizon=40)
