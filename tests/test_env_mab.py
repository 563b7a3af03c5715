"""Tests of the FederatedMAB environment: regret, rewards, seeding, truncation and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.baselines import FullSharingCoordinator
from fedbandit_envs import NEIGHBOURS, SERVER, FederatedMAB, Message, MessageBatch
from fedbandit_envs.core import MAX_BOUNDARY_EXCHANGES

INSTANCE = np.array([[0.1, 0.5, 0.9], [0.3, 0.5, 0.7]])  # global means [0.2, 0.5, 0.8], best arm 2


def arms_action(env: FederatedMAB, arms: list[int]) -> dict:
    return {a: arms[i] for i, a in enumerate(env.agents)}


# ---------------------------------------------------------------------------------------------------------
# Pseudo-regret and state
# ---------------------------------------------------------------------------------------------------------


def test_pseudo_regret_on_a_fixed_instance() -> None:
    env = FederatedMAB(num_agents=2, num_arms=3, horizon=2, instance=INSTANCE, topology="server")
    _, infos = env.reset(seed=0)
    assert infos == {
        a: {"pseudo_regret": 0.0, "instant_regret": 0.0, "messages_sent": 0, "bytes_sent": 0, "cost": 0.0}
        for a in ("agent_0", "agent_1")
    }
    np.testing.assert_allclose(env.instance.global_means, [0.2, 0.5, 0.8], rtol=0, atol=1e-12)
    assert env.instance.best_arm == 2

    _, rewards1, _, _, infos = env.step({"agent_0": 0, "agent_1": 2})
    assert infos["agent_0"]["instant_regret"] == pytest.approx(0.6, abs=1e-12)
    assert infos["agent_0"]["pseudo_regret"] == pytest.approx(0.6, abs=1e-12)
    assert infos["agent_1"]["instant_regret"] == 0.0
    assert infos["agent_1"]["pseudo_regret"] == 0.0
    state = env.state()
    assert state.shape == (6,)
    assert state.dtype == np.float64
    np.testing.assert_allclose(state, [0, 2, rewards1["agent_0"], rewards1["agent_1"], 0.6, 0.0], rtol=0, atol=1e-12)

    _, rewards2, _, _, infos = env.step({"agent_0": 1, "agent_1": 0})
    assert infos["agent_0"]["instant_regret"] == pytest.approx(0.3, abs=1e-12)
    assert infos["agent_0"]["pseudo_regret"] == pytest.approx(0.6 + 0.3, abs=1e-12)
    assert infos["agent_1"]["instant_regret"] == pytest.approx(0.6, abs=1e-12)
    assert infos["agent_1"]["pseudo_regret"] == pytest.approx(0.0 + 0.6, abs=1e-12)
    np.testing.assert_allclose(
        env.state(), [1, 0, rewards2["agent_0"], rewards2["agent_1"], 0.9, 0.6], rtol=0, atol=1e-12
    )
    assert env.state_space.contains(env.state())
    for r in (*rewards1.values(), *rewards2.values()):
        assert r in (0.0, 1.0)


def test_regret_uses_global_gaps_not_local_ones() -> None:
    # agent 0's local best arm is 2, agent 1's is 0; the global best is arm 1 (means [0.45, 0.5, 0.45])
    means = np.array([[0.1, 0.5, 0.8], [0.8, 0.5, 0.1]])
    env = FederatedMAB(num_agents=2, num_arms=3, horizon=3, instance=means)
    env.reset(seed=0)
    np.testing.assert_array_equal(env.instance.local_best_arms, [2, 0])
    assert env.instance.best_arm == 1
    *_, infos = env.step({"agent_0": 2, "agent_1": 0})
    assert infos["agent_0"]["pseudo_regret"] == pytest.approx(0.05, abs=1e-12)
    assert infos["agent_1"]["pseudo_regret"] == pytest.approx(0.05, abs=1e-12)
    *_, infos = env.step({"agent_0": 1, "agent_1": 1})
    assert infos["agent_0"]["instant_regret"] == 0.0
    assert infos["agent_1"]["pseudo_regret"] == pytest.approx(0.05, abs=1e-12)


def test_heterogeneous_instance_global_means_and_regret() -> None:
    env = FederatedMAB(num_agents=4, num_arms=5, horizon=4, instance="heterogeneous", instance_params={"h_max": 0.3})
    env.reset(seed=3)
    means = np.asarray(env.instance.means)
    assert means.shape == (4, 5)
    assert not np.all(means == means[0])
    np.testing.assert_allclose(env.instance.global_means, means.mean(axis=0), rtol=0, atol=1e-12)
    global_means = [sum(means[i, k] for i in range(4)) / 4 for k in range(5)]
    best = max(global_means)
    assert env.instance.best_arm == global_means.index(best)
    local_best = [int(np.argmax(means[i])) for i in range(4)]
    assert any(k != env.instance.best_arm for k in local_best)
    # every agent pulls its *local* best arm; it is charged the *global* gap of that arm
    *_, infos = env.step(arms_action(env, local_best))
    for i in range(4):
        expected = best - global_means[local_best[i]]
        assert infos[f"agent_{i}"]["pseudo_regret"] == pytest.approx(expected, abs=1e-12)
    # pulling arm k for three more slots adds three times its global gap
    for _ in range(3):
        *_, infos = env.step(arms_action(env, [0, 1, 2, 3]))
    for i in range(4):
        expected = best - global_means[local_best[i]] + 3 * (best - global_means[i])
        assert infos[f"agent_{i}"]["pseudo_regret"] == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------------------------------------------------
# Rewards
# ---------------------------------------------------------------------------------------------------------


def test_bernoulli_rewards_are_zero_or_one_with_the_right_rate() -> None:
    slots = 500
    env = FederatedMAB(num_agents=2, num_arms=2, horizon=slots, instance=np.array([0.3, 0.0]))
    env.reset(seed=9)
    ones = 0
    for _ in range(slots):
        _, rewards, *_ = env.step({"agent_0": 0, "agent_1": 1})
        assert rewards["agent_0"] in (0.0, 1.0)
        assert rewards["agent_1"] == 0.0  # a mean-0 arm never pays
        ones += int(rewards["agent_0"])
    sd = math.sqrt(slots * 0.3 * 0.7)
    assert abs(ones - 0.3 * slots) < 4 * sd


def test_gaussian_rewards() -> None:
    slots = 400
    env = FederatedMAB(
        num_agents=2,
        num_arms=2,
        horizon=slots,
        instance=np.array([0.2, 0.8]),
        reward_model="gaussian",
        reward_params={"sigma": 0.5},
    )
    env.reset(seed=1)
    samples = []
    for _ in range(slots):
        _, rewards, *_ = env.step({"agent_0": 1, "agent_1": 1})
        samples += [rewards["agent_0"], rewards["agent_1"]]
    samples = np.array(samples)
    n = len(samples)
    assert len(np.unique(samples)) == n  # continuous
    assert abs(samples.mean() - 0.8) < 4 * 0.5 / math.sqrt(n)
    # the sample variance of n normals has sd about sigma^2 * sqrt(2 / (n - 1))
    assert abs(samples.var(ddof=1) - 0.25) < 4 * 0.25 * math.sqrt(2 / (n - 1))


def test_common_random_numbers_across_arm_choices() -> None:
    # reward noise does not depend on the arm pulled: two runs with the same seed and different arms
    # see rewards that differ by exactly the difference of the means
    def run(arm: int) -> np.ndarray:
        env = FederatedMAB(
            num_agents=3,
            num_arms=2,
            horizon=300,
            instance=np.array([0.2, 0.7]),
            reward_model="gaussian",
            reward_params={"sigma": 1.0},
        )
        env.reset(seed=17)
        out = []
        for _ in range(300):
            _, rewards, *_ = env.step(dict.fromkeys(env.agents, arm))
            out.append(list(rewards.values()))
        return np.array(out)

    np.testing.assert_allclose(run(1) - run(0), 0.5, rtol=0, atol=1e-12)


def test_reward_tape_gives_the_nth_pull_the_same_draw() -> None:
    def run(arms: list[int], tape: bool) -> dict[int, list[float]]:
        env = FederatedMAB(
            num_agents=2,
            num_arms=2,
            horizon=len(arms),
            instance=np.array([0.2, 0.7]),
            reward_model="gaussian",
            reward_params={"sigma": 1.0},
            reward_tape=tape,
        )
        env.reset(seed=4)
        per_arm: dict[int, list[float]] = {0: [], 1: []}
        for k in arms:
            _, rewards, *_ = env.step({"agent_0": k, "agent_1": 1 - k})
            per_arm[k].append(rewards["agent_0"])
        return per_arm

    blocks = [0] * 5 + [1] * 5
    alternating = [0, 1] * 5
    a, b = run(blocks, tape=True), run(alternating, tape=True)
    assert len(a[0]) == len(a[1]) == 5
    assert a == b
    # without the tape the draws follow the slot, so the per-arm sequences differ
    a, b = run(blocks, tape=False), run(alternating, tape=False)
    assert a[0] != b[0] and a[1] != b[1]


# ---------------------------------------------------------------------------------------------------------
# Seeding
# ---------------------------------------------------------------------------------------------------------


def make_seeded_env(**kwargs) -> FederatedMAB:
    return FederatedMAB(num_agents=4, num_arms=3, horizon=30, topology="ring", gossip="uniform_edge", **kwargs)


def trajectory(env: FederatedMAB, seed: int | None) -> tuple:
    obs, _ = env.reset(seed=seed)
    arm_rng = np.random.default_rng(123)  # the same arm choices in every run
    partners = [tuple(o["partner"] for o in obs.values())]
    rewards = []
    for _ in range(30):
        obs, rew, *_ = env.step(arms_action(env, arm_rng.integers(3, size=4).tolist()))
        rewards.append(tuple(rew.values()))
        partners.append(tuple(o["partner"] for o in obs.values()))
    return env.instance.means.tolist(), rewards, partners


def test_same_seed_same_trajectory_other_seed_other_trajectory() -> None:
    env = make_seeded_env()
    first = trajectory(env, seed=7)
    assert trajectory(env, seed=7) == first
    assert trajectory(make_seeded_env(), seed=7) == first
    other = trajectory(env, seed=8)
    assert other[0] != first[0]
    assert other[1] != first[1]
    assert other[2] != first[2]


def test_unseeded_reset_continues_the_seed_sequence() -> None:
    env = make_seeded_env()
    seeded = trajectory(env, seed=7)
    follow_up = trajectory(env, seed=None)
    follow_up_2 = trajectory(env, seed=None)
    assert follow_up != seeded
    assert follow_up_2 != follow_up
    # reproducible from the same starting seed
    again = make_seeded_env()
    assert trajectory(again, seed=7) == seeded
    assert trajectory(again, seed=None) == follow_up
    assert trajectory(again, seed=None) == follow_up_2


def test_instance_seed_fixes_the_means_across_reset_seeds() -> None:
    env = make_seeded_env(instance_seed=99)
    a = trajectory(env, seed=1)
    b = trajectory(env, seed=2)
    assert a[0] == b[0]
    assert a[1] != b[1]
    # without instance_seed the means follow the reset seed
    free = make_seeded_env()
    assert trajectory(free, seed=1)[0] != trajectory(free, seed=2)[0]


def test_full_sharing_coordinator_runs_and_is_reproducible() -> None:
    def run() -> tuple:
        env = FederatedMAB(num_agents=3, num_arms=2, horizon=5, coordinator=FullSharingCoordinator())
        env.reset(seed=3)
        last = None
        history = []
        for t in range(5):
            messages = (
                {}
                if last is None
                else {i: [Message(i, SERVER, "sample", {"arm": 0, "reward": last[f"agent_{i}"]})] for i in range(3)}
            )
            obs, last, *_ = env.step({a: {"arm": 0, "messages": messages.get(i, [])} for i, a in enumerate(env.agents)})
            pooled = obs["agent_0"]["inbox"][0]
            assert pooled.kind == "pooled" and pooled.sender == SERVER and pooled.slot == t
            history.append(pooled.payload["counts"].tolist())
        return history, env.ledger.totals()

    history, totals = run()
    # the server pools 3 samples per slot from slot 1 on
    assert history == [[0, 0], [3, 0], [6, 0], [9, 0], [12, 0]]
    assert totals["up_messages"] == 12
    assert totals["down_messages"] == 15
    assert totals["link_cost"] == 12.0
    assert run() == (history, totals)


# ---------------------------------------------------------------------------------------------------------
# Truncation at the horizon
# ---------------------------------------------------------------------------------------------------------


def test_truncation_exactly_at_the_horizon() -> None:
    horizon = 4
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=horizon)
    obs, infos = env.reset(seed=0)
    assert env.agents == ["agent_0", "agent_1", "agent_2"]
    assert all(o["slot"] == 0 and o["arm"] == -1 and o["partner"] == -1 for o in obs.values())
    for t in range(1, horizon + 1):
        obs, rewards, terminations, truncations, infos = env.step(arms_action(env, [0, 1, 0]))
        assert set(obs) == set(rewards) == set(terminations) == set(truncations) == set(infos)
        assert len(obs) == 3
        assert [o["slot"] for o in obs.values()] == [t, t, t]
        assert [o["arm"] for o in obs.values()] == [0, 1, 0]
        assert not any(terminations.values())
        assert all(truncations.values()) is (t == horizon)
        assert all(v == (t == horizon) for v in truncations.values())
        for agent, o in obs.items():
            assert env.observation_space(agent).contains(o)
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})
    with pytest.raises(RuntimeError, match="reset"):
        env.step(dict.fromkeys(env.possible_agents, 0))
    obs, _ = env.reset(seed=1)
    assert env.agents == env.possible_agents
    assert all(o["slot"] == 0 for o in obs.values())


def test_step_before_reset_raises() -> None:
    env = FederatedMAB(num_agents=2, num_arms=2, horizon=3)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": 0, "agent_1": 0})


# ---------------------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def ring_env() -> FederatedMAB:
    env = FederatedMAB(num_agents=4, num_arms=3, horizon=5, topology="ring")
    env.reset(seed=0)
    return env


@pytest.mark.parametrize("arm", [3, -1, 100])
def test_arm_out_of_range(ring_env: FederatedMAB, arm: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        ring_env.step({"agent_0": arm, "agent_1": 0, "agent_2": 0, "agent_3": 0})
    with pytest.raises(ValueError, match="out of range"):
        ring_env.step({"agent_0": 0, "agent_1": 0, "agent_2": 0, "agent_3": {"arm": arm}})


@pytest.mark.parametrize("arm", [1.5, 1.0, "1", None, True, np.float64(2.0)])
def test_non_integer_arm(ring_env: FederatedMAB, arm) -> None:
    with pytest.raises(TypeError, match="integer"):
        ring_env.step({"agent_0": arm, "agent_1": 0, "agent_2": 0, "agent_3": 0})


def test_numpy_integer_arms_are_accepted(ring_env: FederatedMAB) -> None:
    obs, *_ = ring_env.step(
        {"agent_0": np.int64(2), "agent_1": np.int32(1), "agent_2": np.array(0), "agent_3": {"arm": np.uint8(1)}}
    )
    assert [o["arm"] for o in obs.values()] == [2, 1, 0, 1]


def test_missing_agent(ring_env: FederatedMAB) -> None:
    with pytest.raises(ValueError, match="missing"):
        ring_env.step({"agent_0": 0, "agent_1": 0, "agent_2": 0})


def test_unknown_agent(ring_env: FederatedMAB) -> None:
    with pytest.raises(ValueError, match="unknown"):
        ring_env.step({"agent_0": 0, "agent_1": 0, "agent_2": 0, "agent_3": 0, "agent_9": 0})


def test_bad_action_dict(ring_env: FederatedMAB) -> None:
    with pytest.raises(ValueError, match="arm"):
        ring_env.step({"agent_0": {"messages": []}, "agent_1": 0, "agent_2": 0, "agent_3": 0})
    with pytest.raises(ValueError, match="arm"):
        ring_env.step({"agent_0": {"arm": 0, "msgs": []}, "agent_1": 0, "agent_2": 0, "agent_3": 0})
    with pytest.raises(TypeError, match="Message"):
        ring_env.step({"agent_0": {"arm": 0, "messages": [(0, 1)]}, "agent_1": 0, "agent_2": 0, "agent_3": 0})


def with_message(message: Message, sender_agent: str = "agent_0") -> dict:
    actions = {a: 0 for a in ("agent_0", "agent_1", "agent_2", "agent_3")}
    actions[sender_agent] = {"arm": 0, "messages": [message]}
    return actions


def test_message_to_a_non_neighbour(ring_env: FederatedMAB) -> None:
    # ring 0-1-2-3-0: agents 0 and 2 are not linked
    with pytest.raises(ValueError, match="not linked"):
        ring_env.step(with_message(Message(0, 2, "x", {"v": np.zeros(2)})))


def test_message_to_self(ring_env: FederatedMAB) -> None:
    with pytest.raises(ValueError, match="not linked"):
        ring_env.step(with_message(Message(0, 0, "x")))


@pytest.mark.parametrize("recipient", [99, 4, -3])
def test_unknown_recipient(ring_env: FederatedMAB, recipient: int) -> None:
    with pytest.raises(ValueError, match="unknown"):
        ring_env.step(with_message(Message(0, recipient, "x")))


def test_message_with_wrong_sender(ring_env: FederatedMAB) -> None:
    with pytest.raises(ValueError, match="sender"):
        ring_env.step(with_message(Message(1, 2, "x"), sender_agent="agent_0"))
    with pytest.raises(ValueError, match="sender"):
        ring_env.step(with_message(Message(SERVER, NEIGHBOURS, "x")))


def test_sending_to_server_without_a_coordinator() -> None:
    env = FederatedMAB(num_agents=2, num_arms=2, horizon=3, topology="server")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="coordinator"):
        env.step({"agent_0": {"arm": 0, "messages": [Message(0, SERVER, "x")]}, "agent_1": 0})


def test_sending_to_server_on_a_graph_without_server(ring_env: FederatedMAB) -> None:
    with pytest.raises(ValueError, match="not linked"):
        ring_env.step(with_message(Message(0, SERVER, "x")))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, [1.0, np.nan]])
def test_non_finite_payload(value) -> None:
    with pytest.raises(ValueError, match="NaN or inf"):
        Message(0, 1, "x", {"v": value})


def test_non_numeric_payload_and_empty_kind() -> None:
    with pytest.raises(TypeError, match="numeric"):
        Message(0, 1, "x", {"v": "text"})
    with pytest.raises(TypeError, match="payload"):
        Message(0, 1, "x", [1.0])
    with pytest.raises(TypeError, match="kind"):
        Message(0, 1, "", {})


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"c1": -1.0}, "c1"),
        ({"c2": -0.5}, "c2"),
        ({"c1": math.nan}, "c1"),
        ({"price_per_byte": -1.0}, "price_per_byte"),
        ({"link_accounting": "all_edges"}, "link_accounting"),
        ({"num_agents": 0}, "num_agents"),
        ({"num_agents": -2}, "num_agents"),
        ({"num_arms": 1}, "num_arms"),
        ({"num_arms": 0}, "num_arms"),
        ({"horizon": 0}, "horizon"),
        ({"drop_prob": 1.0}, "drop_prob"),
        ({"reward_model": "poisson"}, "unknown reward model"),
        ({"gossip": "random_walk"}, "gossip"),
    ],
)
def test_bad_construction_arguments(kwargs: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        FederatedMAB(**{"num_agents": 3, "num_arms": 3, "horizon": 5, **kwargs})


def test_float_size_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="num_arms must be an integer"):
        FederatedMAB(num_agents=3, num_arms=2.0, horizon=5)


def test_unknown_reward_parameter() -> None:
    with pytest.raises(TypeError, match="sigma"):
        FederatedMAB(num_agents=2, num_arms=2, reward_params={"sigma": 1.0})


def test_gossip_needs_agent_agent_edges() -> None:
    with pytest.raises(ValueError, match="edge"):
        FederatedMAB(num_agents=3, num_arms=2, topology="server", gossip="uniform_edge").reset(seed=0)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4,), (2, 3, 1)])
def test_mismatched_mean_matrix(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="shape"):
        FederatedMAB(num_agents=2, num_arms=3, instance=np.full(shape, 0.5)).reset(seed=0)


def test_bernoulli_means_outside_unit_interval() -> None:
    with pytest.raises(ValueError):
        FederatedMAB(num_agents=2, num_arms=2, instance=np.array([0.5, 1.5])).reset(seed=0)


def test_a_rejected_step_has_no_side_effects() -> None:
    means = np.array([[0.1, 0.5, 0.9], [0.3, 0.5, 0.7], [0.2, 0.5, 0.8]])  # global best arm 2, gap of arm 0: 0.6
    env = FederatedMAB(num_agents=3, num_arms=3, horizon=4, topology="path", instance=means)
    env.reset(seed=0)
    bad = {"agent_0": {"arm": 0, "messages": [Message(0, 2, "x")]}, "agent_1": 0, "agent_2": 0}
    with pytest.raises(ValueError, match="not linked"):
        env.step(bad)
    # the slot was never played: no regret, and the next valid step is slot 0 with regret 0.6
    np.testing.assert_array_equal(env.state()[-3:], [0.0, 0.0, 0.0])
    obs, _, _, _, infos = env.step(dict.fromkeys(env.agents, 0))
    assert obs["agent_0"]["slot"] == 1
    assert infos["agent_0"]["pseudo_regret"] == pytest.approx(0.6, abs=1e-12)


def test_a_rejected_step_does_not_shift_the_reward_draws() -> None:
    def make() -> FederatedMAB:
        env = FederatedMAB(
            num_agents=3,
            num_arms=2,
            horizon=5,
            topology="path",
            instance=np.array([0.2, 0.7]),
            reward_model="gaussian",
            reward_params={"sigma": 1.0},
        )
        env.reset(seed=5)
        return env

    def rewards(env: FederatedMAB) -> list[list[float]]:
        return [list(env.step(dict.fromkeys(env.agents, 1))[1].values()) for _ in range(5)]

    clean = rewards(make())
    env = make()
    with pytest.raises(ValueError, match="not linked"):
        env.step({"agent_0": {"arm": 1, "messages": [Message(0, 2, "x")]}, "agent_1": 1, "agent_2": 1})
    assert rewards(env) == clean


# ---------------------------------------------------------------------------------------------------------
# Boundary hops (message-only steps between two slots)
# ---------------------------------------------------------------------------------------------------------


def boundary_env(**kwargs) -> FederatedMAB:
    """An env with boundary hops: every slot but the last is followed by message-only steps."""
    return FederatedMAB(**{"num_agents": 3, "num_arms": 2, "horizon": 3, "boundary_hops": True, **kwargs})


def test_a_boundary_hop_routes_through_the_coordinator_without_a_pull() -> None:
    env = boundary_env(coordinator=FullSharingCoordinator(), record_messages=True)
    env.reset(seed=3)
    obs, rewards, *_ = env.step(dict.fromkeys(env.agents, 0))
    assert all(o["phase"] == 1 for o in obs.values()) and env.pending_phase.kind == "boundary"
    regret, slot = env.unwrapped.core.regret.copy(), env.unwrapped.core.slot
    samples = {
        a: {"messages": [Message(i, SERVER, "sample", {"arm": 0, "reward": rewards[a]})]}
        for i, a in enumerate(env.agents)
    }
    obs, hop_rewards, terminations, truncations, _ = env.step(samples)
    # the server pooled the three samples of slot 0 and replied within the hop; no arm was pulled
    assert set(hop_rewards.values()) == {0.0} and not any(terminations.values()) and not any(truncations.values())
    for o in obs.values():
        (pooled,) = o["inbox"]
        assert pooled.kind == "pooled" and pooled.slot == 0 and pooled.payload["counts"].tolist() == [3, 0]
        assert o["phase"] == 1 and o["slot"] == 1  # another hop may follow while someone sends
    assert env.unwrapped.core.slot == slot == 1 and np.array_equal(env.unwrapped.core.regret, regret)
    records = env.ledger.records()  # step 0's pooled broadcast, then the hop: 3 samples up, 3 replies down
    assert records["slot"].tolist() == [0] * 9 and records["kind"].tolist()[3:6] == ["sample"] * 3
    assert env.ledger.totals()["link_cost"] == 3.0  # three uplinks; the downlink is free
    obs, *_ = env.step({})  # nobody sends: the boundary ends, the next step pulls
    assert all(o["phase"] == 0 and o["inbox"] == () for o in obs.values()) and env.pending_phase is None
    assert env.ledger.totals()["messages"] == 9
    obs, *_ = env.step(dict.fromkeys(env.agents, 1))
    assert all(o["slot"] == 2 and o["inbox"][0].payload["counts"].tolist() == [3, 0] for o in obs.values())


def test_a_boundary_hop_is_priced_as_a_hop_of_its_own() -> None:
    # used_links: the same edge used in a step and in the boundary after it is two hops, so it costs twice
    env = boundary_env(topology="path")
    env.reset(seed=0)
    hello = Message(0, 1, "hello", {"x": 1.0})
    env.step({"agent_0": {"arm": 0, "messages": [hello]}, "agent_1": 0, "agent_2": 0})
    obs, *_ = env.step({"agent_0": {"messages": [hello]}})
    assert [m.kind for m in obs["agent_1"]["inbox"]] == ["hello"]
    assert obs["agent_0"]["inbox"] == obs["agent_2"]["inbox"] == ()
    assert env.ledger.totals()["links"] == 2 and env.ledger.totals()["messages"] == 2


def test_bad_boundary_hops_leave_everything_untouched() -> None:
    env = boundary_env(topology="path", num_agents=4)
    env.reset(seed=0)
    env.step(dict.fromkeys(env.agents, 0))
    before, phase = env.ledger.totals(), env.pending_phase
    with pytest.raises(ValueError, match="not linked"):
        env.step({"agent_0": {"messages": [Message(0, 2, "x", {"v": 1.0})]}})
    with pytest.raises(ValueError, match="only send as itself"):
        env.step({"agent_0": {"messages": [Message(1, 2, "x", {"v": 1.0})]}})
    with pytest.raises(ValueError, match="unknown agents"):
        env.step({"agent_9": {"messages": []}})
    with pytest.raises(ValueError, match="unknown keys"):
        env.step({"agent_0": {"message": []}})
    with pytest.raises(TypeError, match="Message objects"):
        env.step({"agent_0": {"messages": [{"recipient": 1}]}})
    assert env.ledger.totals() == before and env.unwrapped.core.slot == 1 and env.pending_phase == phase
    env.step({})
    env.step(dict.fromkeys(env.agents, 0))
    env.step({})
    obs, _, _, truncations, _ = env.step(dict.fromkeys(env.agents, 0))  # no hop after the final slot
    assert all(truncations.values()) and all(o["phase"] == 0 for o in obs.values()) and env.agents == []


def test_a_boundary_hop_past_the_last_is_refused_before_it_is_routed():
    """Messages in the last hop a boundary offers are refused, not routed and then refused: a retry costs nothing."""
    env = FederatedMAB(3, 2, 4, topology="ring", boundary_hops=True)
    env.reset(seed=0)
    env.step({a: 0 for a in env.agents})

    def chat():
        batch = {i: MessageBatch("chat", [0], [i], [NEIGHBOURS], {"v": [1.0]}) for i in range(3)}
        return {a: {"messages": [batch[i]]} for i, a in enumerate(env.agents)}

    for _ in range(MAX_BOUNDARY_EXCHANGES - 1):
        env.step(chat())
    counted = env.ledger.totals()["messages"]
    for _ in range(2):  # refused, and refused again: nothing routed either time
        with pytest.raises(RuntimeError, match="the last one a boundary offers"):
            env.step(chat())
        assert env.ledger.totals()["messages"] == counted
    observations, *_ = env.step({a: {"messages": []} for a in env.agents})  # silent: the boundary ends
    assert all(observation["phase"] == 0 for observation in observations.values())
