"""A refused step changes nothing, and what a learner sends or configures is checked the same on every path.

Each test here failed before its fix: fault hooks inside a DP wrapper kept the state of a refused slot, a DP
wrapper outside ``MessageDelays`` checked and charged a held copy when it was released, value entries labelled
with a never-pulled arm escaped the record count, a noise scale too large for a float was refused only after the
slot was charged, an object-dtype arm array passed on the PettingZoo path, names given as one string were
read as the set of their letters, and a hosted server's step or reset of its own env played a slot inside another.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit_envs import FederatedMAB, Message
from fedbandit_envs.channel.privacy import Public, Sensitive, declare_message_kinds
from fedbandit_envs.families.linear.env import FederatedLinear
from fedbandit_envs.privacy.mechanisms import _gaussian_delta_normalised, gaussian_sigma_analytic
from fedbandit_envs.protocol import Action, Population
from fedbandit_envs.run import run
from wrappers.dp import GaussianMessageDP, LaplaceMessageDP, TreeMessageDP
from wrappers.faults import ByzantineAgents, MessageDelays, MessageDrops, PointMass

declare_message_kinds("refusal_test")


def _broadcasts(env, kind: str = "refusal_test", bounds=(0.0, 1.0)) -> dict:
    """Every agent pulls arm 0 and tells its neighbours a value."""
    privacy = {"v": Sensitive(aggregate="value", bounds=bounds)}
    return {
        agent: {"arm": 0, "messages": [Message(i, -2, kind, {"v": [0.5]}, privacy=privacy)]}
        for i, agent in enumerate(env.agents)
    }


FAULTS = {
    "drops": lambda env: MessageDrops(env, 0.5),
    "byzantine": lambda env: ByzantineAgents(env, 0.5, fields=("v",), q=PointMass(1.0)),
}
REFUSALS = {
    "unknown kind": lambda env: _broadcasts(env, kind="not_declared_anywhere"),
    "noise overflow": lambda env: _broadcasts(env, bounds=(-8e307, 8e307)),
}


def _play(fault, refusal) -> dict:
    """A whole episode of DP over ``fault``; with ``refusal``, slot 2 is first tried with a step the DP refuses."""
    inner = fault(FederatedMAB(3, 2, 6, topology="ring"))
    env = LaplaceMessageDP(inner, epsilon=1.0)
    env.reset(seed=0)
    inboxes = []
    while env.agents:
        if refusal is not None and env.unwrapped.core.slot == 2:
            with pytest.raises(ValueError):
                env.step(refusal(env))
        observations, *_ = env.step(_broadcasts(env))
        inboxes.append(
            [m.payload["v"].tolist() for agent in sorted(observations) for m in observations[agent]["inbox"]]
        )
    hook = inner.hook
    state = {name: getattr(hook, name).tolist() for name in ("exposed", "dropped", "corrupted") if hasattr(hook, name)}
    if isinstance(inner, ByzantineAgents):
        state["log"] = {k: v.tolist() for k, v in hook.corruptions().items()}
    return {
        "inboxes": inboxes,
        "hook": state,
        "ledger": env.unwrapped.ledger.totals(),
        "epsilon": env.epsilon_spent().tolist(),
        "rng": [rng.bit_generator.state for rng in hook.rngs],
    }


@pytest.mark.parametrize("refusal", REFUSALS)
@pytest.mark.parametrize("fault", FAULTS)
def test_a_step_refused_by_the_dp_wrapper_leaves_the_faults_inside_it_as_they_were(fault, refusal):
    never_refused = _play(FAULTS[fault], None)
    refused_once = _play(FAULTS[fault], REFUSALS[refusal])
    assert refused_once == never_refused
    assert never_refused["hook"]["exposed"][0] > 0  # the fault acted on the episode


@pytest.mark.parametrize("dp", [LaplaceMessageDP, TreeMessageDP])
def test_a_dp_wrapper_refuses_to_wrap_message_delays_and_takes_it_outside(dp):
    with pytest.raises(ValueError, match=r"cannot wrap MessageDelays: .*MessageDelays\((Laplace|Tree)MessageDP\(env"):
        dp(MessageDelays(FederatedMAB(3, 2, 6, topology="ring"), delay=2), epsilon=1.0)
    env = MessageDelays(LaplaceMessageDP(FederatedMAB(3, 2, 6, topology="ring"), epsilon=1.0), delay=1)
    env.reset(seed=0)
    env.step({a: 0 for a in env.agents})  # one observed reward each
    # a mean of 5 records after one reward: refused in the slot it is sent, not when a delayed copy is released
    claim = {"v": Sensitive(aggregate="mean", bounds=(0.0, 1.0), records_field="n"), "n": Public()}
    too_many = {
        agent: {"arm": 0, "messages": [Message(i, -2, "refusal_test", {"v": [0.5], "n": [5]}, privacy=claim)]}
        for i, agent in enumerate(env.agents)
    }
    with pytest.raises(ValueError, match="claims 5 records"):
        env.step(too_many)
    assert env.unwrapped.core.slot == 1


def _value_entries(env, arm_label: int | None, entries: int = 200) -> dict:
    """Agent 0 sends its one reward as ``entries`` value entries, labelled with ``arm_label`` if given."""
    payload = {"v": np.full(entries, 0.5)}
    declaration = Sensitive(aggregate="value", bounds=(0.0, 1.0), affects="one")
    privacy = {"v": declaration}
    if arm_label is not None:
        payload["arm"] = np.full(entries, arm_label, np.int64)
        privacy = {
            "v": Sensitive(aggregate="value", bounds=(0.0, 1.0), affects="one", arm_field="arm"),
            "arm": Public(),
        }
    return {"agent_0": {"arm": 0, "messages": [Message(0, 1, "refusal_test", payload, privacy=privacy)]}, "agent_1": 0}


@pytest.mark.parametrize("arm_label", [None, 0, 1], ids=["no arm field", "pulled arm", "never-pulled arm"])
def test_value_entries_may_not_outnumber_the_rewards_observed_whatever_arm_they_name(arm_label):
    env = LaplaceMessageDP(FederatedMAB(2, 4, 10, topology="complete"), epsilon=0.5)
    env.reset(seed=0)
    env.step(_value_entries(env, arm_label))  # before any reward nothing is private yet: accepted
    assert env.epsilon_spent().tolist() == [0.5, 0.0]
    with pytest.raises(ValueError, match="holds 200 entries of one record each"):
        env.step(_value_entries(env, arm_label))  # agent 0 has observed one reward (of arm 0)
    assert env.epsilon_spent().tolist() == [0.5, 0.0]


@pytest.mark.parametrize(
    "dp, bounds",
    [
        (lambda env: LaplaceMessageDP(env, epsilon=1e-300), (-1e300, 1e300)),
        (lambda env: LaplaceMessageDP(env, epsilon=lambda index: 5e-324), (0.0, 1.0)),
        (lambda env: LaplaceMessageDP(env, epsilon=1.0), (-8e307, 8e307)),
        (lambda env: GaussianMessageDP(env, epsilon=0.5, delta=1e-5), (-8e307, 8e307)),
        (lambda env: TreeMessageDP(env, epsilon=1.0), (-1e306, 1e306)),
    ],
    ids=["laplace tiny epsilon", "laplace subnormal schedule", "laplace huge bounds", "gaussian", "tree"],
)
def test_a_noise_scale_too_large_for_a_float_is_refused_before_anything_is_charged(dp, bounds):
    env = dp(FederatedMAB(3, 4, 10, topology="ring"))
    env.reset(seed=0)
    env.step({a: 0 for a in env.agents})
    kind = "refusal_test"
    privacy = {"v": Sensitive(aggregate="sum" if isinstance(env, TreeMessageDP) else "value", bounds=bounds)}
    sending = {
        a: {"arm": 0, "messages": [Message(i, -2, kind, {"v": [0.5]}, privacy=privacy)]}
        for i, a in enumerate(env.agents)
    }
    with pytest.raises(ValueError, match="too large to release a finite value|could exceed the largest float"):
        env.step(sending)
    assert env.epsilon_spent().tolist() == [0.0, 0.0, 0.0] and env.unwrapped.core.slot == 1
    assert env.unwrapped.ledger.totals()["messages"] == 0
    env.step({a: 0 for a in env.agents})  # the retried step plays


def test_the_analytic_gaussian_calibration_takes_any_finite_epsilon():
    for epsilon in (1e3, 1e100, 1e300):
        sigma = gaussian_sigma_analytic(1.0, epsilon, 1e-5)
        assert 0.0 < sigma < 1.0 and _gaussian_delta_normalised(sigma, epsilon) <= 1e-5
    assert gaussian_sigma_analytic(1.0, 1.0, 1e-5) == pytest.approx(3.7306, abs=1e-4)


class _ObjectArms(Population):
    """Plays arm 0 from an object-dtype array (Python ints inside)."""

    families = ("mab",)

    def reset(self, context) -> None:
        self.shape = (context.num_replicas, context.num_agents)

    def act(self, step) -> Action:
        return Action(np.zeros(self.shape, dtype=object))

    def observe(self, feedback) -> None:
        pass


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "pettingzoo"])
def test_an_object_dtype_arm_array_is_refused_on_both_paths(batched):
    with pytest.raises(TypeError, match="arms must be integers, got dtype object"):
        run(_ObjectArms, {"num_agents": 3, "num_arms": 4, "horizon": 5}, [0, 1], checkpoints=1, batched=batched)


@pytest.mark.parametrize(
    "build",
    [
        lambda env: MessageDrops(env, 0.5, kinds="sample"),
        lambda env: MessageDelays(env, 1, kinds="sample"),
        lambda env: ByzantineAgents(env, 0.5, kinds="sample"),
        lambda env: LaplaceMessageDP(env, epsilon=1.0, kinds="sample"),
        lambda env: LaplaceMessageDP(env, epsilon=1.0, kinds=None),
    ],
    ids=["drops", "delays", "byzantine", "dp", "dp None"],
)
def test_kinds_must_be_an_iterable_of_names_not_one_string(build):
    with pytest.raises(TypeError, match="kinds must be an iterable of names"):
        build(FederatedMAB(3, 2, 6))


def test_the_dp_wrappers_strict_switch_must_be_a_bool():
    with pytest.raises(TypeError, match="strict must be True or False"):
        LaplaceMessageDP(FederatedMAB(3, 2, 6), epsilon=1.0, strict="no")


@pytest.mark.parametrize("claim", ["undeclared field", "records beyond the count"])
def test_what_a_drop_loses_is_checked_by_the_dp_wrapper_outside_it_all_the_same(claim):
    """The DP wrapper checks messages as sent: a drop that loses one must not let an invalid message through."""
    env = LaplaceMessageDP(MessageDrops(FederatedMAB(3, 2, 6, topology="ring"), 1.0), epsilon=1.0)
    env.reset(seed=0)
    env.step({a: 0 for a in env.agents})  # one observed reward each
    if claim == "undeclared field":
        payload, privacy = {"v": [0.5], "raw": [0.7]}, {"v": Sensitive(aggregate="value", bounds=(0.0, 1.0))}
    else:
        privacy = {"v": Sensitive(aggregate="mean", bounds=(0.0, 1.0), records_field="n"), "n": Public()}
        payload = {"v": [0.5], "n": [50]}
    sending = {
        a: {"arm": 0, "messages": [Message(i, -2, "refusal_test", payload, privacy=privacy)]}
        for i, a in enumerate(env.agents)
    }
    with pytest.raises(ValueError, match="undeclared payload fields|claims 50 records"):
        env.step(sending)
    assert env.unwrapped.core.slot == 1


class Reentrant:
    """A hosted server (no replies) that re-enters its env once: ``call(env)`` in its ``method`` (of slot ``slot``).

    With ``catch`` it catches the refusal and serves on, else the refusal reaches the env; ``refusals`` are their texts.
    """

    def __init__(self, call=None, method=None, slot=None, catch=True) -> None:
        self.call, self.method, self.slot, self.catch = call, method, slot, catch
        self.env = None
        self.refusals: list[str] = []

    def reset(self, context, rngs) -> None:
        self._reenter("reset", None)

    def step(self, slot, inbox) -> list:
        self._reenter("step", slot)
        return []

    def observe_arrivals(self, slot, clients) -> None:
        self._reenter("observe_arrivals", slot)

    def _reenter(self, method, slot) -> None:
        if (method, slot) != (self.method, self.slot):
            return
        self.method = None  # once
        try:
            self.call(self.env)
        except RuntimeError as error:
            self.refusals.append(str(error))
            if not self.catch:
                raise


def _core_step(env) -> None:
    """A slot of the env's batched core: arm 0 for the two agents that act (both envs below have two)."""
    env.core.play(Action(np.zeros((1, 2), np.int64)))


REENTRANT_ENVS = {
    "mab": lambda server: FederatedMAB(2, 3, 5, coordinator=server),
    "linear": lambda server: FederatedLinear(3, 3, 2, 5, active_per_slot=2, coordinator=server),
}
REENTRANT_CALLS = {
    "env.step": lambda env: env.step({agent: 0 for agent in env.agents}),
    "env.reset": lambda env: env.reset(),
    "core.step": _core_step,
    "core.reset": lambda env: env.core.reset([1]),
}
REENTRY_POINTS = [("mab", "reset", None), ("mab", "step", 2), ("linear", "reset", None), ("linear", "step", 2)]
REENTRY_POINTS += [("linear", "observe_arrivals", 2), ("linear", "observe_arrivals", 0)]  # 0: inside the reset


def _episode(env) -> tuple:
    """A whole episode (arm 0 everywhere, nothing sent): its steps, regret and ledger, and the next episode's seed."""
    env.reset(seed=0)
    steps = 0
    while env.agents:
        env.step({agent: 0 for agent in env.agents} if env.pending_phase is None else {})
        steps += 1
    outcome = steps, env.core.regret.tolist(), env.ledger.totals()
    env.reset()
    return *outcome, env.context.agent_seeds[0].spawn_key


@pytest.mark.parametrize("call", REENTRANT_CALLS)
@pytest.mark.parametrize(("family", "method", "slot"), REENTRY_POINTS)
def test_a_step_or_reset_from_inside_one_is_refused_and_changes_nothing(family, method, slot, call):
    """A server that catches the refusal sees the episode go on as if it had not called; the env lost nothing."""
    server = Reentrant(REENTRANT_CALLS[call], method, slot)
    env = server.env = REENTRANT_ENVS[family](server)
    assert _episode(env) == _episode(REENTRANT_ENVS[family](Reentrant()))
    assert len(server.refusals) == 1 and "from inside a step or reset of the same environment" in server.refusals[0]


@pytest.mark.parametrize("call", REENTRANT_CALLS)
@pytest.mark.parametrize(("family", "method", "slot"), REENTRY_POINTS)
def test_a_refused_reentry_that_reaches_the_env_fails_it_as_a_failing_server(family, method, slot, call):
    """The refusal fails the reset or the slot it interrupts; the env refuses every step until a reset succeeds."""
    server = Reentrant(REENTRANT_CALLS[call], method, slot, catch=False)
    env = server.env = REENTRANT_ENVS[family](server)
    with pytest.raises(RuntimeError, match="from inside a step or reset of the same environment"):
        _episode(env)
    failure = "the last reset failed" if method == "reset" or slot == 0 else f"slot {slot} failed half played"
    with pytest.raises(RuntimeError, match=failure):
        env.step({agent: 0 for agent in env.possible_agents})
    assert _episode(env) == _episode(REENTRANT_ENVS[family](Reentrant()))
