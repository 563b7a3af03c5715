"""The fedbandit command: list, sweep (dry run, report), plot, report, and errors that say how to fix."""

import csv
import importlib
import json
import re

import pytest

from fedbandit_envs.cli import main

SMALL = ["--set", "horizon=100", "--seeds", "2", "--set", "checkpoints=4", "--no-progress"]


def test_list_shows_scenarios(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Scenarios (fedbandit sweep NAME" in out and "suite/baselines" in out and "3 x 3" in out


def test_sweep_dry_run_shows_the_job_count_and_writes_nothing(tmp_path, capsys):
    assert main(["sweep", "suite/baselines", "--out", str(tmp_path / "r"), "--dry-run", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "= 6 runs in 3 job(s); 3 job(s) to run" in out and "suite/baselines / random seeds [0, 1]" in out
    assert not (tmp_path / "r").exists()


def test_sweep_with_report_then_plot_and_report_commands(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r"
    assert (
        main(
            [
                "sweep",
                "suite/baselines",
                "--out",
                str(out),
                "--backend",
                "inprocess",
                "--format",
                "csv",
                "--report",
                *SMALL,
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    header, *rows = (out / "results.csv").read_text().splitlines()
    assert header.startswith("scenario,algorithm,seed,slot,group_regret") and len(rows) == 3 * 2 * 4
    assert f"wrote {out / 'report.html'}" in printed
    assert main(["plot", str(out)]) == 0
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "regret.png",
        "regret.svg",
        "regret_vs_cost.png",
        "regret_vs_cost.svg",
    ]
    assert main(["report", str(out)]) == 0
    assert "sharing_helps" in (out / "report.md").read_text()
    assert main(["sweep", "suite/baselines", "--out", str(out), "--backend", "inprocess", *SMALL]) == 0
    assert "0 job(s) to run, 6 run(s) already stored" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sweep", "nope/x"], "unknown scenario 'nope/x'; `fedbandit list` shows the catalogue"),
        (["sweep", "suite/baselines", "--seeds", "-2"], "seeds must be a positive number of runs"),
        (["sweep", "suite/baselines", "--backend", "inprocess", "--workers", "2"], "--workers only applies"),
        (["sweep", "suite/baselines", "--address", "auto"], "--address only applies to --backend ray"),
        (["report"], "give either a results DIRECTORY or --replication"),
        (["report", "never_swept_dir"], "no results table in 'never_swept_dir'"),
    ],
)
def test_bad_input_prints_how_to_fix_and_writes_nothing(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_unwritable_output_directory(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["sweep", "suite/baselines", "--out", str(tmp_path / "file" / "out"), *SMALL]) == 2
    assert "cannot write results to" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_malformed_setting_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "suite/baselines", "--set", "horizon"])
    assert exit_info.value.code == 2 and "expected KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("seeds", "listed"),
    [
        (["--seeds", "100:102"], "[100, 101]"),
        (["--seeds", "3,7,9"], "[3, 7, 9]"),
        (["--seeds", "2"], "[0, 1]"),
        (["--set", "seeds=[100,101]"], "[100, 101]"),
        (["--set", "seeds=5:7"], "[5, 6]"),
    ],
)
def test_sweep_takes_explicit_seeds(seeds, listed, tmp_path, capsys):
    argv = ["sweep", "suite/baselines", "--out", str(tmp_path / "r"), "--dry-run", "--no-progress", *seeds]
    assert main(argv) == 0
    assert f"suite/baselines / random seeds {listed}" in capsys.readouterr().out


def test_run_takes_explicit_seeds(tmp_path):
    out = tmp_path / "r"
    argv = ["run", "--algorithms", "random", "--agents", "2", "--arms", "3", "--horizon", "20", "--seeds", "10:12"]
    assert main([*argv, "--checkpoints", "2", "--out", str(out), "--no-plot", "--no-progress"]) == 0
    assert json.loads((out / "config.json").read_text())["seeds"] == [10, 11]
    assert {row["seed"] for row in csv.DictReader((out / "results.csv").open())} == {"10", "11"}


def test_run_table_states_its_plus_minus_and_cost_unit(tmp_path, capsys):
    argv = ["run", "--algorithms", "random", "--agents", "2", "--arms", "3", "--horizon", "20", "--seeds", "2"]
    assert main([*argv, "--checkpoints", "2", "--out", str(tmp_path), "--no-plot", "--no-progress"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.split() == ["algorithm", "group", "regret", "(mean", "+-", "sem)", "cost", "(price", "units)"]


@pytest.mark.parametrize(
    ("argv", "columns"),
    [
        (["--algorithms", "solanki_pfcb", "--set", "num_agents=3", "--set", "num_producers=4"], {"frr", "violations"}),
        (
            ["--algorithms", "async_linucb", "--set", "num_clients=6", "--set", "dimension=3", "--set", "num_arms=4"],
            {"reward"},
        ),
        (["--algorithms", "async_linucb", "--env", "replay", "--set", "num_arms=4"], {"normalised_reward"}),
    ],
    ids=["procurement", "linear", "replay"],
)
def test_run_plays_every_family(argv, columns, tmp_path):
    out = tmp_path / "r"
    common = ["--horizon", "30", "--seeds", "2", "--checkpoints", "2", "--out", str(out), "--no-plot", "--no-progress"]
    assert main(["run", *argv, *common]) == 0
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert {row["slot"] for row in rows} == {"15", "30"} and columns <= set(rows[0])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--algorithms", "random", "async_linucb"], r"different families \(random: mab, async_linucb: linear\)"),
        (["--algorithms", "solanki_nf", "--arms", "3"], r"--arms set\(s\) keywords of the mab family.*'procurement'"),
        (["--algorithms", "random", "--env", "procurement"], r"supports the families \['mab'\], not 'procurement'"),
    ],
)
def test_run_refuses_settings_of_another_family_before_writing(argv, message, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", *argv, "--horizon", "10", "--out", str(out), "--no-plot", "--no-progress"]) != 0
    assert re.search(message, capsys.readouterr().err) and not out.exists()


def test_a_missing_environment_argument_names_the_way_to_give_it(tmp_path, capsys):
    argv = ["run", "--algorithms", "async_linucb", "--env", "replay_log", "--horizon", "20", "--seeds", "1"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    error = capsys.readouterr().err
    assert "missing 2 required positional arguments: 'events_path' and 'features_path'" in error
    assert error.rstrip().endswith("(give them with --set NAME=VALUE)")


def test_a_run_directory_reports_without_claims_and_with_verified_tables(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", "--algorithms", "independent_ucb1", "--set", "num_agents=2", "--set", "num_arms=3"]
    assert main([*argv, "--horizon", "40", "--seeds", "2", "--out", str(out), "--no-plot"]) == 0
    assert (out / "tables.json").exists()
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "fedbandit run of independent_ucb1" in report and "not from a scenario's sweep: no claims" in report
    assert "older version" not in report and "Warning" not in report
    capsys.readouterr()


def test_run_refuses_an_algorithm_named_twice_before_writing(tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["run", "--algorithms", "independent_ucb1", "random", "independent_ucb1", "--horizon", "10", "--seeds", "2"]
    assert main([*argv, "--out", str(out), "--no-plot", "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert "--algorithms must be distinct" in error and "['independent_ucb1'] more than once" in error
    assert len(error.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize(
    ("argv", "target", "kept"),
    [
        (["sweep", "suite/baselines"], "fedbandit_envs.bench.sweep.run_sweep", "the runs of finished jobs are stored"),
        (["replicate", "zhu"], "fedbandit_envs.bench.sweep.run_sweep", "the runs of finished jobs are stored"),
        (
            ["compare", "--agent", "random", "--label", "mine", "--scenario", "suite/baselines"],
            "fedbandit_envs.bench.compare.run_sweep",
            "the runs of finished jobs are stored",
        ),
        (["run", "--algorithms", "random", "--horizon", "10"], "fedbandit_envs.cli.run", "nothing was written"),
    ],
    ids=["sweep", "replicate", "compare", "run"],
)
def test_ctrl_c_prints_one_line_and_exits_130(argv, target, kept, tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    module, _, name = target.rpartition(".")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(importlib.import_module(module), name, interrupted)  # bench.compare is also a function
    try:
        status = main([*argv, "--no-progress"])
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped main with its traceback")
    assert status == 130
    error = capsys.readouterr().err
    assert error.startswith(f"fedbandit {argv[0]}: interrupted; {kept}") and len(error.splitlines()) == 1


SEEDS_TWICE = "--seeds 2 and --set seeds=100:103 both give the seeds"
SEEDS = ["--seeds", "2", "--set", "seeds=100:103"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sweep", "suite/baselines", *SEEDS, "--dry-run"], SEEDS_TWICE),
        (["replicate", "zhu", *SEEDS, "--dry-run"], SEEDS_TWICE),
        (["compare", "--agent", "random", "--label", "x", "--scenario", "suite/baselines", *SEEDS], SEEDS_TWICE),
        (["run", "--agents", "3", "--set", "num_agents=5"], "--agents 3 and --set num_agents=5 both set num_agents"),
        (["run", "--horizon", "10", "--set", "horizon=20"], "--horizon 10 and --set horizon=20 both set horizon"),
        (["run", "--env", "mab", "--set", "env=mab"], "--env mab and --set env=mab both set env"),
        (["run", "--instance-seed", "1", "--set", "instance_seed=2"], "--instance-seed 1 and --set instance_seed=2"),
        (["flower", "random", "--env", "mab", "--set", "env=linear"], "--env mab and --set env=linear both set env"),
    ],
    ids=["sweep", "replicate", "compare", "run-agents", "run-horizon", "run-env", "run-instance-seed", "flower"],
)
def test_an_option_and_a_set_of_the_same_setting_are_refused(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert message in error and "give only one of them" in error and len(error.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_of_another_scenario_into_a_used_directory_needs_overwrite(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["sweep", "suite/baselines", "--out", str(out), "--backend", "inprocess", *SMALL]) == 0
    capsys.readouterr()
    other = ["sweep", "zhu/sa_collaboration", "--out", str(out), "--dry-run", "--no-progress"]
    assert main(other) == 2
    error = capsys.readouterr().err
    assert "holds a sweep of 'suite/baselines'" in error and "not of 'zhu/sa_collaboration'" in error
    assert "--overwrite" in error
    assert main([*other, "--overwrite"]) == 0
    assert json.loads((out / "config.json").read_text())["scenario"] == "suite/baselines"  # a dry run writes nothing
    assert main(["sweep", "--repair", "--out", str(out), "--overwrite"]) == 2
