"""Sweeps: job expansion, restart, backends (in-process, pool, Ray) and bad input."""

import functools
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from agents.baselines import IndependentUCB1
from fedbandit_envs.bench.backends import JobFailed, PoolBackend, make_backend
from fedbandit_envs.bench.jobs import cell_id, expand, param_columns, pending, resolve_scenario
from fedbandit_envs.bench.scenarios import _CATALOGUE, AlgorithmSpec, Scenario, get, names, paper_registrar
from fedbandit_envs.bench.store import atomic_write, load_config, load_results
from fedbandit_envs.bench.sweep import run_sweep
from fedbandit_envs.identity import faithful_key
from fedbandit_envs.topology import from_adjacency, path, star

SMALL = {"horizon": 120, "seeds": 3, "checkpoints": 4}


def without_wall_time(rows):
    return [{k: v for k, v in row.items() if k != "wall_time"} for row in rows]


def same_tables(a, b):
    return without_wall_time(a.curves) == without_wall_time(b.curves) and a.agents == b.agents


def grid_scenario(seeds=5):
    return Scenario(
        name="test/grid",
        paper="test",
        description="expansion test",
        env_kwargs={"num_agents": 2, "num_arms": 3, "horizon": 20},
        algorithms={"a": AlgorithmSpec("random"), "b": AlgorithmSpec("independent_ucb1")},
        sweep={"env.num_arms": (3, 4), "env.c2": (1.0, 2.0, 0.5)},
        seeds=seeds,
        checkpoints=2,
    )


def test_expansion_is_points_times_algorithms_times_seed_chunks():
    jobs = expand(grid_scenario(), seeds_per_job=2)
    # 2 x 3 points, 2 algorithms, seeds 0..4 in chunks (0, 1), (2, 3), (4,)
    assert len(jobs) == 6 * 2 * 3
    assert [job.seeds for job in jobs[:3]] == [(0, 1), (2, 3), (4,)]
    assert (jobs[0].algorithm, jobs[3].algorithm, jobs[6].algorithm) == ("a", "b", "a")
    assert jobs[0].point == {"env.num_arms": 3, "env.c2": 1.0}
    assert jobs[6].point == {"env.num_arms": 3, "env.c2": 2.0}
    assert jobs[-1].point == {"env.num_arms": 4, "env.c2": 0.5} and jobs[-1].params == {"num_arms": 4, "c2": 0.5}
    cells = list(dict.fromkeys(job.cell for job in jobs))
    assert len(cells) == 12 and all(job.cell == jobs[0].cell for job in jobs[:3])
    one_job_per_cell = expand(grid_scenario())
    assert len(one_job_per_cell) == 12 and one_job_per_cell[0].seeds == (0, 1, 2, 3, 4)


def test_excluded_points_are_not_expanded():
    scenario = replace(grid_scenario(), exclude=({"env.num_arms": 4, "env.c2": 2.0}, {"env.c2": 0.5}))
    assert scenario.points() == [
        {"env.num_arms": 3, "env.c2": 1.0},
        {"env.num_arms": 3, "env.c2": 2.0},
        {"env.num_arms": 4, "env.c2": 1.0},
    ]
    jobs = expand(scenario)
    assert len(jobs) == 3 * 2
    kept = {job.cell for job in expand(grid_scenario())}
    assert {job.cell for job in jobs} < kept  # excluding points leaves the other cells' ids unchanged
    with pytest.raises(ValueError, match="must name sweep keys only.*'env.horizon'"):
        replace(grid_scenario(), exclude=({"env.horizon": 20},))
    with pytest.raises(ValueError, match="none given"):
        replace(grid_scenario(), exclude=({},))
    with pytest.raises(ValueError, match="applies no wrapper, so a wrapper keyword would change nothing"):
        replace(grid_scenario(), sweep={"wrapper.epsilon": (0.5, 2.0)})


def test_pending_drops_finished_seeds():
    jobs = expand(grid_scenario(), seeds_per_job=2)
    left = pending(jobs, {jobs[0].cell: {0, 1, 2}, jobs[3].cell: {0, 1, 2, 3, 4}})
    assert len(left) == 36 - 1 - 3
    assert [job.seeds for job in left[:2]] == [(3,), (4,)]
    assert left[2].algorithm == "a" and left[2].point == {"env.num_arms": 3, "env.c2": 2.0}


def test_cell_id_ignores_seed_count_but_not_settings():
    base = get("suite/baselines")
    three = resolve_scenario(base, "ci", seeds=3)
    five = resolve_scenario(base, "ci", seeds=5)
    longer = resolve_scenario(base, "ci", {"horizon": 999})
    assert cell_id(three, "random", {}) == cell_id(five, "random", {})
    assert cell_id(three, "random", {}) != cell_id(longer, "random", {})
    assert cell_id(three, "random", {}) != cell_id(three, "independent_ucb1", {})
    assert len(cell_id(three, "random", {})) == 16


def low_means(rng, num_agents, num_arms):
    return rng.uniform(0.0, 0.2, num_arms)


def means_between(low, high):
    def means(rng, num_agents, num_arms):
        return rng.uniform(low, high, num_arms)

    return means


class Means:
    def draw(self, rng, num_agents, num_arms):
        return rng.uniform(0.8, 1.0, num_arms)


def one_cell(**env):
    return Scenario(
        name="test/identity",
        paper="test",
        description="cell identity",
        env_kwargs={"num_agents": 6, "num_arms": 3, "horizon": 30, **env},
        algorithms={"a": AlgorithmSpec("independent_ucb1")},
        seeds=2,
        checkpoints=2,
    )


def test_cell_id_tells_topologies_apart_by_structure_not_by_repr(tmp_path):
    chain, hub = from_adjacency(path(6).adjacency, name="custom"), from_adjacency(star(6).adjacency, name="custom")
    assert repr(chain) == repr(hub)
    assert cell_id(one_cell(topology=chain), "a", {}) != cell_id(one_cell(topology=hub), "a", {})
    again = from_adjacency(path(6).adjacency, name="custom")
    assert cell_id(one_cell(topology=chain), "a", {}) == cell_id(one_cell(topology=again), "a", {})
    assert faithful_key({"topology": chain}) != faithful_key({"topology": hub})
    first = run_sweep(one_cell(topology=chain), tmp_path, backend="inprocess", progress=False)
    second = run_sweep(one_cell(topology=hub), tmp_path, backend="inprocess", progress=False)
    assert len(first.jobs_run) == len(second.jobs_run) == 1 and second.cells_skipped == 0


def test_cell_id_refuses_functions_their_name_does_not_identify(tmp_path):
    def closure(rng, num_agents, num_arms):
        return rng.uniform(0.0, 1.0, num_arms)

    unnamed = {
        "lambda": lambda rng, num_agents, num_arms: rng.uniform(0.0, 1.0, num_arms),
        "closure": closure,
        "factory closure": means_between(0.8, 1.0),
        "partial of a lambda": functools.partial(lambda rng, num_agents, num_arms, low: low, low=0.1),
        "bound method": Means().draw,
    }
    for what, instance in unnamed.items():
        with pytest.raises(ValueError, match="environment keyword 'instance' of scenario 'test/identity': .*top level"):
            cell_id(one_cell(instance=instance), "a", {})
        assert faithful_key({"instance": instance}) is None, what
    with pytest.raises(ValueError, match="sweep value of 'env.instance' of scenario 'test/identity'"):
        run_sweep(replace(one_cell(), sweep={"env.instance": (low_means, means_between(0, 1))}), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    named = cell_id(one_cell(instance=low_means), "a", {})
    assert named == cell_id(one_cell(instance=low_means), "a", {})
    assert named != cell_id(one_cell(instance=functools.partial(low_means)), "a", {})


def test_catalogue_cells_keep_the_ids_stored_sweeps_have():
    ids = {
        ("suite/baselines", "ci", 0): "bc5459ab4f4c600d",
        ("li_song/fig11_hybrid", "ci", 0): "4c5650069c6f6c5e",  # a Topology object, keyed by its repr
        ("zhu/diabetes_standin", "ci", 0): "56a5793e1016b1f0",  # a module-level function
        ("dubey/fig1a_private", "paper", 0): "211a04276bb65973",
    }
    for (name, scale, index), cell in ids.items():
        assert expand(resolve_scenario(name, scale))[index].cell == cell, name


def test_resolve_scenario_applies_scale_overrides_and_seeds():
    scenario = resolve_scenario("suite/baselines", "ci", {"horizon": 50, "checkpoints": 5}, seeds=2)
    assert scenario.env_kwargs["horizon"] == 50 and scenario.checkpoints == 5 and scenario.seeds == 2
    assert resolve_scenario("suite/baselines", "paper").env_kwargs["horizon"] == 20000


def test_seeds_given_both_as_seeds_and_in_the_overrides_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"both give the seeds \(in Python: seeds= and overrides\['seeds'\]\)"):
        run_sweep("suite/baselines", tmp_path / "out", overrides={"seeds": [5, 6]}, seeds=2, dry_run=True)


def test_sweep_parameter_clashes_are_errors():
    with pytest.raises(ValueError, match="'seed' column"):
        param_columns(Scenario("t/x", "t", "", {}, {"a": AlgorithmSpec("random")}, sweep={"env.seed": (1,)}))
    clash = Scenario(
        "t/x", "t", "", {}, {"a": AlgorithmSpec("cdp_mab")}, sweep={"env.rounds": (1,), "alg.rounds": (2,)}
    )
    with pytest.raises(ValueError, match="both map to the result column 'rounds'"):
        param_columns(clash)


class Flaky(IndependentUCB1):
    """IndependentUCB1 that crashes while ``fail`` is set (simulates an interrupted sweep)."""

    fail = False

    def reset(self, context):
        if Flaky.fail:
            raise RuntimeError("simulated crash")
        super().reset(context)


def flaky_scenario():
    algorithms = {
        "random": AlgorithmSpec("random"),
        "flaky": AlgorithmSpec(f"{__name__}:Flaky"),
        "full_sharing_ucb": AlgorithmSpec("full_sharing_ucb"),
    }
    return Scenario("test/flaky", "test", "restart test", {"num_agents": 3, "num_arms": 4, "horizon": 60}, algorithms)


def test_interrupted_sweep_resumes_and_equals_an_uninterrupted_run(tmp_path, monkeypatch):
    scenario, overrides = flaky_scenario(), {"seeds": 3, "checkpoints": 3}
    monkeypatch.setattr(Flaky, "fail", True)
    with pytest.raises(JobFailed, match="(?s)flaky.*simulated crash.*run the same sweep again"):
        run_sweep(scenario, tmp_path / "resumed", overrides=overrides, backend="inprocess", table_format="csv")
    parts = sorted((tmp_path / "resumed" / "parts").iterdir())
    assert len(parts) == 1  # the job before the crash is stored, complete
    with gzip.open(parts[0], "rt") as handle:
        assert json.loads(handle.readline())["seeds"] == [0, 1, 2]
    assert not (tmp_path / "resumed" / "results.csv").exists()
    assert not [p for p in (tmp_path / "resumed").rglob("*.tmp")]

    monkeypatch.setattr(Flaky, "fail", False)
    resumed = run_sweep(scenario, tmp_path / "resumed", overrides=overrides, backend="inprocess", table_format="csv")
    assert [job.algorithm for job in resumed.jobs_run] == ["flaky", "full_sharing_ucb"]
    assert resumed.cells_skipped == 3
    again = run_sweep(scenario, tmp_path / "resumed", overrides=overrides, backend="inprocess", table_format="csv")
    assert again.jobs_run == [] and again.cells_skipped == 9

    fresh = run_sweep(scenario, tmp_path / "fresh", overrides=overrides, backend="inprocess", table_format="csv")
    assert len(fresh.jobs_run) == 3
    table, reference = load_results(tmp_path / "resumed"), load_results(tmp_path / "fresh")
    assert len(table.curves) == 3 * 3 * 3 and len(table.agents) == 3 * 3 * 3 * 3
    assert same_tables(table, reference)


def test_more_seeds_run_only_the_new_seeds(tmp_path):
    run_sweep("suite/baselines", tmp_path / "grown", overrides={**SMALL, "seeds": 2}, backend="inprocess")
    grown = run_sweep("suite/baselines", tmp_path / "grown", overrides=SMALL, backend="inprocess")
    assert [job.seeds for job in grown.jobs_run] == [(2,)] * 3
    run_sweep("suite/baselines", tmp_path / "fresh", overrides=SMALL, backend="inprocess")
    assert same_tables(load_results(tmp_path / "grown"), load_results(tmp_path / "fresh"))


def test_pool_and_inprocess_give_identical_tables(tmp_path):
    inprocess = run_sweep("suite/baselines", tmp_path / "a", overrides=SMALL, backend="inprocess")
    pool = run_sweep("suite/baselines", tmp_path / "b", overrides=SMALL, backend=PoolBackend(2), seeds_per_job=2)
    assert len(pool.jobs) == 6 and len(inprocess.jobs) == 3
    a, b = load_results(tmp_path / "a"), load_results(tmp_path / "b")
    assert len(a.curves) == 3 * 3 * 4
    assert same_tables(a, b)
    config = load_config(tmp_path / "b")
    assert config["backend"] == "pool" and config["versions"]["fedbandit-envs"]
    assert config["seeds"] == [0, 1, 2] and config["env_kwargs"]["horizon"] == 120


def test_ray_backend_on_a_local_instance(tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep("suite/baselines", tmp_path / "ray", overrides=SMALL, backend="ray")
        assert ray.is_initialized()  # a Ray instance started by the caller is left running
    finally:
        ray.shutdown()
    run_sweep("suite/baselines", tmp_path / "local", overrides=SMALL, backend="inprocess")
    assert same_tables(load_results(tmp_path / "ray"), load_results(tmp_path / "local"))
    assert load_config(tmp_path / "ray")["backend"] == "ray"


def test_dry_run_counts_jobs_and_writes_nothing(tmp_path):
    summary = run_sweep("suite/baselines", tmp_path / "dry", overrides=SMALL, dry_run=True)
    assert len(summary.jobs_run) == 3 and summary.tables == []
    assert "3 job(s) to run" in summary.describe()
    assert not (tmp_path / "dry").exists()


def test_bad_input_gives_clear_errors_and_no_files(tmp_path):
    with pytest.raises(ValueError, match="unknown scenario 'nope/x'.*fedbandit list"):
        run_sweep("nope/x", tmp_path / "a")
    for seeds in (-1, 0):
        with pytest.raises(ValueError, match="seeds must be a positive number"):
            run_sweep("suite/baselines", tmp_path / "a", seeds=seeds)
    with pytest.raises(ValueError, match="seeds must be a positive number"):
        run_sweep("suite/baselines", tmp_path / "a", overrides={"seeds": -3})
    broken = Scenario("t/broken", "t", "", {"num_agents": 2}, {"mine": AlgorithmSpec("nowhere_pkg:Learner")})
    with pytest.raises(
        ValueError, match="algorithm 'mine' of scenario 't/broken': cannot import 'nowhere_pkg:Learner'"
    ):
        run_sweep(broken, tmp_path / "a")
    assert not (tmp_path / "a").exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ValueError, match="cannot write results to .*choose a writable directory"):
        run_sweep("suite/baselines", blocker / "out", overrides=SMALL)
    with pytest.raises(ValueError, match="backend must be one of"):
        make_backend("spark")
    with pytest.raises(ValueError, match="--address only applies to --backend ray"):
        make_backend("pool", address="auto")
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        make_backend("pool", workers=0)
    with pytest.raises(ValueError, match="seeds_per_job"):
        expand(grid_scenario(), seeds_per_job=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old complete table\n")

    def crash(path):
        path.write_text("half a ta")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, crash)
    assert target.read_text() == "old complete table\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_pool_failure_keeps_finished_jobs_and_resumes(tmp_path, monkeypatch):
    scenario, overrides = flaky_scenario(), {"seeds": 2, "checkpoints": 2}
    monkeypatch.setattr(Flaky, "fail", True)  # forked workers inherit the flag
    with pytest.raises(JobFailed, match="simulated crash"):
        run_sweep(scenario, tmp_path / "out", overrides=overrides, backend=PoolBackend(2))
    stored = {json.loads(gzip.open(p, "rt").readline())["algorithm"] for p in (tmp_path / "out" / "parts").iterdir()}
    assert "random" in stored and "flaky" not in stored  # full_sharing_ucb may have been dispatched already
    assert not list((tmp_path / "out").glob("results*"))
    monkeypatch.setattr(Flaky, "fail", False)
    resumed = run_sweep(scenario, tmp_path / "out", overrides=overrides, backend=PoolBackend(2))
    assert {job.algorithm for job in resumed.jobs_run} == {"random", "flaky", "full_sharing_ucb"} - stored
    assert len(load_results(tmp_path / "out").curves) == 3 * 2 * 2


@pytest.mark.parametrize("scale", ["ci", "paper"])
def test_every_registered_scenario_expands(scale, tmp_path):
    for name in names():
        summary = run_sweep(name, tmp_path / "dry", scale=scale, dry_run=True)
        runs = sum(len(job.seeds) for job in summary.jobs)
        assert runs == len(summary.scenario.points()) * len(summary.scenario.algorithms) * summary.scenario.seeds > 0
    assert not (tmp_path / "dry").exists()


@pytest.mark.slow
def test_suite_baselines_at_paper_scale(tmp_path):
    # paper scale: 10 agents, 20 arms, 20000 slots, 20 seeds, on the process pool.
    summary = run_sweep("suite/baselines", tmp_path, scale="paper", backend="pool")
    assert len(summary.jobs) == 3 and summary.scenario.seeds == 20
    results = load_results(tmp_path)
    assert len(results.curves) == 3 * 20 * 20
    verdict = get("suite/baselines").claims[0].check(results)
    assert verdict.passed, verdict.evidence


def test_explicit_seeds_run_those_runs_and_keep_their_seed_column(tmp_path):
    settings = {"horizon": 120, "checkpoints": 4}
    wide = run_sweep("suite/baselines", tmp_path / "wide", "ci", settings, seeds="0:4", backend="inprocess")
    assert wide.scenario.seed_list() == (0, 1, 2, 3)
    picked = run_sweep("suite/baselines", tmp_path / "picked", "ci", settings, seeds=[3, 1], backend="inprocess")
    wide_rows = [r for r in load_results(tmp_path / "wide").curves if r["seed"] in (1, 3)]
    picked_rows = load_results(tmp_path / "picked").curves
    assert {r["seed"] for r in picked_rows} == {1, 3}
    # a seed's run does not depend on which other seeds run beside it or in what order
    key = lambda r: (r["algorithm"], r["seed"], r["slot"])  # noqa: E731
    assert sorted(without_wall_time(picked_rows), key=key) == sorted(without_wall_time(wide_rows), key=key)
    assert [job.seeds for job in picked.jobs] == [(3, 1)] * 3
    assert load_config(tmp_path / "picked")["seeds"] == [3, 1]
    # resuming into the wide directory with a subset of its seeds runs nothing
    again = run_sweep("suite/baselines", tmp_path / "wide", "ci", settings, seeds=range(1, 3), backend="inprocess")
    assert again.jobs_run == [] and {r["seed"] for r in load_results(tmp_path / "wide").curves} == {1, 2}


def test_seeds_in_overrides_and_scenarios_may_be_explicit():
    assert resolve_scenario("suite/baselines", "ci", {"seeds": [100, 101]}).seed_list() == (100, 101)
    assert resolve_scenario("suite/baselines", "ci", {"seeds": "100:103"}).seed_list() == (100, 101, 102)
    assert resolve_scenario("suite/baselines", "ci", seeds=np.arange(7, 9)).seeds == (7, 8)
    assert resolve_scenario(grid_scenario(seeds=(9, 4)), "ci").seed_list() == (9, 4)
    assert [job.seeds for job in expand(resolve_scenario(grid_scenario(seeds=(9, 4, 5)), "ci"), 2)][:2] == [
        (9, 4),
        (5,),
    ]
    for bad, message in (([1, 1], "distinct"), ("3:1", "empty or negative"), (0, "positive number of runs")):
        with pytest.raises(ValueError, match=message):
            resolve_scenario("suite/baselines", "ci", {"seeds": bad})


def test_paper_registrar_names_registers_and_lets_fields_override_its_defaults(monkeypatch):
    monkeypatch.setattr("fedbandit_envs.bench.scenarios._CATALOGUE", dict(_CATALOGUE))
    add = paper_registrar("some_paper", "some", runner="some.module:run", seeds=7)
    env = {"num_agents": 2, "num_arms": 3, "horizon": 10}
    algorithms = {"ucb": AlgorithmSpec("independent_ucb1")}
    plain = add("plain", "a scenario", env, algorithms, ())
    assert plain == Scenario(
        "some/plain",
        "some_paper",
        "a scenario",
        env,
        {"ucb": AlgorithmSpec("independent_ucb1")},
        seeds=7,
        runner="some.module:run",
    )
    assert get("some/plain") is plain
    assert add("more", "another", env, algorithms, (), seeds=3, checkpoints=4).seeds == 3
    with pytest.raises(ValueError, match="already registered"):
        add("plain", "again", env, algorithms, ())


class Sleepy(IndependentUCB1):
    """IndependentUCB1 that, while ``pid_file`` is set, writes its process id there and sleeps a minute."""

    pid_file = None

    def reset(self, context):
        if Sleepy.pid_file is not None:
            Sleepy.pid_file.write_text(str(os.getpid()))
            time.sleep(60)
        super().reset(context)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_during_a_pool_sweep_ends_the_workers_at_once_and_keeps_finished_jobs(tmp_path, monkeypatch):
    algorithms = {"random": AlgorithmSpec("random"), "sleepy": AlgorithmSpec(f"{__name__}:Sleepy")}
    scenario = Scenario(
        "test/sleepy", "test", "interrupt test", {"num_agents": 2, "num_arms": 3, "horizon": 20}, algorithms
    )
    pid_file = tmp_path / "worker.pid"
    monkeypatch.setattr(Sleepy, "pid_file", pid_file)  # forked workers inherit it

    done = threading.Event()

    def ctrl_c():  # as a terminal does: SIGINT to the worker and to this process
        while not pid_file.exists() or not pid_file.read_text():
            time.sleep(0.05)
        time.sleep(0.5)  # the random job is done and stored by now
        os.kill(int(pid_file.read_text()), signal.SIGINT)
        if not done.wait(0.5):  # the sweep still runs (a worker that took the SIGINT fails its job)
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=ctrl_c, daemon=True)
    thread.start()
    start = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sweep(scenario, tmp_path / "out", overrides={"seeds": 2, "checkpoints": 2}, backend=PoolBackend(2))
    finally:
        done.set()
        thread.join()
    assert time.perf_counter() - start < 30  # the sleeping job was not waited for
    assert not alive(int(pid_file.read_text()))
    stored = [json.loads(gzip.open(p, "rt").readline())["algorithm"] for p in (tmp_path / "out" / "parts").iterdir()]
    assert stored == ["random"] and not list((tmp_path / "out").glob("results*"))


SWEEP_THAT_SLEEPS = """
import os, sys, time
from pathlib import Path
from agents.baselines import Random
from fedbandit_envs.bench.backends import PoolBackend
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario
from fedbandit_envs.bench.sweep import run_sweep

class Sleepy(Random):
    def reset(self, context):
        Path(sys.argv[2]).write_text(str(os.getpid()))
        time.sleep(60)

if __name__ == "__main__":
    env = {"num_agents": 2, "num_arms": 3, "horizon": 5}
    scenario = Scenario("test/orphans", "test", "", env, {"s": AlgorithmSpec("__main__:Sleepy")})
    run_sweep(scenario, sys.argv[1], overrides={"seeds": 1}, backend=PoolBackend(1))
"""


def ended(pid):
    """Whether process ``pid`` has ended (gone, or a zombie nobody reaps)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_pool_workers_end_when_the_sweep_process_is_killed(tmp_path):
    script, pid_file = tmp_path / "sweep.py", tmp_path / "worker.pid"
    script.write_text(SWEEP_THAT_SLEEPS)
    sweep = subprocess.Popen([sys.executable, str(script), str(tmp_path / "out"), str(pid_file)])
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        worker = int(pid_file.read_text())
    finally:
        sweep.kill()  # as the kernel's out-of-memory killer or a lost session would: no clean-up in the sweep
        sweep.wait()
    deadline = time.monotonic() + 15
    while not ended(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not ended(worker):
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the pool worker outlived its sweep process")


def test_a_directory_holds_one_sweep_and_loses_the_report_of_tables_it_replaces(tmp_path):
    def sweep(scenario, **kwargs):
        return run_sweep(scenario, tmp_path, backend="inprocess", progress=False, **kwargs)

    small = {**SMALL, "seeds": 2}
    sweep("suite/baselines", overrides=small)
    report = [tmp_path / "report.md", tmp_path / "report.html", tmp_path / "figures" / "regret.png"]
    (tmp_path / "figures").mkdir()
    for file in [*report, tmp_path / "figures" / "notes.txt"]:
        file.write_text("of the first tables")
    again = sweep("suite/baselines", overrides=small)  # the same sweep: same tables, the report stays
    assert again.removed == [] and not again.jobs_run and all(file.exists() for file in report)
    with pytest.raises(ValueError, match="holds a sweep of 'suite/baselines'.*not of 'test/grid'.*overwrite=True"):
        sweep(grid_scenario(seeds=1))
    assert load_config(tmp_path)["scenario"] == "suite/baselines" and all(file.exists() for file in report)
    grown = sweep("suite/baselines", overrides=SMALL)  # one more seed: new tables, the report goes
    assert grown.removed == report and not any(file.exists() for file in report)
    assert "removed the report of the earlier tables (report.md, report.html, regret.png)" in grown.describe()
    assert (tmp_path / "figures" / "notes.txt").exists()
    replaced = sweep(grid_scenario(seeds=1), overwrite=True)
    assert load_config(tmp_path)["scenario"] == "test/grid" and len(replaced.jobs_run) == 12


def _refusing_runner(algorithm, env_kwargs, seeds, checkpoints=1, **options):
    from fedbandit_envs.run import run

    return run(algorithm, env_kwargs, seeds, checkpoints, **options)


def _refuse_odd_arms(algorithm, env, seeds):
    if env.unwrapped.config.num_arms % 2:
        raise ValueError(f"this runner cannot run {env.unwrapped.config.num_arms} arms")


_refusing_runner.check = _refuse_odd_arms


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_runners_check_stops_the_sweep_before_anything_is_written(tmp_path, dry_run):
    scenario = replace(grid_scenario(), name="test/checked", runner=f"{__name__}:_refusing_runner")
    with pytest.raises(
        ValueError, match=r"invalid configuration of job .*env.num_arms=3.*this runner cannot run 3 arms"
    ):
        run_sweep(scenario, tmp_path / "out", dry_run=dry_run)
    assert not (tmp_path / "out").exists()


def test_li_song_wrapper_binding_is_checked_before_the_sweep_writes(tmp_path):
    """The DP wrapper's n_agg must equal the agents: a sweep with other agents fails in its pre-check, not in job 1."""
    with pytest.raises(ValueError, match=r"num_agents=10: ValueError: the DP wrapper's n_agg=50 must equal"):
        run_sweep("li_song/fig4_epsilon", tmp_path / "out", overrides={"num_agents": 10}, dry_run=True)
    with pytest.raises(ValueError, match="n_agg=50 must equal the agents averaged per round"):
        run_sweep("li_song/fig4_epsilon", tmp_path / "out", overrides={"num_agents": 10, "horizon": 200})
    assert not (tmp_path / "out").exists()
    summary = run_sweep("li_song/fig4_epsilon", tmp_path / "ok", overrides={"horizon": 200, "seeds": 1}, dry_run=True)
    assert len(summary.jobs_run) == 4
