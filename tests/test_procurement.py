"""The procurement environment (solanki-pfcb §1, §6): instances, outcomes, regret, communication, bad input."""

import numpy as np
import pytest
from scipy import stats

from fedbandit_envs.channel import NEIGHBOURS, Message
from fedbandit_envs.families.procurement.env import (
    FedProcurementEnv,
    ProcurementCore,
    ProcurementInstance,
    build_instance,
    normal_instance,
    stress_instance,
    uniform_instance,
)
from fedbandit_envs.topology import SERVER


def tiny_instance(alpha=0.5):
    # q in {0, 1}: outcomes are deterministic (x = l for producer 0, 0 for producer 1)
    return ProcurementInstance(np.array([1.0, 0.0]), np.array([[0.2, 0.1]]), np.array([[2, 3]]), alpha)


# ---------------------------------------------------------------------------------------------- instances
def test_uniform_family_shapes_ranges_and_homogeneity():
    inst = uniform_instance(4, 6, np.random.default_rng(0))
    assert inst.costs.shape == inst.capacities.shape == (4, 6) and inst.quality.shape == (6,)
    assert inst.capacities.min() >= 1 and inst.capacities.max() <= 50 and inst.alpha == 0.4
    assert not inst.homogeneous and not np.all(inst.costs == inst.costs[0])
    hom = uniform_instance(4, 6, np.random.default_rng(0), homogeneous=True)
    assert hom.homogeneous and np.all(hom.costs == hom.costs[0]) and np.all(hom.capacities == hom.capacities[0])
    assert stress_instance(2, 3, np.random.default_rng(0)).alpha == 0.7


def test_normal_family_is_clipped_and_centred_on_alpha():
    inst = normal_instance(200, 30, np.random.default_rng(1), std=0.2)
    assert inst.costs.min() >= 0 and inst.costs.max() <= 1
    # mean of N(0.4, 0.2) clipped to [0, 1] is 0.4 + 0.2 (phi(2) - phi(3)) + small tails = 0.4028 (ignoring the
    # clipping of the upper tail, which is 0.0013 lower); 6000 draws give sd 0.0026
    assert inst.costs.mean() == pytest.approx(0.4, abs=0.012)


def test_agent_pool_nests_agent_sets():
    small = build_instance("uniform", 10, 30, 3, agent_pool=40)
    large = build_instance("uniform", 40, 30, 3)
    assert np.array_equal(small.quality, large.quality)
    assert np.array_equal(small.costs, large.costs[:10]) and np.array_equal(small.capacities, large.capacities[:10])
    assert np.array_equal(large.first_agents(10).costs, small.costs)


@pytest.mark.parametrize(("alpha", "expected"), [(0.7, 0.67), (0.6, 0.18)])
def test_share_of_binding_agents_matches_the_spec(alpha, expected):
    # spec §4.5: "take all profitable capacity" breaks QC for 67% (alpha 0.7) / 18% (alpha 0.6) of U instances;
    # 600 draws give a binomial sd of at most 0.019, tolerance 3 sd
    rng = np.random.default_rng(2)
    binding = 0
    for _ in range(600):
        inst = uniform_instance(1, 30, rng, alpha=alpha)
        full = np.where(inst.unit_revenue > 0, inst.capacities, 0)
        binding += not inst.qc_satisfied(full)[0]
    assert binding / 600 == pytest.approx(expected, abs=0.057)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": -0.1}, "alpha"),
        ({"capacities": np.array([[-1, 2]])}, "capacities must be integers >= 1"),
        ({"capacities": np.array([[0, 2]])}, "capacities must be integers >= 1"),
        ({"capacities": np.array([[1.5, 2]])}, "capacities must be integers"),
        ({"quality": np.array([1.2, 0.5])}, "quality"),
        ({"costs": np.array([[0.1, -0.2]])}, "costs"),
        ({"costs": np.array([[0.1, 0.2, 0.3]])}, "shape"),
        ({"rho": 0.0}, "rho"),
        (
            {"costs": np.array([[0.1, 0.2], [0.3, 0.2]]), "capacities": np.ones((2, 2), int), "homogeneous": True},
            "homo",
        ),
    ],
)
def test_bad_instances_raise(kwargs, match):
    base = {"quality": np.array([0.5, 0.5]), "costs": np.array([[0.1, 0.2]]), "capacities": np.array([[1, 2]])}
    base.update(alpha=0.4)
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ProcurementInstance(**base)


def test_bad_family_arguments_raise():
    with pytest.raises(ValueError, match="instance must be one of"):
        FedProcurementEnv(instance="cauchy")
    with pytest.raises(ValueError, match="agent_pool"):
        FedProcurementEnv(num_agents=5, agent_pool=3)
    with pytest.raises(ValueError, match="alpha"):
        FedProcurementEnv(alpha=2.0)
    with pytest.raises(ValueError, match="max_capacity"):
        FedProcurementEnv(instance_params={"max_capacity": 0})
    with pytest.raises(TypeError, match="bad parameters"):
        FedProcurementEnv(instance_params={"sigma": 0.1})
    with pytest.raises(ValueError, match=r"\['alpha'\] given both as keywords and in instance_params"):
        FedProcurementEnv(alpha=0.3, instance_params={"alpha": 0.5})
    assert FedProcurementEnv(instance_params={"alpha": 0.5, "rho": 2.0}).core.instance.alpha == 0.5


def test_a_ragged_units_action_is_named_in_the_error():
    env = FedProcurementEnv(instance=tiny_instance(), horizon=3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="aggregator_0 is not a flat vector of unit counts"):
        env.step({"aggregator_0": [[1], [1, 2]]})


# ---------------------------------------------------------------------------------------------- regret by hand
def test_regret_penalty_and_rewards_by_hand():
    # r = rho q - c = [0.8, -0.1]; benchmark: 2 units of producer 0 (QC slack 2 * 0.5 = 1 >= 0), r* = 1.6;
    # L = r* - sum k min(0, r) = 1.6 + 0.3 = 1.9
    env = FedProcurementEnv(instance=tiny_instance(), horizon=4)
    _, infos = env.reset(seed=0)
    assert infos["aggregator_0"]["capacities"].tolist() == [2, 3] and infos["aggregator_0"]["alpha"] == 0.5
    expected = [  # action, reward, regret, qc
        ([1, 3], 1.0 - (0.2 + 0.3), 1.9, False),  # QC: 1 * 0.5 + 3 * (-0.5) = -1 < 0 -> penalty L
        ([2, 2], 2.0 - (0.4 + 0.2), 1.6 - 1.4, True),  # QC slack 1 - 1 = 0: satisfied
        ([0, 0], 0.0, 1.6, True),  # the empty vector satisfies QC
        ([2, 0], 2.0 - 0.4, 0.0, True),
    ]
    total = 0.0
    for action, reward, regret, qc in expected:
        obs, rewards, _, truncations, infos = env.step({"aggregator_0": np.array(action)})
        info = infos["aggregator_0"]
        total += regret
        assert rewards["aggregator_0"] == pytest.approx(reward, abs=1e-12)
        assert info["regret"] == pytest.approx(regret, abs=1e-12) and info["qc_satisfied"] is qc
        assert info["r_star"] == pytest.approx(1.6) and info["L"] == pytest.approx(1.9)
        assert info["cumulative_regret"] == pytest.approx(total, abs=1e-12)
        assert obs["aggregator_0"]["procured"].tolist() == action
        assert obs["aggregator_0"]["successes"].tolist() == [action[0], 0]
        assert obs["aggregator_0"]["phase"] == 1 and not truncations["aggregator_0"]  # the round's report step
        obs, rewards, _, truncations, _ = env.step({})
        assert obs["aggregator_0"]["phase"] == 0 and rewards["aggregator_0"] == 0.0
    assert info["violations"] == 1 and info["exact_regret"] == pytest.approx(total)
    assert truncations["aggregator_0"] and env.agents == []  # after the last round's report step


def test_evaluation_values_are_hidden_without_evaluation_mode():
    env = FedProcurementEnv(num_agents=2, num_producers=3, horizon=2, evaluation=False)
    env.reset(seed=0)
    _, _, _, _, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
    assert "regret" not in infos["aggregator_0"] and "messages_sent" in infos["aggregator_0"]


# ---------------------------------------------------------------------------------------------- outcomes
def test_outcomes_are_binomial_and_monotone_in_units():
    inst = build_instance("uniform", 2, 3, 5, max_capacity=8)
    core_full, core_half = ProcurementCore(inst, 4000), ProcurementCore(inst, 4000)
    core_full.reset([9])
    core_half.reset([9])
    full = inst.capacities[None]
    half = full // 2
    sums = np.zeros_like(full, dtype=float)
    squares = np.zeros_like(sums)
    for _ in range(4000):
        x = core_full.step(full).successes
        y = core_half.step(half).successes
        assert np.all(y <= x) and np.all(x <= full)  # common random numbers: x grows with l for a fixed uniform
        sums += x
        squares += x**2
    mean, var = sums / 4000, squares / 4000 - (sums / 4000) ** 2
    expected_mean = full * inst.quality
    expected_var = full * inst.quality * (1 - inst.quality)
    # standard error of the mean: sqrt(var / 4000) <= sqrt(12.5 / 4000) = 0.056; 4 SE
    assert np.abs(mean - expected_mean).max() < 4 * np.sqrt(expected_var.max() / 4000) + 1e-9
    assert np.allclose(var, expected_var, rtol=0.15, atol=0.05)


def test_outcome_streams_depend_on_the_seed_only():
    env_a, env_b = (FedProcurementEnv(num_agents=2, num_producers=3, horizon=5) for _ in range(2))
    actions = {f"aggregator_{j}": np.ones(3, np.int64) for j in range(2)}
    env_a.reset(seed=4)
    env_b.reset(seed=4)
    for _ in range(5):
        a, b = env_a.step(actions), env_b.step(actions)
        assert all(np.array_equal(a[0][k]["successes"], b[0][k]["successes"]) for k in actions)
    first_q = env_a.problem.quality.copy()
    env_a.reset(seed=5)
    assert np.array_equal(env_a.problem.quality, first_q)  # the instance is fixed across resets


def test_uniform_family_ks():
    q = uniform_instance(1, 2000, np.random.default_rng(7)).quality
    assert stats.kstest(q, "uniform").pvalue > 1e-3


# ---------------------------------------------------------------------------------------------- bad actions
def test_bad_actions_raise_before_any_state_change():
    env = FedProcurementEnv(instance=tiny_instance(), horizon=3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"capacity k\[0, 1\]"):
        env.step({"aggregator_0": np.array([1, 4])})
    with pytest.raises(ValueError, match=r"must lie in \[0, 2\]"):
        env.step({"aggregator_0": np.array([-1, 0])})
    with pytest.raises(ValueError, match="vector of 2 unit counts"):
        env.step({"aggregator_0": np.array([1])})
    with pytest.raises(TypeError, match="integers"):
        env.step({"aggregator_0": np.array([1.0, 0.0])})
    with pytest.raises(ValueError, match="one entry per live agent"):
        env.step({})
    assert env.core.slot == 0 and env.core.regret.sum() == 0


# ---------------------------------------------------------------------------------------------- communication
def test_report_steps_broadcast_over_the_complete_graph_and_are_costed():
    env = FedProcurementEnv(num_agents=3, num_producers=2, horizon=5, instance_params={"max_capacity": 3})
    env.reset(seed=0)
    message = Message(sender=1, recipient=NEIGHBOURS, kind="hello", payload={"v": np.array([1.0, 2.0])})
    with pytest.raises(ValueError, match="report step"):  # messages go in the report step, after the outcomes
        env.step(
            {a: {"units": np.zeros(2, np.int64), "messages": [message] * (a == "aggregator_1")} for a in env.agents}
        )
    obs, *_ = env.step({a: {"units": np.zeros(2, np.int64), "messages": []} for a in env.agents})
    assert all(o["phase"] == 1 and o["inbox"] == () for o in obs.values())
    obs, *_ = env.step({"aggregator_1": {"messages": [message]}})
    assert [len(obs[a]["inbox"]) for a in env.possible_agents] == [1, 0, 1]
    delivered = obs["aggregator_0"]["inbox"][0]
    assert delivered.payload["v"].tolist() == [1.0, 2.0] and delivered.slot == 0 and obs["aggregator_0"]["phase"] == 0
    totals = env.ledger.totals()
    assert totals["messages"] == 2 and totals["bytes"] == 2 * 16 and totals["peer_messages"] == 2
    assert totals["links"] == 2 and totals["cost"] == 2.0  # two agent-agent links used once each (c2 = 1)
    env.step({a: np.zeros(2, np.int64) for a in env.agents})
    forged = Message(sender=2, recipient=0, kind="hello", payload={"v": np.array([0.0])})
    with pytest.raises(ValueError, match="only send as itself"):
        env.step({"aggregator_1": {"messages": [forged]}})
    with pytest.raises(ValueError, match="no server"):
        env.step({"aggregator_1": {"messages": [Message(sender=1, recipient=SERVER, kind="hello")]}})
    assert env.ledger.totals() == totals and env.pending_phase is not None  # rejected steps change nothing


def test_render_and_state():
    env = FedProcurementEnv(num_agents=2, num_producers=3, horizon=2, render_mode="ansi")
    env.reset(seed=0)
    env.step({a: env.action_space(a).sample() for a in env.agents})
    env.step({})
    assert env.render().startswith("round 1/2") and env.state_space.contains(env.state())
    with pytest.warns(UserWarning, match="render_mode='human'"):
        assert FedProcurementEnv(render_mode="human").render() is None
