"""Array messages in the PettingZoo API: a MessageBatch in an agent's ``"messages"`` is a set of single messages.

The run loop's PettingZoo path sends each agent's rows as sub-batches and reads batch inboxes (see
``fedbandit_envs.env_base``); here the same runs are repeated with every row sent as a single ``Message`` and
read from ``Message`` inboxes, and the fingerprints (arms, regret, every ledger column, the wrappers' DP
noise, charges and fault state) must be equal bit for bit, on every family, with DP and fault wrappers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from fingerprints.cases import CASES
from fingerprints.record import Case, differences, fingerprint
from test_messaging_conformance import EchoServer

from fedbandit_envs.channel import NEIGHBOURS, Message, MessageBatch, batches_from_messages
from fedbandit_envs.channel.messages import batches_by_key
from fedbandit_envs.channel.privacy import Public, Sensitive
from fedbandit_envs.core import Action
from fedbandit_envs.env_base import MESSAGE, ProtocolParallelEnv
from fedbandit_envs.families.linear.env import FederatedLinear
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.families.procurement.env import FedProcurementEnv
from fedbandit_envs.observations import MessageSequence
from fedbandit_envs.protocol import Agent, PerAgentPopulation
from fedbandit_envs.run import run
from fedbandit_envs.topology import SERVER

#: Cases whose PettingZoo path sends messages, on every family: the channel's latency and drops, every DP wrapper
#: (Laplace, paper-calibrated Laplace, Gaussian, tree, a budget that blocks), byzantine relays and sources, drops and
#: delays.
FORM_CASES = (
    "full_sharing_ucb_latency_drops",
    "full_sharing_ucb_delays",
    "gossip_ucb_ring",
    "fed_ucb_laplace",
    "fed_ucb_gaussian",
    "fed_ucb_tree",
    "dubey_byzantine_ucb_relay",
    "dubey_byzantine_ucb_source",
    "dubey_byzantine_ucb_drops",
    "cdp_mab_laplace",
    "async_linucb_uniform",
    "async_linucb_drops_prices",
    "async_linucb_replay",
    "solanki_fcb_ring_drops",
    "solanki_pfcb_gaussian_wrapper",
    "solanki_pfcb_laplace_budget_block",
)
BY_NAME = {case.name: case for case in CASES}
#: The cases also played with half the agents sending single messages and half arrays (one per family and wrapper).
MIXED_CASES = {
    "full_sharing_ucb_latency_drops",
    "fed_ucb_laplace",
    "async_linucb_uniform",
    "solanki_pfcb_gaussian_wrapper",
}

#: How the PettingZoo path's agents send and receive: (what each agent sends, the inbox form).
FORMS = {
    "arrays": ("batches", "batches"),  # the translation methods' own form: per-sender sub-batches
    "single": ("messages", "messages"),  # every row as a single Message
    "mixed": ("mixed", "batches"),  # even agents single messages, odd agents sub-batches
}


def as_single_messages(sent: list[Any]) -> list[Any]:
    """Every row of the batches in ``sent`` as a single Message, in order."""
    return [m for item in sent for m in (item.messages() if isinstance(item, MessageBatch) else [item])]


def in_form(actions: Mapping[str, Any], form: str, sent: dict[type, int]) -> dict[str, Any]:
    """``actions`` with the messages of every agent (``"messages"``) or of every even agent (``"mixed"``) as
    single messages; ``sent`` counts the items sent of each type."""
    converted = {}
    for agent, action in actions.items():
        if isinstance(action, Mapping) and "messages" in action:
            even = int(agent.rsplit("_", 1)[1]) % 2 == 0  # agent_i, client_i, aggregator_j
            if form == "messages" or (form == "mixed" and even):
                action = {**action, "messages": as_single_messages(action["messages"])}
            for item in action["messages"]:
                sent[type(item)] = sent.get(type(item), 0) + 1
        converted[agent] = action
    return converted


def fingerprint_in(case: Case, form: str) -> tuple[dict[str, Any], dict[type, int]]:
    """The case's PettingZoo-path fingerprint with its agents sending and receiving in ``form``, and the number
    of items sent of each type."""
    sending, inbox = FORMS[form]
    sent: dict[type, int] = {}
    with pytest.MonkeyPatch.context() as patch:
        for cls, name in ((FederatedMAB, "actions_from"), (ProtocolParallelEnv, "message_actions")):
            method = getattr(cls, name)
            patch.setattr(cls, name, lambda self, *args, _method=method: in_form(_method(self, *args), sending, sent))
        return fingerprint(dataclasses.replace(case, env={**case.env, "inbox": inbox}), "pettingzoo"), sent


@pytest.mark.parametrize("name", FORM_CASES)
def test_array_messages_equal_single_messages_bit_for_bit(name: str) -> None:
    case = BY_NAME[name]
    arrays, sent = fingerprint_in(case, "arrays")
    assert set(sent) == {MessageBatch}
    for form in ("single", "mixed") if name in MIXED_CASES else ("single",):
        fingerprinted, sent = fingerprint_in(case, form)
        assert set(sent) == ({Message} if form == "single" else {Message, MessageBatch})
        found = [d for d in differences(arrays, fingerprinted) if d.field != "spec"]
        assert not found, f"{name}, {form} form:\n  " + "\n  ".join(map(str, found[:10]))


# ---------------------------------------------------------------------------------------------------- validation
def row_batch(senders: list[int], recipients: list[int], replica: int = 0, value: float = 1.0) -> MessageBatch:
    """A ``"note"`` batch with one row per (sender, recipient) pair and a float payload."""
    n = len(senders)
    return MessageBatch("note", np.full(n, replica), senders, recipients, {"value": np.full(n, value)})


def message_step(env: ProtocolParallelEnv) -> None:
    """Reset ``env`` and play act steps (arm 0, or no units) until a message-only step is pending."""
    observations, _ = env.reset(seed=0)
    while env.pending_phase is None:
        shapes = {a: env.action_space(a)[env.action_key].shape for a in env.agents}
        observations, *_ = env.step({a: {env.action_key: np.zeros(shape, np.int64)} for a, shape in shapes.items()})
    assert all(o["phase"] == MESSAGE for o in observations.values())


def ring() -> FederatedMAB:
    return FederatedMAB(6, 3, 10, topology="ring", boundary_hops=True, inbox="batches")


ENVS = {
    "mab": ring,
    "linear": lambda: FederatedLinear(4, 3, 2, 10, coordinator=EchoServer(), inbox="batches"),
    "procurement": lambda: FedProcurementEnv(3, 4, 10, topology="ring", inbox="batches"),
}


@pytest.mark.parametrize("family", sorted(ENVS))
def test_a_spoofed_sender_row_is_rejected(family: str) -> None:
    env = ENVS[family]()
    message_step(env)
    agent = env.possible_agents[1]
    with pytest.raises(
        ValueError, match=rf"{agent} sent a MessageBatch\('note'\) whose row 1 has sender=2; .* must be 1"
    ):
        env.step({agent: {"messages": [row_batch([1, 2], [0, 0])]}})


@pytest.mark.parametrize("family", sorted(ENVS))
def test_a_row_of_another_replica_is_rejected(family: str) -> None:
    env = ENVS[family]()
    message_step(env)
    agent = env.possible_agents[1]
    with pytest.raises(ValueError, match="whose row 0 has replica=1; .* every row's replica must be 0"):
        env.step({agent: {"messages": [row_batch([1], [0], replica=1)]}})


@pytest.mark.parametrize(("family", "recipient"), [("mab", 3), ("linear", 2), ("procurement", 5)])
def test_a_recipient_outside_the_topology_is_rejected(family: str, recipient: int) -> None:
    env = ENVS[family]()
    message_step(env)
    agent = env.possible_agents[0]
    error = "not linked in the topology" if family != "procurement" else "recipient 5 is unknown"
    with pytest.raises(ValueError, match=error):
        env.step({agent: {"messages": [row_batch([0, 0], [1, recipient])]}})
    assert env.ledger.totals()["messages"] == 0  # nothing of the step was sent


def test_a_mab_act_step_checks_the_batches_sent_with_the_arms() -> None:
    env = ring()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="whose row 0 has sender=4"):
        env.step({a: {"arm": 0, "messages": [row_batch([4], [NEIGHBOURS])]} for a in env.agents})
    env.step({a: {"arm": 0, "messages": [row_batch([i], [NEIGHBOURS])]} for i, a in enumerate(env.agents)})
    assert env.ledger.totals()["messages"] == 12  # a copy to each of two neighbours


def test_payloads_are_checked_when_a_batch_is_built() -> None:
    with pytest.raises(ValueError, match="field 'value' contains NaN or inf; send finite values only"):
        MessageBatch("note", [0], [0], [1], {"value": [np.inf]})
    with pytest.raises(TypeError, match="field 'value' must be numeric"):
        MessageBatch("note", [0], [0], [1], {"value": ["x"]})
    with pytest.raises(ValueError, match="privacy"):
        MessageBatch("note", [0], [0], [1], {"value": [1.0]}, privacy={"other": Public()})


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (row_batch([0], [1]), "must be a list of messages, got one MessageBatch; wrap it in"),
        ([np.zeros(2)], r"must hold Message objects \(or MessageBatch objects\), got ndarray"),
        (None, r"must be a list of Message \(or MessageBatch\) objects, got NoneType"),
        (5, r"must be a list of Message \(or MessageBatch\) objects, got int"),
        ({"m": 1}, r"must be a list of Message \(or MessageBatch\) objects, got dict"),
    ],
)
def test_messages_must_be_a_list_of_messages_or_batches(messages: Any, error: str) -> None:
    env = ring()
    message_step(env)
    with pytest.raises(TypeError, match=error):
        env.step({"agent_0": {"messages": messages}})


@pytest.mark.parametrize("actions", [None, [0, 0, 0], "agent_0"])
def test_step_takes_a_dict_of_actions_on_every_family(actions: Any) -> None:
    for make in (FederatedMAB, FederatedLinear, FedProcurementEnv):
        env = make()
        env.reset(seed=0)
        with pytest.raises(TypeError, match=r"step\(\) takes a dict of agent name to action"):
            env.step(actions)


@pytest.mark.parametrize("inbox", ["batch", 1])
def test_the_inbox_option_names_its_choices(inbox: Any) -> None:
    for make in (FederatedMAB, FederatedLinear, FedProcurementEnv):
        with pytest.raises((ValueError, TypeError), match="inbox must be one of 'messages', 'batches'"):
            make(inbox=inbox)


# ---------------------------------------------------------------------------------------------------- the inbox
@pytest.mark.parametrize("family", sorted(ENVS))
def test_a_batch_inbox_holds_each_agents_rows_and_its_space_contains_it(family: str) -> None:
    env = ENVS[family]()
    message_step(env)
    m = len(env.possible_agents)
    recipients = [(i + 1) % m if family != "linear" else SERVER for i in range(m)]
    privacy = {"value": Sensitive(aggregate="sum", bounds=(0.0, 10.0))}
    sent = {
        a: {"messages": [MessageBatch("note", [0], [i], [recipients[i]], {"value": [float(i)]}, privacy=privacy)]}
        for i, a in enumerate(env.possible_agents)
    }
    observations, *_ = env.step(sent)
    for i, agent in enumerate(env.possible_agents):
        observation = observations[agent]
        assert env.observation_space(agent).contains(observation)
        assert not MessageSequence().contains(observation["inbox"])
        (batch,) = observation["inbox"]
        assert batch.recipient.tolist() == [i] and batch.replica.tolist() == [0]
        if family == "linear":  # the echo server answers each client
            assert batch.sender.tolist() == [SERVER] and batch.kind == "ack"
            continue
        sender = (i - 1) % m
        assert batch.sender.tolist() == [sender]
        assert batch.payload["value"].tolist() == [float(sender)] and batch.privacy == privacy


def test_a_lone_batch_is_routed_as_it_is_and_sorted_rows_are_split_without_copies() -> None:
    batch = row_batch([0, 0, 1, 3], [1, 2, 0, 0])
    assert batches_from_messages([batch])[0] is batch
    by_sender = batches_by_key([batch], "sender")
    assert list(by_sender) == [0, 1, 3]
    assert [b.recipient.tolist() for (b,) in by_sender.values()] == [[1, 2], [0], [0]]
    assert all(np.shares_memory(b.payload["value"], batch.payload["value"]) for (b,) in by_sender.values())
    merged = batches_from_messages([b for (b,) in by_sender.values()])
    assert len(merged) == 1 and merged[0].header_key() == batch.header_key()
    assert np.array_equal(merged[0].payload["value"], batch.payload["value"])
    by_recipient = batches_by_key([batch], "recipient")  # unsorted: one sorted copy, rows in order per key
    assert {k: [b.sender.tolist() for b in v] for k, v in by_recipient.items()} == {0: [[1, 3]], 1: [[0]], 2: [[0]]}


# ---------------------------------------------------------------------------------------------------- per agent
class Talker(Agent):
    """Greedy on its own rewards plus what its neighbours tell it; tells them each reward, as arrays or single."""

    def __init__(self, arrays: bool) -> None:
        self.arrays = arrays

    def reset(self, agent_id: int, context: Any, rng: np.random.Generator) -> None:
        self.id, self.rng = agent_id, rng
        self.counts, self.sums = np.zeros(context.num_arms), np.zeros(context.num_arms)

    def act(self, observation: Mapping[str, Any]) -> Any:
        arm = observation["arm"]
        told = [(b.payload["arm"], b.payload["reward"]) for b in observation["inbox"] if isinstance(b, MessageBatch)]
        told += [
            (m.payload["arm"][None], m.payload["reward"][None]) for m in observation["inbox"] if isinstance(m, Message)
        ]
        for arms, rewards in told:
            np.add.at(self.counts, arms, 1)
            np.add.at(self.sums, arms, rewards)
        if arm >= 0:
            self.counts[arm] += 1
            self.sums[arm] += float(observation["reward"])
        choice = (
            int(self.rng.integers(len(self.counts)))
            if self.counts.min() == 0
            else int(np.argmax(self.sums / self.counts))
        )
        if arm < 0:
            return choice
        payload = {"arm": np.array([arm]), "reward": np.array([float(observation["reward"])])}
        if self.arrays:
            return {"arm": choice, "messages": [MessageBatch("told", [0], [self.id], [NEIGHBOURS], payload)]}
        return {
            "arm": choice,
            "messages": [Message(self.id, NEIGHBOURS, "told", {k: v[0] for k, v in payload.items()})],
        }


@pytest.mark.parametrize("batched", [True, False])
def test_per_agent_array_messages_and_batch_inboxes_equal_single_messages(batched: bool) -> None:
    env = {"num_agents": 4, "num_arms": 3, "horizon": 60, "topology": "ring", "instance_seed": 0}
    results = [
        run(lambda a=arrays, f=inbox: PerAgentPopulation(lambda: Talker(a), inbox=f), env, [0, 1], 3, batched=batched)
        for arrays, inbox in ((False, "messages"), (True, "batches"), (True, "messages"))
    ]
    timeless = [[{k: v for k, v in row.items() if k != "wall_time"} for row in r.curves] for r in results]
    assert results[0].curves[-1]["messages"] == 2 * 4 * 59
    for curves, other in zip(timeless[1:], results[1:]):
        assert curves == timeless[0] and other.agents == results[0].agents


def test_a_per_agent_learner_may_only_send_as_itself() -> None:
    class Spoofer(Talker):
        def reset(self, agent_id: int, context: Any, rng: np.random.Generator) -> None:
            super().reset(agent_id, context, rng)
            self.id = (agent_id + 1) % context.num_agents

    with pytest.raises(ValueError, match=r"agent 0 sent a MessageBatch\('told'\) whose row 0 has sender=1"):
        run(lambda: PerAgentPopulation(lambda: Spoofer(True)), {"num_agents": 3, "horizon": 5}, [0], 1)


# ---------------------------------------------------------------------------------------------------- aliasing
@pytest.mark.parametrize("latency", [0, 1])
def test_header_arrays_a_learner_rewrites_after_step_do_not_change_what_was_routed(latency: int) -> None:
    """The env routes copies of a sent batch's header arrays: a learner reusing its buffers cannot rewrite history."""
    env = FederatedMAB(3, 3, 10, topology="complete", inbox="batches", latency=latency, record_messages=True)
    env.reset(seed=0)
    replica, sender, recipient = np.zeros(1, np.int64), np.array([0]), np.array([1])
    batch = MessageBatch("note", replica, sender, recipient, {"value": np.ones(1)})
    assert batch.sender is sender and batch.recipient is recipient  # int64 headers are held as given
    observations, *_ = env.step({a: {"arm": 0, "messages": [batch] if a == "agent_0" else []} for a in env.agents})
    replica[:], sender[:], recipient[:] = 0, 2, 0  # the learner writes into its arrays after the step
    if latency:
        observations, *_ = env.step({a: {"arm": 0} for a in env.agents})
    (received,) = observations["agent_1"]["inbox"]
    assert received.sender.tolist() == [0] and received.recipient.tolist() == [1]
    assert len(observations["agent_0"]["inbox"]) == len(observations["agent_2"]["inbox"]) == 0
    assert env.ledger.sent_messages[0].tolist() == [1, 0, 0, 0]
    assert env.ledger.received_messages[0].tolist() == [0, 1, 0, 0]
    assert env.ledger.records()["recipient"].tolist() == [1]


def test_header_arrays_a_population_rewrites_after_play_do_not_change_its_inbox() -> None:
    """On the batched core too: the delivered copies hold read-only header arrays, never the population's."""
    core = FederatedMAB(3, 3, 10, topology="complete").core
    core.reset([0, 1])
    replica, sender, recipient, count = np.array([0, 1]), np.array([0, 2]), np.array([1, 0]), np.array([3, 1])
    read_only_count = count.view()
    read_only_count.setflags(write=False)  # read-only, yet its owner can still write to the array under it
    batch = MessageBatch("note", replica, sender, recipient, {"value": np.ones(2)}, count=read_only_count)
    feedback = core.play(Action(np.zeros((2, 3), np.int64), [batch]))
    replica[:], sender[:], recipient[:], count[:] = 1, 1, 0, 5
    (delivered,) = feedback.inbox
    assert delivered.replica.tolist() == [0, 1] and delivered.sender.tolist() == [0, 2]
    assert delivered.recipient.tolist() == [1, 0] and delivered.count.tolist() == [3, 1]
    assert core.channel.ledger.messages.tolist() == [3, 1]
    for name in ("replica", "sender", "recipient", "count"):
        assert not getattr(delivered, name).flags.writeable
