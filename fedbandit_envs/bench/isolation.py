"""Per-agent learners in processes of their own, so that agents share nothing but the channel.

A population object acts for every agent of a run in one process, and per-agent :class:`~fedbandit_envs.protocol.Agent`
objects of one process can share state too (a class attribute, a module global, a reference to each other). A
learner written to win can therefore pool its agents' rewards without sending a message: the ledger charges nothing
and a DP wrapper sees nothing. :class:`IsolatedAgent` stands in for one agent and runs the real one in a worker
process: the agent receives its own observations and its reset's context and generator (pickled), and its actions
come back the same way, so whatever passes between agents crosses the environment's channel, priced and privatized
there. ``fedbandit compare --isolate-agents`` plays the learner under test so.

The workers start from a fork server (``multiprocessing``'s ``forkserver`` context where the platform has it,
``spawn`` elsewhere), never from a fork of this process, so a worker holds none of the parent's or the other agents'
state. This is isolation of memory, not a sandbox: code that opens files, sockets or shared memory can still reach
other processes.
"""

from __future__ import annotations

import multiprocessing
import traceback
import weakref
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from fedbandit_envs.algorithms import load_object
from fedbandit_envs.protocol import Agent, AgentContext

__all__ = ["IsolatedAgent", "WorkerError"]


class WorkerError(RuntimeError):
    """The isolated agent raised in its process; the message holds its traceback."""


def _context() -> Any:
    """The start method of the workers: a fork server where available, otherwise spawn.

    The fork server imports this module (numpy and the library with it) once; each worker is forked from it, so
    a worker starts in milliseconds and holds only a fresh copy of what the server imported.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def _serve(connection: Connection, path: str, kwargs: Mapping[str, Any]) -> None:
    """The worker: build the agent of ``path`` and answer ``reset`` and ``act`` requests until told to stop."""
    try:
        agent = load_object(path)(**kwargs)
    except Exception:
        connection.send(("error", traceback.format_exc()))
        return
    connection.send(("ok", None))
    while True:
        try:
            request, arguments = connection.recv()
        except EOFError:  # the parent closed the pipe or died
            return
        except Exception:  # a request that cannot be unpickled here
            connection.send(("error", traceback.format_exc()))
            continue
        if request == "stop":
            return
        try:
            reply = getattr(agent, request)(*arguments)
        except Exception:
            connection.send(("error", traceback.format_exc()))
        else:
            connection.send(("ok", reply))


def _stop(connection: Connection, process: Any) -> None:
    """Ask the worker to stop, then wait for it briefly (and end it if it does not)."""
    try:
        connection.send(("stop", ()))
    except (OSError, ValueError):
        pass
    connection.close()
    process.join(timeout=5)
    if process.is_alive():
        process.kill()
        process.join()


class IsolatedAgent(Agent):
    """One agent of ``path`` (``"module:Class"`` of an :class:`Agent`) built with ``kwargs`` in a process of its own.

    Args:
        path: the agent's class as an import path (the worker imports it).
        kwargs: its constructor keywords (pickled to the worker).

    Raises:
        WorkerError: the class could not be built in the worker, or the agent raised there (with its traceback).
    """

    def __init__(self, path: str, **kwargs: Any) -> None:
        self.path = path
        parent, child = multiprocessing.Pipe()
        process = _context().Process(target=_serve, args=(child, path, dict(kwargs)), daemon=True)
        process.start()
        child.close()
        self._connection = parent
        self._stop = weakref.finalize(self, _stop, parent, process)
        self._reply()

    def _reply(self) -> Any:
        try:
            status, value = self._connection.recv()
        except EOFError as error:
            raise WorkerError(f"the worker process of {self.path} ended unexpectedly") from error
        if status == "error":
            raise WorkerError(f"{self.path} raised in its process:\n{value}")
        return value

    def _call(self, request: str, *arguments: Any) -> Any:
        self._connection.send((request, arguments))
        return self._reply()

    def reset(self, agent_id: int, context: AgentContext, rng: np.random.Generator) -> None:
        """Reset the agent in its process with its id, its own replica's context and its generator."""
        self._call("reset", agent_id, context, rng)

    def act(self, observation: Mapping[str, Any]) -> int | Mapping[str, Any]:
        """The agent's action on its own observation, computed in its process."""
        return self._call("act", observation)

    def close(self) -> None:
        """Stop the worker now (it also stops when this object is collected or the parent exits)."""
        self._stop()
