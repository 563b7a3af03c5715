"""A fourth family added in one folder plus one registration (``tests/toy_family``) runs like the built-in ones.

It is played by the one ``run`` on both paths with the same rows, passes PettingZoo's API test, is
wrapped by a fault wrapper like any family, and refuses algorithms of other families with a clear error.
"""

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test
from toy_family import GuessEnv
from toy_family.algorithm import IntervalSharing

from fedbandit_envs import NEIGHBOURS, Message
from fedbandit_envs.algorithms import registered_algorithms
from fedbandit_envs.core import Action
from fedbandit_envs.families.registry import family_of_env
from fedbandit_envs.run import run
from wrappers import MessageDrops

ENV = {"env": "guess", "num_agents": 5, "num_values": 64, "horizon": 12}
SLOTS = list(range(1, 13))


def rows(results, table):
    """The rows of a table without the wall time, by seed, slot and agent (the paths order runs differently)."""
    kept = [{k: v for k, v in row.items() if k != "wall_time"} for row in getattr(results, table)]
    return sorted(kept, key=lambda row: (row["seed"], row["slot"], row.get("agent", -1)))


def test_the_family_and_its_algorithms_are_registered():
    assert family_of_env("guess").name == "guess"
    assert set(registered_algorithms("guess")) == {"interval_alone", "interval_sharing"}


@pytest.mark.parametrize("algorithm", ["interval_sharing", "interval_alone"])
def test_both_paths_give_the_same_rows(algorithm):
    batched = run(algorithm, ENV, [3, 4, 5], checkpoints=SLOTS, batched=True)
    single = run(algorithm, ENV, [3, 4, 5], checkpoints=SLOTS, batched=False)
    for table in ("curves", "agents"):
        assert rows(batched, table) == rows(single, table)
    assert {"agents_found", "messages", "cost"} <= set(batched.curves[0])
    assert "found" in batched.agents[0]


def test_sharing_costs_messages_and_finds_the_number_sooner():
    sharing = run("interval_sharing", ENV, range(20), checkpoints=[12])
    alone = run("interval_alone", ENV, range(20), checkpoints=[12])
    assert sum(r["messages"] for r in alone.curves) == 0
    # a report goes to the 2 ring neighbours of its sender (a message per copy), between agents, at c2 = 1 per link
    assert all(r["messages"] > 0 and r["messages"] % 2 == 0 for r in sharing.curves)
    assert all(r["peer_messages"] == r["messages"] and r["cost"] == r["links"] for r in sharing.curves)
    # measured over these 20 seeds: 150 (sd 67) against 281 (sd 89), a gap of about 5 standard errors
    assert np.mean(sharing.column("group_regret")) < np.mean(alone.column("group_regret"))


def test_exact_trajectory_of_one_slot_and_its_report():
    env = GuessEnv(num_agents=3, num_values=8, horizon=2, topology="complete")
    observations, _ = env.reset(seed=0)
    hidden = int(env.core.hidden[0])
    guesses = {"agent_0": 0, "agent_1": hidden, "agent_2": 7}
    observations, rewards, *_ = env.step(guesses)
    assert rewards == {"agent_0": float(hidden == 0), "agent_1": 1.0, "agent_2": float(hidden == 7)}
    assert [o["hint"] for o in observations.values()] == [int(np.sign(hidden - g)) for g in guesses.values()]
    assert all(o["phase"] == 1 for o in observations.values())
    report = Message(1, NEIGHBOURS, "interval", {"low": hidden, "high": hidden})
    observations, rewards, *_ = env.step({"agent_1": {"messages": [report]}})
    assert [len(o["inbox"]) for o in observations.values()] == [1, 0, 1]
    assert rewards == dict.fromkeys(env.agents, 0.0)
    assert env.ledger.totals()["copies"] == 2 and observations["agent_0"]["phase"] == 0
    assert env.core.regret[0].tolist() == [abs(hidden - 0), 0, abs(hidden - 7)]


def test_pettingzoo_api():
    parallel_api_test(GuessEnv(num_agents=3, num_values=8, horizon=6), num_cycles=50)


def test_a_fault_wrapper_applies_on_both_paths():
    drops = [lambda env: MessageDrops(env, prob=0.5)]
    batched = run("interval_sharing", ENV, [1, 2], checkpoints=[12], batched=True, wrappers=drops)
    single = run("interval_sharing", ENV, [1, 2], checkpoints=[12], batched=False, wrappers=drops)
    keys = ("group_regret", "messages", "copies", "cost")
    assert [[r[k] for k in keys] for r in batched.curves] == [[r[k] for k in keys] for r in single.curves]
    clean = run("interval_sharing", ENV, [1, 2], checkpoints=[12])
    assert batched.column("copies").sum() < clean.column("copies").sum()


def test_an_algorithm_of_another_family_is_refused():
    with pytest.raises(ValueError, match=r"supports the families \['mab'\], not 'guess' \(env 'guess'\)"):
        run("independent_ucb1", ENV, [0])
    with pytest.raises(ValueError, match=r"supports the families \['guess'\], not 'mab'"):
        run("interval_sharing", {"env": "mab", "num_agents": 3, "num_arms": 4, "horizon": 5}, [0])


def test_bad_guesses_are_refused():
    env = GuessEnv(num_agents=2, num_values=4, horizon=3, topology="complete")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="a guess must be <= 3"):
        env.step({"agent_0": 4, "agent_1": 0})
    with pytest.raises(ValueError, match="missing"):
        env.step({"agent_0": 1})
    population = IntervalSharing()
    env.core.reset([0])
    population.reset(env.core.context)
    with pytest.raises(ValueError, match=r"shape \(replicas, agents\) = \(1, 2\)"):
        env.core.play(Action(np.zeros((2, 2), np.int64)))
