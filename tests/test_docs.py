"""Documentation that runs: every Python block of the README, every example, the CLI main job."""

import re
import runpy
from pathlib import Path

import pytest

from fedbandit_envs.cli import main

ROOT = Path(__file__).resolve().parents[1]
README_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_readme_has_python_blocks():
    assert len(README_BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(README_BLOCKS)))
def test_readme_block_runs(index, tmp_path, monkeypatch):
    if "stable_baselines3" in README_BLOCKS[index]:
        pytest.importorskip("stable_baselines3")
    monkeypatch.chdir(tmp_path)
    exec(compile(README_BLOCKS[index], f"README block {index}", "exec"), {"__name__": "__readme__"})


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEDBANDIT_EXAMPLE_SCALE", "tiny")
    runpy.run_path(str(path), run_name="__main__")


def test_cli_run_writes_table_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code = main(
        [
            "run",
            "--agents",
            "3",
            "--arms",
            "4",
            "--horizon",
            "50",
            "--seeds",
            "2",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--checkpoints",
            "5",
        ]
    )
    assert code == 0
    header, *rows = (tmp_path / "results.csv").read_text().splitlines()
    assert header.startswith("algorithm,seed,slot,group_regret")
    assert len(rows) == 3 * 2 * 5  # algorithms x seeds x checkpoints
    assert (tmp_path / "regret.png").stat().st_size > 1000
    assert "full_sharing_ucb" in capsys.readouterr().out


def test_cli_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "fedbandit/FederatedMAB-v0" in out and "independent_ucb1" in out


def test_readme_lists_every_registered_id():
    from fedbandit_envs.registration import GYMNASIUM_ENVS, PARALLEL_ENVS

    readme = (ROOT / "README.md").read_text()
    missing = [env_id for env_id in [*PARALLEL_ENVS, *GYMNASIUM_ENVS] if f"`{env_id}`" not in readme]
    assert not missing, f"add these ids to the README table: {missing}"
