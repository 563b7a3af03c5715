"""Conformance with messages in the loop: every registered id, driven through ``step()`` with valid messages.

PettingZoo's ``parallel_api_test`` samples actions from the action spaces, whose message sequences sample
empty, so on its own it never sends a message. :class:`MessagingDriver` adds, to every sampled action, a
message from the agent to each recipient the topology allows (a neighbour, ``NEIGHBOURS``, ``SERVER``):
with the action where the family allows it (MAB act steps) and in the message-only steps
(``obs["phase"] == 1``: MAB boundary hops, linear and procurement report rounds). The PettingZoo API tests
run on the driven environment, in its parallel form and through the AEC conversion; afterwards the ledger
must account for exactly the messages the driver sent and the copies the agents and the server received.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pettingzoo
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test
from pettingzoo.utils import BaseParallelWrapper
from pettingzoo.utils.conversions import parallel_to_aec

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs.algorithms import load_object
from fedbandit_envs.channel import NEIGHBOURS, Message, MessageBatch
from fedbandit_envs.env_base import MESSAGE
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.protocol import Coordinator
from fedbandit_envs.registration import PARALLEL_ENVS
from fedbandit_envs.topology import SERVER

PARALLEL_IDS = sorted(PARALLEL_ENVS)
MAB_IDS = [i for i in PARALLEL_IDS if PARALLEL_ENVS[i].entry_point.endswith(":FederatedMAB")]
#: Message-only steps in a row the driver sends in at a MAB boundary (one more, silent, closes it).
BOUNDARY_HOPS_SENT = 2


class EchoServer(Coordinator):
    """A server that answers every copy it receives with one ``"ack"`` to its sender, and counts both."""

    def reset(self, context: Any, rngs: list[np.random.Generator]) -> None:
        self.received = 0
        self.replied = 0

    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        replies = []
        for batch in inbox:
            self.received += len(batch)
            self.replied += len(batch)
            replies.append(
                MessageBatch(
                    "ack",
                    batch.replica,
                    np.full(len(batch), SERVER),
                    batch.sender,
                    {"slot": np.full(len(batch), slot)},
                )
            )
        return replies


class MessagingDriver(BaseParallelWrapper):
    """Adds valid messages to every action it forwards, and keeps, per episode, what was sent and delivered.

    Each agent sends one ``"probe"`` per recipient the topology gives it (its neighbours, ``NEIGHBOURS`` when
    it has any, ``SERVER`` when it is linked to one), every act step of a family that carries messages with
    the action, and in message-only steps (at most :data:`BOUNDARY_HOPS_SENT` in a row, so MAB boundaries
    close; every third agent in turn sends nothing and is left out of a message-only step). :attr:`episodes`
    holds, for every episode played, the copies the driver addressed, the copies the agents and the server
    received, the message-only steps played and the ledger's totals (taken before the next reset).
    """

    def __init__(self, env: pettingzoo.ParallelEnv, messages_with_action: bool, server: EchoServer | None) -> None:
        super().__init__(env)
        self.messages_with_action = messages_with_action
        self.server = server
        self.episodes: list[dict[str, Any]] = []
        self.addressed = 0

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.close_episode()
        observations, infos = self.env.reset(seed=seed, options=options)
        self.observations = observations
        self.message_steps = self.addressed = self.delivered = self.turn = self.phase_steps = 0
        topology = self.env.unwrapped.context.topologies[0]
        self.recipients = {
            agent: [int(j) for j in topology.neighbours(i)]
            + ([NEIGHBOURS] if len(topology.neighbours(i)) else [])
            + ([SERVER] if topology.server_links[i] else [])
            for i, agent in enumerate(self.env.possible_agents)
        }
        self.degree = [len(topology.neighbours(i)) for i in range(len(self.env.possible_agents))]
        return observations, infos

    def close_episode(self) -> None:
        """Keep the counts of the episode played since the last reset (if it sent anything)."""
        if self.addressed:
            server = self.server
            self.episodes.append(
                {
                    "addressed": self.addressed,
                    "message_steps": self.phase_steps,
                    "delivered": self.delivered,
                    "server_received": server.received if server else 0,
                    "server_replied": server.replied if server else 0,
                    "ledger": self.env.unwrapped.ledger.totals(),
                }
            )

    def _messages(self, agent: str) -> list[Message]:
        i = self.env.possible_agents.index(agent)
        payload = {"value": np.array([float(i), float(self.addressed)])}
        messages = [Message(i, recipient, "probe", payload) for recipient in self.recipients[agent]]
        self.addressed += sum(self.degree[i] if m.recipient == NEIGHBOURS else 1 for m in messages)
        return messages

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        message_step = any(o["phase"] == MESSAGE for o in self.observations.values())
        self.message_steps = self.message_steps + 1 if message_step else 0
        self.phase_steps += message_step
        driven = dict(actions)
        if message_step and self.message_steps <= BOUNDARY_HOPS_SENT:
            # every third agent in turn has nothing to say and is left out of the step
            quiet = self.possible_agents[self.turn % 3 :: 3]
            self.turn += 1
            driven = {a: {**action, "messages": self._messages(a)} for a, action in actions.items() if a not in quiet}
        elif self.messages_with_action and not message_step:
            driven = {a: {**action, "messages": self._messages(a)} for a, action in actions.items()}
        result = self.env.step(driven)
        self.observations = result[0]
        self.delivered += sum(len(o["inbox"]) for o in self.observations.values())
        return result


def build(env_id: str, **overrides: Any) -> MessagingDriver:
    """The driven environment of ``env_id`` at its test size, hosting an echo server where a topology has one."""
    kwargs = {**PARALLEL_ENVS[env_id].test_kwargs, **overrides}
    server = None
    if "coordinator" in inspect.signature(load_object(PARALLEL_ENVS[env_id].entry_point)).parameters:
        server = kwargs["coordinator"] = EchoServer()  # server links need a server (procurement has none)
    env = pettingzoo.make("parallel", env_id, **kwargs)
    return MessagingDriver(env, isinstance(env.unwrapped, FederatedMAB), server)


def check_ledger(driver: MessagingDriver) -> None:
    """Every episode's ledger holds exactly the driver's copies and the server's replies, all delivered.

    Message-only steps were played unless the environment is a MAB one without boundary hops.
    """
    driver.close_episode()
    core = driver.unwrapped.core
    expect_message_steps = not isinstance(driver.unwrapped, FederatedMAB) or core.boundary_hops
    assert driver.episodes
    for episode in driver.episodes:
        totals = episode["ledger"]
        assert episode["addressed"] > 0
        assert (episode["message_steps"] > 0) == expect_message_steps
        assert totals["messages"] == totals["copies"] == episode["addressed"] + episode["server_replied"]
        assert totals["copies"] == episode["delivered"] + episode["server_received"]
        assert totals["dropped"] == 0


CASES = [
    *[(env_id, {}) for env_id in PARALLEL_IDS],
    *[(env_id, {"boundary_hops": True}) for env_id in MAB_IDS],
    ("fedbandit/FederatedLinear-v0", {"active_per_slot": 2}),
]
#: PettingZoo's AEC checker advises Box or Discrete spaces and array observations; ours are dicts by design.
AEC_ADVICE = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be",
    "Action space for each agent probably should be",
    "Agents have different observation space sizes",
)


@pytest.mark.parametrize(("env_id", "overrides"), CASES)
def test_parallel_api_with_messages(env_id, overrides):
    driver = build(env_id, **overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(driver, num_cycles=200)
    check_ledger(driver)


@pytest.mark.parametrize(("env_id", "overrides"), CASES)
def test_aec_api_with_messages(env_id, overrides):
    driver = build(env_id, **overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for advice in AEC_ADVICE:
            warnings.filterwarnings("ignore", message=advice)
        api_test(parallel_to_aec(driver), num_cycles=200)
    check_ledger(driver)


@pytest.mark.parametrize(("env_id", "overrides"), CASES)
def test_pettingzoo_seed_tests_with_messages(env_id, overrides):
    """PettingZoo's own seed tests: two environments reset with one seed play the same episode, messages included."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for advice in AEC_ADVICE:
            warnings.filterwarnings("ignore", message=advice)
        parallel_seed_test(lambda: build(env_id, **overrides), num_cycles=50)
        seed_test(lambda: parallel_to_aec(build(env_id, **overrides)), num_cycles=50)
