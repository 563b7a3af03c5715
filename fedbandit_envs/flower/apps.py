"""The Flower apps of a federation: a ``ServerApp`` that drives the slots, a ``ClientApp`` per agent.

The server is the coordinator and the referee: it hosts the scenario's environment (channel, ledger,
the algorithm's coordinator, pseudo-regret) and drives the slots through the population protocol. Each
round of Flower messages carries, per client, what to *deliver* (the feedback of a slot or the inbox of
a message-only phase) and what to *request* (an action, or the messages of a phase); one round per
slot when the algorithm has no message-only phases. A client replies with its arm, its own outgoing
messages (as Flower records, see :mod:`fedbandit_envs.flower.records`) and a report (its reward and its
privacy spent) that the server records but never charges or forwards.

State: a client keeps its :class:`~fedbandit_envs.flower.agent.AgentShard` in ``context.state`` between
rounds (pickled into a ``ConfigRecord``), and the privacy mod keeps its
:class:`~fedbandit_envs.flower.agent.AgentHooks` there too; the client app publishes the agent's count
of observed rewards as an ``ArrayRecord`` the mod reads.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable
from flwr.serverapp import Grid, ServerApp

from fedbandit_envs.core import Action, Phase
from fedbandit_envs.flower.agent import AgentHooks, AgentShard, FederationSpec
from fedbandit_envs.flower.records import batches_from_records, batches_to_records, merge_batches, rows_of
from fedbandit_envs.run import Recorder, Results, checkpoint_slots

__all__ = ["FlowerRun", "client_app", "drive", "privacy_mod", "server_app"]

#: ``context.state`` keys of a client: its agent, its privacy hooks, its count of observed rewards.
_SHARD, _HOOKS, _RECORDS = "agent", "hooks", "records"
#: Record prefixes of the inbox delivered to a client and of the messages it sends.
_INBOX, _OUT = "inbox", "out"
#: The default time a round may take before the server gives up (seconds).
ROUND_TIMEOUT = 600.0


@dataclass
class FlowerRun:
    """What a Flower run of one seed produced.

    Attributes:
        results: the tidy tables of :func:`fedbandit_envs.run.run` (curves and per-agent rows).
        arms: (T, M) the arm each client pulled in each slot.
        rewards: (T, M) the reward each client drew from its own stream.
        referee_rewards: (T, M) the rewards the server's environment drew for the same pulls (equal to
            ``rewards`` when the clients' streams are the environment's).
        ledger: the ledger's totals at the end (:meth:`fedbandit_envs.channel.Ledger.totals`).
        epsilon_spent: (M,) epsilon each client's privacy mod accounted, or None without one.
        delta_spent: (M,) delta likewise, or None.
    """

    results: Results
    arms: np.ndarray
    rewards: np.ndarray
    referee_rewards: np.ndarray
    ledger: dict[str, float]
    epsilon_spent: np.ndarray | None = None
    delta_spent: np.ndarray | None = None


# ---------------------------------------------------------------------- wire helpers
def _phase_record(phase: Phase) -> ConfigRecord:
    return ConfigRecord({"slot": phase.slot, "kind": phase.kind, "round": phase.round, "required": phase.required})


def _phase_from(record: Any) -> Phase:
    if "positions" in record:
        raise ValueError("phases with reporting positions (linear family) are not carried by this adapter")
    return Phase(int(record["slot"]), str(record["kind"]), int(record["round"]), None, bool(record["required"]))


def _clear_batches(content: RecordDict, prefix: str) -> None:
    for key in [k for k in content if k.startswith(prefix)]:
        del content[key]


def _load(context: Context, key: str) -> Any:
    return pickle.loads(bytes(context.state[key]["state"]))  # noqa: S301 (the client's own state)


def _store(context: Context, key: str, value: Any) -> None:
    context.state[key] = ConfigRecord({"state": pickle.dumps(value)})


def _agent_of(context: Context) -> int:
    if "partition-id" not in context.node_config:
        raise ValueError("a fedbandit client needs its agent index as node config 'partition-id' (0..M-1)")
    return int(context.node_config["partition-id"])


def _request_slot(op: Any, content: RecordDict) -> int:
    return int(op["act_slot"]) if op["request"] == "act" else int(content["request_phase"]["slot"])


# ---------------------------------------------------------------------- client side
def _client_round(spec: FederationSpec, content: RecordDict, context: Context) -> RecordDict:
    """One round of a client: deliver, then answer the request; the shard is kept in ``context.state``."""
    op = content["op"]
    agent = _agent_of(context)
    shard = AgentShard(spec, agent) if op["deliver"] == "setup" else _load(context, _SHARD)
    if op["deliver"] == "observe":
        shard.observe(int(op["observed_slot"]), batches_from_records(content, _INBOX), int(op["partner"]))
    elif op["deliver"] == "receive":
        shard.receive(_phase_from(content["deliver_phase"]), batches_from_records(content, _INBOX))
    reply = RecordDict({"action": ConfigRecord({"agent": agent})})
    out = []
    if op["request"] == "act":
        arm, reward, out = shard.act(int(op["act_slot"]), int(op["partner"]))
        reply["action"]["arm"] = arm
        reply["report"] = MetricRecord({"reward": reward})
    elif op["request"] == "send":
        out = shard.send(_phase_from(content["request_phase"]))
    batches_to_records(out, _OUT, reply)
    _store(context, _SHARD, shard)
    context.state[_RECORDS] = ArrayRecord(
        {"agent_counts": Array(shard.observed_total), "arm_counts": Array(shard.observed)}
    )
    return reply


def privacy_mod(spec: FederationSpec) -> Any:
    """A Flower client mod that runs the run's message wrappers on what leaves the client.

    It privatizes the outgoing messages of every reply with the agent's :class:`AgentHooks` (the DP
    wrappers' hooks: clipping, noise, accounting, budget guard) and adds the agent's privacy spent to the
    reply's ``privacy`` record.
    """

    def mod(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
        reply = call_next(msg, context)
        if reply.has_error():
            return reply
        op = msg.content["op"]
        hooks = AgentHooks(spec, _agent_of(context)) if op["deliver"] == "setup" else _load(context, _HOOKS)
        if op["request"] in ("act", "send"):
            records = context.state[_RECORDS]
            sent = hooks.privatize(
                _request_slot(op, msg.content),
                batches_from_records(reply.content, _OUT),
                records["agent_counts"].numpy(),
                records["arm_counts"].numpy(),
            )
            _clear_batches(reply.content, _OUT)
            batches_to_records(sent, _OUT, reply.content)
        spent = hooks.privacy_spent()
        if spent is not None:
            reply.content["privacy"] = MetricRecord({"epsilon": spent[0], "delta": spent[1]})
        _store(context, _HOOKS, hooks)
        return reply

    return mod


def client_app(spec: FederationSpec) -> ClientApp:
    """The ``ClientApp`` of agent ``partition-id``: its learner, its rewards, and the wrappers as a client mod."""
    app = ClientApp(mods=[privacy_mod(spec)] if spec.wrappers else [])

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return Message(_client_round(spec, msg.content, context), reply_to=msg)

    return app


# ---------------------------------------------------------------------- server side
class _ReportedPrivacy:
    """The clients' privacy reports, as the recorder reads a population's own accounting."""

    def __init__(self, num_agents: int) -> None:
        self.epsilon = np.zeros((1, num_agents))
        self.delta = np.zeros((1, num_agents))
        self.reported = False

    def update(self, agent: int, record: Mapping[str, Any]) -> None:
        self.reported = True
        self.epsilon[0, agent] = float(record["epsilon"])
        self.delta[0, agent] = float(record["delta"])

    def epsilon_spent(self) -> np.ndarray | None:
        """(1, M) epsilon the clients reported, or None when none reported."""
        return self.epsilon.copy() if self.reported else None

    def delta_spent(self) -> np.ndarray | None:
        """(1, M) delta the clients reported, or None when none reported."""
        return self.delta.copy() if self.reported else None


def _wait_for_nodes(grid: Grid, count: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= count:
            return nodes
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(nodes)} Flower nodes connected within {timeout} s; the federation needs {count}")
        time.sleep(0.05)


def _exchange(grid: Grid, contents: Mapping[int, RecordDict], timeout: float) -> dict[int, RecordDict]:
    """Send each node its content, return each node's reply content; RuntimeError on a missing or failed reply."""
    messages = [Message(content, dst_node_id=node, message_type="query") for node, content in contents.items()]
    replies = {}
    for reply in grid.send_and_receive(messages, timeout=timeout):
        if reply.has_error():
            raise RuntimeError(f"node {reply.metadata.src_node_id} failed: {reply.error.reason}")
        replies[reply.metadata.src_node_id] = reply.content
    missing = set(contents) - set(replies)
    if missing:
        raise RuntimeError(f"no reply within {timeout} s from nodes {sorted(missing)}")
    return replies


def drive(grid: Grid, spec: FederationSpec, checkpoints: int | Any = 20, timeout: float = ROUND_TIMEOUT) -> FlowerRun:
    """Run the federation of ``spec`` over ``grid`` (one client per agent); the ``ServerApp``'s main."""
    population, env, family = spec.world(wrapped=False)
    core = env.unwrapped.core
    m, horizon = core.context.num_agents, core.horizon
    recorder = Recorder(family, spec.name, [spec.seed], checkpoint_slots(horizon, checkpoints))
    privacy = _ReportedPrivacy(m)
    recorder.attach(core, privacy)
    nodes = _wait_for_nodes(grid, m, timeout)
    setup = {n: RecordDict({"op": ConfigRecord({"deliver": "setup", "request": "none"})}) for n in nodes}
    agents = {node: int(reply["action"]["agent"]) for node, reply in _exchange(grid, setup, timeout).items()}
    if sorted(agents.values()) != list(range(m)):
        raise ValueError(
            f"the federation needs one client per agent with partition-ids 0..{m - 1}, got {sorted(agents.values())}"
        )
    node_of = {agent: node for node, agent in agents.items()}
    arms, rewards, referee = np.zeros((horizon, m), np.int64), np.zeros((horizon, m)), np.zeros((horizon, m))
    deliver: dict[str, Any] = {"deliver": "none"}
    inbox: list = []
    deliver_phase: Phase | None = None
    phase: Phase | None = None
    while True:
        step = core.current_step()  # the next slot, and every agent's gossip partner in it
        op = dict(deliver)
        if phase is not None:
            op["request"] = "send"
        elif not core.done:
            op.update(request="act", act_slot=step.slot)
        else:
            op["request"] = "none"
        contents = {}
        for agent in range(m):
            content = RecordDict({"op": ConfigRecord({**op, "partner": int(step.gossip_partners()[0, agent])})})
            if deliver_phase is not None:
                content["deliver_phase"] = _phase_record(deliver_phase)
            if phase is not None:
                content["request_phase"] = _phase_record(phase)
            batches_to_records(rows_of(inbox, "recipient", agent), _INBOX, content)
            contents[node_of[agent]] = content
        answers = _exchange(grid, contents, timeout)
        replies = [answers[node_of[agent]] for agent in range(m)]
        for agent, reply in enumerate(replies):
            if "privacy" in reply:
                privacy.update(agent, reply["privacy"])
        if op["request"] == "none":
            break
        batches = merge_batches([batches_from_records(reply, _OUT) for reply in replies])
        if phase is None:
            slot = step.slot
            chosen = np.array([[int(reply["action"]["arm"]) for reply in replies]], np.int64)
            feedback = core.play(Action(chosen, batches))
            arms[slot], referee[slot] = chosen[0], feedback.rewards[0]
            rewards[slot] = [float(reply["report"]["reward"]) for reply in replies]
            inbox, deliver_phase, deliver = feedback.inbox, None, {"deliver": "observe", "observed_slot": slot}
            phase = core.first_phase()
        else:
            sent = bool(batches)
            if sent or phase.required:
                inbox, deliver_phase, deliver = core.exchange(phase, batches), phase, {"deliver": "receive"}
            else:
                inbox, deliver_phase, deliver = [], None, {"deliver": "none"}
            phase = core.next_phase(phase, sent)
        if phase is None:
            recorder.record(core.slot)
    epsilon, delta = privacy.epsilon_spent(), privacy.delta_spent()
    return FlowerRun(
        recorder.results,
        arms,
        rewards,
        referee,
        core.channel.ledger.totals(0),
        None if epsilon is None else epsilon[0],
        None if delta is None else delta[0],
    )


def server_app(spec: FederationSpec, sink: dict[str, Any], checkpoints: int | Any = 20) -> ServerApp:
    """The ``ServerApp`` of ``spec``: drives the federation and puts its :class:`FlowerRun` in ``sink["run"]``.

    An exception of the run is put in ``sink["error"]`` (the simulation engine only logs it).
    """
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        try:
            sink["run"] = drive(grid, spec, checkpoints)
        except Exception as error:  # handed to the caller, who re-raises it
            sink["error"] = error

    return app
