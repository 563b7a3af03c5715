"""``examples/any_family_population.py``: one population on the three families, through ``run``, sweep and compare."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedbandit_envs.bench.compare import compare, on_family, play_on_scenario_family, resolve_agent
from fedbandit_envs.bench.jobs import resolve_scenario
from fedbandit_envs.core import Action
from fedbandit_envs.protocol import Agent
from fedbandit_envs.run import run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))  # as ``--path examples`` does for the CLI
from any_family_population import EpsilonGreedy  # noqa: E402

PROBLEMS = {
    "mab": {"num_agents": 4, "num_arms": 5, "horizon": 40, "instance_seed": 0},
    "linear": {"env": "linear", "num_clients": 4, "num_arms": 5, "dimension": 3, "horizon": 40},
    # several clients a slot: the step's positions follow their arrival, on both paths (not their ids)
    "linear, 3 active": {
        "env": "linear",
        "num_clients": 5,
        "num_arms": 5,
        "dimension": 3,
        "horizon": 40,
        "active_per_slot": 3,
    },
    "procurement": {"env": "procurement", "num_agents": 3, "num_producers": 5, "horizon": 40},
}

#: One scenario per family at a tiny size: (name, overrides).
SCENARIOS = {
    "mab": ("suite/baselines", {"horizon": 40}),
    "linear": (
        "li_wang/fig2c_global_dimension",
        {"num_clients": 6, "horizon": 40, "num_arms": 5, "dimension": 4, "sweep": {"env.global_dimension": [2]}},
    ),
    "procurement": (
        "solanki/fig2_uniform",
        {"num_agents": 3, "num_producers": 5, "horizon": 40, "sweep": {"env.homogeneous": [True]}},
    ),
}


def sorted_rows(rows: list[dict]) -> list[dict]:
    """Rows without the wall time, in (seed, slot, agent) order, NaN replaced by a marker (NaN != NaN)."""
    plain = [
        {k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items() if k != "wall_time"}
        for row in rows
    ]
    return sorted(plain, key=lambda row: (row["seed"], row["slot"], row.get("agent", -1)))


@pytest.mark.parametrize("family", PROBLEMS)
def test_runs_on_every_family_with_the_same_rows_on_both_paths(family):
    batched = run(EpsilonGreedy, PROBLEMS[family], [0, 1], checkpoints=4, batched=True)
    pettingzoo = run(EpsilonGreedy, PROBLEMS[family], [0, 1], checkpoints=4, batched=False)
    assert sorted_rows(batched.curves) == sorted_rows(pettingzoo.curves)
    assert sorted_rows(batched.agents) == sorted_rows(pettingzoo.agents)
    final = [row for row in batched.curves if row["slot"] == 40]
    assert len(final) == 2 and all(row["group_regret"] > 0 for row in final)
    # only the procurement learner talks: each of 3 aggregators tells its 2 neighbours, every round
    assert all(row["messages"] == (3 * 2 * 40 if family == "procurement" else 0) for row in final)


def test_procurement_sharing_changes_the_estimates():
    silent = run(_Silent, PROBLEMS["procurement"], [0], checkpoints=1)
    shared = run(EpsilonGreedy, PROBLEMS["procurement"], [0], checkpoints=1)
    assert silent.curves[0]["messages"] == 0
    assert silent.curves[0]["group_regret"] != shared.curves[0]["group_regret"]


class _Silent(EpsilonGreedy):
    """The same learner without the report round."""

    def send(self, phase):
        return []


def test_rejects_bad_hyper_parameters():
    with pytest.raises(ValueError, match="explore"):
        EpsilonGreedy(explore=1.5)
    with pytest.raises(ValueError, match="ridge"):
        EpsilonGreedy(ridge=0.0)


def test_compare_pins_a_several_family_learner_to_the_scenarios_family():
    spec = resolve_agent("any_family_population:EpsilonGreedy", {"explore": 0.2})
    linear = resolve_scenario("li_wang/fig2c_global_dimension")
    pinned = play_on_scenario_family(spec, linear)
    assert pinned.path == "fedbandit_envs.bench.compare:on_family"
    assert pinned.kwargs == {"learner": "any_family_population:EpsilonGreedy", "family": "linear", "explore": 0.2}
    learner = on_family(**pinned.kwargs)
    assert learner.families == ("linear",) and learner.explore == 0.2
    assert EpsilonGreedy.families == ("mab", "linear", "procurement")  # the class is untouched
    # on a MAB scenario the learner's own first family is the scenario's: nothing to pin
    assert play_on_scenario_family(spec, resolve_scenario("suite/baselines")) is spec


class _FirstArm(Agent):
    """A per-agent learner (the MAB family's form) that always pulls arm 0."""

    def reset(self, agent_id, context, rng):
        pass

    def act(self, observation):
        return 0


@pytest.mark.parametrize("agent", ["independent_ucb1", _FirstArm])
def test_compare_refuses_a_learner_of_other_families(agent):
    spec = resolve_agent(agent)
    with pytest.raises(ValueError, match="supports the families \\['mab'\\].*'linear' family"):
        play_on_scenario_family(spec, resolve_scenario("li_wang/fig2c_global_dimension"))


def test_compare_in_python_on_a_procurement_scenario():
    name, overrides = SCENARIOS["procurement"]
    comparison = compare(EpsilonGreedy, name, overrides={**overrides, "seeds": 1, "checkpoints": 1})
    assert {entry["algorithm"] for entry in comparison.entries} == {"EpsilonGreedy", "fcb_sync"}


def fedbandit(*args: str, cwd: Path) -> str:
    """Run the ``fedbandit`` command (importing this tree) and return its output; fail with it on an error."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(["fedbandit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("family", SCENARIOS)
def test_cli_sweep_then_compare_on_every_family(family, tmp_path):
    name, overrides = SCENARIOS[family]
    options = ["--backend", "inprocess", "--no-progress", "--seeds", "2", "--set", "checkpoints=2"]
    for key, value in overrides.items():
        options += ["--set", f"{key}={json.dumps(value)}"]
    out = str(tmp_path / "results")
    swept = fedbandit("sweep", name, "--out", out, *options, cwd=tmp_path)
    assert "0 run(s) already stored" in swept
    agent = ["--agent", "any_family_population:EpsilonGreedy", "--path", str(EXAMPLES), "--no-report"]
    compared = fedbandit("compare", *agent, "--scenario", name, "--out", out, *options, cwd=tmp_path)
    references = len(resolve_scenario(name).algorithms)
    assert f"1 job(s) to run, {2 * references} run(s) already stored" in compared  # only the learner ran
    leaderboard = [line for line in compared.splitlines() if line.startswith("|")]
    assert any("| EpsilonGreedy |" in line for line in leaderboard)
    assert len(leaderboard) == 2 + references + 1  # header, rule, the references and the learner


class _Family(EpsilonGreedy):
    """A learner with a keyword that ``on_family`` takes itself."""

    def __init__(self, family: str = "mab") -> None:
        super().__init__()


def test_compare_refuses_learner_keywords_that_clash_with_the_pinning():
    spec = resolve_agent(_Family, {"family": "linear"})
    with pytest.raises(ValueError, match="keywords \\['family'\\]"):
        play_on_scenario_family(spec, resolve_scenario("li_wang/fig2c_global_dimension"))


class OneAgentTooMany(EpsilonGreedy):
    """Plays the example's action with one row more on the agent axis (or flattened): a misshapen joint action."""

    def __init__(self, flat: bool) -> None:
        super().__init__()
        self.flat = flat

    def act(self, step):
        action = super().act(step)
        arms = action.arms.reshape(-1) if self.flat else np.concatenate([action.arms, action.arms[:, :1]], axis=1)
        return Action(arms, action.messages)


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("family", PROBLEMS)
def test_a_misshapen_action_is_refused_alike_on_both_paths(family, flat):
    """Before, the PettingZoo path played the first agents' arms of a row too long and crashed on a flat one."""
    errors = []
    for batched in (True, False):
        with pytest.raises(ValueError, match=r"(arms|units) must have shape \(replicas, ") as error:
            run(lambda: OneAgentTooMany(flat), PROBLEMS[family], [0], checkpoints=1, batched=batched)
        errors.append(str(error.value))
    assert errors[0] == errors[1]  # B = 1: the same shapes are named
