"""Property-based tests of the ``fedbandit`` command: malformed arguments never give a traceback.

Every example calls ``main(argv)`` in process. The property: the command returns 0 (a valid dry run)
or 2, or argparse exits with status 2; a status 2 from the command itself comes with exactly one line
on stderr, ``fedbandit <command>: error: ...``; no other exception escapes; nothing is written by a
dry run or a refused command. Examples are bounded (``max_examples``) and use cheap scenarios.
"""

import json
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbandit_envs.cli import main

resource = pytest.importorskip("resource")  # Unix

FUZZ = settings(
    max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
#: Scenarios whose dry run checks its cells in well under a second, plus names that are not scenarios.
SCENARIOS = [
    "suite/baselines",
    "dubey/fig1a_private",
    "li_wang/fig2c_global_dimension",
    "zhu/sa_epsilon",
    "li_song/fig8_heterogeneous",
    "nope/x",
    "suite",
]
#: Keys of the environments (some), the scenario-level keys, and near misses.
KEYS = [
    "horizon",
    "num_agents",
    "num_arms",
    "c1",
    "c2",
    "topology",
    "instance",
    "instance_seed",
    "drop_prob",
    "latency",
    "gossip",
    "reward_model",
    "seeds",
    "checkpoints",
    "sweep",
    "horzon",
    "num_agent",
    "Horizon",
    "seed",
]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=2),
    max_leaves=4,
)
keys = st.sampled_from(KEYS) | st.text(alphabet=string.ascii_letters + string.digits + "_.", min_size=1, max_size=12)
values = json_values.map(json.dumps) | st.text(max_size=10)
settings_text = st.tuples(keys, values).map(lambda kv: f"{kv[0]}={kv[1]}")


@pytest.fixture(autouse=True)
def memory_cap():
    """Cap this process's address space while fuzzing (4 GB above its size now), restored after.

    A fuzzed size that would fill the machine's memory then fails at once with MemoryError (which the
    command reports in one line) instead of growing until the system kills the process.
    """
    statm = Path("/proc/self/statm")
    if not statm.exists():  # not Linux: fuzz uncapped
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    pages = int(statm.read_text().split()[0])
    resource.setrlimit(resource.RLIMIT_AS, (pages * resource.getpagesize() + 4 * 2**30, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def outcome(argv, capsys):
    """Run ``main(argv)``; return (status, stderr). Any exception other than SystemExit fails the test."""
    try:
        status = main(argv)
        argparse_exit = False
    except SystemExit as exit_info:
        status, argparse_exit = exit_info.code, True
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert status in (0, 2), (argv, status, err)
    lines = err.rstrip("\n").split("\n") if err else []
    errors = [line for line in lines if not line.startswith("fedbandit: warning: ")]
    if status == 2 and not argparse_exit:
        assert len(errors) == 1 and errors[0].startswith(f"fedbandit {argv[0]}: error: "), (argv, err)
    if argparse_exit:
        assert status == 2 and ": error: " in errors[-1], (argv, err)
    return status, errors


@FUZZ
@given(scenario=st.sampled_from(SCENARIOS), given_settings=st.lists(settings_text, min_size=1, max_size=3))
def test_fuzz_sweep_settings_dry_run(scenario, given_settings, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["sweep", scenario, "--out", str(out), "--dry-run", "--no-progress"]
    for setting in given_settings:
        argv += ["--set", setting]
    status, errors = outcome(argv, capsys)
    if status == 2 and errors and scenario in ("suite/baselines",) and not errors[-1].startswith("usage"):
        keys_given = [setting.partition("=")[0] for setting in given_settings]
        assert any(key in errors[-1] for key in keys_given), (argv, errors)  # the message names the key
    assert not out.exists()


@FUZZ
@given(given_settings=st.lists(settings_text, min_size=1, max_size=2))
def test_fuzz_sweep_settings_refused_before_writing(given_settings, tmp_path, capsys):
    # without --dry-run: a refused setting leaves nothing behind; a valid one would run, so only refused
    # settings are run for real (the dry run decides which)
    out = tmp_path / "out"
    argv = ["sweep", "suite/baselines", "--out", str(out), "--backend", "inprocess", "--no-progress"]
    for setting in given_settings:
        argv += ["--set", setting]
    status, _ = outcome([*argv, "--dry-run"], capsys)
    if status == 2:
        assert outcome(argv, capsys)[0] == 2
        assert not out.exists()


#: Keywords of Fed_UCB (the algorithm of zhu/sa_epsilon) and near misses, for ``--set sweep={"alg.<key>": [...]}``.
ALGORITHM_KEYS = ["epsilon", "profile", "eps_split", "dp_bonus_scale", "clip_for_dp", "alpha1", "epsilonn", "gamma"]


@settings(FUZZ, max_examples=40)
@given(key=st.sampled_from(ALGORITHM_KEYS), value=json_values)
def test_fuzz_sweep_algorithm_keywords_refused_before_writing(key, value, tmp_path, capsys):
    # a malformed algorithm keyword of the sweep is refused at parse time, naming the keyword, with or without
    # --dry-run, and nothing is written; a valid one passes the dry run
    out = tmp_path / "out"
    setting = "sweep=" + json.dumps({f"alg.{key}": [value]})
    argv = ["sweep", "zhu/sa_epsilon", "--out", str(out), "--no-progress", "--set", setting]
    status, errors = outcome([*argv, "--dry-run"], capsys)
    assert not out.exists()
    if status == 2:
        assert f"alg.{key}" in errors[-1] or key in errors[-1], (argv, errors)
        assert outcome([*argv, "--backend", "inprocess"], capsys)[0] == 2
        assert not out.exists()


#: Not numbers or small numbers (a large valid horizon or seed count would really run).
garbage = st.text(max_size=6) | st.integers(-(2**70), 3).map(str) | st.floats().map(str)
number_options = ["--agents", "--arms", "--horizon", "--seeds", "--instance-seed", "--c1", "--c2", "--checkpoints"]
#: One bad setting of ``fedbandit run``; given last, so no later valid value overrides it.
bad_run_settings = st.one_of(
    st.tuples(st.sampled_from(["--agents", "--horizon", "--seeds", "--checkpoints"]), st.integers(-5, 0).map(str)),
    st.tuples(st.just("--arms"), st.integers(-5, 1).map(str)),
    st.tuples(st.sampled_from(["--agents", "--arms"]), st.integers(2**40, 2**70).map(str)),  # far beyond memory
    st.tuples(st.sampled_from(["--c1", "--c2"]), st.sampled_from(["-1", "nan", "inf", "-0.5"])),
    st.tuples(st.just("--algorithms"), st.text(alphabet=string.ascii_lowercase + ":._", min_size=1, max_size=10)),
    st.tuples(st.sampled_from(number_options), garbage),
    st.tuples(st.just("--instance"), st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=8)),
    st.tuples(st.just("--out"), st.sampled_from(["a_file", "a_file/sub"])),
    st.tuples(st.just("--bogus"), garbage),
)


@FUZZ
@given(
    valid=st.lists(st.tuples(st.sampled_from(["--agents", "--arms"]), st.integers(2, 4).map(str)), max_size=2),
    bad=bad_run_settings,
)
def test_fuzz_run_refuses_bad_settings_before_running(valid, bad, monkeypatch, capsys):
    with tempfile.TemporaryDirectory() as scratch:  # one per example
        monkeypatch.chdir(scratch)
        (Path(scratch) / "a_file").write_text("x")
        argv = ["run", "--out", "results", "--horizon", "8", "--seeds", "1", "--no-plot", "--no-progress"]
        for option, value in [*valid, bad]:
            argv += [option, value]
        status, _ = outcome(argv, capsys)
        if status == 2:  # not a 'bad' value that is valid after all (e.g. --instance uniform)
            assert [p.name for p in Path(scratch).iterdir()] == ["a_file"]  # refused before anything is written
        monkeypatch.undo()


@pytest.fixture(scope="module")
def damaged_directories(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_dirs")
    (root / "a_file").write_text("x")
    (root / "empty").mkdir()
    for name, files in {
        "bad_config": {"config.json": '{"scenario": ', "results.csv": "seed,slot\n0,1\n"},
        "bad_table": {
            "results.csv": "seed,slot\n0",
            "tables.json": '{"complete": true, "sha256": {"results.csv": "0"}}',
        },
        "bad_status": {"results.csv": "seed,slot\n0,1\n", "tables.json": "[1, 2"},
        "stale": {"results.csv": "seed,slot\n0,1\n", "tables.json": '{"complete": false, "reason": "a test"}'},
    }.items():
        (root / name).mkdir()
        for file, text in files.items():
            (root / name / file).write_text(text)
    return root


@FUZZ
@given(
    command=st.sampled_from(["report", "plot"]),
    directory=st.sampled_from(["a_file", "empty", "missing", "bad_config", "bad_table", "bad_status", "stale"]),
    extra=st.lists(st.sampled_from(["--replication", "--root", "--bogus", "x"]), max_size=2),
)
def test_fuzz_report_and_plot_of_damaged_directories(command, directory, extra, damaged_directories, capsys):
    argv = [command, str(damaged_directories / directory), *extra]
    before = sorted(p.relative_to(damaged_directories) for p in damaged_directories.rglob("*"))
    status, _ = outcome(argv, capsys)
    assert status == 2
    assert sorted(p.relative_to(damaged_directories) for p in damaged_directories.rglob("*")) == before


@FUZZ
@given(
    agent=st.text(alphabet=string.ascii_letters + ":._", max_size=16),
    scenario=st.sampled_from(SCENARIOS),
    kwargs=st.text(max_size=10),
)
def test_fuzz_compare_with_bad_agents(agent, scenario, kwargs, tmp_path, capsys):
    # no agent spelled from these letters exists, so compare must refuse before sweeping
    argv = ["compare", "--agent", agent, "--scenario", scenario, "--agent-kwargs", kwargs, "--out", str(tmp_path / "o")]
    status, _ = outcome(argv, capsys)
    assert status == 2 and not (tmp_path / "o").exists()
