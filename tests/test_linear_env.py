"""The linear contextual environment: samplers, arrivals, streams, the core's phases and the PettingZoo view."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from fedbandit_envs.channel import Message, batches_from_messages
from fedbandit_envs.families.linear.classification import ClassificationSource
from fedbandit_envs.families.linear.env import (
    ArrivalProcess,
    FederatedLinear,
    LinearConfig,
    LinearCore,
    sample_unit_ball,
)
from fedbandit_envs.frozen import is_frozen
from fedbandit_envs.topology import SERVER

SMALL = {"num_clients": 5, "num_arms": 4, "dimension": 3, "horizon": 30}


# ---------------------------------------------------------------------- contexts and parameters
def test_ball_contexts_have_the_lemma10_covariance():
    d = 25
    x = sample_unit_ball(np.random.default_rng(0), (100_000, d), d)
    assert np.all(np.linalg.norm(x, axis=1) <= 1 + 1e-12)
    covariance = x.T @ x / len(x)
    assert np.linalg.norm(covariance - np.eye(d) / (d + 2), ord=2) < 0.01  # spec section 5 (measured 0.00099)
    config = LinearConfig(num_clients=2, num_arms=2, dimension=d, horizon=1)
    np.testing.assert_allclose(config.context_covariance(), np.eye(d) / (d + 2))
    assert config.lambda_c() == 1 / (d + 2)


def test_heterogeneous_layout_and_parameters():
    config = LinearConfig(
        num_clients=3,
        num_arms=6,
        dimension=5,
        horizon=300,
        mode="heterogeneous",
        global_dimension=2,
        local_dimensions=[3, 1, 0],
    )
    core = LinearCore(config)
    core.reset([4])
    theta = core.replicas[0].theta
    assert np.linalg.norm(theta[0, :2]) == pytest.approx(1.0)
    np.testing.assert_allclose(theta[:, :2], np.broadcast_to(theta[0, :2], (3, 2)))  # shared global part
    assert np.linalg.norm(theta[0, 2:5]) == pytest.approx(1.0) and np.linalg.norm(theta[1, 2:3]) == pytest.approx(1.0)
    assert np.all(theta[1, 3:] == 0) and np.all(theta[2, 2:] == 0)
    block = core._block
    used = config.client_dimensions[block.clients]  # (B, L, m)
    width = np.arange(5)
    padding = block.contexts * (width >= used[..., None, None])
    assert np.all(padding == 0)
    assert np.all(np.linalg.norm(block.contexts, axis=-1) <= 1 + 1e-12)
    np.testing.assert_allclose(block.means, np.einsum("blmkd,blmd->blmk", block.contexts, theta[block.clients]))
    assert config.context_covariance(1)[2, 2] == pytest.approx(1 / 5) and config.context_covariance(1)[3, 3] == 0


def test_pool_contexts_are_distinct_unit_vectors_from_a_fixed_pool():
    config = LinearConfig(num_clients=2, num_arms=8, dimension=4, horizon=50, context_mode="pool", pool_size=30)
    core = LinearCore(config)
    core.reset([1])
    pool = core.replicas[0].pool
    np.testing.assert_allclose(np.linalg.norm(pool, axis=1), 1.0)
    contexts = core._block.contexts[0, :, 0]  # (L, K, d)
    matches = (contexts[:, :, None, :] == pool[None, None]).all(axis=-1)
    assert np.all(matches.sum(axis=-1) == 1)
    assert all(len(set(np.argmax(m, axis=-1))) == 8 for m in matches)
    assert core.replicas[0].pool_covariance().shape == (4, 4)


@pytest.mark.parametrize(("noise", "check"), [("uniform", "bounded"), ("rademacher", "two_point"), ("gaussian", "std")])
def test_noise_kinds_are_sigma_sub_gaussian(noise, check):
    sigma = 0.3
    config = LinearConfig(num_clients=2, num_arms=2, dimension=2, horizon=4096, noise=noise, sigma=sigma)
    core = LinearCore(config)
    core.reset([0])
    eta = np.concatenate([core.replicas[0].block(0, 4096).noise.ravel()])
    if check == "bounded":
        assert np.all(np.abs(eta) <= sigma) and eta.std() == pytest.approx(sigma / np.sqrt(3), rel=0.05)
    elif check == "two_point":
        assert set(np.round(eta, 12)) == {-sigma, sigma}
    else:
        assert eta.std() == pytest.approx(sigma, rel=0.05)  # 4096 draws: relative sd of the std ~ 1.1%


def test_instance_seed_fixes_theta_and_seeds_change_it():
    config = LinearConfig(**SMALL)
    core = LinearCore(config)
    core.reset([0])
    first = core.replicas[0].theta.copy()
    core.reset([1])
    assert not np.allclose(first, core.replicas[0].theta)
    fixed = LinearCore(LinearConfig(**SMALL, instance_seed=9))
    fixed.reset([0])
    theta = fixed.replicas[0].theta.copy()
    fixed.reset([1])
    np.testing.assert_array_equal(theta, fixed.replicas[0].theta)
    np.testing.assert_allclose(np.linalg.norm(theta, axis=1), 1.0)


# ---------------------------------------------------------------------- arrivals
def frequencies(process: ArrivalProcess, slots: int = 20000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    clients, _ = process.draw(rng, process.probabilities(rng), 0, slots)
    return np.bincount(clients.ravel(), minlength=process.num_clients) / clients.size


def test_arrival_distributions():
    n = 10
    zipf = 1 / np.arange(1, n + 1)
    # 20000 slots: the standard error of a frequency is at most 0.0035; tolerance 0.015 is > 4 se.
    np.testing.assert_allclose(frequencies(ArrivalProcess("uniform", n)), 0.1, atol=0.015)
    np.testing.assert_allclose(frequencies(ArrivalProcess("zipf", n)), zipf / zipf.sum(), atol=0.015)
    p = np.arange(1, n + 1) / 55
    np.testing.assert_allclose(frequencies(ArrivalProcess("categorical", n, params={"p": p})), p, atol=0.015)
    dirichlet = ArrivalProcess("dirichlet", n, params={"concentration": 0.5})
    weights = dirichlet.probabilities(np.random.default_rng(0))
    np.testing.assert_allclose(frequencies(dirichlet), weights, atol=0.015)
    rr, _ = ArrivalProcess("round_robin", 4, active_per_slot=2).draw(np.random.default_rng(0), None, 3, 3)
    np.testing.assert_array_equal(rr, [[2, 3], [0, 1], [2, 3]])
    trace = ArrivalProcess("trace", 4, params={"trace": [3, 1, 1, 0]})
    np.testing.assert_array_equal(trace.draw(None, None, 1, 3)[0].ravel(), [1, 1, 0])
    with pytest.raises(ValueError, match="trace"):
        trace.draw(None, None, 2, 3)


def test_multi_active_clients_are_distinct_with_a_permuted_report_order():
    process = ArrivalProcess("zipf", 6, active_per_slot=3)
    rng = np.random.default_rng(2)
    clients, order = process.draw(rng, process.probabilities(rng), 0, 500)
    assert all(len(set(row)) == 3 for row in clients.tolist())
    assert all(sorted(row) == [0, 1, 2] for row in order.tolist())
    assert len({tuple(row) for row in order.tolist()}) == 6  # every permutation of 3 appears


def test_stream_does_not_depend_on_actions():
    config = LinearConfig(**SMALL, arrival="zipf")
    traces = []
    for policy in (lambda k: 0, lambda k: k % 4):
        core = LinearCore(config)
        core.reset([3])
        seen = []
        while not core.done:
            seen.append((core.clients.copy(), core.contexts.copy()))
            feedback = core.pull(np.array([[policy(core.slot)]]))
            seen.append(feedback.rewards - core.means[0, 0, feedback.arms[0, 0]])  # the noise
            core.communicate()
        traces.append(seen)
    for a, b in zip(*traces):
        if isinstance(a, tuple):
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])


def test_batched_replica_equals_single_replica_stream():
    config = LinearConfig(**SMALL, arrival="dirichlet")
    batched, single = LinearCore(config), LinearCore(config)
    batched.reset([5, 6, 7])
    single.reset([6])
    while not single.done:
        np.testing.assert_array_equal(batched.contexts[1], single.contexts[0])
        np.testing.assert_array_equal(
            batched.pull(np.zeros((3, 1), np.int64)).rewards[1], single.pull([[0]]).rewards[0]
        )
        batched.communicate()
        single.communicate()
    np.testing.assert_array_equal(batched.regret[1], single.regret[0])


def test_core_phases_and_regret():
    core = LinearCore(LinearConfig(**SMALL))
    core.reset([0])
    with pytest.raises(RuntimeError, match="pull"):
        core.communicate()
    means = core.means.copy()
    feedback = core.pull([[1]])
    assert core.last_regret[0, 0] == pytest.approx(means[0, 0].max() - means[0, 0, 1])
    with pytest.raises(RuntimeError, match="already pulled"):
        core.pull([[1]])
    with pytest.raises(ValueError, match="no coordinator"):
        core.communicate(batches_from_messages([Message(0, SERVER, "upload", {"x": np.ones(2)})]))
    with pytest.raises(TypeError, match="MessageBatch"):
        core.communicate([Message(0, SERVER, "upload", {"x": np.ones(2)})])
    assert core.communicate() == [] and core.slot == 1 and core.phase == "act"
    assert feedback.slot == 0
    with pytest.raises(ValueError, match="out of range"):
        core.pull([[4]])
    with pytest.raises(ValueError, match="shape"):
        core.pull([1])


# ---------------------------------------------------------------------- the PettingZoo view
def test_pettingzoo_phases_active_mask_and_hidden_information():
    env = FederatedLinear(**SMALL)
    observations, infos = env.reset(seed=1)
    active = [a for a, o in observations.items() if o["active"]]
    assert len(active) == 1 and all(o["phase"] == 0 for o in observations.values())
    agent = active[0]
    assert observations[agent]["contexts"].shape == (4, 3) and np.any(observations[agent]["contexts"])
    idle = next(a for a in env.agents if a != agent)
    assert not np.any(observations[idle]["contexts"])
    observations, rewards, _, truncations, infos = env.step({agent: 2})
    assert set(infos[agent]) == {"slot", "expected_rewards", "instant_regret", "pseudo_regret"}
    assert rewards[agent] == pytest.approx(infos[agent]["expected_rewards"][2], abs=0.5)
    assert all(rewards[a] == 0.0 for a in env.agents if a != agent)
    assert observations[agent]["phase"] == 1 and observations[agent]["arm"] == 2
    assert float(observations[agent]["reward"]) == rewards[agent]
    assert "theta" not in observations[agent] and not any(truncations.values())
    observations, *_ = env.step({})  # an empty report round
    assert all(o["phase"] == 0 for o in observations.values())
    assert env.state().shape == (SMALL["num_clients"] + 2,)
    for _ in range(2 * SMALL["horizon"] - 2):
        active = [a for a, o in observations.items() if o["active"]]
        observations, _, _, truncations, _ = env.step({a: 0 for a in active})
    assert all(truncations.values()) and env.agents == []
    assert env.theta.shape == (SMALL["num_clients"], 3)


def test_pettingzoo_bad_actions():
    env = FederatedLinear(**SMALL)
    observations, _ = env.reset(seed=0)
    agent = next(a for a, o in observations.items() if o["active"])
    with pytest.raises(ValueError, match="must act"):
        env.step({})
    with pytest.raises(ValueError, match="unknown agents"):
        env.step({agent: 0, "client_99": 0})
    message = Message(int(agent.split("_")[1]), SERVER, "upload", {"x": np.ones(2)})
    with pytest.raises(ValueError, match="sent messages in the act step"):
        env.step({agent: {"arm": 0, "messages": [message]}})
    env.step({agent: 0})
    other = next(a for a in env.agents if a != agent)
    with pytest.raises(ValueError, match="sender"):
        env.step({other: {"arm": 0, "messages": [message]}})
    with pytest.raises(ValueError, match="no coordinator"):
        env.step({agent: {"arm": 0, "messages": [message]}})


def test_pettingzoo_act_step_refuses_messages_and_unknown_keys_from_any_client():
    env = FederatedLinear(**{**SMALL, "active_per_slot": 2})
    observations, _ = env.reset(seed=0)
    active = {a: 0 for a, o in observations.items() if o["active"]}
    idle = next(a for a, o in observations.items() if not o["active"])
    message = Message(int(idle.split("_")[1]), SERVER, "upload", {"x": np.ones(2)})
    before = (env.core.slot, env.core.phase, env.core.regret.copy(), env.pending_phase)
    with pytest.raises(ValueError, match=f"{idle} sent messages in the act step"):
        env.step({**active, idle: {"arm": 0, "messages": [message]}})
    with pytest.raises(ValueError, match=f"{idle} sent messages in the act step"):
        env.step({**active, idle: {"messages": [message]}})
    with pytest.raises(ValueError, match=f"the action of {idle} has unknown keys \\['bogus'\\]"):
        env.step({**active, idle: {"arm": 0, "bogus": 1}})
    with pytest.raises(TypeError, match="must be a list"):
        env.step({**active, idle: {"arm": 0, "messages": message}})
    assert (env.core.slot, env.core.phase, env.pending_phase) == before[:2] + before[3:]
    np.testing.assert_array_equal(env.core.regret, before[2])
    env.step({**active, idle: {"arm": 0, "messages": []}})  # an empty list is no message
    assert env.pending_phase is not None


@pytest.mark.parametrize(
    ("action", "error", "match"),
    [
        ("garbage", TypeError, "an arm"),
        (4, ValueError, "arm 4 is out of range: arms are 0..3"),
        (-1, ValueError, "arm -1 is out of range"),
        ({"arm": 7, "messages": []}, ValueError, "arm 7 is out of range"),
        (1.0, TypeError, "an arm"),
    ],
)
def test_an_idle_clients_action_is_checked_as_an_active_clients(action, error, match):
    """An idle client may be left out; an action given for it must be one an active client could play."""
    env = FederatedLinear(**SMALL)
    observations, _ = env.reset(seed=0)
    active = {a: 0 for a, o in observations.items() if o["active"]}
    idle = next(a for a, o in observations.items() if not o["active"])
    with pytest.raises(error, match=match):
        env.step({**active, idle: action})
    assert (env.core.slot, env.core.phase, env.pending_phase, env.core.regret.sum()) == (0, "act", None, 0.0)
    for fine in (3, {"arm": 0}, {"messages": []}, {}):  # valid arms, or a dict without one: not played
        env.reset(seed=0)
        env.step({**active, idle: fine})
        assert env.core.last_arms.tolist() == [[0]]


def reachable(array: np.ndarray) -> int:
    """How many entries a holder of ``array`` reaches through ``.base`` (the size of the array at the chain's end)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array.size


def test_a_learner_reaches_only_the_current_slot_through_what_the_core_hands_it():
    """Steps, feedback and report rounds are frozen copies of the slot (of the round), not views of the drawn block."""
    core = LinearCore(LinearConfig(**{**SMALL, "active_per_slot": 2}))
    core.reset([0, 1])  # B = 2 replicas, m = 2 active clients, K = 4 arms of d = 3
    for _ in range(3):
        step = core.current_step()
        feedback = core.pull(np.zeros((2, 2), np.int64))
        phases = [core.first_phase()]
        core.exchange(phases[0], [])
        phases.append(core.next_phase(phases[0], False))
        shown = (step.clients, step.contexts, feedback.clients, *(phase.positions for phase in phases))
        assert [reachable(array) for array in shown] == [4, 48, 4, 2, 2]
        assert all(is_frozen(array) for array in shown)
        core.exchange(phases[1], [])


def test_an_observation_reaches_only_its_own_contexts():
    """A client's ``contexts`` is its own frozen (K, d) array: no other client's, no other slot's through ``.base``."""
    env = FederatedLinear(**{**SMALL, "active_per_slot": 2})
    observations, _ = env.reset(seed=0)
    for _ in range(3):
        for _ in range(3):  # the act step, then the two report rounds
            shown = [o["contexts"] for o in observations.values() if o["active"]]
            assert [reachable(contexts) for contexts in shown] == [12] * len(shown) and all(map(is_frozen, shown))
            act = observations["client_0"]["phase"] == 0
            observations, *_ = env.step({a: 0 for a, o in observations.items() if o["active"]} if act else {})


class ArrivalsServer:
    """A server (no replies) whose ``observe_arrivals`` fails when slot ``fail_at`` starts, once."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.seen: list[int] = []

    def reset(self, context, rngs) -> None:
        self.seen = []

    def observe_arrivals(self, slot, clients) -> None:
        if slot == self.fail_at:
            self.fail_at = -1
            raise RuntimeError("arrivals boom")
        self.seen.append(slot)

    def step(self, slot, inbox) -> list:
        return []


def test_a_server_failing_to_observe_arrivals_ends_the_episode_on_the_batched_core():
    server = ArrivalsServer(fail_at=2)
    core = LinearCore(LinearConfig(**SMALL), coordinator=server)
    core.reset([0])
    for _ in range(2):
        core.pull([[0]])
        if core.slot == 1:
            with pytest.raises(RuntimeError, match="arrivals boom"):
                core.communicate()
        else:
            core.communicate()
    refused = "slot 2 failed half played \\(RuntimeError: arrivals boom\\).* call reset"
    assert core.failed is not None and server.seen == [0, 1]
    with pytest.raises(RuntimeError, match=refused):
        core.pull([[0]])
    with pytest.raises(RuntimeError, match=refused):
        core.communicate()
    core.reset([0])
    assert core.failed is None and server.seen == [0]


def test_a_server_failing_to_observe_arrivals_ends_the_episode_through_pettingzoo():
    env = FederatedLinear(**SMALL, coordinator=ArrivalsServer(fail_at=1))
    observations, _ = env.reset(seed=0)
    active = {a: 0 for a, o in observations.items() if o["active"]}
    env.step(active)
    with pytest.raises(RuntimeError, match="arrivals boom"):
        env.step({})
    refused = "slot 1 failed half played \\(RuntimeError: arrivals boom\\).* call reset"
    for actions in ({}, active, {a: 0 for a in env.agents}):
        with pytest.raises(RuntimeError, match=refused):
            env.step(actions)
    observations, _ = env.reset(seed=0)
    env.step({a: 0 for a, o in observations.items() if o["active"]})
    env.step({})
    assert env.core.slot == 1 and env.core.failed is None


def test_pettingzoo_pickle_mid_episode():
    env = FederatedLinear(**SMALL, arrival="zipf")
    observations, _ = env.reset(seed=2)
    agent = next(a for a, o in observations.items() if o["active"])
    env.step({agent: 1})
    clone = pickle.loads(pickle.dumps(env))
    a, b = env.step({}), clone.step({})
    assert {k: v["active"] for k, v in a[0].items()} == {k: v["active"] for k, v in b[0].items()}
    np.testing.assert_array_equal(env.state(), clone.state())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_arms": 1}, "num_arms"),
        ({"dimension": 0}, "dimension"),
        ({"sigma": -1.0}, "sigma"),
        ({"mode": "mixed"}, "mode"),
        ({"global_dimension": 2}, "heterogeneous"),
        ({"mode": "heterogeneous", "global_dimension": 4}, "global_dimension"),
        ({"mode": "heterogeneous", "global_dimension": 1, "local_dimensions": [1, 1, 1, 1, 1]}, "dimension must equal"),
        ({"mode": "heterogeneous", "global_dimension": 1, "local_dimensions": [2, 2]}, "one int per client"),
        ({"mode": "heterogeneous", "global_dimension": 0, "local_dimensions": [3, 3, 0, 3, 3]}, "d_g \\+ d_i >= 1"),
        (
            {
                "mode": "heterogeneous",
                "local_dimensions": [2, 1, 2, 2, 2],
                "global_dimension": 1,
                "context_mode": "pool",
            },
            "same local dimension",
        ),
        ({"arrival": "poisson"}, "arrival"),
        ({"arrival": "categorical"}, "needs arrival_params"),
        ({"arrival": "categorical", "arrival_params": {"p": [0.5, 0.5, 0, 0, 0.1]}}, "summing to 1"),
        ({"arrival": "zipf", "arrival_params": {"exponent": -1}}, "exponent"),
        ({"arrival": "zipf", "arrival_params": {"p": [1]}}, "unknown arrival_params"),
        ({"arrival": "trace", "arrival_params": {"trace": [0, 7]}}, "outside"),
        ({"arrival": "trace", "arrival_params": {"trace": [0.5]}}, "integer"),
        ({"active_per_slot": 6}, "active_per_slot"),
        ({"active_per_slot": 2, "arrival": "trace", "arrival_params": {"trace": [[1, 1]]}}, "distinct"),
        ({"noise": "cauchy"}, "noise"),
    ],
)
def test_bad_configuration(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        LinearConfig(**{**SMALL, **kwargs})


@pytest.mark.parametrize("length, horizon", [(3, 5), (300, 600)], ids=["within the first block", "past it"])
def test_a_trace_shorter_than_the_horizon_is_refused_when_the_problem_is_built(length, horizon):
    """Not half way through an episode, when the block of slots past the trace is drawn."""
    trace = {"trace": np.arange(length) % 2}
    with pytest.raises(ValueError, match=f"has {length} slots, fewer than the horizon"):
        LinearConfig(**{**SMALL, "horizon": horizon}, arrival="trace", arrival_params=trace)
    with pytest.raises(ValueError, match=f"has {length} slots, fewer than the horizon"):
        ClassificationSource("iris", 3, horizon, arrival="trace", arrival_params=trace)
    LinearCore(LinearConfig(**{**SMALL, "horizon": length}, arrival="trace", arrival_params=trace)).reset([0])
