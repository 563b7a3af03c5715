"""A Flower ``Grid`` in one process: every round's messages go through Flower's wire format, no engine.

:class:`LocalGrid` runs the federation's ``ClientApp`` (with its mods) for each node in the calling
process, one node after the other, and passes every message through Flower's protobuf serialisation in
both directions, so only Flower records cross and nothing is shared by reference. It skips the
simulation engine's polling (tenths of a second per round), which makes long runs and many-slot tests
practical; the engine itself is :func:`fedbandit_envs.flower.run_flower`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import uuid4

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.common.serde import message_from_proto, message_to_proto
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

from fedbandit_envs.flower.agent import FederationSpec
from fedbandit_envs.flower.apps import ROUND_TIMEOUT, FlowerRun, client_app, drive
from fedbandit_envs.validation import check_int

__all__ = ["LocalGrid", "run_local"]


class LocalGrid(Grid):
    """A Grid whose nodes are ``num_nodes`` instances of ``app`` in this process (``partition-id`` 0..n-1).

    Args:
        app: the ``ClientApp`` every node runs.
        num_nodes: how many nodes (SuperNodes) the grid has.
    """

    def __init__(self, app: ClientApp, num_nodes: int) -> None:
        check_int("num_nodes", num_nodes, 1)
        self.app = app
        self.contexts = {
            node + 1: Context(
                run_id=0,
                node_id=node + 1,
                node_config={"partition-id": node, "num-partitions": num_nodes},
                state=RecordDict(),
                run_config={},
            )
            for node in range(num_nodes)
        }
        self.replies: dict[str, Message] = {}
        self.wire_bytes = 0
        self._run: Any = None

    def set_run(self, run: Any) -> None:
        """Remember the run this grid operates in."""
        self._run = run

    @property
    def run(self) -> Any:
        """The run set by :meth:`set_run`."""
        if self._run is None:
            raise RuntimeError("LocalGrid.run: no run was set (call set_run first)")
        return self._run

    def create_message(
        self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str, ttl: float | None = None
    ) -> Message:
        """A message to ``dst_node_id`` (the ``Message`` constructor does the same)."""
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """The node ids (1..n)."""
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Deliver every message to its node's ``ClientApp`` now; keep the replies for :meth:`pull_messages`."""
        ids = []
        for message in messages:
            node = message.metadata.dst_node_id
            if node not in self.contexts:
                raise ValueError(f"no node {node} in this grid; its nodes are {list(self.contexts)}")
            message.metadata.__dict__["_message_id"] = str(uuid4())
            sent = message_to_proto(message)
            self.wire_bytes += sent.ByteSize()
            received = message_from_proto(sent)
            reply = message_to_proto(self.app(received, self.contexts[message.metadata.dst_node_id]))
            self.wire_bytes += reply.ByteSize()
            self.replies[message.metadata.message_id] = message_from_proto(reply)
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """The replies to ``message_ids`` (each handed out once)."""
        return [self.replies.pop(i) for i in message_ids if i in self.replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        """Push ``messages`` and return their replies (all of them: the nodes answer synchronously)."""
        return self.pull_messages(self.push_messages(messages))


@contextmanager
def _server_identity() -> Iterator[None]:
    """Act as the server task of a local run (Flower's runtime sets it; messages read it)."""
    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 0, SUPERLINK_NODE_ID
    try:
        yield
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def run_local(
    spec: FederationSpec, checkpoints: int | Any = 20, timeout: float = ROUND_TIMEOUT
) -> tuple[FlowerRun, LocalGrid]:
    """Run ``spec`` over a :class:`LocalGrid` with one node per agent (the ``ServerApp``'s logic, in process).

    Returns the run and the grid (whose ``wire_bytes`` counts the serialised Flower messages of the run).
    """
    _, env, _ = spec.world(wrapped=False)
    grid = LocalGrid(client_app(spec), env.unwrapped.core.context.num_agents)
    with _server_identity():
        return drive(grid, spec, checkpoints, timeout), grid
