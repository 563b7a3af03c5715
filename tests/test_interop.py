"""The fixed-shape form (fedbandit_envs.interop) driven by PettingZoo's test utilities, SuperSuit, SB3 and RLlib.

``parallel_api_test`` and ``parallel_seed_test`` run on it beside the raw form, in ``test_conformance.py``.
"""

import pickle
import types
import warnings

import numpy as np
import pettingzoo
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import data_equivalence
from pettingzoo.test import api_test, max_cycles_test
from pettingzoo.utils.conversions import parallel_to_aec

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs.interop import STATISTICS, FixedShapeParallelEnv, make_fixed_shape
from fedbandit_envs.registration import PARALLEL_ENVS

PARALLEL_IDS = sorted(PARALLEL_ENVS)
#: One id of each family (the library tests that train run on these only, to keep CPU use modest).
FAMILY_IDS = ["fedbandit/GossipMAB-v0", "fedbandit/FederatedLinear-v0", "fedbandit/Procurement-v0"]
#: PettingZoo's api_test suggests Box or Discrete actions; the procurement action is a MultiDiscrete by design.
MULTI_DISCRETE_HINT = "Action space for each agent probably should be gymnasium.spaces.box or gymnasium.spaces.discrete"
#: Before its first pull an agent has no statistics, no last arm and reward and (linear: when inactive) no contexts.
ALL_ZEROS_HINT = "Observation numpy array is all zeros"
#: The synthetic linear envs' Gaussian reward noise is unbounded, in the raw env's reward space as in the statistics.
UNBOUNDED_HINT = "Agent's m(in|ax)imum observation space value is -?infinity"
#: What api_test says of the raw environments' dict observations and actions (and of procurement's per-agent spaces).
RAW_HINTS = [
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be",
    MULTI_DISCRETE_HINT,
    "Agents have different observation space sizes",
]


def make(env_id, **kwargs):
    return make_fixed_shape(env_id, **PARALLEL_ENVS[env_id].test_kwargs, **kwargs)


def random_actions(env):
    return {a: env.action_space(a).sample() for a in env.agents}


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_spaces_are_fixed_flattenable_and_shared(env_id):
    env = make(env_id)
    first = env.possible_agents[0]
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(first)
        assert env.action_space(agent) is env.action_space(first)
        for space in (env.observation_space(agent), env.action_space(agent), env.message_space(agent)):
            assert space.is_np_flattenable
            spaces.flatten_space(space)
    assert isinstance(env.observation_space(first), spaces.Box)
    assert env.observation_space(first).dtype == np.float32
    assert env.observation_space(first) == spaces.flatten_space(env.dict_observation_space)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_aec_api(env_id):
    env = parallel_to_aec(make(env_id))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", ALL_ZEROS_HINT)
        if "Procurement" in env_id:
            warnings.filterwarnings("ignore", MULTI_DISCRETE_HINT)
        if PARALLEL_ENVS[env_id].entry_point.endswith(":FederatedLinear"):
            warnings.filterwarnings("ignore", UNBOUNDED_HINT)
        api_test(env, num_cycles=100)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_max_cycles(env_id):
    module = types.SimpleNamespace(
        parallel_env=lambda max_cycles: make(env_id, max_cycles=max_cycles),
        env=lambda max_cycles: parallel_to_aec(make(env_id, max_cycles=max_cycles)),
    )
    max_cycles_test(module)


@pytest.mark.parametrize("env_id", ["fedbandit/FederatedMAB-v0", "fedbandit/GossipMAB-v0"])
def test_raw_mab_max_cycles_is_its_horizon(env_id):
    """A raw MAB slot is one step (without boundary hops), so its horizon passes for max_cycles."""

    def raw(max_cycles):
        return pettingzoo.make("parallel", env_id, **{**PARALLEL_ENVS[env_id].test_kwargs, "horizon": max_cycles})

    max_cycles_test(types.SimpleNamespace(parallel_env=raw, env=lambda max_cycles: parallel_to_aec(raw(max_cycles))))


@pytest.mark.parametrize("env_id", FAMILY_IDS)
def test_one_step_per_slot_until_the_horizon(env_id):
    env = make(env_id)
    env.action_space(env.possible_agents[0]).seed(0)
    env.reset(seed=0)
    steps = 0
    while env.agents:
        _, _, terminations, truncations, _ = env.step(random_actions(env))
        steps += 1
    assert steps == PARALLEL_ENVS[env_id].test_kwargs["horizon"]
    assert all(truncations.values()) and not any(terminations.values())
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_mab_statistics_and_rewards_match_the_raw_env_exactly():
    kwargs = {**PARALLEL_ENVS["fedbandit/FederatedMAB-v0"].test_kwargs, "topology": "complete"}
    env = make_fixed_shape("fedbandit/FederatedMAB-v0", **kwargs)
    raw = pettingzoo.make("parallel", "fedbandit/FederatedMAB-v0", **kwargs)
    m, k = kwargs["num_agents"], kwargs["num_arms"]
    rng = np.random.default_rng(0)
    env.reset(seed=11)
    raw.reset(seed=11)
    counts, sums = np.zeros((m, k)), np.zeros((m, k))
    for _ in range(kwargs["horizon"]):
        arms = rng.integers(0, k, m)
        sent_counts, sent_sums = counts.copy(), sums.copy()  # the statistics go with the pull, before it
        observations, rewards, *_ = env.step({f"agent_{i}": arms[i] for i in range(m)})
        _, raw_rewards, *_ = raw.step({f"agent_{i}": int(arms[i]) for i in range(m)})
        assert rewards == raw_rewards
        for i in range(m):
            counts[i, arms[i]] += 1
            sums[i, arms[i]] += raw_rewards[f"agent_{i}"]
            fields = env.unflatten(observations[f"agent_{i}"])
            assert np.array_equal(fields["counts"], counts[i].astype(np.float32))
            assert np.array_equal(fields["sums"], sums[i].astype(np.float32))
            assert np.array_equal(fields["arm"], np.eye(k, dtype=np.float32)[arms[i]])
            others = np.arange(m) != i
            assert np.array_equal(fields["inbox_counts"][others], sent_counts[others].astype(np.float32))
            assert np.array_equal(fields["inbox_sums"][others], sent_sums[others].astype(np.float32))
            assert not fields["inbox_counts"][i].any()
    # one statistics message per directed edge and slot, costed in the wrapped env's ledger
    assert env.unwrapped.ledger.totals()["messages"] == kwargs["horizon"] * m * (m - 1)


def test_agents_linked_to_a_server_too_send_to_their_agent_neighbours_only():
    from fedbandit_envs.topology import from_adjacency

    m, horizon = 4, 10
    ring = np.roll(np.eye(m, dtype=bool), 1, axis=1) | np.roll(np.eye(m, dtype=bool), -1, axis=1)
    topology = from_adjacency(ring, server_links=np.ones(m, dtype=bool))
    env = make_fixed_shape("fedbandit/FederatedMAB-v0", num_agents=m, num_arms=3, horizon=horizon, topology=topology)
    env.reset(seed=0)
    while env.agents:
        observations, *_ = env.step(dict.fromkeys(env.agents, 1))
    assert env.unwrapped.ledger.totals()["messages"] == horizon * 2 * m  # no copy to the (unhosted) server
    for i in range(m):
        received = env.unflatten(observations[f"agent_{i}"])["inbox_counts"][:, 1]
        expected = np.where(ring[i], horizon - 1, 0)  # the neighbours' pulls before the last slot
        assert np.array_equal(received, expected.astype(np.float32))


def test_gossip_sends_to_the_announced_partner_only():
    env = make("fedbandit/GossipMAB-v0")
    env.action_space(env.possible_agents[0]).seed(1)
    observations, _ = env.reset(seed=1)
    inboxes = {a: env.unflatten(o)["inbox_counts"] for a, o in observations.items()}
    slots = 0
    while env.agents:
        partner_rows = {a: env.unflatten(o)["partner"] for a, o in observations.items()}
        assert sum(row.sum() for row in partner_rows.values()) == 2  # one gossip edge per slot
        before = env.unwrapped.ledger.totals()["messages"]
        observations, *_ = env.step(random_actions(env))
        assert env.unwrapped.ledger.totals()["messages"] - before == 2
        for agent, observation in observations.items():
            received = env.unflatten(observation)["inbox_counts"]
            if partner_rows[agent].any():
                partner = int(np.argmax(partner_rows[agent]))
                assert received[partner].sum() == slots  # the partner's pulls before this slot
                inboxes[agent][partner] = received[partner]
            assert np.array_equal(received, inboxes[agent])
        slots += 1


def test_procurement_statistics_broadcast_after_the_round_and_capacities_cap_units():
    env_id = "fedbandit/Procurement-v0"
    env = make(env_id)
    observations, _ = env.reset(seed=3)
    capacities = env.unwrapped.problem.capacities
    n, m = capacities.shape
    top = env.action_space(env.possible_agents[0]).nvec - 1
    assert np.array_equal(top, capacities.max(axis=0))
    units, goods = np.zeros((n, m)), np.zeros((n, m))
    for _ in range(5):
        observations, rewards, _, _, infos = env.step(dict.fromkeys(env.agents, top))
        for j, agent in enumerate(env.possible_agents):
            assert infos[agent]["units_capped"] == int((top - capacities[j]).sum())
            fields = env.unflatten(observations[agent])
            assert np.array_equal(fields["procured"], capacities[j].astype(np.float32))
            units[j] += fields["procured"]
            goods[j] += fields["successes"]
        for j, agent in enumerate(env.possible_agents):
            fields = env.unflatten(observations[agent])
            assert np.array_equal(fields["units"], units[j].astype(np.float32))
            assert np.array_equal(fields["goods"], goods[j].astype(np.float32))
            others = np.arange(n) != j  # the report step follows the round: statistics including it
            assert np.array_equal(fields["inbox_units"][others], units[others].astype(np.float32))
            assert np.array_equal(fields["inbox_goods"][others], goods[others].astype(np.float32))


def test_linear_statistics_are_the_ridge_sums_of_the_client():
    env_id = "fedbandit/FederatedLinearHeterogeneous-v0"
    env = make(env_id)
    raw = pettingzoo.make("parallel", env_id, **PARALLEL_ENVS[env_id].test_kwargs)
    assert env.messages == "none" and not any(k.startswith("inbox") for k in env.dict_observation_space)
    env.reset(seed=5)
    raw_observations, _ = raw.reset(seed=5)
    d = env.dict_observation_space["moment"].shape[0]
    gram = {a: np.zeros((d, d)) for a in env.possible_agents}
    moment = {a: np.zeros(d) for a in env.possible_agents}
    pulls = dict.fromkeys(env.possible_agents, 0)
    rng = np.random.default_rng(5)
    while env.agents:
        actions = {a: int(rng.integers(0, env.action_space(a).n)) for a in env.agents}
        active = [a for a in raw.agents if raw_observations[a]["active"]]
        chosen = {a: raw_observations[a]["contexts"][actions[a]].copy() for a in active}  # raw float64 contexts
        observations, rewards, *_ = env.step(actions)
        raw_observations, raw_rewards, *_ = raw.step({a: actions[a] for a in active})
        assert rewards == raw_rewards  # one slot: the act step's rewards (the report step gives 0)
        for a in active:
            gram[a] += np.outer(chosen[a], chosen[a])
            moment[a] += raw_rewards[a] * chosen[a]
            pulls[a] += 1
        while raw.agents and raw_observations["client_0"]["phase"] == 1:  # the report step
            raw_observations, *_ = raw.step({})
        for a, observation in observations.items():
            got = env.unflatten(observation)
            assert np.array_equal(got["gram"], gram[a].astype(np.float32))
            assert np.array_equal(got["moment"], moment[a].astype(np.float32))
            assert got["pulls"][0] == pulls[a]
    assert sum(pulls.values()) == PARALLEL_ENVS[env_id].test_kwargs["horizon"]  # one active client per slot
    assert env.unwrapped.ledger.totals()["messages"] == 0


def test_messages_pass_the_wrapped_fault_hooks():
    from wrappers import MessageDrops

    kwargs = {**PARALLEL_ENVS["fedbandit/FederatedMAB-v0"].test_kwargs, "topology": "complete"}
    env = FixedShapeParallelEnv(MessageDrops(pettingzoo.make("parallel", "fedbandit/FederatedMAB-v0", **kwargs), 1.0))
    inbox = env.dict_observation_space["inbox_counts"]
    assert np.isneginf(inbox.low).all() and np.isposinf(inbox.high).all()  # hooks may change payloads
    env.action_space("agent_0").seed(0)
    env.reset(seed=0)
    while env.agents:
        observations, *_ = env.step(random_actions(env))
    fields = env.unflatten(observations["agent_0"])
    assert fields["counts"].sum() == kwargs["horizon"] and not fields["inbox_counts"].any()  # every copy lost


def test_a_strict_dp_wrapper_refuses_the_undeclared_statistics():
    from wrappers import LaplaceMessageDP

    kwargs = {**PARALLEL_ENVS["fedbandit/FederatedMAB-v0"].test_kwargs, "topology": "complete"}
    inner = pettingzoo.make("parallel", "fedbandit/FederatedMAB-v0", **kwargs)
    env = FixedShapeParallelEnv(LaplaceMessageDP(inner, epsilon=1.0, kinds=(STATISTICS,)))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="undeclared payload fields \\['counts', 'sums'\\]"):
        env.step(dict.fromkeys(env.agents, 0))


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_raw_aec_api(env_id):
    """The raw environments through parallel_to_aec; their dict observations draw PettingZoo's style hints only."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for hint in RAW_HINTS:
            warnings.filterwarnings("ignore", hint)
        api_test(pettingzoo.make("aec", env_id, **PARALLEL_ENVS[env_id].test_kwargs), num_cycles=100)


@pytest.mark.parametrize("env_id", FAMILY_IDS)
def test_flat_observation_is_gymnasium_flatten_of_the_dict_observation(env_id):
    flat, nested = make(env_id), make(env_id, flatten=False)
    flat_observations, _ = flat.reset(seed=4)
    dict_observations, _ = nested.reset(seed=4)
    flat.action_space(flat.possible_agents[0]).seed(4)
    while flat.agents:
        for agent, observation in flat_observations.items():
            expected = spaces.flatten(nested.dict_observation_space, dict_observations[agent])
            assert observation.dtype == expected.dtype and np.array_equal(observation, expected)
        actions = random_actions(flat)
        flat_observations, *_ = flat.step(actions)
        dict_observations, *_ = nested.step(actions)


def test_dict_observations_and_pickle():
    env = make("fedbandit/GossipMAB-v0", flatten=False)
    observations, _ = env.reset(seed=2)
    space = env.observation_space(env.possible_agents[0])
    assert isinstance(space, spaces.Dict) and all(space.contains(o) for o in observations.values())
    with pytest.raises(ValueError, match="already dicts"):
        env.unflatten(observations["agent_0"])
    env.action_space("agent_0").seed(0)
    env.step(random_actions(env))
    clone = pickle.loads(pickle.dumps(env))
    actions = random_actions(env)
    assert data_equivalence(env.step(actions), clone.step(actions))


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="messages='none'"):
        make("fedbandit/FederatedLinear-v0", messages="broadcast")
    with pytest.raises(ValueError, match="messages must be one of"):
        make("fedbandit/GossipMAB-v0", messages="all")
    with pytest.raises(ValueError, match="max_cycles must be >= 1"):
        make("fedbandit/GossipMAB-v0", max_cycles=0)
    with pytest.raises(TypeError, match="flatten"):
        make("fedbandit/GossipMAB-v0", flatten=1)
    with pytest.raises(TypeError, match="ParallelEnv"):
        FixedShapeParallelEnv(object())
    with pytest.raises(TypeError, match="fedbandit multi-agent environment"):
        FixedShapeParallelEnv(BoxEnv())
    env = make("fedbandit/GossipMAB-v0")
    with pytest.raises(ValueError, match="unknown agent"):
        env.action_space("agent_9")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="missing \\['agent_3'\\]"):
        env.step({a: 0 for a in env.agents[:3]})
    with pytest.raises(ValueError, match="the action of agent_0 must be in Discrete\\(3\\)"):
        env.step({a: 3 for a in env.agents})


class BoxEnv(pettingzoo.ParallelEnv):
    """A ParallelEnv of another suite: one agent with a Box observation."""

    possible_agents = ["player_0"]

    def observation_space(self, agent):
        return spaces.Box(0, 1, (2,))

    def action_space(self, agent):
        return spaces.Discrete(2)


# ---------------------------------------------------------------------------------------------- third-party learners
@pytest.mark.parametrize("env_id", FAMILY_IDS)
def test_supersuit_vector_env_trains_sb3_ppo(env_id):
    supersuit = pytest.importorskip("supersuit")
    sb3 = pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    env = make(env_id)
    vec = supersuit.pettingzoo_env_to_vec_env_v1(env)
    vec = supersuit.concat_vec_envs_v1(vec, 2, num_cpus=0, base_class="stable_baselines3")
    agents = len(env.possible_agents)
    assert vec.num_envs == 2 * agents
    assert vec.observation_space == env.observation_space(env.possible_agents[0])
    # SuperSuit 3.11's SB3 wrapper cannot take a seed (its ConcatVecEnv has no seed()): seed torch and the envs
    sb3.common.utils.set_random_seed(0)
    vec.venv.reset(seed=0)
    model = sb3.PPO("MlpPolicy", vec, n_steps=32, batch_size=32, n_epochs=1)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters()))
    observations = vec.reset()
    actions, _ = model.predict(observations, deterministic=True)
    assert all(env.action_space(env.possible_agents[0]).contains(a) for a in actions)
    vec.close()


@pytest.mark.slow
def test_rllib_parallel_pettingzoo_env_trains_ppo():
    pytest.importorskip("ray.rllib")
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    env_id = "fedbandit/GossipMAB-v0"
    register_env("fedbandit_fixed_shape", lambda config: ParallelPettingZooEnv(make(env_id)))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        config = (
            PPOConfig()
            .environment("fedbandit_fixed_shape")
            .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: "shared")
            .env_runners(num_env_runners=0, rollout_fragment_length=60)
            .training(train_batch_size_per_learner=240, minibatch_size=60, num_epochs=1)
            .debugging(seed=0)
        )
        algorithm = config.build_algo()
        for _ in range(2):
            result = algorithm.train()
        assert result["training_iteration"] == 2
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 2 * 240
        algorithm.stop()
    finally:
        ray.shutdown()


def test_statistics_declared_with_privacy_pass_a_strict_dp_wrapper_and_are_noised():
    from fedbandit_envs.channel.privacy import Public, Sensitive
    from wrappers.dp import LaplaceMessageDP

    setting = {"num_agents": 3, "num_arms": 2, "horizon": 6, "topology": "complete"}
    shared = {"counts": Public(), "sums": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
    inner = pettingzoo.make("parallel", "fedbandit/FederatedMAB-v0", **setting)
    wrapped = LaplaceMessageDP(inner, epsilon=1.0, kinds=(STATISTICS,))
    undeclared = FixedShapeParallelEnv(wrapped, flatten=False)
    undeclared.reset(seed=0)
    with pytest.raises(ValueError, match="undeclared payload fields"):
        undeclared.step({a: 0 for a in undeclared.agents})
    env = FixedShapeParallelEnv(wrapped, flatten=False, privacy=shared)
    plain = make_fixed_shape("fedbandit/FederatedMAB-v0", flatten=False, **setting)
    env.reset(seed=0)
    plain.reset(seed=0)
    for _ in range(3):
        noised, *_ = env.step({a: 0 for a in env.agents})
        exact, *_ = plain.step({a: 0 for a in plain.agents})
    np.testing.assert_array_equal(noised["agent_0"]["inbox_counts"], exact["agent_0"]["inbox_counts"])  # public
    assert not np.array_equal(noised["agent_0"]["inbox_sums"], exact["agent_0"]["inbox_sums"])  # noised
    assert wrapped.epsilon_spent().tolist() == [3.0, 3.0, 3.0]  # one release per agent and slot


def test_a_privacy_declaration_must_name_the_statistics():
    from fedbandit_envs.channel.privacy import Public

    with pytest.raises(ValueError, match="privacy declares field 'nope'"):
        make("fedbandit/GossipMAB-v0", privacy={"nope": Public()})
