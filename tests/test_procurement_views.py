"""The single-aggregator Gymnasium view of the procurement environment."""

import gymnasium
import numpy as np
import pytest
from env_checks import gymnasium_check_env_without_warnings

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs.families.procurement.env import FedProcurementEnv
from fedbandit_envs.families.procurement.views import SingleAggregatorEnv

SMALL = {"num_producers": 4, "horizon": 40, "instance_params": {"max_capacity": 5}}


def test_one_aggregator_is_the_non_federated_setting():
    view = SingleAggregatorEnv(**SMALL)
    env = FedProcurementEnv(num_agents=1, **SMALL)
    observation, _ = view.reset(seed=3)
    env.reset(seed=3)
    assert observation.shape == (4 * 4 + 1,) and observation.dtype == np.float32
    rng = np.random.default_rng(0)
    for _ in range(40):
        action = rng.integers(0, view.action_space.nvec)
        observation, reward, terminated, truncated, info = view.step(action)
        _, rewards, _, _, infos = env.step({"aggregator_0": action})
        _, _, _, truncations, _ = env.step({})  # the round's report step (nothing to send alone)
        assert reward == rewards["aggregator_0"] and info["regret"] == infos["aggregator_0"]["regret"]
        assert truncated == truncations["aggregator_0"] and not terminated
    k = view.core.instance.capacities[0]
    # the flat observation: last units / k, last good units / k, own units / (k T), empirical quality, t / T
    assert np.allclose(observation[:4], action / k) and observation[16] == 1.0


def test_dict_observation_and_peer_views_pass_check_env():
    for kwargs in (
        {"observation": "dict"},
        {"num_agents": 3, "observation": "dict", "peer_params": {"t_lo": 4}},
        {"num_agents": 3, "peer_algorithm": "fcb", "peer_params": {"t_lo": 4}},
    ):
        gymnasium_check_env_without_warnings(gymnasium.make("fedbandit/SingleAggregator-v0", **SMALL, **kwargs))


def test_peer_messages_reach_the_learner():
    view = SingleAggregatorEnv(num_agents=3, observation="dict", peer_params={"t_lo": 4, "t_hi": 16}, **SMALL)
    observation, _ = view.reset(seed=0)
    assert observation["inbox_mask"].tolist() == [0, 0]
    for _ in range(4):
        observation, _, _, _, info = view.step(np.ones(4, np.int64))
    # round 4 is a communication round: both peers' noisy window sums arrive (normalised, clipped to [-1, 1])
    assert observation["inbox_mask"].tolist() == [1, 1] and np.abs(observation["inbox"]).max() <= 1
    assert info["messages_sent"] == 2  # the learner follows P-FCB's protocol with its own data


def test_bad_view_arguments():
    with pytest.raises(ValueError, match="observation"):
        SingleAggregatorEnv(observation="pixels")
    with pytest.raises(ValueError, match="peer_algorithm"):
        SingleAggregatorEnv(num_agents=2, peer_algorithm="gossip")
    view = SingleAggregatorEnv(**SMALL)
    with pytest.raises(RuntimeError, match="reset"):
        view.step(np.zeros(4, np.int64))
    view.reset(seed=0)
    with pytest.raises(ValueError, match="4 unit counts"):
        view.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="capacity"):
        view.step(view.action_space.nvec.astype(np.int64))  # one more than the capacity
