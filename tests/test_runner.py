"""The runner: batched replicas equal single PettingZoo runs; tidy tables; per-agent learners."""

import numpy as np
import pytest

from agents.base import Agent, PerAgentPopulation
from fedbandit_envs.runner import checkpoint_slots, make_algorithm, run

ENV = {"num_agents": 4, "num_arms": 6, "horizon": 120, "instance_seed": 3}
KEYS = (
    "group_regret",
    "messages",
    "copies",
    "scalars",
    "bytes",
    "links",
    "link_cost",
    "cost",
    "up_messages",
    "down_messages",
)


def by_run_and_slot(results):
    return {(row["seed"], row["slot"]): tuple(row[k] for k in KEYS) for row in results.curves}


CASES = [(a, t) for a in ("random", "round_robin", "independent_ucb1") for t in ("server", "complete")]


@pytest.mark.parametrize(("algorithm", "topology"), [*CASES, ("full_sharing_ucb", "server")])
def test_batched_replica_equals_single_pettingzoo_run(algorithm, topology):
    env = {**ENV, "topology": topology}
    seeds = [11, 12, 13, 14]
    batched = run(algorithm, env, seeds, checkpoints=list(range(1, 121)), batched=True)
    for seed in (11, 13, 14):  # several replicas b, each against its own single run
        single = run(algorithm, env, [seed], checkpoints=list(range(1, 121)), batched=False)
        expected = by_run_and_slot(single)
        got = {key: value for key, value in by_run_and_slot(batched).items() if key[0] == seed}
        assert got == expected
    if algorithm == "full_sharing_ucb":  # messages every slot: M uploads (from slot 1) and M downloads
        final = [r for r in batched.curves if r["slot"] == 120]
        assert all(r["up_messages"] == 4 * 119 and r["down_messages"] == 4 * 120 for r in final)


def test_batched_equals_single_with_heterogeneous_instance_and_drops():
    env = {**ENV, "instance": "heterogeneous", "instance_seed": None, "drop_prob": 0.2}
    batched = run("full_sharing_ucb", env, [5, 6], checkpoints=10, batched=True)
    single = run("full_sharing_ucb", env, [6], checkpoints=10, batched=False)
    got = {k: v for k, v in by_run_and_slot(batched).items() if k[0] == 6}
    assert got == by_run_and_slot(single)
    assert single.curves[-1]["dropped"] > 0


def test_tables_are_tidy_and_saved(tmp_path):
    results = run("independent_ucb1", ENV, [0, 1], checkpoints=4)
    assert len(results.curves) == 2 * 4 and len(results.agents) == 2 * 4 * 4
    assert sorted({r["slot"] for r in results.curves}) == [30, 60, 90, 120]
    per_agent = sum(r["regret"] for r in results.agents if r["seed"] == 0 and r["slot"] == 120)
    group = [r["group_regret"] for r in results.curves if r["seed"] == 0 and r["slot"] == 120][0]
    assert per_agent == pytest.approx(group)
    paths = results.save(tmp_path, "x")
    assert [p.name for p in paths] == ["x.csv", "x_agents.csv"]
    assert paths[0].read_text().count("\n") == 1 + 8


class Greedy(Agent):
    def reset(self, agent_id, context, rng):
        self.counts = np.zeros(context.num_arms)
        self.sums = np.zeros(context.num_arms)

    def act(self, observation):
        if observation["arm"] >= 0:
            self.counts[observation["arm"]] += 1
            self.sums[observation["arm"]] += float(observation["reward"])
        untried = np.flatnonzero(self.counts == 0)
        return int(untried[0]) if len(untried) else int(np.argmax(self.sums / self.counts))


def test_per_agent_learner_runs_on_both_paths():
    make = lambda: PerAgentPopulation(Greedy)  # noqa: E731
    batched = run(make, ENV, [1, 2], checkpoints=3, batched=True)
    single = run(make, ENV, [2], checkpoints=3, batched=False)
    assert {k: v for k, v in by_run_and_slot(batched).items() if k[0] == 2} == by_run_and_slot(single)


def test_bad_runner_input():
    with pytest.raises(ValueError, match="unknown algorithm"):
        make_algorithm("nope")
    with pytest.raises(ValueError, match="checkpoints"):
        checkpoint_slots(10, [0, 5])
    with pytest.raises(ValueError, match="coordinator"):
        run("random", {**ENV, "coordinator": None}, [0])
    with pytest.raises(ValueError, match="seeds"):
        run("random", ENV, [])


def test_saving_rows_with_different_columns_takes_their_union(tmp_path):
    from wrappers.dp import LaplaceMessageDP

    results = run("independent_ucb1", ENV, [0], checkpoints=1)
    results.extend(run("independent_ucb1", ENV, [0], checkpoints=1, wrappers=[lambda e: LaplaceMessageDP(e, 1.0)]))
    header, first, second = (tmp_path / "r.csv").read_text().splitlines() if results.save(tmp_path, "r") else []
    assert header.split(",")[-1] == "delta_max" and "epsilon_max" in header
    assert first.count(",") == second.count(",") == header.count(",")
