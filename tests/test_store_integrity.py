"""The result store never loses or hides a row, and the CLI refuses bad settings before writing anything.

Regression tests of issue 19 (each failed on 604ad5f): a part missing a table, a truncated, empty or
cut part and a stray file in ``parts/``; ``--set`` values accepted by ``--dry-run`` and failing only at
job time; ``fedbandit run --out`` naming a file. Plus: manifests and checksums, parts written before
manifests, ``--repair``, and reports that refuse (or flag) incomplete tables.
"""

import gzip
import json
import shutil

import pytest

from agents.baselines import IndependentUCB1
from fedbandit_envs.bench.store import load_results
from fedbandit_envs.cli import main

# suite/baselines: 3 algorithms x 4 seeds x 3 checkpoints, 10 agents; 6 jobs of 2 seeds.
SMALL = ["--set", "horizon=60", "--set", "checkpoints=3", "--seeds", "4", "--seeds-per-job", "2"]
FAST = ["--backend", "inprocess", "--format", "csv", "--no-progress"]
CURVES, AGENTS = 3 * 4 * 3, 3 * 4 * 3 * 10


def sweep(out, *extra):
    return main(["sweep", "suite/baselines", "--out", str(out), *SMALL, *FAST, *extra])


def tables(directory):
    results = load_results(directory)
    return [{k: v for k, v in row.items() if k != "wall_time"} for row in results.curves], results.agents


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    out = tmp_path_factory.mktemp("store") / "complete"
    assert sweep(out) == 0
    return out


@pytest.fixture
def stored(complete, tmp_path):
    """A copy of the complete sweep directory (each test damages its own copy)."""
    return shutil.copytree(complete, tmp_path / "sweep")


def part_files(directory):
    return sorted((directory / "parts").iterdir())


def lines_of(path):
    with gzip.open(path, "rt") as handle:
        return handle.read().splitlines(keepends=True)


def rewrite(path, text):
    with gzip.open(path, "wt") as handle:
        handle.write(text)


def test_fresh_sweep_has_every_row(complete):
    curves, agents = tables(complete)
    assert (len(curves), len(agents)) == (CURVES, AGENTS)


def drop_agents_table(path):
    rewrite(path, "".join(lines_of(path)[:2]))


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def empty(path):
    path.write_bytes(b"")


def cut_json(path):
    text = "".join(lines_of(path))
    rewrite(path, text[: len(text) // 2])


def garble_gzip(path):
    path.write_bytes(b"\x1f\x8b\x08\x00 this is not deflate data at all")


@pytest.mark.parametrize("damage", [drop_agents_table, truncate, empty, cut_json, garble_gzip])
def test_damaged_part_is_named_moved_aside_and_rerun(damage, stored, complete, capsys):
    victim = part_files(stored)[1]
    damage(victim)
    capsys.readouterr()
    assert sweep(stored) == 0
    captured = capsys.readouterr()
    warning = [line for line in captured.err.splitlines() if "damaged part" in line]
    assert len(warning) == 1 and victim.name in warning[0] and "moved to" in warning[0]
    assert "1 job(s) to run, 10 run(s) already stored" in captured.out
    assert [p.name for p in (stored / "damaged").iterdir()] == [victim.name]
    assert tables(stored) == tables(complete)
    assert sweep(stored) == 0  # verified clean now: nothing damaged, nothing to run
    captured = capsys.readouterr()
    assert "damaged" not in captured.err and "0 job(s) to run, 12 run(s) already stored" in captured.out


def test_stray_file_in_parts_is_moved_aside(stored, complete, capsys):
    (stored / "parts" / "copy-of-results.jsonl.gz").write_bytes(b"not gzip at all")
    (stored / "parts" / "notes.txt").write_text("my notes")
    capsys.readouterr()
    assert sweep(stored) == 0
    err = capsys.readouterr().err
    assert "copy-of-results.jsonl.gz" in err and "notes.txt" in err and "Traceback" not in err
    assert sorted(p.name for p in (stored / "damaged").iterdir()) == ["copy-of-results.jsonl.gz", "notes.txt"]
    assert tables(stored) == tables(complete)


def test_changed_rows_fail_the_checksum(stored, complete, capsys):
    victim = part_files(stored)[0]
    header, curves, agents = lines_of(victim)
    rows = json.loads(curves)
    rows["curves"][0]["group_regret"] += 1.0  # a valid file holding different numbers than it recorded
    rewrite(victim, header + json.dumps(rows) + "\n" + agents)
    assert sweep(stored) == 0
    assert "the curves table does not match its sha256 checksum" in capsys.readouterr().err
    assert tables(stored) == tables(complete)


def test_manifest_records_rows_and_checksums(complete):
    import hashlib

    from fedbandit_envs.bench.store import read_part

    for path in part_files(complete):
        header, curves, agents = lines_of(path)
        manifest = json.loads(header)["tables"]
        assert manifest["curves"] == {"rows": 3 * 2, "sha256": hashlib.sha256(curves[:-1].encode()).hexdigest()}
        assert manifest["agents"] == {"rows": 3 * 2 * 10, "sha256": hashlib.sha256(agents[:-1].encode()).hexdigest()}
        part = read_part(path)
        assert part.checksummed and len(part.seeds) == 2


def legacy(path):
    """Rewrite a part as 604ad5f wrote it: a header without format or manifest."""
    header, *rest = lines_of(path)
    old = {k: v for k, v in json.loads(header).items() if k not in ("format", "tables")}
    rewrite(path, json.dumps(old) + "\n" + "".join(rest))


def test_parts_written_before_manifests_still_load(stored, complete, capsys):
    for path in part_files(stored):
        legacy(path)
    assert sweep(stored) == 0
    out = capsys.readouterr().out
    assert "0 job(s) to run" in out and "6 stored part(s) predate part manifests" in out
    assert tables(stored) == tables(complete)
    drop_agents_table(part_files(stored)[2])  # what can be verified still is: every table, every seed
    assert sweep(stored) == 0
    assert "the agents table is missing" in capsys.readouterr().err
    assert tables(stored) == tables(complete)


def test_collect_refuses_missing_runs(stored):
    from fedbandit_envs.bench.jobs import expand, resolve_scenario
    from fedbandit_envs.bench.store import IncompleteResults, ResultStore

    scenario = resolve_scenario("suite/baselines", "ci", {"horizon": 60, "checkpoints": 3}, seeds=4)
    part_files(stored)[0].unlink()
    with pytest.raises(IncompleteResults, match=r"lack 2 run\(s\) \(.* seeds \[.*\]\).*--repair"):
        ResultStore(stored).collect(expand(scenario, 2))


def test_repair_reruns_damaged_parts_from_config(stored, complete, capsys):
    truncate(part_files(stored)[4])
    assert main(["sweep", "--repair", "--out", str(stored), *FAST]) == 0
    captured = capsys.readouterr()
    assert "damaged part" in captured.err and "1 job(s) to run" in captured.out
    assert tables(stored) == tables(complete)
    assert main(["sweep", "--repair", "--out", str(stored), "--set", "horizon=5"]) == 2
    assert "--repair takes the scenario, settings and seeds from the directory's config.json" in capsys.readouterr().err


@pytest.mark.parametrize("seeds", [["--seeds", "100:102"], ["--set", "seeds=100:102"]], ids=["--seeds", "--set"])
def test_repair_keeps_the_recorded_explicit_seeds(seeds, tmp_path, capsys):
    out = tmp_path / "explicit"
    argv = ["sweep", "suite/baselines", "--out", str(out), "--set", "horizon=30", "--set", "checkpoints=2", *seeds]
    assert main([*argv, *FAST]) == 0
    part_files(out)[1].unlink()
    capsys.readouterr()
    assert main(["sweep", "--repair", "--out", str(out), *FAST]) == 0
    assert "2 seed(s) = 6 runs in 3 job(s); 1 job(s) to run, 4 run(s) already stored" in capsys.readouterr().out
    assert {row["seed"] for row in load_results(out).curves} == {100, 101}


def test_dry_run_names_damaged_parts_and_moves_nothing(stored, capsys):
    victim = part_files(stored)[0]
    empty(victim)
    assert sweep(stored, "--dry-run") == 0
    captured = capsys.readouterr()
    assert f"{victim}: empty" in captured.err and "1 job(s) to run" in captured.out
    assert victim.exists() and not (stored / "damaged").exists()


class Failing(IndependentUCB1):
    """A learner whose construction works and whose reset always fails."""

    def reset(self, context):
        raise RuntimeError("simulated crash")


def test_report_refuses_tables_of_an_unfinished_sweep(stored, capsys):
    pytest.importorskip("matplotlib")
    assert main(["report", str(stored)]) == 0
    # a later sweep into the directory with a learner that fails: the old tables no longer match config.json
    assert (
        main(
            [
                "compare",
                "--agent",
                f"{__name__}:Failing",
                "--scenario",
                "suite/baselines",
                "--out",
                str(stored),
                *SMALL[:4],
                "--seeds",
                "4",
                "--backend",
                "inprocess",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "simulated crash" in capsys.readouterr().err
    assert main(["report", str(stored)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "incomplete results: a sweep of suite/baselines" in err
    assert "--allow-incomplete" in err
    assert main(["report", str(stored), "--allow-incomplete"]) == 0
    report = (stored / "report.md").read_text()
    assert report.index("Warning: a sweep of suite/baselines") < report.index("## Claims")


def test_report_refuses_a_changed_table(stored, capsys):
    table = stored / "results_agents.csv"
    table.write_text(table.read_text()[:-200])  # truncated after it was written
    assert main(["report", str(stored)]) == 2
    err = capsys.readouterr().err
    assert "results_agents.csv' changed after it was written" in err and "--repair" in err


def test_unreadable_config_is_one_line(stored, capsys):
    (stored / "config.json").write_text('{"scenario": "suite/bas')
    assert main(["report", str(stored)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config.json" in err and "Traceback" not in err


# ------------------------------------------------------------------------------ settings checked before writing
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("horizon=-5", "horizon must be >= 1, got -5"),
        ("horizon=abc", "horizon must be an integer (Python or numpy int; not bool, float), got 'abc'"),
        (
            "horzon=500",
            "'horzon' is not a keyword of scenario 'suite/baselines' (environment FederatedMAB); "
            "did you mean 'horizon'?",
        ),
        ("checkpoints=[0]", "checkpoints must lie in [1, 1000], got [0]"),
        ("checkpoints=0", "checkpoints must be a count >= 1 or a list of slots"),
        ("c2=-1", "c2 must be >= 0.0, got -1.0"),
        ("horizon=1180591620717411303424", "horizon must be <= 9223372036854775807, got 1180591620717411303424"),
        ('sweep={"env.c2": 1}', "sweep values of 'env.c2' must be a non-empty list"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_bad_setting_fails_before_anything_is_written(setting, message, dry_run, tmp_path, capsys):
    argv = ["sweep", "suite/baselines", "--out", str(tmp_path / "out"), "--set", setting, *FAST]
    assert main(argv + ["--dry-run"] * dry_run) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedbandit sweep: error: ") and message in err
    assert not (tmp_path / "out").exists()


def test_every_cell_is_checked(tmp_path, capsys):
    # the second point of the sweep is invalid: found before the first job runs
    argv = ["sweep", "suite/baselines", "--out", str(tmp_path / "out"), "--set", 'sweep={"env.c1": [1, -2]}', *FAST]
    assert main(argv) == 2
    assert "[env.c1=-2]" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_runner_that_returns_no_rows_for_a_seed_fails_the_job(tmp_path):
    from fedbandit_envs.bench.backends import JobFailed
    from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario
    from fedbandit_envs.bench.sweep import run_sweep

    scenario = Scenario(
        "test/short",
        "test",
        "",
        {"num_agents": 2, "num_arms": 3, "horizon": 20},
        {"a": AlgorithmSpec("random")},
        runner=f"{__name__}:first_seed_only",
        seeds=2,
        checkpoints=2,
    )
    with pytest.raises(JobFailed, match=r"returned no rows for seeds \[1\] in the curves table"):
        run_sweep(scenario, tmp_path / "out", backend="inprocess")
    assert list((tmp_path / "out" / "parts").iterdir()) == []


def first_seed_only(algorithm, env_kwargs, seeds, checkpoints, **kwargs):
    from fedbandit_envs.run import run

    return run(algorithm, env_kwargs, seeds[:1], checkpoints, **kwargs)


# ------------------------------------------------------------------------------------------------ fedbandit run
@pytest.mark.parametrize("out", ["a_file", "a_file/results"])
def test_run_into_a_file_is_a_one_line_error_before_running(out, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("x")
    assert main(["run", "--out", out, "--horizon", "10", "--seeds", "1", "--no-plot", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "cannot write results to" in captured.err
    assert captured.out == ""  # refused before any run


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--agents", "0"], "num_agents must be >= 1"),
        (["--algorithms", "random", "nope"], "unknown algorithm 'nope'"),
        (["--checkpoints", "0"], "checkpoints must be >= 1"),
        (["--seeds", "0"], "seeds must be a positive number of runs"),
        (["--seeds", str(2**40)], "at most 1000000 seeds per sweep or run"),
        (["--seeds", "0:2000000"], "at most 1000000 seeds per sweep or run"),
        (["--c2", "-1"], "c2 must be >= 0.0"),
    ],
)
def test_run_checks_settings_before_running(option, message, tmp_path, capsys):
    assert main(["run", "--out", str(tmp_path / "r"), "--horizon", "10", "--no-plot", "--no-progress", *option]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == "" and not (tmp_path / "r").exists()


def test_replicate_checks_every_scenario_before_writing(tmp_path, capsys):
    assert main(["replicate", "--root", str(tmp_path / "r"), "--set", "horizon=-5", "--backend", "inprocess"]) == 2
    assert "with --set horizon=-5: ValueError: " in capsys.readouterr().err  # the first paper scenario's check
    assert not (tmp_path / "r").exists()


def test_second_sweep_into_a_busy_directory_stops_at_once(stored, complete, capsys):
    from fedbandit_envs.bench.store import ResultStore

    def contents():  # every file but the lock and its owner
        return {path: path.read_bytes() for path in stored.rglob("*") if path.is_file() and ".sweep." not in path.name}

    before = contents()
    with ResultStore(stored).lock("a sweep of suite/baselines"):
        assert sweep(stored, "--seeds", "6") == 2
        error = capsys.readouterr().err
        assert f"another sweep is writing into {str(stored)!r} (a sweep of suite/baselines, process " in error
        assert "choose another --out" in error
        assert sweep(stored, "--dry-run") == 0  # reading takes no lock
    assert contents() == before
    assert sweep(stored) == 0 and tables(stored) == tables(complete)


def test_lock_of_a_killed_sweep_is_released(stored, capsys):
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from fedbandit_envs.bench.store import ResultStore\n"
            f"with ResultStore({str(stored)!r}).lock('a crashing sweep'):\n"
            "    print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert sweep(stored) == 2 and "(a crashing sweep, process " in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert sweep(stored) == 0
