"""Conformance of every registered id: PettingZoo API tests (raw and fixed-shape forms), Gymnasium checks, pickling."""

import pickle
import warnings

import gymnasium
import pettingzoo
import pytest
from env_checks import gymnasium_check_env_without_warnings, sb3_check_env_without_warnings
from gymnasium.utils.env_checker import data_equivalence
from pettingzoo.test import parallel_api_test, parallel_seed_test

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs.interop import make_fixed_shape
from fedbandit_envs.registration import GYMNASIUM_ENVS, PARALLEL_ENVS

PARALLEL_IDS = sorted(PARALLEL_ENVS)
GYMNASIUM_IDS = sorted(GYMNASIUM_ENVS)


def make_parallel(env_id):
    return pettingzoo.make("parallel", env_id, **PARALLEL_ENVS[env_id].test_kwargs)


def make_gymnasium(env_id, **overrides):
    return gymnasium.make(env_id, **{**GYMNASIUM_ENVS[env_id].test_kwargs, **overrides})


def rollout(env, seed, steps=50):
    """Observations, rewards and infos of a rollout with actions sampled from seeded action spaces."""
    observations, infos = env.reset(seed=seed)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    trace = [(observations, infos)]
    for _ in range(steps):
        if not env.agents:
            break
        trace.append(env.step({a: env.action_space(a).sample() for a in env.agents}))
    return trace


def test_every_id_is_registered():
    assert set(PARALLEL_IDS) <= set(pettingzoo.parallel_registry)
    assert set(GYMNASIUM_IDS) <= set(gymnasium.registry)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_every_parallel_id_is_named_by_its_metadata(env_id):
    """A variant id (other defaults of a class) is named by itself, in every form, not by its class's name."""
    kwargs = PARALLEL_ENVS[env_id].test_kwargs
    for env in (pettingzoo.make("parallel", env_id, **kwargs), pettingzoo.make("aec", env_id, **kwargs)):
        assert env.metadata["name"] == env_id
    assert make_fixed_shape(env_id, **kwargs).metadata["name"] == f"{env_id}-fixed-shape"


def make_fixed_shape_parallel(env_id):
    return make_fixed_shape(env_id, **PARALLEL_ENVS[env_id].test_kwargs)


#: The two forms of every parallel id: the raw env (dict observations) and its fixed-shape form (flat arrays).
PARALLEL_FORMS = {"raw": make_parallel, "fixed_shape": make_fixed_shape_parallel}


@pytest.mark.parametrize("form", PARALLEL_FORMS)
@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_api(env_id, form):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(PARALLEL_FORMS[form](env_id), num_cycles=100)


@pytest.mark.parametrize("form", PARALLEL_FORMS)
@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_seed(env_id, form):
    parallel_seed_test(lambda: PARALLEL_FORMS[form](env_id), num_cycles=70)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_spaces_contain_observations(env_id):
    env = make_parallel(env_id)
    observations, _ = env.reset(seed=3)
    for _ in range(5):
        for agent, observation in observations.items():
            assert env.observation_space(agent).contains(observation)
        observations, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    assert env.state_space.contains(env.state())


@pytest.mark.parametrize("fixed", [False, True], ids=["raw", "fixed-shape"])
@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_state_render_and_ledger_before_reset_ask_for_a_reset(env_id, fixed):
    kwargs = {**PARALLEL_ENVS[env_id].test_kwargs, "render_mode": "ansi"}
    env = make_fixed_shape(env_id, **kwargs) if fixed else pettingzoo.make("parallel", env_id, **kwargs)
    for call in (env.render, env.state, env.unwrapped.ledger.totals):
        with pytest.raises(RuntimeError, match="reset"):
            call()
    env.reset(seed=0)
    assert env.render() and env.state() is not None and env.unwrapped.ledger.totals()["messages"] == 0


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_parallel_determinism_and_pickle(env_id):
    first, second = rollout(make_parallel(env_id), 7), rollout(make_parallel(env_id), 7)
    assert data_equivalence(first, second)
    assert not data_equivalence(first, rollout(make_parallel(env_id), 8))
    env = make_parallel(env_id)
    env.reset(seed=5)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(i)
    env.step({a: env.action_space(a).sample() for a in env.agents})
    clone = pickle.loads(pickle.dumps(env))
    actions = {a: env.action_space(a).sample() for a in env.agents}
    assert data_equivalence(env.step(actions), clone.step(actions))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_gymnasium_check_env(env_id):
    gymnasium_check_env_without_warnings(make_gymnasium(env_id))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_sb3_check_env(env_id):
    sb3_check_env_without_warnings(make_gymnasium(env_id))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_gymnasium_determinism_and_pickle(env_id):
    def trace(env, seed):
        observation, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        steps = [(observation, info)]
        for _ in range(50):
            steps.append(env.step(env.action_space.sample()))
            if steps[-1][2] or steps[-1][3]:
                break
        return steps

    assert data_equivalence(trace(make_gymnasium(env_id), 2), trace(make_gymnasium(env_id), 2))
    env = make_gymnasium(env_id)
    env.reset(seed=4)
    env.action_space.seed(0)
    env.step(env.action_space.sample())
    clone = pickle.loads(pickle.dumps(env))
    action = env.action_space.sample()
    assert data_equivalence(env.step(action), clone.step(action))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_gymnasium_training_smoke(env_id, sb3):
    env = make_gymnasium(env_id, horizon=64)
    model = sb3.PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0).learn(128)
    observation, _ = env.reset(seed=0)
    action, _ = model.predict(observation, deterministic=True)
    assert env.action_space.contains(action)
