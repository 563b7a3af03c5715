"""A Flower deployment on loopback: a SuperLink and three SuperNodes in their own processes, ``flwr run``.

The test starts every process itself (loopback addresses, free ports, ``--insecure``, Flower's home in a
temporary folder, telemetry and run-time dependency installation off), runs a small FullSharingUCB
federation through them and checks the run is the simulator's; it stops every process it started, and
every process those started, in ``finally``. Slow tier; skipped without flwr or its command-line tools.
The app project's tests are fast.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # before flwr is first imported

pytest.importorskip("flwr")

import tomllib  # noqa: E402
from flwr.common.config import validate_config  # noqa: E402
from test_flower import GOSSIP, assert_same_run, simulate, without_wall_time  # noqa: E402

from fedbandit_envs.cli import main  # noqa: E402
from fedbandit_envs.flower import FederationSpec, run_local  # noqa: E402
from fedbandit_envs.flower.deploy import spec_from_run_config, wrappers_from_config, write_app  # noqa: E402
from fedbandit_envs.run import run  # noqa: E402
from wrappers import LaplaceMessageDP, TreeMessageDP  # noqa: E402

#: Flower's command-line tools, installed beside the interpreter that runs the tests.
BIN = Path(sys.executable).parent

NUM_NODES = 3
STARTUP_TIMEOUT = 60.0  # seconds for the SuperLink to listen
RUN_TIMEOUT = 600.0  # seconds for the whole federation (about 10 s per round on a loaded 2-core machine)
STOP_TIMEOUT = 15.0  # seconds for the processes to exit after SIGTERM


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def running_parents() -> dict[int, int]:
    """The parent of every running process, zombies left out (from ``/proc``)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # it exited meanwhile
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if state != "Z":
                parent[int(entry.name)] = int(ppid)
    return parent


def descendants(roots: set[int]) -> set[int]:
    """The running processes below ``roots`` (Flower starts its SuperExec and app processes in new sessions,
    out of reach of a process-group kill)."""
    parent = running_parents()
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found


def stop(processes: list[subprocess.Popen]) -> set[int]:
    """SIGTERM every process started here and every process below them; SIGKILL what is left after a while.

    Returns the ones still running after that (none, unless a kill failed).
    """
    pids = {process.pid for process in processes} | descendants({process.pid for process in processes})
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_TIMEOUT
    for process in processes:
        try:
            process.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            pass
    pids |= descendants(pids)  # started meanwhile
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for process in processes:
        process.wait(STOP_TIMEOUT)
    deadline = time.monotonic() + STOP_TIMEOUT
    while pids & set(running_parents()) and time.monotonic() < deadline:  # killed, not yet gone
        time.sleep(0.1)
    return pids & set(running_parents())


def wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    """Return once ``port`` on 127.0.0.1 accepts connections; fail if ``process`` exits or time runs out."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the SuperLink exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail(f"the SuperLink did not listen on 127.0.0.1:{port} within {STARTUP_TIMEOUT} s")


@contextmanager
def loopback_federation(folder: Path, num_nodes: int) -> Iterator[dict[str, str]]:
    """A SuperLink and ``num_nodes`` SuperNodes on loopback; yields the environment ``flwr run`` needs."""
    home = folder / "flwr-home"
    home.mkdir()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # the SuperLink starts flower-superexec
        "FLWR_HOME": str(home),
        "FLWR_TELEMETRY_ENABLED": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")])),
    }
    port = free_port()
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> subprocess.Popen:
        with open(folder / f"{name}.log", "wb") as log:
            processes.append(
                subprocess.Popen([str(BIN / args[0]), *args[1:]], env=env, stdout=log, stderr=subprocess.STDOUT)
            )
        return processes[-1]

    try:
        link = start(
            "superlink",
            "flower-superlink",
            "--insecure",
            "--host=127.0.0.1",
            f"--port={port}",
            "--disable-runtime-dependency-installation",
        )
        wait_listening(port, link, folder / "superlink.log")
        for node in range(num_nodes):
            start(
                f"supernode{node}",
                "flower-supernode",
                "--insecure",
                f"--superlink=127.0.0.1:{port}",
                "--host=127.0.0.1",
                f"--port={free_port()}",
                f"--node-config=partition-id={node} num-partitions={num_nodes}",
            )
        (home / "config.toml").write_text(
            '[superlink]\ndefault = "loopback"\n\n'
            f'[superlink.loopback]\naddress = "127.0.0.1:{port}"\ninsecure = true\n'
        )
        yield env
    finally:
        left = stop(processes)
    assert not left, f"processes of the deployment outlived it: {sorted(left)}"


def logs(folder: Path) -> str:
    """The last lines of every process's log (for a failure message)."""
    return "\n".join(f"== {log.name}\n{log.read_text()[-2000:]}" for log in sorted(folder.glob("*.log")))


def test_the_app_project_is_valid_for_flower_and_its_run_config_is_the_spec(tmp_path):
    path = write_app(tmp_path, "cdp_mab", {"num_agents": 4, "horizon": 9}, 7, tmp_path / "run.pkl", "cdp", 9)
    config = tomllib.loads(path.read_text())
    assert validate_config(config, check_module=True, project_dir=tmp_path) == (True, [], [])
    run_config = config["tool"]["flwr"]["app"]["config"]
    assert spec_from_run_config(run_config) == FederationSpec(
        "cdp_mab", {"num_agents": 4, "horizon": 9}, 7, label="cdp"
    )
    assert (run_config["checkpoints"], run_config["result-path"]) == (9, str(tmp_path / "run.pkl"))


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"algorithm": "cdp_mab", "seed": 1}, r"needs \['env-kwargs'\]"),
        ({"algorithm": "cdp_mab", "env-kwargs": "[1]", "seed": 1}, "'env-kwargs' must be a JSON object"),
    ],
)
def test_a_bad_run_config_names_what_is_wrong(config, match):
    with pytest.raises(ValueError, match=match):
        spec_from_run_config(config)


def test_a_deployed_run_config_naming_a_dp_wrapper_spends_the_simulators_privacy(tmp_path):
    env = {**GOSSIP, "horizon": 30}
    wrappers = "laplace:epsilon=0.5,calibration=paper,n_agg=5"
    path = write_app(tmp_path, "fed_ucb", env, 4, label="algorithm", checkpoints=30, wrappers=wrappers)
    spec = spec_from_run_config(tomllib.loads(path.read_text())["tool"]["flwr"]["app"]["config"])
    flower, _ = run_local(spec, checkpoints=list(range(1, 31)))
    laplace = [lambda env: LaplaceMessageDP(env, epsilon=0.5, calibration="paper", n_agg=5)]
    expected, arms, _ = simulate("fed_ucb", env, 4, laplace)
    np.testing.assert_array_equal(flower.arms, arms)
    assert without_wall_time(flower.results.curves) == without_wall_time(expected.curves)
    assert without_wall_time(flower.results.agents) == without_wall_time(expected.agents)
    spent = [row["epsilon_spent"] for row in expected.agents if row["slot"] == 30]
    np.testing.assert_array_equal(flower.epsilon_spent, spent)
    assert min(spent) > 0 and expected.curves[-1]["peer_messages"] > 0


def test_run_config_wrappers_as_text_and_as_json_are_the_same_wrappers():
    text = wrappers_from_config('laplace:epsilon=0.5,kinds=["rel_mean"],strict=true; tree:epsilon=2')
    listed = '[{"name": "laplace", "kwargs": {"epsilon": 0.5, "kinds": ["rel_mean"], "strict": true}},'
    listed += ' {"name": "tree", "kwargs": {"epsilon": 2}}]'
    for made in (text, wrappers_from_config(listed)):
        assert [(w.func, w.keywords) for w in made] == [
            (LaplaceMessageDP, {"epsilon": 0.5, "kinds": ["rel_mean"], "strict": True}),
            (TreeMessageDP, {"epsilon": 2}),
        ]
    assert wrappers_from_config("") == wrappers_from_config(" ; ") == ()


@pytest.mark.parametrize(
    ("wrappers", "match"),
    [
        ("lapalce:epsilon=1", r"unknown wrapper 'lapalce' in the run config; the wrappers are \['gaussian', 'laplace'"),
        ("laplace:epsilon=1,calibraton=paper", r"the wrapper 'laplace' takes no keyword \['calibraton'\]"),
        ("laplace:epsilon", "a wrapper keyword must be written key=value, got 'epsilon'"),
        ("drops:prob=0.1", r"unknown wrapper 'drops' .* a fault wrapper cannot run on a Flower federation"),
        ('{"name": "laplace"}', "a wrapper keyword must be written key=value"),
        ('[{"name": "laplace", "args": [1]}]', 'a wrapper entry has a "name" and a "kwargs" object only'),
        ('[{"kwargs": {}}]', r'wrappers as JSON must be a list of \{"name"'),
        ("laplace:epsilon=-1", "epsilon"),  # the wrapper's own check, when the app is written
    ],
)
def test_a_bad_wrapper_in_a_run_config_is_named_when_the_app_is_written(tmp_path, wrappers, match):
    with pytest.raises(ValueError, match=match):
        write_app(tmp_path, "cdp_mab", {"num_agents": 4, "horizon": 9}, 7, wrappers=wrappers)


def test_the_cli_runs_a_federation_with_a_dp_wrapper(tmp_path):
    env = {**GOSSIP, "horizon": 12}
    args = ["flower", "fed_ucb", *[f"--set={key}={value}" for key, value in env.items()], "--engine", "local"]
    assert main([*args, "--wrappers", "laplace:epsilon=0.5", "--checkpoints", "1", "--out", str(tmp_path)]) == 0
    header, row = (tmp_path / "results.csv").read_text().splitlines()
    laplace = [lambda env: LaplaceMessageDP(env, epsilon=0.5)]
    expected = run("fed_ucb", env, [0], checkpoints=1, wrappers=laplace, reference=None).curves[-1]["epsilon_max"]
    assert float(dict(zip(header.split(","), row.split(","), strict=True))["epsilon_max"]) == expected > 0


def test_write_app_refuses_a_bad_checkpoint_count(tmp_path):
    with pytest.raises(ValueError, match="checkpoints"):
        write_app(tmp_path, "cdp_mab", {"num_agents": 4}, 7, checkpoints=0)


@pytest.mark.slow
def test_a_loopback_deployment_with_a_superlink_and_supernodes_matches_the_simulator(tmp_path):
    if not (BIN / "flower-superlink").exists():
        pytest.skip(f"flower-superlink is not installed beside {sys.executable}")
    with loopback_federation(tmp_path, NUM_NODES) as env:

        def deployed(spec, checkpoints, wrappers=""):
            result = tmp_path / f"run_{spec.algorithm}.pkl"
            app = write_app(
                tmp_path / f"app_{spec.algorithm}",
                spec.algorithm,
                spec.env_kwargs,
                spec.seed,
                result,
                label=spec.label or "",
                checkpoints=len(checkpoints),  # 1..T: T evenly spaced checkpoints
                wrappers=wrappers,
            ).parent
            started = subprocess.run(
                [str(BIN / "flwr"), "run", str(app), "loopback"],
                env=env,
                capture_output=True,
                text=True,
                timeout=STARTUP_TIMEOUT,
            )
            assert started.returncode == 0, started.stdout + started.stderr
            deadline = time.monotonic() + RUN_TIMEOUT
            while not result.exists():
                assert time.monotonic() < deadline, f"no result within {RUN_TIMEOUT} s\n{logs(tmp_path)}"
                time.sleep(1.0)
            return pickle.loads(result.read_bytes())  # noqa: S301 (written by this test's ServerApp)

        flower, _ = assert_same_run(
            "full_sharing_ucb", {"num_agents": NUM_NODES, "num_arms": 4, "horizon": 6}, seed=3, engine=deployed
        )
        # The same federation runs a second app whose run config names a DP wrapper: the clients privatize
        # their messages as the simulator's wrapper does, and spend the same privacy.
        # Fed_UCB's gossip (relayed by the server, charged as agent links) sends from the first slot.
        text = "laplace:epsilon=0.5,calibration=paper,n_agg=5"
        laplace = [lambda env: LaplaceMessageDP(env, epsilon=0.5, calibration="paper", n_agg=5)]
        gossip = {**GOSSIP, "num_agents": NUM_NODES, "horizon": 6}
        private, expected = assert_same_run(
            "fed_ucb", gossip, 4, laplace, engine=lambda spec, checkpoints: deployed(spec, checkpoints, text)
        )
    assert flower.ledger["messages"] > 0
    assert flower.rounds == 6 + 2  # the set-up round, one round per slot, the closing round
    spent = [row["epsilon_spent"] for row in expected.agents if row["slot"] == 6]
    np.testing.assert_array_equal(private.epsilon_spent, spent)
    assert min(spent) > 0 and private.ledger["messages"] > 0
