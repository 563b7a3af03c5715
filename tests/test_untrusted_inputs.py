"""What an untrusted learner declares, returns or reports is checked before the env relies on it.

Each case is a way a learner (or its server) could lower the ledger's counts or the privacy charged, or leave the
env half played, with plain Python: a huge count, a broadcast field of astronomic size, a ``str`` subclass as a
message kind, a privacy mapping that runs code when read, a negative ``epsilon_spent``, a phase it rewrites, a
server that replies nonsense.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pytest

from agents.baselines import RoundRobin
from fedbandit_envs import SERVER, FederatedMAB, Message, MessageBatch
from fedbandit_envs.channel.layouts import MAX_KINDS
from fedbandit_envs.channel.messages import MAX_COUNT, MAX_FIELDS, MAX_ROW_AXES, MAX_ROW_BYTES, _check_row_size
from fedbandit_envs.channel.privacy import Privatized, Public, Sensitive, declare_message_kinds
from fedbandit_envs.core import Action, Phase, play_slot
from fedbandit_envs.env_base import MESSAGE_HOOKS
from fedbandit_envs.families.linear.env import FederatedLinear, LinearContext
from fedbandit_envs.families.procurement.env import FedProcurementEnv
from fedbandit_envs.frozen import FrozenDict, is_frozen
from fedbandit_envs.protocol import Agent, Coordinator, PerAgentPopulation, Population
from fedbandit_envs.reference import reference_mode
from fedbandit_envs.run import run
from fedbandit_envs.validation import MAX_NAME_LENGTH
from wrappers.dp import LaplaceMessageDP
from wrappers.faults import MessageDelays

declare_message_kinds("sample")


def test_counts_and_row_sizes_are_bounded_so_the_ledger_stays_exact():
    with pytest.raises(ValueError, match=f"Message.count must be <= {MAX_COUNT}"):
        Message(0, 1, "x", {"v": [1.0]}, count=2**62)
    with pytest.raises(ValueError, match=f"MessageBatch.count must be <= {MAX_COUNT}"):
        MessageBatch("x", [0], [0], [1], {"v": [1.0]}, count=[MAX_COUNT + 1])
    huge = np.broadcast_to(np.zeros((1, 1, 1), bool), (1, 2, MAX_ROW_BYTES // 2 + 1))  # one byte, 4 GiB logically
    with pytest.raises(ValueError, match=f"carries {MAX_ROW_BYTES + 2} payload bytes; at most {MAX_ROW_BYTES}"):
        MessageBatch("x", [0], [0], [1], {"pad": huge})
    assert MessageBatch("x", [0], [0], [1], {"v": [1.0]}, count=[MAX_COUNT]).count.tolist() == [MAX_COUNT]


def test_metadata_is_bounded_so_no_data_travels_free_in_names_or_shapes():
    """Kinds, field names, the number of fields and the shape of an empty field are not charged: all are bounded."""
    secret = "r" * (MAX_NAME_LENGTH + 1)
    with pytest.raises(ValueError, match=f"Message.kind has {MAX_NAME_LENGTH + 1} characters; at most"):
        Message(0, 1, secret, {"v": [1.0]})
    with pytest.raises(ValueError, match=f"a payload field name has {MAX_NAME_LENGTH + 1} characters"):
        MessageBatch("x", [0], [0], [1], {secret: [[1.0]]})
    with pytest.raises(TypeError, match="a payload field name must be a non-empty string, got 7"):
        Message(0, 1, "x", {7: [1.0]})
    many = {f"f{i}": [[1.0]] for i in range(MAX_FIELDS + 1)}
    with pytest.raises(ValueError, match=f"{MAX_FIELDS + 1} payload fields; at most {MAX_FIELDS}"):
        MessageBatch("x", [0], [0], [1], many)
    with pytest.raises(ValueError, match="at most 8 axes"):  # an empty field: zero bytes, its shape still says much
        MessageBatch("x", [0], [0], [1], {"v": np.zeros((1, 0, 2**40))})
    with pytest.raises(ValueError, match="at most 8 axes"):
        Message(0, 1, "x", {"v": np.zeros((0,) * 9)})
    with pytest.raises(ValueError, match="description must be a string of at most 200"):
        Privatized(description=secret * 4)
    with pytest.raises(ValueError, match="Privatized.account_key has"):
        Privatized(account_key=secret)
    longest = "k" * MAX_NAME_LENGTH
    batch = MessageBatch(longest, [0], [0], [1], {longest: np.zeros((1, *[1] * MAX_ROW_AXES))})
    assert batch.kind == longest and list(batch.payload) == [longest]


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 1, 1), (2, 0, 5)])
def test_an_empty_field_has_one_row_shape_so_its_shape_carries_nothing(shape: tuple[int, ...]) -> None:
    """A field with no entries costs no byte: its row shape must be (0,), else a shape could carry data for free."""
    with pytest.raises(ValueError, match=rf"field 'v' has rows of shape \({shape[0]}, .*with no entries"):
        Message(0, 1, "x", {"v": np.zeros(shape)})
    with pytest.raises(ValueError, match="an empty field's row must have shape"):
        MessageBatch("x", [0, 0], [0, 1], [1, 0], {"v": np.zeros((2, *shape))})
    with pytest.raises(ValueError, match="an empty field's row must have shape"):
        MessageBatch("x", [], [], [], {"v": np.zeros((0, *shape))})
    assert MessageBatch("x", [0], [0], [1], {"v": np.zeros((1, 0))}).bytes_per_row == 0  # an empty row of shape (0,)
    assert Message(0, 1, "x", {"v": np.zeros(0), "w": np.zeros(())}).payload["v"].shape == (0,)


def _send(env: FederatedMAB, *messages: Message) -> None:
    """One slot in which agent 0 sends ``messages`` (to agent 1) and agent 1 sends nothing."""
    env.step({"agent_0": {"arm": 0, "messages": list(messages)}, "agent_1": 0})


def test_a_kind_keeps_its_layouts_so_names_carry_no_data_from_message_to_message():
    """Field names are not charged: a kind has at most two layouts in an episode, whatever the messages' order."""
    env = FederatedMAB(2, 2, 20, topology="complete", price_per_byte=1.0)
    env.reset(seed=0)
    _send(env, Message(0, 1, "k", {"a": np.zeros(3)}))
    _send(env, Message(0, 1, "k", {"a": np.zeros(5)}), Message(0, 1, "k", {"b": [1]}))  # shapes may vary
    for secret in ("c", "d"):  # a third layout: names, a dtype, a rank or a declaration
        for payload, privacy in (({secret: [1.0]}, None), ({"a": [1]}, None), ({"a": [[1.0]]}, None)):
            with pytest.raises(ValueError, match="a kind may have at most 2 layouts"):
                _send(env, Message(0, 1, "k", payload, privacy=privacy))
        with pytest.raises(ValueError, match="at most 2 layouts"):
            _send(env, Message(0, 1, "k", {"a": [1.0]}, privacy={"a": Privatized(description=secret)}))
    slot = env.unwrapped.core.slot
    with pytest.raises(ValueError, match="at most 2 layouts"):  # refused whole: the new kind "m" is not registered
        _send(env, *[Message(0, 1, "m", {"x": [1.0]}), Message(0, 1, "k", {"c": [1.0]})])
    assert env.unwrapped.core.slot == slot
    for kind in [f"n{i}" for i in range(MAX_KINDS - 1)]:  # "k" and 15 more kinds (not "m")
        _send(env, Message(0, 1, kind, {"x": [1.0]}))
    with pytest.raises(ValueError, match=f"at most {MAX_KINDS} message kinds"):
        _send(env, Message(0, 1, "m", {"x": [1.0]}))
    env.reset(seed=1)  # a new episode starts afresh
    _send(env, Message(0, 1, "k", {"c": [1.0]}), Message(0, 1, "m", {"x": [1.0]}))


class Layouts(Population):
    """Replica b sends kind "k" with the fields of layouts[b][t % 2] in slot t (from agent 0 to agent 1)."""

    families = ("mab",)
    layouts = ((("a",), ("b",)), (("c",), ("d",)))

    def reset(self, context):
        self.replicas, self.t = context.num_replicas, 0

    def act(self, step):
        batches = []
        for b in range(self.replicas):
            fields = {name: np.zeros((1, 1)) for name in self.layouts[b % 2][self.t % 2]}
            batches.append(MessageBatch("k", [b], [0], [1], fields))
        self.t += 1
        return Action(np.zeros((self.replicas, 2), np.int64), batches)

    def observe(self, feedback):
        pass


@pytest.mark.parametrize("batched", [True, False])
def test_layouts_are_bounded_per_replica_so_both_paths_agree(batched: bool):
    """Two replicas with two layouts of a kind each (four in all) run on the batched path as one by one."""
    env = {"num_agents": 2, "num_arms": 2, "horizon": 6, "topology": "complete"}
    results = run(Layouts, env, [0, 1], checkpoints=1, batched=batched)
    assert [row["messages"] for row in results.curves] == [6, 6]
    with reference_mode():
        assert [row["messages"] for row in run(Layouts, env, [0, 1], checkpoints=1, batched=batched).curves] == [6, 6]


class Kind(str):
    """A kind that compares equal to every string, whatever it says."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return True


class Spying(Mapping):
    """A privacy mapping that counts how often the env reads it."""

    def __init__(self, declarations: dict) -> None:
        self.declarations, self.reads = declarations, 0

    def __getitem__(self, key: str):
        self.reads += 1
        return self.declarations[key]

    def __iter__(self) -> Iterator[str]:
        self.reads += 1
        return iter(self.declarations)

    def __len__(self) -> int:
        return len(self.declarations)


def test_kinds_are_exact_strings_and_privacy_is_read_once_into_a_dict():
    message = Message(0, 1, Kind("reward=0.7"), {"v": [1.0]})
    assert type(message.kind) is str and message.kind == "reward=0.7" and message.kind != "sample"
    batch = MessageBatch(Kind("reward=0.7"), [0], [0], [1], {"v": [1.0]})
    assert type(batch.kind) is str and batch.kind != "sample"
    env = LaplaceMessageDP(FederatedMAB(2, 2, 3, topology="complete"), epsilon=1.0, kinds=("sample",))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="'reward=0.7' is not in the wrapper's public vocabulary"):
        env.step({"agent_0": {"arm": 0, "messages": [message]}, "agent_1": 0})
    spying = Spying({"v": Public()})
    batch = MessageBatch("sample", [0], [0], [1], {"v": [1.0]}, privacy=spying)
    reads = spying.reads
    assert type(batch.privacy) is FrozenDict and batch.layout_key() and spying.reads == reads  # not read again

    class Lenient(Sensitive):
        """A declaration of the sender's own making."""

    with pytest.raises(TypeError, match="must be Public\\(\\), Sensitive\\(...\\) or Privatized"):
        Message(0, 1, "sample", {"v": [1.0]}, privacy={"v": Lenient(aggregate="value")})


def test_value_entries_of_one_record_each_cannot_outnumber_the_records_observed():
    """A reward repeated in many entries declared affects='one' would be averaged back: refused."""
    env = LaplaceMessageDP(FederatedMAB(2, 2, 3, topology="complete"), epsilon=0.5, kinds=("sample",))
    env.reset(seed=0)
    env.step({"agent_0": 0, "agent_1": 0})  # agent 0 has observed one reward
    declaration = {"v": Sensitive(aggregate="value", bounds=(0.0, 1.0), affects="one")}
    many = Message(0, 1, "sample", {"v": np.full(50, 1.0)}, privacy=declaration)
    with pytest.raises(ValueError, match="holds 50 entries of one record each .* has observed 1 rewards"):
        env.step({"agent_0": {"arm": 0, "messages": [many]}, "agent_1": 0})
    assert env.epsilon_spent().tolist() == [0.0, 0.0]
    one = Message(0, 1, "sample", {"v": [1.0]}, privacy=declaration)
    env.step({"agent_0": {"arm": 0, "messages": [one]}, "agent_1": 0})
    assert env.epsilon_spent().tolist() == [0.5, 0.0]


class Cancelling(RoundRobin):
    """Reports a negative epsilon of its own, which would cancel a DP wrapper's charge in the results."""

    def reset(self, context):
        super().reset(context)
        self.shape = (context.num_replicas, context.num_agents)

    def epsilon_spent(self):
        return np.full(self.shape, -5.0)

    def delta_spent(self):
        return np.zeros(self.shape)


@pytest.mark.parametrize("batched", [True, False])
def test_a_population_may_only_add_privacy_spent(batched):
    with pytest.raises(ValueError, match=r"Cancelling.epsilon_spent\(\) must return .* >= 0"):
        run(Cancelling, {"num_agents": 2, "num_arms": 2, "horizon": 3}, [0], checkpoints=1, batched=batched)


class Skipping(Population):
    """Sends a note in round 0's report step, then marks every later report round as not required."""

    families = ("procurement",)

    def reset(self, context):
        self.context, self.received = context, 0

    def act(self, step):
        return Action(np.zeros((1, self.context.num_agents, self.context.num_arms), np.int64))

    def observe(self, feedback):
        pass

    def send(self, phase):
        sends = [MessageBatch("note", [0], [0], [1], {"v": [1.0]})] if phase.slot == 0 else []
        phase.required = False
        return sends

    def receive(self, phase, inbox):
        self.received += sum(len(batch) for batch in inbox)


@pytest.mark.parametrize("batched", [True, False])
def test_the_env_reads_its_own_phase_whatever_the_population_does_to_its_copy(batched):
    """Under delays every report round is routed, even if the population rewrites its phase's ``required``."""
    env = {"env": "procurement", "num_agents": 2, "num_producers": 3, "horizon": 4}
    delays = [lambda e: MessageDelays(e, delay=2)]
    results = run(Skipping, env, [0], checkpoints=1, batched=batched, reference=None, wrappers=delays)
    assert results.curves[-1]["messages"] == 1  # held in round 0, released in round 2 (a silent round)


class Replying(Coordinator):
    """A server whose replies are ``answer``."""

    def __init__(self, answer):
        self.answer = answer

    def reset(self, context, rngs):
        pass

    def step(self, slot, inbox):
        return self.answer


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        (None, TypeError, "Replying.step must return a list of MessageBatch replies"),
        ([Message(SERVER, 0, "down")], TypeError, "must be MessageBatch objects, got Message"),
        ([MessageBatch("down", [0], [SERVER], [SERVER], {})], ValueError, "cannot send 'down' to the server"),
    ],
)
def test_a_failing_server_ends_the_episode_instead_of_leaving_a_slot_half_played(answer, error, match):
    env = FederatedMAB(2, 2, 5, topology="server", coordinator=Replying(answer))
    env.reset(seed=0)
    up = [MessageBatch("up", [0], [0], [SERVER], {"v": [1.0]})]
    with pytest.raises(error, match=match):
        env.step({"agent_0": {"arm": 0, "messages": up}, "agent_1": 0})
    regret, messages = env.unwrapped.core.regret.copy(), env.ledger.totals()["messages"]
    with pytest.raises(RuntimeError, match="slot 0 failed half played .* call reset"):
        env.step({"agent_0": {"arm": 0, "messages": up}, "agent_1": 0})
    assert np.array_equal(env.unwrapped.core.regret, regret) and env.ledger.totals()["messages"] == messages
    env.reset(seed=0)
    assert env.unwrapped.core.failed is None


def _reply_through_dp(reply: MessageBatch, strict: bool = True) -> list[MessageBatch]:
    """The batches agent 0 receives when the server answers an upload with ``reply``, under a Laplace DP wrapper."""
    env = LaplaceMessageDP(
        FederatedMAB(2, 2, 5, topology="server", coordinator=Replying([reply]), inbox="batches"),
        1.0,
        kinds=("up", "down"),
        strict=strict,
    )
    env.reset(seed=0)
    up = [MessageBatch("up", [0], [0], [SERVER], {"v": [1.0]}, privacy={"v": Public()})]
    observations, *_ = env.step({"agent_0": {"arm": 0, "messages": up}, "agent_1": 0})
    return list(observations["agent_0"]["inbox"])


def _reply(kind: str = "down", privacy: dict | None = None) -> MessageBatch:
    return MessageBatch(kind, [0], [SERVER], [0], {"raw": [37.0]}, privacy=privacy)


def test_a_server_s_replies_are_checked_by_a_strict_dp_wrapper_but_not_noised():
    # replies skipped every message hook: a server holding the population sent raw reward sums under an undeclared
    # kind and undeclared fields through a strict wrapper
    with pytest.raises(ValueError, match="'zz' is not in the wrapper's public vocabulary"):
        _reply_through_dp(_reply("zz", {"raw": Public()}))
    with pytest.raises(ValueError, match=r"undeclared payload fields \['raw'\]"):
        _reply_through_dp(_reply())
    with pytest.raises(ValueError, match="does not noise a server's replies"):
        _reply_through_dp(_reply(privacy={"raw": Sensitive(bounds=(0.0, 1.0), aggregate="value")}))
    (received,) = _reply_through_dp(_reply(privacy={"raw": Privatized()}))  # post-processing: sent as it is
    assert received.kind == "down" and received.payload["raw"].tolist() == [37.0]
    with pytest.warns(UserWarning, match="strict=False"):
        (received,) = _reply_through_dp(_reply("zz"), strict=False)
    assert received.payload["raw"].tolist() == [37.0]
    with pytest.raises(ValueError, match="does not noise a server's replies"):
        _reply_through_dp(_reply(privacy={"raw": Sensitive(bounds=(0.0, 1.0), aggregate="value")}), strict=False)


class FailingResetHook:
    """A message hook whose ``reset`` fails while ``failing``: the reset breaks after the channel was replaced."""

    refuses_steps = False

    def __init__(self) -> None:
        self.failing = True

    def reset(self, context, streams) -> None:
        if self.failing:
            raise RuntimeError("hook reset boom")

    def __call__(self, slot, batches):
        return batches


RESET_FAMILIES = {
    "mab": (lambda: FederatedMAB(2, 2, 5), lambda env: dict.fromkeys(env.agents, 0)),
    "linear": (
        lambda: FederatedLinear(num_clients=3, num_arms=2, dimension=2, horizon=5),
        lambda env: dict.fromkeys(env.agents, 0),
    ),
    "procurement": (
        lambda: FedProcurementEnv(num_agents=2, num_producers=2, horizon=5),
        lambda env: {a: np.zeros(2, np.int64) for a in env.agents},
    ),
}


@pytest.mark.parametrize("family", RESET_FAMILIES)
def test_a_reset_that_fails_half_way_refuses_every_step_until_a_reset_succeeds(family):
    build, act = RESET_FAMILIES[family]
    env = build()
    env.reset(seed=0)
    env.step(act(env))
    hook = FailingResetHook()
    with pytest.raises(RuntimeError, match="hook reset boom"):
        env.reset(seed=1, options={MESSAGE_HOOKS: [hook]})
    core = env.unwrapped.core
    refused = "the last reset failed: RuntimeError: hook reset boom; reset again"
    for _ in range(2):
        with pytest.raises(RuntimeError, match=refused):
            env.step(act(env))
    with pytest.raises(RuntimeError, match=refused):  # the batched path: the act step and a message-only phase
        play_slot(core, RoundRobin())
    with pytest.raises(RuntimeError, match=refused):
        core.exchange(Phase(0, "report"), [])
    for show in (env.state, env.unwrapped.summary):  # half the new episode and half the old one: nothing to show
        with pytest.raises(RuntimeError, match=refused):
            show()
    hook.failing = False
    env.reset(seed=1, options={MESSAGE_HOOKS: [hook]})
    assert core.failed is None and core.slot == 0
    env.step(act(env))  # the new episode plays
    assert env.state().ndim == 1 and "/5 " in env.unwrapped.summary()


def test_an_action_s_messages_are_a_list():
    with pytest.raises(TypeError, match="Action.messages must be a list of MessageBatch objects, got NoneType"):
        Action(np.zeros((1, 2), np.int64), None)  # type: ignore[arg-type]
    assert Action(np.zeros((1, 2), np.int64), ()).messages == ()


class SendsWithTheAction(Population):
    """Attaches a message to every act-phase action (the linear and procurement families take none there)."""

    families = ("linear", "procurement")

    def reset(self, context):
        self.context = context

    def act(self, step):
        c, replicas = self.context, np.arange(self.context.num_replicas)
        shape = step.clients.shape if isinstance(c, LinearContext) else (len(replicas), *c.capacities.shape)
        message = MessageBatch("up", replicas, np.zeros_like(replicas), np.full_like(replicas, SERVER), {})
        return Action(np.zeros(shape, np.int64), [message])

    def observe(self, feedback):
        pass


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(
    "env",
    [
        {"env": "linear", "num_clients": 3, "num_arms": 3, "dimension": 2, "horizon": 4},
        {"env": "procurement", "num_agents": 2, "num_producers": 3, "horizon": 4},
    ],
)
def test_an_act_phase_action_s_messages_are_refused_on_both_paths(env, batched):
    # the PettingZoo path dropped them silently, so the two paths differed
    with pytest.raises(ValueError, match="actions carry no messages in the act phase"):
        run(SendsWithTheAction, env, [0], checkpoints=1, batched=batched, reference=None)


def test_a_procurement_env_without_hooks_still_skips_silent_report_rounds():
    env = FedProcurementEnv(num_agents=2, num_producers=3, horizon=2)
    env.reset(seed=0)
    assert env.unwrapped.core.first_phase().required is False  # no hook: nothing can be held back
    wrapped = MessageDelays(FedProcurementEnv(num_agents=2, num_producers=3, horizon=2), delay=1)
    wrapped.reset(seed=0)
    assert wrapped.unwrapped.core.first_phase().required is True


def _arrays(value: object) -> Iterator[np.ndarray]:
    """Every array in an observation (its dict values, nested)."""
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _arrays(item)


def _write_through(array: np.ndarray) -> None:
    """Overwrite ``array`` and every array it is a view of, lifting read-only flags where numpy allows."""
    target: object = array
    while isinstance(target, np.ndarray):
        try:
            target.setflags(write=True)
            target[...] = 123
        except ValueError:
            pass
        target = target.base


@pytest.mark.parametrize(
    "make",
    [
        lambda: FederatedMAB(num_agents=3, num_arms=2, horizon=5),
        lambda: FederatedLinear(num_clients=3, num_arms=2, dimension=2, horizon=5),
        lambda: FedProcurementEnv(num_agents=3, num_producers=4, horizon=5),
    ],
    ids=["mab", "linear", "procurement"],
)
def test_an_agent_cannot_rewrite_another_agents_observation(make):
    """An agent's policy holds its own observation: writing through it (and its ``.base``) reaches no other agent's."""
    env = make()
    observations, _ = env.reset(seed=0)
    for _ in range(2):
        actions = {}
        for agent in env.agents:
            space = env.action_space(agent)
            space.seed(0)
            actions[agent] = space.sample()
        observations, *_ = env.step(actions)
    first, *others = list(observations)
    kept = {agent: [np.array(a) for a in _arrays(observations[agent])] for agent in others}
    assert kept[others[0]], "the observations hold arrays"
    for array in _arrays(observations[first]):
        _write_through(array)
    for agent in others:
        for was, now in zip(kept[agent], _arrays(observations[agent]), strict=True):
            np.testing.assert_array_equal(now, was)


def _reachable(obj: object, seen: set[int] | None = None) -> Iterator[np.ndarray]:
    """Every array an agent reaches from ``obj``: through containers, public attributes and ``.base`` chains.

    A ``bytes`` object under an array is read as the array's dtype (it holds whatever memory the array was cut from).
    """
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, str | int | float | type(None)):
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        yield obj
        if isinstance(obj.base, bytes) and len(obj.base) % obj.itemsize == 0:
            yield np.frombuffer(obj.base, obj.dtype)
        elif obj.base is not None:
            yield from _reachable(obj.base, seen)
    elif isinstance(obj, Mapping):
        for item in obj.values():
            yield from _reachable(item, seen)
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from _reachable(item, seen)
    else:
        slots = [name for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())]
        for name in (*getattr(obj, "__dict__", {}), *slots):
            if not name.startswith("_"):
                yield from _reachable(getattr(obj, name, None), seen)


def _values(obj: object) -> set[float]:
    """Every number in an array reachable from ``obj``."""
    return {value for array in _reachable(obj) for value in np.asarray(array, float).ravel().tolist()}


def test_an_agent_reads_no_other_agents_reward():
    """An agent's reward observation is a frozen scalar of its own: nothing under it holds another agent's reward."""
    env = FederatedMAB(4, 3, 5, reward_model="gaussian")
    env.reset(seed=0)
    observations, rewards, *_ = env.step({agent: i % 3 for i, agent in enumerate(env.agents)})
    for agent in env.agents:
        reward = observations[agent]["reward"]
        assert reward.shape == () and is_frozen(reward)
        assert [array.size for array in _reachable(reward)] == [1, 1]  # the scalar and the bytes under it
        assert _values(reward) == {rewards[agent]}

    seen: list[tuple[set[float], set[float]]] = []

    class Reading(Agent):
        def reset(self, agent_id, context, rng):
            self.index = agent_id

        def act(self, observation):
            seen.append((_values(observation["reward"]), {float(observation["reward"])}))
            return self.index % 2

    run(Reading, {"num_agents": 3, "num_arms": 2, "horizon": 3, "reward_model": "gaussian"}, seeds=[0, 1],
        checkpoints=1, reference=None)  # fmt: skip
    assert len(seen) == 18 and all(reached == own for reached, own in seen)


def _private_message(sender: int, recipient: int, replica: int = 0) -> Message:
    """A message whose one value names its sender, recipient and replica (all above the headers' small ints)."""
    return Message(sender, recipient, "p", {"x": np.array([1000.0 * (replica + 1) + 10.0 * sender + recipient])})


def _only_own_rows(inbox: object, own: set[float]) -> None:
    """Assert the payload values reachable from ``inbox`` are ``own``, and each array holds one row at most."""
    assert {value for value in _values(inbox) if value >= 1000} == own
    assert max(array.size for array in _reachable(inbox)) == 1  # one message received: no other row under it


@pytest.mark.parametrize("form", ["messages", "batches"])
@pytest.mark.parametrize("family", ["mab", "procurement"])
def test_an_agent_reaches_only_the_messages_addressed_to_it(family, form):
    """Each agent sends a private message to the next: what an agent receives leads to no other agent's message.

    Neither the payload's ``.base`` (a view of the routed field) nor a gathered payload's ``source`` (the sender's
    whole batch), nor the header columns (the routed batch's), lead past the agent's own rows.
    """
    n = 4
    if family == "mab":
        env = FederatedMAB(n, 3, 5, topology="complete", inbox=form)
        env.reset(seed=0)
        action = lambda i, sent: {"arm": 0, "messages": sent}  # noqa: E731
    else:
        env = FedProcurementEnv(n, 3, 5, inbox=form)
        env.reset(seed=0)
        env.step({agent: np.zeros(3, np.int64) for agent in env.agents})  # the act step; then the report step
        action = lambda i, sent: {"messages": sent}  # noqa: E731
    sent = {agent: action(i, [_private_message(i, (i + 1) % n)]) for i, agent in enumerate(env.agents)}
    observations, *_ = env.step(sent)
    for i, agent in enumerate(env.agents):
        inbox = observations[agent]["inbox"]
        assert len(inbox) == 1 and all(
            isinstance(item, Message if form == "messages" else MessageBatch) for item in inbox
        )
        _only_own_rows(inbox, {1000.0 + 10.0 * ((i - 1) % n) + i})


@pytest.mark.parametrize("form", ["messages", "batches"])
def test_an_agent_of_a_per_agent_population_reaches_only_the_messages_addressed_to_it(form):
    """On the batched path each :class:`Agent` gets its own rows of its replica's routed copies, nothing more."""
    n, created, received = 3, [], []

    class Whispering(Agent):
        def reset(self, agent_id, context, rng):
            self.index, self.replica = agent_id, len(created) // n  # replica 0's agents are built first
            created.append(self)

        def act(self, observation):
            if observation["inbox"]:
                received.append((self, observation["inbox"]))
            return {"arm": 0, "messages": [_private_message(self.index, (self.index + 1) % n, self.replica)]}

    settings = {"num_agents": n, "num_arms": 2, "horizon": 3, "topology": "complete"}
    run(lambda: PerAgentPopulation(Whispering, inbox=form), settings, seeds=[0, 1], checkpoints=1, reference=None)
    assert len(received) == 2 * 2 * n  # two replicas, two slots with an inbox, every agent
    for agent, inbox in received:
        _only_own_rows(inbox, {1000.0 * (agent.replica + 1) + 10.0 * ((agent.index - 1) % n) + agent.index})


def test_the_mab_env_s_feedback_cannot_rewrite_its_state():
    """The array form of the last step is frozen: whoever reads it cannot rewrite the env's arms or rewards."""
    env = FederatedMAB(3, 4, 10, reward_model="gaussian")
    env.reset(seed=0)
    env.step({agent: 1 for agent in env.agents})
    before = env.state().copy()
    feedback = env.feedback
    for array in (feedback.arms, feedback.rewards, feedback.partners):
        assert is_frozen(array)
        _write_through(array)
    np.testing.assert_array_equal(env.state(), before)


class Unchecked(MessageBatch):
    """A batch whose constructor checks and copies nothing and whose length, layout and size say it is empty."""

    def __init__(self, payload, sender=0, recipient=1, replica=0):
        header = {"replica": np.array([replica]), "sender": np.array([sender]), "recipient": np.array([recipient])}
        vars(self).update(header, kind="k", payload=payload, count=np.ones(1, np.int64), slot=np.full(1, -1))
        vars(self).update(privacy=None)

    def __len__(self):
        return 0

    def layout_key(self):
        return ("k", (), None)

    @property
    def bytes_per_row(self):
        return 0


class UncheckedMessage(Message):
    """A message whose constructor keeps whatever it was given."""

    def __post_init__(self):
        pass


class SendsOnce(Population):
    """Agent 0 of every replica sends ``make(replica)`` with its first pull (in the act step or as a server reply)."""

    def __init__(self, make):
        self.make = make

    def reset(self, context):
        self.context = context

    def act(self, step):
        arms = np.zeros((self.context.num_replicas, self.context.num_agents), np.int64)
        return Action(arms, [self.make(0)] if step.slot == 0 else [])

    def observe(self, feedback):
        self.inbox = feedback.inbox


def _sent_and_received(make, path):
    """Bytes charged and the copies agent 1 received after agent 0 sent ``make(0)`` in slot 0 along ``path``."""
    if path == "pettingzoo":
        env = FederatedMAB(3, 2, 3, topology="complete", inbox="batches")
        env.reset(seed=0)
        observations, *_ = env.step({"agent_0": {"arm": 0, "messages": [make(0)]}, "agent_1": 0, "agent_2": 0})
        return env.ledger.totals()["bytes"], list(observations["agent_1"]["inbox"])
    population = SendsOnce(make)
    core = FederatedMAB(3, 2, 3, topology="complete").unwrapped.core
    core.reset([0])
    population.reset(core.context)
    population.observe(core.play(population.act(core.current_step())))
    return core.channel.ledger.totals(0)["bytes"], [b.take(b.recipient == 1) for b in population.inbox]


@pytest.mark.parametrize("path", ["pettingzoo", "batched"])
def test_a_subclassed_message_is_routed_costed_and_checked_as_the_base_class(path):
    """A learner's subclass cannot say its batch is empty, skip the payload checks, or keep a handle on the payload."""
    payload = np.ones((1, 100))
    charged, received = _sent_and_received(lambda r: Unchecked({"x": payload}), path)
    assert charged == 800 and [type(b) for b in received] == [MessageBatch]
    payload[:] = 7.0  # the sender's array after the send: the delivered copy is its own, immutable
    assert np.array_equal(received[0].payload["x"], np.ones((1, 100)))
    assert not received[0].payload["x"].flags.writeable
    for bad, error in [(np.full((1, 3), np.nan), "NaN or inf"), (np.array([[{"data": 1}]], object), "numeric")]:
        with pytest.raises((ValueError, TypeError), match=error):
            _sent_and_received(lambda r, bad=bad: Unchecked({"x": bad}), path)
    if path == "pettingzoo":  # an agent sends as itself (a population sends for all its agents)
        with pytest.raises(ValueError, match="an agent may only send as itself"):
            _sent_and_received(lambda r: Unchecked({"x": payload}, sender=2), path)


def test_a_subclassed_message_of_one_row_is_checked_as_the_base_class():
    env = FederatedMAB(2, 2, 3, topology="complete", inbox="batches")
    env.reset(seed=0)
    forged = UncheckedMessage(0, 1, "k", {"x": np.array([np.inf])})
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step({"agent_0": {"arm": 0, "messages": [forged]}, "agent_1": 0})
    assert not hasattr(Message, "trusted")  # the unchecked constructor is private


def test_a_server_s_subclassed_reply_is_checked_as_the_base_class():
    reply = Unchecked({"x": np.array([[np.nan]])}, sender=SERVER, recipient=0)
    env = FederatedMAB(2, 2, 5, topology="server", coordinator=Replying([reply]))
    env.reset(seed=0)
    up = [MessageBatch("up", [0], [0], [SERVER], {"v": [1.0]})]
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step({"agent_0": {"arm": 0, "messages": up}, "agent_1": 0})


def test_remembered_row_size_verdicts_equal_the_reference() -> None:
    """A layout's row-size verdict, remembered after its first check, is what the reference mode works out anew."""
    rng = np.random.default_rng(0)
    sizes = [0, 1, 3, 2**16, 2**31, MAX_ROW_BYTES + 1]
    layouts = [
        tuple(
            (f"f{f}", np.dtype(str(rng.choice(["bool", "int32", "float64"]))), tuple(rng.choice(sizes, axes).tolist()))
            for f, axes in enumerate(rng.integers(0, MAX_ROW_AXES + 2, int(rng.integers(1, 4))).tolist())
        )
        for _ in range(200)
    ]

    def verdicts() -> list[str | None]:
        found: list[str | None] = []
        for layout in layouts + layouts:  # each layout twice: the second time its verdict is remembered
            try:
                _check_row_size(layout, "where")
                found.append(None)
            except ValueError as error:
                found.append(str(error))
        return found

    fast = verdicts()
    with reference_mode():
        assert verdicts() == fast
    assert None in fast and any(verdict is not None for verdict in fast)


class _GossipAlongEdges(Population):
    """Sends a row along every gossip edge of each slot and keeps the partners and the delivered batches it got."""

    families = ("mab",)

    def reset(self, context):
        self.shape = (context.num_replicas, context.num_agents)
        self.partners, self.inboxes = [], []

    def act(self, step):
        self.partners.append(step.partners)
        replica, sender = np.nonzero(np.asarray(step.partners) >= 0)
        recipient = np.asarray(step.partners)[replica, sender]
        batch = MessageBatch("theta", replica, sender, recipient, {"v": np.ones(len(replica))})
        return Action(np.zeros(self.shape, np.int64), [batch])

    def observe(self, feedback):
        self.inboxes.append(feedback.inbox)


def test_a_learner_reaches_only_the_current_slot_s_gossip_edges():
    # The channel draws the gossip edges of a block of slots at once; a view of the block (the partners of a step, the
    # header of a batch sent along the edges) would show the edges of the slots to come.
    learner = _GossipAlongEdges()
    env = {"num_agents": 4, "num_arms": 3, "horizon": 12, "topology": "ring", "gossip": "uniform_edge"}
    run(lambda: learner, env, [0, 1], checkpoints=1, batched=True, reference=None)
    b, m = learner.shape
    assert all(array.size <= b * m for partners in learner.partners for array in _reachable(partners))
    delivered = [batch for inbox in learner.inboxes for batch in inbox]
    edges = [column for batch in delivered for column in (batch.sender, batch.recipient)]  # slot stamps: public
    assert edges and all(array.size <= 2 * b for column in edges for array in _reachable(column))
