"""The Flower apps of a federation: a ``ServerApp`` that drives the slots, a ``ClientApp`` per agent.

The server is the coordinator and the referee: it hosts the scenario's environment (channel, ledger,
the algorithm's coordinator, pseudo-regret) and drives the slots through the population protocol. Each
round of Flower messages carries, per client, what to *deliver* (the feedback of a slot or the inbox of
a message-only phase) and what to *request* (an action, or the messages of a phase); one round per
slot when the algorithm has no message-only phases. A client replies with its arm, its own outgoing
messages (as Flower records, see :mod:`fedbandit_envs.flower.records`) and a report (its reward and its
privacy spent) that the server records but never charges or forwards. Sync-LinUCB's reporting client
also returns a control field (whether everyone synchronises); the server then asks every client for its
upload in one more round, and never charges the field.

State: a client keeps its :class:`~fedbandit_envs.flower.agent.AgentShard` in ``context.state`` between
rounds (pickled into a ``ConfigRecord``, numpy views kept as views), and the privacy mod keeps its
:class:`~fedbandit_envs.flower.agent.AgentHooks` there too; the client app publishes the agent's count
of observed rewards as an ``ArrayRecord`` the mod reads.
"""

from __future__ import annotations

import io
import pickle
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast, get_args

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable
from flwr.serverapp import Grid, ServerApp

from fedbandit_envs.core import Action, Feedback, Phase, PhaseKind, Step
from fedbandit_envs.families.procurement.env import ProcurementFeedback
from fedbandit_envs.flower.agent import AgentHooks, AgentShard, FederationSpec
from fedbandit_envs.flower.records import batches_from_records, batches_to_records, merge_batches, rows_of
from fedbandit_envs.run import Recorder, Results, checkpoint_slots

__all__ = ["FlowerRun", "client_app", "drive", "privacy_mod", "server_app"]

#: ``context.state`` keys of a client: its agent, its privacy hooks, its count of observed rewards.
_SHARD, _HOOKS, _RECORDS = "agent", "hooks", "records"
#: Record prefixes of the inbox delivered to a client and of the messages it sends.
_INBOX, _OUT = "inbox", "out"
#: The reply records of a client's privacy spent: its wrappers' (the privacy mod) and its population's own.
_PRIVACY = ("privacy", "own_privacy")
#: The requests a client answers with messages of its own (the privacy mod privatizes them).
_SENDING = ("act", "send", "synchronise")
#: The default time a round may take before the server gives up (seconds).
ROUND_TIMEOUT = 600.0


@dataclass
class FlowerRun:
    """What a Flower run of one seed produced.

    Attributes:
        results: the tidy tables of :func:`fedbandit_envs.run.run` (curves and per-agent rows).
        arms: (T, n) the arms pulled in each slot: every agent's (n = M, MAB family) or the active clients'
            (n = m, linear family).
        rewards: (T, n) the rewards the clients drew from their own streams (MAB family; NaN on the linear
            family, whose rewards the referee hands out).
        referee_rewards: (T, n) the rewards the server's environment drew for the same pulls (equal to
            ``rewards`` when the clients' streams are the environment's).
        ledger: the ledger's totals at the end (:meth:`fedbandit_envs.channel.Ledger.totals`).
        rounds: the rounds of Flower messages the server sent (one message to every client each), the
            set-up round included.
        epsilon_spent: (M,) epsilon each client reported (its privacy mod's and its population's own
            accounting), or None when none accounts.
        delta_spent: (M,) delta likewise, or None.
    """

    results: Results
    arms: np.ndarray
    rewards: np.ndarray
    referee_rewards: np.ndarray
    ledger: dict[str, float]
    rounds: int
    epsilon_spent: np.ndarray | None = None
    delta_spent: np.ndarray | None = None


# ---------------------------------------------------------------------- wire helpers
def _phase_record(phase: Phase) -> ConfigRecord:
    record = ConfigRecord({"slot": phase.slot, "kind": phase.kind, "round": phase.round, "required": phase.required})
    if phase.positions is not None:
        record["positions"] = [int(p) for p in phase.positions]
    return record


def _phase_from(record: Any) -> Phase:
    kind = str(record["kind"])
    if kind not in get_args(PhaseKind):
        raise ValueError(f"a phase's kind must be one of {get_args(PhaseKind)}, got {kind!r}")
    positions = np.array(record["positions"], np.int64) if "positions" in record else None
    return Phase(int(record["slot"]), cast(PhaseKind, kind), int(record["round"]), positions, bool(record["required"]))


def _clear_batches(content: RecordDict, prefix: str) -> None:
    for key in [k for k in content if k.startswith(prefix)]:
        del content[key]


def _view_of(
    root: np.ndarray, dtype: np.dtype, shape: tuple[int, ...], offset: int, strides: tuple[int, ...], writeable: bool
) -> np.ndarray:
    """The view of ``root``'s memory that :class:`_ViewPickler` recorded."""
    view = np.ndarray(shape, dtype, buffer=root, offset=offset, strides=strides)
    if not writeable:
        view.flags.writeable = False
    return view


class _ViewPickler(pickle.Pickler):
    """A pickler that keeps numpy views views: one copy of each array's memory, the views rebuilt on it.

    Plain pickling copies every view into an array of its own, so a population that writes through a view
    (Gossip_UCB writes ϑ and the received ñ through whole-row views) would no longer see its writes after
    a round trip through ``context.state``.
    """

    def reducer_override(self, obj: Any) -> Any:
        """Views of a contiguous array (no Python objects) as (that array, layout); anything else as usual."""
        if type(obj) is not np.ndarray or not isinstance(obj.base, np.ndarray) or obj.dtype.hasobject:
            return NotImplemented
        root = obj.base
        while isinstance(root.base, np.ndarray):
            root = root.base
        if type(root) is not np.ndarray or not (root.flags.c_contiguous or root.flags.f_contiguous):
            return NotImplemented
        offset = obj.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        return _view_of, (root, obj.dtype, obj.shape, offset, obj.strides, obj.flags.writeable)


def _load(context: Context, key: str) -> Any:
    return pickle.loads(bytes(context.state[key]["state"]))  # noqa: S301 (the client's own state)


def _store(context: Context, key: str, value: Any) -> None:
    buffer = io.BytesIO()
    _ViewPickler(buffer).dump(value)
    context.state[key] = ConfigRecord({"state": buffer.getvalue()})


def _agent_of(context: Context) -> int:
    if "partition-id" not in context.node_config:
        raise ValueError("a fedbandit client needs its agent index as node config 'partition-id' (0..M-1)")
    return int(context.node_config["partition-id"])


def _request_slot(op: Any, content: RecordDict) -> int:
    return int(op["act_slot"]) if op["request"] == "act" else int(content["request_phase"]["slot"])


# ---------------------------------------------------------------------- client side
def _arrays(content: RecordDict, key: str) -> dict[str, np.ndarray]:
    return {name: array.numpy() for name, array in content[key].items()} if key in content else {}


def _client_round(spec: FederationSpec, content: RecordDict, context: Context) -> RecordDict:
    """One round of a client: deliver, then answer the request; the shard is kept in ``context.state``."""
    op = content["op"]
    agent = _agent_of(context)
    shard = AgentShard(spec, agent) if op["deliver"] == "setup" else _load(context, _SHARD)
    if op["deliver"] == "observe":
        shard.observe(int(op["observed_slot"]), batches_from_records(content, _INBOX), _arrays(content, "facts"))
    elif op["deliver"] == "receive":
        shard.receive(_phase_from(content["deliver_phase"]), batches_from_records(content, _INBOX))
    reply = RecordDict({"action": ConfigRecord({"agent": agent})})
    out = []
    if op["request"] == "act":
        arms, reward, out = shard.act(Step(int(op["act_slot"]), **_arrays(content, "step")))
        reply["arms"] = ArrayRecord({"arms": Array(arms)})
        if reward is not None:
            reply["report"] = MetricRecord({"reward": reward})
    elif op["request"] == "send":
        phase = _phase_from(content["request_phase"])
        out = shard.send(phase)
        if shard.synchronised and shard.reports(phase):  # a control field: never charged, never forwarded
            reply["control"] = ConfigRecord({"synchronise": bool(shard.fired[0])})
    elif op["request"] == "synchronise":
        out = shard.synchronise(bool(op["synchronise"]))
    batches_to_records(out, _OUT, reply)
    spent = shard.privacy_spent()
    if spent is not None:
        reply["own_privacy"] = MetricRecord({"epsilon": spent[0], "delta": spent[1]})
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
        if op["request"] in _SENDING:
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
class _ServerPopulation:
    """The population as the server's recorder sees it: its parameters, and the privacy the clients reported.

    The server's copy of the population, reset with the scenario's context, gives the family's metrics the
    algorithm's public parameters (e.g. the procurement family's exploration length ``tau0``); it never
    learns. The privacy is the sum of what the clients reported: their wrappers' accounting (the privacy
    mod's ``privacy`` record) and their population's own (``own_privacy``, e.g. P-FCB's in-agent noise),
    added in the simulator's order.
    """

    def __init__(self, population: Any, context: Any) -> None:
        population.reset(context)
        self.population = population
        self.parts = {key: np.zeros((2, 1, context.num_agents)) for key in _PRIVACY}
        self.reported: dict[str, bool] = dict.fromkeys(_PRIVACY, False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["population"], name)

    def update(self, agent: int, reply: RecordDict) -> None:
        """Keep the privacy records of ``agent``'s reply."""
        for key in _PRIVACY:
            if key in reply:
                self.reported[key] = True
                self.parts[key][:, 0, agent] = reply[key]["epsilon"], reply[key]["delta"]

    def _spent(self, index: int) -> np.ndarray | None:
        parts = [self.parts[key][index] for key in _PRIVACY if self.reported[key]]
        return np.sum(parts, axis=0) if parts else None

    def epsilon_spent(self) -> np.ndarray | None:
        """(1, M) epsilon the clients reported, or None when none reported."""
        return self._spent(0)

    def delta_spent(self) -> np.ndarray | None:
        """(1, M) delta the clients reported, or None when none reported."""
        return self._spent(1)


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


def _agent_step(step: Step, agent: int) -> ArrayRecord:
    """What ``agent`` may see of an act step: the slot's gossip edge, the active clients, its own contexts.

    The gossip edge (``partners``: which pair of agents the channel activated) goes to every client, as the
    simulator's step gives it to the whole population: Gossip_UCB checks in its first main round that the
    channel announces an edge, which a client off the edge could not see otherwise. It is the channel's
    draw and carries nothing of any agent's rewards; a client's learner uses only its own entry.
    """
    arrays = {}
    if step.partners is not None:
        arrays["partners"] = step.partners
    if step.clients is not None and step.contexts is not None:
        arrays["clients"] = step.clients
        arrays["contexts"] = np.where((step.clients == agent)[..., None, None], step.contexts, 0.0)
    return ArrayRecord({name: Array(np.ascontiguousarray(value)) for name, value in arrays.items()})


def _agent_facts(feedback: Any, agent: int) -> ArrayRecord:
    """What ``agent`` learns from the referee after a pull: its next gossip partner, or its own round."""
    if isinstance(feedback, Feedback):
        partners = np.full_like(feedback.partners, -1)
        partners[:, agent] = feedback.partners[:, agent]
        return ArrayRecord({"partners": Array(partners)})
    if isinstance(feedback, ProcurementFeedback):  # its own row of units, good units and utility
        rows = {"units": feedback.units, "successes": feedback.successes, "rewards": feedback.rewards}
        own = {name: np.zeros_like(value) for name, value in rows.items()}
        for name, value in rows.items():
            own[name][:, agent] = value[:, agent]
        return ArrayRecord({name: Array(value) for name, value in own.items()})
    rewards = np.where(feedback.clients == agent, feedback.rewards, 0.0)
    return ArrayRecord({"rewards": Array(np.ascontiguousarray(rewards))})


def drive(grid: Grid, spec: FederationSpec, checkpoints: int | Any = 20, timeout: float = ROUND_TIMEOUT) -> FlowerRun:
    """Run the federation of ``spec`` over ``grid`` (one client per agent); the ``ServerApp``'s main."""
    population, env, family = spec.world(wrapped=False)
    core = env.unwrapped.core
    m, horizon = core.context.num_agents, core.horizon
    recorder = Recorder(family, spec.name, [spec.seed], checkpoint_slots(horizon, checkpoints))
    server_population = _ServerPopulation(population, core.context)
    recorder.attach(core, server_population)
    nodes = _wait_for_nodes(grid, m, timeout)
    setup = {n: RecordDict({"op": ConfigRecord({"deliver": "setup", "request": "none"})}) for n in nodes}
    agents = {node: int(reply["action"]["agent"]) for node, reply in _exchange(grid, setup, timeout).items()}
    if sorted(agents.values()) != list(range(m)):
        raise ValueError(
            f"the federation needs one client per agent with partition-ids 0..{m - 1}, got {sorted(agents.values())}"
        )
    node_of = {agent: node for node, agent in agents.items()}
    rounds = 1

    def exchange_round(contents: Mapping[int, RecordDict]) -> list[RecordDict]:
        """One round of Flower messages (content per node); the replies in agent order, privacy recorded."""
        nonlocal rounds
        answers = _exchange(grid, contents, timeout)
        rounds += 1
        replies = [answers[node_of[agent]] for agent in range(m)]
        for agent, reply in enumerate(replies):
            server_population.update(agent, reply)
        return replies

    arms: list[np.ndarray] = []
    rewards: list[np.ndarray] = []
    referee: list[np.ndarray] = []
    deliver: dict[str, Any] = {"deliver": "none"}
    extra: dict[int, dict[str, Any]] = {agent: {} for agent in range(m)}  # records delivered with the round
    inbox: list = []
    phase: Phase | None = None
    while True:
        step = core.current_step()
        op = dict(deliver)
        if phase is not None:
            op["request"] = "send"
        elif not core.done:
            op.update(request="act", act_slot=step.slot)
        else:
            op["request"] = "none"
        contents = {}
        for agent in range(m):
            content = RecordDict({"op": ConfigRecord(op), **extra[agent]})
            if op["request"] == "act":
                content["step"] = _agent_step(step, agent)
            if phase is not None:
                content["request_phase"] = _phase_record(phase)
            batches_to_records(rows_of(inbox, "recipient", agent), _INBOX, content)
            contents[node_of[agent]] = content
        replies = exchange_round(contents)
        if op["request"] == "none":
            break
        fired = [reply["control"]["synchronise"] for reply in replies if "control" in reply]
        if phase is not None and any(fired):  # the reporting client's trigger fired: everyone uploads
            sync = {"deliver": "none", "request": "synchronise", "synchronise": True}
            replies = exchange_round(
                {node: RecordDict({"op": ConfigRecord(sync), "request_phase": _phase_record(phase)}) for node in nodes}
            )
        batches = merge_batches([batches_from_records(reply, _OUT) for reply in replies])
        if phase is None:
            owners = step.clients[0] if step.clients is not None else np.arange(m)
            chosen = np.array([[replies[owner]["arms"]["arms"].numpy()[col] for col, owner in enumerate(owners)]])
            feedback = core.play(Action(chosen.astype(np.int64), batches))
            arms.append(chosen[0])
            referee.append(np.asarray(feedback.rewards[0], float))
            reported = [replies[owner].get("report") for owner in owners]
            rewards.append(np.array([r["reward"] if r is not None else np.nan for r in reported]))
            inbox = getattr(feedback, "inbox", [])
            deliver = {"deliver": "observe", "observed_slot": step.slot}
            extra = {agent: {"facts": _agent_facts(feedback, agent)} for agent in range(m)}
            phase = core.first_phase()
        else:
            sent = bool(batches)
            inbox, deliver, extra = [], {"deliver": "none"}, {agent: {} for agent in range(m)}
            if sent or phase.required:
                inbox, deliver = core.exchange(phase, batches), {"deliver": "receive"}
                extra = {agent: {"deliver_phase": _phase_record(phase)} for agent in range(m)}
            phase = core.next_phase(phase, sent)
        if phase is None:
            recorder.record(core.slot)
    epsilon, delta = server_population.epsilon_spent(), server_population.delta_spent()
    return FlowerRun(
        recorder.results,
        np.array(arms),
        np.array(rewards),
        np.array(referee),
        core.channel.ledger.totals(0),
        rounds,
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
