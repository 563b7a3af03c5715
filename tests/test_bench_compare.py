"""Custom learners against the reference agents: compare(), the protocol checks, and the CLI commands."""

import re

import numpy as np
import pytest

from fedbandit_envs.bench.compare import compare, resolve_agent
from fedbandit_envs.bench.leaderboard import leaderboard
from fedbandit_envs.bench.scenarios import get
from fedbandit_envs.bench.store import load_results
from fedbandit_envs.bench.sweep import run_sweep
from fedbandit_envs.cli import main
from fedbandit_envs.core import Action
from fedbandit_envs.protocol import Agent, Population
from fedbandit_envs.run import Results, run

SMALL = {"horizon": 100, "seeds": 2, "checkpoints": 4}


class EpsGreedy(Agent):
    """Per-agent epsilon-greedy (explores with probability ``explore``)."""

    def __init__(self, explore=0.1):
        self.explore = explore

    def reset(self, agent_id, context, rng):
        self.rng = rng
        self.counts = np.zeros(context.num_arms)
        self.sums = np.zeros(context.num_arms)

    def act(self, observation):
        if observation["arm"] >= 0:
            self.counts[observation["arm"]] += 1
            self.sums[observation["arm"]] += float(observation["reward"])
        if self.rng.random() < self.explore or self.counts.min() == 0:
            return int(self.rng.integers(len(self.counts)))
        return int(np.argmax(self.sums / self.counts))


class NotALearner:
    pass


class HalfPopulation(Population):
    def reset(self, context):
        pass

    def act(self, step):
        pass


def test_compare_adds_the_learner_and_ranks_everything():
    comparison = compare(EpsGreedy, "suite/baselines", agent_kwargs={"explore": 0.2}, overrides=SMALL)
    assert comparison.label == "EpsGreedy"
    labels = ["random", "independent_ucb1", "full_sharing_ucb", "EpsGreedy"]
    assert list(dict.fromkeys(r["algorithm"] for r in comparison.results.curves)) == labels
    assert len(comparison.results.curves) == 4 * 2 * 4
    # two seeds: Holm-corrected Welch tests separate only independent_ucb1 from random (p = 0.0067 <= 0.05 / 6)
    assert [(e["algorithm"], e["rank"], e["tied"]) for e in comparison.entries] == [
        ("full_sharing_ucb", 1, True),
        ("independent_ucb1", 1, True),
        ("EpsGreedy", 1, True),
        ("random", 2, False),
    ]
    assert "| =1 | EpsGreedy | 2 |" in comparison.markdown() and "Holm-corrected" in comparison.markdown()


def test_compare_reuses_stored_reference_runs(tmp_path):
    run_sweep("suite/baselines", tmp_path, overrides=SMALL, backend="inprocess")
    comparison = compare(f"{__name__}:EpsGreedy", "suite/baselines", label="greedy", out=tmp_path, overrides=SMALL)
    assert [job.algorithm for job in comparison.summary.jobs_run] == ["greedy"]
    assert comparison.summary.cells_skipped == 3 * 2
    assert {r["algorithm"] for r in load_results(tmp_path).curves} == {
        "random",
        "independent_ucb1",
        "full_sharing_ucb",
        "greedy",
    }


@pytest.mark.parametrize(
    ("agent", "kwargs", "error", "message"),
    [
        ("no_such_module_xyz:Learner", {}, ValueError, "cannot import module 'no_such_module_xyz'.*PYTHONPATH"),
        ("agents.baselines:NoSuchClass", {}, ValueError, "has no attribute 'NoSuchClass'.*IndependentUCB1"),
        ("agents.baselines", {}, ValueError, "package.module:Attribute"),
        (f"{__name__}:NotALearner", {}, TypeError, "does not implement the protocol.*'reset', 'act', 'observe'"),
        (f"{__name__}:HalfPopulation", {}, TypeError, "does not implement the protocol.*abstract"),
        (f"{__name__}:EpsGreedy", {"temperature": 1}, ValueError, "cannot build .*EpsGreedy with keywords"),
        (42, {}, TypeError, "agent must be 'module:Class' or a class"),
    ],
)
def test_bad_agents_give_clear_errors(agent, kwargs, error, message):
    with pytest.raises(error, match=message):
        resolve_agent(agent, kwargs)


def test_resolve_agent_wraps_per_agent_learners_and_keeps_populations():
    assert resolve_agent("independent_ucb1").path == "independent_ucb1"
    assert resolve_agent("agents.baselines:Random").path == "agents.baselines:Random"
    spec = resolve_agent(EpsGreedy, {"explore": 0.3})
    assert spec.path == "fedbandit_envs.bench.compare:per_agent"
    assert dict(spec.kwargs) == {"agent": f"{__name__}:EpsGreedy", "explore": 0.3}
    population = spec.factory()()
    assert type(population).__name__ == "PerAgentPopulation"
    with pytest.raises(ValueError, match="already an algorithm"):
        compare("agents.baselines:Random", "suite/baselines", label="random")


def test_cli_compare(tmp_path, capsys):
    out = tmp_path / "cmp"
    args = ["compare", "--agent", "agents.baselines:RoundRobin", "--scenario", "suite/baselines", "--out", str(out)]
    assert main([*args, "--set", "horizon=100", "--seeds", "2", "--backend", "inprocess", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| RoundRobin |" in printed and "report.html" in printed
    assert (out / "report.html").stat().st_size > 10_000


def test_cli_compare_with_a_bad_agent_writes_nothing(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "--agent", "nowhere_pkg:Learner", "--scenario", "suite/baselines", "--out", str(out)])
    assert code == 2
    assert "cannot import module 'nowhere_pkg'" in capsys.readouterr().err
    assert not out.exists()
    assert (
        main(["compare", "--agent", f"{__name__}:NotALearner", "--scenario", "suite/baselines", "--out", str(out)]) == 2
    )
    assert "does not implement the protocol" in capsys.readouterr().err


@pytest.mark.parametrize("scenario", ["li_wang/fig2c_global_dimension", "li_wang/fig3_wine"], ids=["family", "env"])
def test_a_family_mismatch_names_the_learner_given(scenario, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--agent", f"{__name__}:EpsGreedy", "--scenario", scenario, "--out", str(out), "--seeds", "1"]
    assert main([*argv, "--backend", "inprocess", "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert f"{__name__}:EpsGreedy supports the families ['mab']" in error
    assert "per_agent" not in error and "<lambda>" not in error and not out.exists()


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        (["--max-cost", "-5"], r"max_cost \(--max-cost\) must be >= 0, got -5.0"),
        (["--max-cost", "inf"], r"max_cost \(--max-cost\) must be a finite number, got inf"),
        (["--max-epsilon", "-0.1"], r"max_epsilon \(--max-epsilon\) must be >= 0, got -0.1"),
        (["--max-epsilon", "nan"], r"max_epsilon \(--max-epsilon\) must be a finite number, got nan"),
    ],
)
def test_cli_compare_refuses_a_negative_or_non_finite_budget_before_writing(budget, message, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--agent", f"{__name__}:EpsGreedy", "--scenario", "suite/baselines", "--out", str(out)]
    assert main([*argv, *budget, "--seeds", "1", "--backend", "inprocess", "--no-progress"]) == 2
    assert re.search(message, capsys.readouterr().err) and not out.exists()
    with pytest.raises(ValueError, match=message):  # the Python leaderboard alike
        leaderboard(Results(), **{budget[0][2:].replace("-", "_"): float(budget[1])})


def _learner_source() -> str:
    """A module holding this file's EpsGreedy, as a user's learner package would."""
    import inspect

    return "import numpy as np\n\nfrom fedbandit_envs.protocol import Agent\n\n\n" + inspect.getsource(EpsGreedy)


def _compare_command(*extra: str, out) -> list[str]:
    """The installed ``fedbandit`` console script (unlike ``python -c``/``-m``, it does not put cwd on sys.path)."""
    import shutil
    import sys
    from pathlib import Path

    script = shutil.which("fedbandit", path=str(Path(sys.executable).parent)) or shutil.which("fedbandit")
    assert script, "the fedbandit console script is not installed (pip install -e .)"
    return [
        script,
        "compare",
        "--agent",
        "mylearners.greedy:EpsGreedy",
        "--scenario",
        "suite/baselines",
        "--out",
        str(out),
        "--set",
        "horizon=50",
        "--seeds",
        "2",
        "--backend",
        "pool",
        "--workers",
        "2",
        "--no-progress",
        "--no-report",
        *extra,
    ]


def _write_learner_package(folder):
    package = folder / "mylearners"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "greedy.py").write_text(_learner_source())


def _compare_in(folder, *extra: str, out):
    """Run the console script in ``folder`` with only the library itself on PYTHONPATH (as an installed package)."""
    import os
    import subprocess

    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # explicit for a worktree
    return subprocess.run(_compare_command(*extra, out=out), cwd=folder, env=env, capture_output=True, text=True)


def test_cli_compare_imports_a_learner_from_the_working_directory(tmp_path):
    """Run from the folder that holds the package, as with ``python -m``: no PYTHONPATH needed (pool workers too)."""
    _write_learner_package(tmp_path / "project")
    done = _compare_in(tmp_path / "project", out=tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "| EpsGreedy |" in done.stdout


def test_cli_compare_path_option_and_an_error_naming_the_searched_path(tmp_path):
    _write_learner_package(tmp_path / "elsewhere")
    (tmp_path / "work").mkdir()
    missing = _compare_in(tmp_path / "work", out=tmp_path / "out1")
    assert missing.returncode == 2
    assert "cannot import module 'mylearners.greedy'" in missing.stderr
    assert str(tmp_path / "work") in missing.stderr and "--path" in missing.stderr
    found = _compare_in(tmp_path / "work", "--path", str(tmp_path / "elsewhere"), out=tmp_path / "out2")
    assert found.returncode == 0, found.stderr
    assert "| EpsGreedy |" in found.stdout
    bad = _compare_in(tmp_path / "work", "--path", str(tmp_path / "nowhere"), out=tmp_path / "out3")
    assert bad.returncode == 2 and "is not a directory" in bad.stderr


def test_cli_run_imports_a_learner_from_the_working_directory(tmp_path):
    """``fedbandit run`` finds ``module:Class`` paths in the working directory too, as ``compare`` does."""
    import os
    import subprocess

    _write_learner_package(tmp_path / "project")
    script = _compare_command(out=tmp_path / "unused")[0]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # explicit for a worktree
    command = [script, "run", "--algorithms", "mylearners.greedy:EpsGreedy", "--horizon", "50", "--seeds", "2"]
    command += ["--out", str(tmp_path / "out"), "--no-plot", "--no-progress"]
    done = subprocess.run(command, cwd=tmp_path / "project", env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "results.csv").read_text().count("EpsGreedy") == 2 * 20  # 2 seeds x 20 checkpoints


class PoolingUCB(Population):
    """UCB1 on the rewards of every replica it is shown: on a batched run, it pools the seeds (a cheat)."""

    families = ("mab",)
    supports_batching = True

    def reset(self, context):
        self.shape = (context.num_replicas, context.num_agents)
        self.counts, self.sums = np.zeros(context.num_arms), np.zeros(context.num_arms)

    def act(self, step):
        safe = np.maximum(self.counts, 1)
        index = self.sums / safe + np.sqrt(2 * np.log(step.slot + 2) / safe) + 1e9 * (self.counts == 0)
        return Action(np.full(self.shape, int(np.argmax(index)), np.int64))

    def observe(self, feedback):
        np.add.at(self.counts, feedback.arms.ravel(), 1)
        np.add.at(self.sums, feedback.arms.ravel(), feedback.rewards.ravel())


def test_compare_plays_the_learner_one_seed_per_population_so_it_cannot_pool_seeds():
    comparison = compare(PoolingUCB, "suite/baselines", overrides={**SMALL, "seeds": 4})
    played = [row["group_regret"] for row in comparison.results.curves if row["algorithm"] == "PoolingUCB"]
    env = {**get("suite/baselines").env_kwargs, "horizon": SMALL["horizon"]}
    alone = run(PoolingUCB, env, range(4), checkpoints=SMALL["checkpoints"], batched=False, reference=None)
    pooled = run(PoolingUCB, env, range(4), checkpoints=SMALL["checkpoints"], batched=True, reference=None)
    assert played == alone.column("group_regret").tolist() != pooled.column("group_regret").tolist()
