"""Conformance of every registered id: PettingZoo and Gymnasium API tests, pickling, determinism."""

import pickle
import warnings

import gymnasium
import numpy as np
import pettingzoo
import pytest
from gymnasium.utils.env_checker import data_equivalence
from pettingzoo.test import parallel_api_test, parallel_seed_test

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs.registration import GYMNASIUM_ENVS, PARALLEL_ENVS

SMALL = {"num_agents": 4, "num_arms": 3, "horizon": 60}
PARALLEL_IDS = sorted(PARALLEL_ENVS)
GYMNASIUM_IDS = sorted(GYMNASIUM_ENVS)


def make_parallel(env_id):
    return pettingzoo.make("parallel", env_id, **SMALL)


def rollout(env, seed, steps=50):
    """Observations, rewards and infos of a rollout with actions from a seeded generator."""
    rng = np.random.default_rng(seed)
    observations, infos = env.reset(seed=seed)
    trace = [(observations, infos)]
    for _ in range(steps):
        if not env.agents:
            break
        actions = {a: int(rng.integers(SMALL["num_arms"])) for a in env.agents}
        trace.append(env.step(actions))
    return trace


def test_every_id_is_registered():
    assert set(PARALLEL_IDS) <= set(pettingzoo.parallel_registry)
    assert set(GYMNASIUM_IDS) <= set(gymnasium.registry)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_api(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(make_parallel(env_id), num_cycles=100)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_seed(env_id):
    parallel_seed_test(lambda: make_parallel(env_id), num_cycles=70)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_spaces_contain_observations(env_id):
    env = make_parallel(env_id)
    observations, _ = env.reset(seed=3)
    for _ in range(5):
        for agent, observation in observations.items():
            assert env.observation_space(agent).contains(observation)
        observations, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    assert env.state_space.contains(env.state())


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_determinism_and_pickle(env_id):
    first, second = rollout(make_parallel(env_id), 7), rollout(make_parallel(env_id), 7)
    assert data_equivalence(first, second)
    assert not data_equivalence(first, rollout(make_parallel(env_id), 8))
    env = make_parallel(env_id)
    env.reset(seed=5)
    env.step({a: 0 for a in env.agents})
    clone = pickle.loads(pickle.dumps(env))
    actions = {a: 1 for a in env.agents}
    assert data_equivalence(env.step(actions), clone.step(actions))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_gymnasium_check_env(env_id):
    from gymnasium.utils.env_checker import check_env

    env = gymnasium.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_sb3_check_env(env_id):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_checker.check_env(gymnasium.make(env_id), warn=True)


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_gymnasium_determinism_and_pickle(env_id):
    def trace(env, seed):
        observation, info = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        steps = [(observation, info)]
        for _ in range(50):
            steps.append(env.step(int(rng.integers(env.action_space.n))))
            if steps[-1][2] or steps[-1][3]:
                break
        return steps

    assert data_equivalence(trace(gymnasium.make(env_id), 2), trace(gymnasium.make(env_id), 2))
    env = gymnasium.make(env_id)
    env.reset(seed=4)
    env.step(0)
    clone = pickle.loads(pickle.dumps(env))
    assert data_equivalence(env.step(1), clone.step(1))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_gymnasium_training_smoke(env_id):
    sb3 = pytest.importorskip("stable_baselines3")
    env = gymnasium.make(env_id, horizon=64)
    model = sb3.PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0).learn(128)
    observation, _ = env.reset(seed=0)
    action, _ = model.predict(observation, deterministic=True)
    assert env.action_space.contains(int(action))
