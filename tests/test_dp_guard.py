"""Regression tests of the DP guard against an untrusted learner (issue 15, defects 1-7).

Each test reproduces one way a learner could get less noise, a lower charge or an unaccounted release from what
it declares, and checks that the wrapped env now refuses it or charges it in full.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit_envs import FederatedMAB, Message, MessageBatch
from fedbandit_envs.channel.privacy import (
    Privatized,
    Public,
    Sensitive,
    declare_message_schema,
    message_schemas,
    public_message_kinds,
)
from fedbandit_envs.env_base import MESSAGE_HOOKS
from fedbandit_envs.families.linear.env import LinearConfig, LinearCore
from fedbandit_envs.families.procurement.env import FedProcurementEnv
from fedbandit_envs.protocol import Action, Population
from fedbandit_envs.run import run
from wrappers.dp import GaussianMessageDP, LaplaceMessageDP, PrivacyBudgetExceeded, TreeMessageDP

KINDS = ("x", "plumless", "buckeroo")
VALUE = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="value")}
SUM = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
MEAN = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n"), "n": Public()}
PER_ARM = {
    "v": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n", arm_field="arm"),
    "n": Public(),
    "arm": Public(),
}


def make_env(horizon: int = 12, **kwargs) -> FederatedMAB:
    return FederatedMAB(num_agents=2, num_arms=3, horizon=horizon, topology="complete", **kwargs)


def step(env, messages: list[Message] = (), arm: int = 0):
    """Both agents pull ``arm``; agent 0 sends ``messages``. Returns (values delivered to agent 1, infos)."""
    actions = {a: {"arm": arm, "messages": list(messages) if i == 0 else []} for i, a in enumerate(env.agents)}
    observations, _, _, _, infos = env.step(actions)
    return [m for m in observations[env.agents[1]]["inbox"]], infos


def spent(env) -> tuple[float, float]:
    return float(env.epsilon_spent()[0]), float(env.delta_spent()[0])


# ------------------------------------------------------------------------------------------ 1: noise streams
@pytest.mark.parametrize("wrap", ["laplace", "tree"])
def test_kinds_with_equal_crc32_never_share_noise(wrap):
    # crc32("plumless") == crc32("buckeroo"): on 604ad5f both kinds drew the same noise, so the difference of the
    # two releases returned the secret exactly while 2 epsilon were charged.
    declaration = VALUE if wrap == "laplace" else SUM
    inner = make_env()
    env = LaplaceMessageDP(inner, 1.0, kinds=KINDS) if wrap == "laplace" else TreeMessageDP(inner, 1.0, kinds=KINDS)
    env.reset(seed=0)
    step(env)
    secret = 0.637
    sent = [Message(0, 1, kind, {"v": secret}, privacy=declaration) for kind in ("plumless", "buckeroo")]
    inbox, _ = step(env, sent)
    released = {m.kind: float(m.payload["v"]) for m in inbox}
    assert abs((released["plumless"] - secret) - (released["buckeroo"] - secret)) > 1e-3


def test_the_first_kind_of_a_crc32_keeps_its_noise_and_a_later_one_gets_a_fresh_stream():
    def release(kinds: list[str]) -> dict[str, float]:
        env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
        env.reset(seed=4)
        out = {}
        for kind in kinds:
            inbox, _ = step(env, [Message(0, 1, kind, {"v": 0.5}, privacy=VALUE)])
            out[kind] = float(inbox[0].payload["v"])
        return out

    alone = release(["plumless"])
    both = release(["plumless", "buckeroo"])
    assert both["plumless"] == alone["plumless"]
    # buckeroo's first draw differs from plumless's second draw on the shared (sender, crc32) generator
    assert release(["plumless", "plumless"])["plumless"] != both["buckeroo"]


# ------------------------------------------------------------------------------------------ 2: clipping sums
def test_a_sum_without_records_is_clipped_to_the_records_the_agent_observed():
    # on 604ad5f a sum without records_field was not clipped: 1000 declared in (0, 1) came out near 1000.
    env = LaplaceMessageDP(make_env(), 50.0, kinds=KINDS)
    env.reset(seed=1)
    step(env)
    step(env)  # agent 0 has observed 2 rewards
    inbox, _ = step(env, [Message(0, 1, "x", {"v": 1000.0}, privacy=SUM)])
    assert abs(float(inbox[0].payload["v"]) - 2.0) < 0.5  # Laplace scale 1/50: 0.5 is 25 scales


def test_a_gaussian_reward_declared_as_a_sum_is_clipped():
    # on 604ad5f a Gaussian reward of 40.25 declared as a sum in (0, 1) came out as 37.3.
    env = LaplaceMessageDP(make_env(reward_model="gaussian", instance=[0.9, 0.5, 0.1]), 10.0, kinds=KINDS)
    env.reset(seed=2)
    _, _ = step(env)
    inbox, _ = step(env, [Message(0, 1, "x", {"v": 40.25}, privacy=SUM)])
    assert float(inbox[0].payload["v"]) < 1.0 + 2.0  # clipped to 1 observed record; Laplace scale 0.1


# ------------------------------------------------------------------------------------------ 3: partitions
def test_a_sender_chosen_partition_composes_sequentially():
    # on 604ad5f changing the partition value every slot released one record many times for epsilon_spent = 1.0.
    epoch = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="value", partition_field="epoch"), "epoch": Public()}
    env = LaplaceMessageDP(make_env(), 0.5, budget=1.0, kinds=KINDS)
    env.reset(seed=3)
    for slot in range(2):
        step(env, [Message(0, 1, "x", {"v": 0.5, "epoch": slot}, privacy=epoch)])
    assert spent(env) == (1.0, 0.0)
    with pytest.raises(PrivacyBudgetExceeded):
        step(env, [Message(0, 1, "x", {"v": 0.5, "epoch": 2}, privacy=epoch)])


# ------------------------------------------------------------------------------------------ 4: record counts
def test_a_claimed_record_count_beyond_the_observed_rewards_is_refused_and_nothing_is_sent_or_charged():
    # on 604ad5f claiming n = 10**6 at slot 0 cut the noise to about 3e-6.
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=5)
    claim = Message(0, 1, "x", {"v": 0.5, "n": 10**6}, privacy=MEAN)
    with pytest.raises(ValueError, match=r"'n'.*observed 0 rewards"):
        step(env, [claim])
    assert spent(env) == (0.0, 0.0)
    inbox, _ = step(env)  # the refused step left the env unchanged: slot 0 is played now, with nothing sent
    assert inbox == [] and env.unwrapped.core.slot == 1
    inbox, _ = step(env, [Message(0, 1, "x", {"v": 0.5, "n": 1}, privacy=MEAN)])
    assert len(inbox) == 1 and spent(env) == (1.0, 0.0)


def test_a_claimed_count_of_an_arm_is_checked_against_that_arm():
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=6)
    step(env, arm=0)
    step(env, arm=0)
    step(env, arm=1)
    inbox, _ = step(env, [Message(0, 1, "x", {"v": [0.5, 0.5], "n": [2, 1], "arm": [0, 1]}, privacy=PER_ARM)])
    assert len(inbox) == 1
    with pytest.raises(ValueError, match=r"'n'.*arm 1"):
        step(env, [Message(0, 1, "x", {"v": [0.5, 0.5], "n": [1, 2], "arm": [0, 1]}, privacy=PER_ARM)])


def test_means_over_disjoint_entries_cannot_claim_more_records_than_observed_in_total():
    vector = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n"), "n": Public()}
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=6)
    for _ in range(3):
        step(env)
    with pytest.raises(ValueError, match="'n'"):
        step(env, [Message(0, 1, "x", {"v": [0.5, 0.5], "n": [2, 2]}, privacy=vector)])
    inbox, _ = step(env, [Message(0, 1, "x", {"v": [0.5, 0.5], "n": [2, 1]}, privacy=vector)])
    assert len(inbox) == 1


def test_an_explicit_sensitivity_is_refused_where_the_env_cannot_back_it():
    declared = {"v": Sensitive(bounds=None, aggregate="sum", sensitivity_field="k"), "k": Public()}
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=7)
    with pytest.raises(ValueError, match="sensitivity_field 'k'"):
        step(env, [Message(0, 1, "x", {"v": 0.5, "k": 1e-9}, privacy=declared)])
    assert spent(env) == (0.0, 0.0)


# ------------------------------------------------------------------------------------------ 5: Privatized
def test_every_privatized_declaration_is_charged_every_time():
    # on 604ad5f Privatized(epsilon=50, account_key="own") cost nothing after Privatized(epsilon=0.1, "own").
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=8)
    for epsilon in (0.1, 50.0, 0.1):
        step(env, [Message(0, 1, "x", {"v": 0.5}, privacy={"v": Privatized(epsilon=epsilon, account_key="own")})])
    assert spent(env)[0] == pytest.approx(50.2, rel=1e-12)


def test_an_episode_declaration_is_charged_once_and_a_different_one_under_its_key_is_refused():
    def episode(epsilon: float) -> dict:
        return {"v": Privatized(epsilon=epsilon, account_key="own", scope="episode")}

    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=8)
    step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=episode(0.1))])
    step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=episode(0.1))])
    assert spent(env)[0] == pytest.approx(0.1, rel=1e-12)
    with pytest.raises(ValueError, match="account_key 'own'"):
        step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=episode(50.0))])
    assert spent(env)[0] == pytest.approx(0.1, rel=1e-12)


# ------------------------------------------------------------------------------------------ 6: metadata
def test_a_kind_outside_the_public_vocabulary_is_refused_under_strict_mode():
    # on 604ad5f the raw reward left in Message.kind ("reward=1.0") and was delivered.
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=9)
    with pytest.raises(ValueError, match=r"kind 'reward=1.0'.*kinds="):
        step(env, [Message(0, 1, "reward=1.0", {"v": 0.5}, privacy=VALUE)])
    inbox, _ = step(env)
    assert inbox == []


def test_a_packed_count_is_refused_under_strict_mode():
    # on 604ad5f a reward-dependent Message.count was delivered as is.
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=9)
    with pytest.raises(ValueError, match="count"):
        step(env, [Message(0, 1, "x", {"v": 0.5}, count=7, privacy=VALUE)])


# ------------------------------------------------------------------------------------------ 7: delta budget
@pytest.mark.parametrize("on_exhausted", ["raise", "drop", "block"])
def test_the_budget_guard_checks_delta(on_exhausted):
    # on 604ad5f the guard checked epsilon only: delta_spent reached 1.25 while messages kept flowing.
    env = GaussianMessageDP(
        make_env(), 0.5, 0.25, budget=100.0, budget_delta=0.5, on_exhausted=on_exhausted, kinds=KINDS
    )
    env.reset(seed=10)
    for _ in range(2):
        inbox, infos = step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])
        assert len(inbox) == 1
    assert infos[env.agents[0]]["delta_spent"] == 0.5
    if on_exhausted == "raise":
        with pytest.raises(PrivacyBudgetExceeded, match="delta"):
            step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])
    else:
        inbox, _ = step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])
        assert inbox == []
    assert spent(env) == (1.0, 0.5)


def test_delta_can_never_reach_one_even_without_a_budget():
    env = GaussianMessageDP(make_env(), 0.5, 0.25, kinds=KINDS)
    env.reset(seed=11)
    for _ in range(3):
        step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])
    with pytest.raises(PrivacyBudgetExceeded, match="delta"):
        step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])
    assert spent(env)[1] == pytest.approx(0.75)


def test_records_view_is_read_only():
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=12)
    step(env, arm=2)
    records = env.privatizer.records
    assert records.agent_counts(0).tolist() == [1, 1]
    assert records.arm_counts(0).tolist() == [[0, 0, 1], [0, 0, 1]]
    with pytest.raises(ValueError, match="read-only"):
        records.agent_counts(0)[0] = 5
    step(env, arm=1)
    assert records.arm_counts(0).tolist() == [[0, 1, 1], [0, 1, 1]]  # the view follows the env's counts


def test_entries_naming_the_same_arm_share_its_records():
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=6)
    for _ in range(3):
        step(env, arm=0)
    with pytest.raises(ValueError, match=r"claims 4 records.*observed 3 rewards of arm 0"):
        step(env, [Message(0, 1, "x", {"v": [0.5, 0.5], "n": [2, 2], "arm": [0, 0]}, privacy=PER_ARM)])
    inbox, _ = step(env, [Message(0, 1, "x", {"v": [0.5, 0.5], "n": [2, 1], "arm": [0, 0]}, privacy=PER_ARM)])
    assert len(inbox) == 1


def test_a_fractional_record_count_is_refused():
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=13)
    step(env)
    step(env)
    with pytest.raises(ValueError, match="whole numbers"):
        step(env, [Message(0, 1, "x", {"v": 0.5, "n": 1.5}, privacy=MEAN)])
    inbox, _ = step(env, [Message(0, 1, "x", {"v": 0.5, "n": 2.0}, privacy=MEAN)])  # a whole count in a float
    assert len(inbox) == 1


class RecordingHook:
    """A message hook that keeps the env's record view and snapshots its counts whenever messages pass."""

    def reset(self, context, streams) -> None:
        self.records, self.seen = None, []

    def attach_records(self, records) -> None:
        self.records = records

    def __call__(self, slot, batches):
        self.seen.append(self.records.agent_counts(0).copy())
        return batches


def test_the_linear_core_counts_each_active_clients_observed_rewards():
    core = LinearCore(LinearConfig(num_clients=3, num_arms=2, dimension=2, horizon=6))
    hook = RecordingHook()
    core.reset([0], hooks=[hook])
    expected = np.zeros(3, np.int64)
    for _ in range(4):
        expected[core.clients[0]] += 1
        core.pull(np.zeros_like(core.clients))
        core.communicate([])
        assert hook.seen[-1].tolist() == expected.tolist()  # read while the slot's messages are privatized
    assert not hook.records.has_arm_counts  # contexts have no arm identity: a per-arm claim is refused


def test_the_procurement_core_counts_rounds_and_knows_the_capacities():
    env = FedProcurementEnv(num_agents=3, num_producers=2, horizon=5, instance_params={"max_capacity": 3})
    hook = RecordingHook()
    env.reset(seed=0, options={MESSAGE_HOOKS: [hook]})  # what a wrapper chain hands down
    for round_ in range(1, 3):
        env.step({agent: np.array([1, 1]) for agent in env.agents})
        env.step({"aggregator_0": {"messages": [Message(0, 1, "x", {"v": 1.0})]}})  # the round's report step
        assert hook.seen[-1].tolist() == [round_] * 3
    np.testing.assert_array_equal(hook.records.record_widths(0), env.core.instance.capacities)


def test_a_packed_count_equal_to_the_payload_record_axis_is_public():
    """Flooded records (Dubey) pack ``count`` records along axis 1: the count repeats the payload's shape."""
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=9)
    packed = Message(0, 1, "x", {"v": np.array([0.5, 0.25, 0.75])}, count=3, privacy={"v": Privatized()})
    inbox, _ = step(env, [packed])
    assert len(inbox) == 1 and inbox[0].count == 3
    with pytest.raises(ValueError, match="record axis"):
        step(env, [Message(0, 1, "x", {"v": np.array([0.5, 0.25])}, count=3, privacy={"v": Privatized()})])


# ------------------------------------------------------------------------------------------ 8: declarations
def narrow(low: float, aggregate: str) -> dict:
    """A declaration whose range, 1e-9 wide, starts at ``low``: a bound chosen from data would release the data."""
    return {"v": Sensitive(bounds=(low, low + 1e-9), aggregate=aggregate)}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("wrap", ["laplace", "gaussian", "tree"])
def test_a_sensitive_declaration_is_fixed_for_the_episode_at_its_first_use(wrap, strict):
    # Before, each message's own bounds were used: a sender centring a 1e-9-wide range on its reward sum had it
    # released to about 1e-8 at the charged epsilon.
    aggregate = "sum" if wrap == "tree" else "value"
    wrappers = {
        "laplace": lambda env: LaplaceMessageDP(env, 1.0, kinds=KINDS, strict=strict),
        "gaussian": lambda env: GaussianMessageDP(env, 0.5, 1e-5, kinds=KINDS, strict=strict),
        "tree": lambda env: TreeMessageDP(env, 1.0, kinds=KINDS, strict=strict),
    }
    env = wrappers[wrap](make_env())
    wide = {"v": Sensitive(bounds=(0.0, 1.0), aggregate=aggregate)}
    for other in (narrow(1.0, aggregate), wide):  # an episode each: a kind has at most 2 layouts (the channel's)
        env.reset(seed=0)
        step(env, [Message(0, 1, "x", {"v": 0.0}, privacy=narrow(0.0, aggregate))])
        before = spent(env)
        with pytest.raises(ValueError, match="fixed for the episode at its first use"):
            step(env, [Message(0, 1, "x", {"v": 1.0}, privacy=other)])
        assert spent(env) == before  # refused before anything is charged
        inbox, _ = step(env, [Message(0, 1, "x", {"v": 0.0}, privacy=narrow(0.0, aggregate))])  # the same passes
        assert len(inbox) == 1
    env.reset(seed=1)  # a new episode pins afresh
    step(env, [Message(0, 1, "x", {"v": 1.0}, privacy=wide)])


def test_every_part_of_a_sensitive_declaration_is_pinned_and_each_sender_and_kind_has_its_own():
    env = LaplaceMessageDP(FederatedMAB(num_agents=3, num_arms=3, horizon=12, topology="complete"), 1.0, kinds=KINDS)
    first = Sensitive(bounds=(0.0, 1.0), aggregate="value")
    actions = {a: 0 for a in env.possible_agents}
    for changed in (  # an episode each: a kind has at most 2 layouts (the channel's)
        Sensitive(bounds=(0.0, 1.0), aggregate="value", affects="all"),
        Sensitive(bounds=(0.0, 1.0), aggregate="sum"),
        Sensitive(bounds=(0.0, 2.0), aggregate="value"),
    ):
        env.reset(seed=0)
        message = Message(0, 1, "x", {"v": 0.5}, privacy={"v": first})
        env.step({**actions, "agent_0": {"arm": 0, "messages": [message]}})
        message = Message(0, 1, "x", {"v": 0.5}, privacy={"v": changed})
        with pytest.raises(ValueError, match="fixed for the episode"):
            env.step({**actions, "agent_0": {"arm": 0, "messages": [message]}})
    other = Sensitive(bounds=(0.0, 2.0), aggregate="value")  # another sender, or another kind, pins its own
    env.step(
        {
            **actions,
            "agent_0": {"arm": 0, "messages": [Message(0, 1, "plumless", {"v": 0.5}, privacy={"v": other})]},
            "agent_1": {"arm": 0, "messages": [Message(1, 2, "x", {"v": 0.5}, privacy={"v": other})]},
        }
    )


def test_a_new_sensitive_field_name_is_a_changed_declaration_but_privatized_and_public_fields_are_free():
    env = LaplaceMessageDP(make_env(), 1.0, kinds=KINDS)
    env.reset(seed=0)
    step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])
    with pytest.raises(ValueError, match=r"declared it only \['v'\] Sensitive"):  # a fresh name, a fresh first use
        step(env, [Message(0, 1, "x", {"w": 0.5}, privacy={"w": Sensitive(bounds=(0.0, 1.0), aggregate="value")})])
    env.reset(seed=0)  # (a kind has at most 2 layouts in an episode, refused steps' included: the channel's)
    step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])
    # a relay of already private values under the same kind and field (as HDP-MAB forwards) sets no noise
    step(env, [Message(0, 1, "x", {"v": 0.5, "o": 1}, privacy={"v": Privatized(), "o": Public()})])
    step(env, [Message(0, 1, "x", {"v": 0.5}, privacy=VALUE)])


def test_a_tree_stream_keeps_the_bounds_of_its_first_release():
    # Before, a stream's noise was calibrated on its first release's bounds, (0, 1e-9), and later increments were
    # clipped to later bounds, (0, 1): the running sums arrived exact to about 1e-8 at the stream's epsilon.
    env = TreeMessageDP(make_env(horizon=16), 1.0, kinds=KINDS)
    env.reset(seed=0)
    step(env, [Message(0, 1, "x", {"v": 0.0}, privacy=narrow(0.0, "sum"))])
    with pytest.raises(ValueError, match="fixed for the episode"):
        step(env, [Message(0, 1, "x", {"v": 1.0}, privacy=SUM)])


class CentredBounds(Population):
    """Sends every slot a value whose declared 1e-9-wide range starts at the slot (data, in an attack)."""

    families = ("mab",)

    def reset(self, context) -> None:
        self.b, self.m = context.num_replicas, context.num_agents

    def act(self, step) -> Action:
        rows, zeros = np.arange(self.b), np.zeros(self.b, int)
        batch = MessageBatch("x", rows, zeros, zeros + 1, {"v": zeros + 0.0}, privacy=narrow(float(step.slot), "value"))
        return Action(np.zeros((self.b, self.m), int), messages=[batch])

    def observe(self, feedback) -> None:
        pass


@pytest.mark.parametrize("batched", [True, False])
def test_both_run_paths_refuse_a_changed_declaration(batched):
    env_kwargs = {"num_agents": 2, "num_arms": 2, "horizon": 4, "topology": "complete"}
    wrapper = lambda env: LaplaceMessageDP(env, 1.0, kinds=KINDS)  # noqa: E731
    with pytest.raises(ValueError, match="fixed for the episode"):
        run(CentredBounds, env_kwargs, seeds=[0], checkpoints=1, wrappers=[wrapper], batched=batched, reference=None)


REGISTERED = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="value"), "o": Public()}
declare_message_schema("registered_value", REGISTERED)  # at import, before any episode


def test_a_kind_registered_with_a_declaration_must_always_carry_exactly_it():
    assert "registered_value" in public_message_kinds() and message_schemas()["registered_value"] == REGISTERED
    env = LaplaceMessageDP(make_env(), 1.0)
    for privacy in (  # even the episode's first message: bounds chosen from data, or any other difference
        {"v": Sensitive(bounds=(0.0, 1e-9), aggregate="value"), "o": Public()},
        {"v": Sensitive(bounds=(0.0, 1.0), aggregate="value"), "o": Privatized()},
    ):
        env.reset(seed=0)  # an episode each: a kind has at most 2 layouts, refused steps' included (the channel's)
        with pytest.raises(ValueError, match="must always carry exactly it"):
            step(env, [Message(0, 1, "registered_value", {"v": 0.0, "o": 1}, privacy=privacy)])
    inbox, _ = step(env, [Message(0, 1, "registered_value", {"v": 0.5, "o": 1}, privacy=REGISTERED)])
    assert len(inbox) == 1
    declare_message_schema("registered_value", dict(REGISTERED))  # the same again (a module run twice) is fine
    with pytest.raises(ValueError, match="is registered with the declaration"):
        declare_message_schema("registered_value", {"v": Sensitive(bounds=(0.0, 2.0), aggregate="value")})
    with pytest.raises(ValueError, match="must be Public"):  # validated as a message's declaration is
        declare_message_schema("other_kind", {"v": Sensitive(aggregate="mean", records_field="n"), "n": Privatized()})
