"""Per-agent learners in processes of their own (``isolate_agents=True``): agents share only the channel."""

import numpy as np
import pytest

from fedbandit_envs import NEIGHBOURS, Message
from fedbandit_envs.bench.compare import compare
from fedbandit_envs.bench.isolation import IsolatedAgent, WorkerError
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario
from fedbandit_envs.protocol import Agent

SMALL = {"horizon": 120}
RING = {"num_agents": 4, "num_arms": 3, "topology": "ring"}


class _PooledUCB(Agent):
    """UCB1 on statistics kept in a class attribute: in one process, every agent's rewards, without a message."""

    shared: dict[str, np.ndarray] = {}

    def statistics(self) -> dict[str, np.ndarray]:
        return type(self).shared

    def reset(self, agent_id, context, rng):
        type(self).shared = {"counts": np.zeros(context.num_arms), "sums": np.zeros(context.num_arms)}
        self.own = {"counts": np.zeros(context.num_arms), "sums": np.zeros(context.num_arms)}

    def act(self, observation):
        stats = self.statistics()
        if observation["arm"] >= 0:
            stats["counts"][observation["arm"]] += 1
            stats["sums"][observation["arm"]] += float(observation["reward"])
        counts, sums = stats["counts"], stats["sums"]
        if counts.min() == 0:
            return int(np.flatnonzero(counts == 0)[0])
        return int(np.argmax(sums / counts + np.sqrt(2 * np.log(counts.sum()) / counts)))


class _LoneUCB(_PooledUCB):
    """The same learner on its own statistics only: what the pooled one can do when nothing is shared."""

    def statistics(self) -> dict[str, np.ndarray]:
        return self.own


class _Gossip(Agent):
    """Sends its counts to its neighbours every slot and plays the arm least pulled by it and what it heard."""

    def reset(self, agent_id, context, rng):
        self.id, self.counts, self.heard = agent_id, np.zeros(context.num_arms), np.zeros(context.num_arms)

    def act(self, observation):
        if observation["arm"] >= 0:
            self.counts[observation["arm"]] += 1
        for message in observation["inbox"]:
            self.heard = np.maximum(self.heard, message.payload["counts"])
        arm = int(np.argmin(self.counts + self.heard))
        return {"arm": arm, "messages": [Message(self.id, NEIGHBOURS, "counts", {"counts": self.counts.copy()})]}


class _Failing(Agent):
    def reset(self, agent_id, context, rng):
        pass

    def act(self, observation):
        raise ArithmeticError("this agent cannot choose")


def _finals(comparison, algorithm):
    rows = [row for row in comparison.results.curves if row["algorithm"] == algorithm]
    last = max(row["slot"] for row in rows)
    return sorted((row["seed"], row["group_regret"], row["cost"]) for row in rows if row["slot"] == last)


def test_isolated_agents_share_nothing_in_memory():
    """Pooled through a class attribute, the learner beats full sharing at cost 0; isolated, it is its lone twin."""
    pooled = compare(f"{__name__}:_PooledUCB", "suite/baselines", overrides=SMALL, seeds=2)
    isolated = compare(f"{__name__}:_PooledUCB", "suite/baselines", overrides=SMALL, seeds=2, isolate_agents=True)
    lone = compare(f"{__name__}:_LoneUCB", "suite/baselines", overrides=SMALL, seeds=2)
    assert _finals(isolated, "_PooledUCB") == _finals(lone, "_LoneUCB")  # bit for bit: the same work on own data
    shared_regret = sum(regret for _, regret, _ in _finals(pooled, "_PooledUCB"))
    assert shared_regret < 0.75 * sum(regret for _, regret, _ in _finals(isolated, "_PooledUCB"))


def test_isolated_agents_talk_through_the_channel_as_before():
    """Observations, inbox messages and sent messages cross the process boundary unchanged: identical results."""
    ring = Scenario(
        "test/ring", "test", "a ring", {**RING, "horizon": 60}, {"random": AlgorithmSpec("random")}, seeds=2
    )
    inline = compare(f"{__name__}:_Gossip", ring)
    isolated = compare(f"{__name__}:_Gossip", ring, isolate_agents=True)
    assert _finals(isolated, "_Gossip") == _finals(inline, "_Gossip")
    assert all(cost > 0 for _, _, cost in _finals(isolated, "_Gossip"))


def test_a_population_cannot_be_isolated():
    with pytest.raises(ValueError, match="is a population: one object acts for every agent.*per-agent Agent"):
        compare("agents.baselines:IndependentUCB1", "suite/baselines", overrides=SMALL, seeds=1, isolate_agents=True)


def test_an_error_in_the_worker_names_the_agent_and_carries_its_traceback():
    agent = IsolatedAgent(f"{__name__}:_Failing")
    agent.reset(0, None, np.random.default_rng(0))
    with pytest.raises(WorkerError, match=r"(?s)_Failing raised in its process.*ArithmeticError: this agent cannot"):
        agent.act({"arm": -1})
    agent.close()
    with pytest.raises(WorkerError, match="cannot build|raised in its process"):
        IsolatedAgent(f"{__name__}:_Failing", unexpected=1)
