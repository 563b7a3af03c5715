"""The jobs progress bar of the sweep backends: jobs done / total, elapsed time and time left, drawn here."""

from __future__ import annotations

import re

import pytest

from fedbandit_envs.bench import backends
from fedbandit_envs.bench.backends import PoolBackend, RayBackend
from fedbandit_envs.bench.jobs import expand, resolve_scenario
from fedbandit_envs.bench.sweep import run_sweep

SMALL = {"horizon": 40, "seeds": 3, "checkpoints": 2}


def frames(stderr: str, label: str) -> list[str]:
    """The bar's frames in captured stderr (tqdm separates redraws with carriage returns)."""
    return [frame.strip() for frame in re.split(r"[\r\n]", stderr) if frame.strip().startswith(label)]


def bar_counts(frame: str) -> tuple[int, int]:
    """``(done, total)`` of a frame ``label: 33%|...| 1/3 [00:02<00:05, 2.60s/job]``."""
    done, total = re.search(r"\| (\d+)/(\d+) \[", frame).groups()
    return int(done), int(total)


def test_pool_bar_counts_every_job_and_redraws_while_waiting(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(backends, "REFRESH_SECONDS", 0.001)  # redraw at every wait, before any job can finish
    run_sweep("suite/baselines", tmp_path, overrides=SMALL, backend=PoolBackend(2), seeds_per_job=1, progress=True)
    drawn = frames(capsys.readouterr().err, "suite/baselines:")
    counts = [bar_counts(frame) for frame in drawn]
    assert counts[-1] == (9, 9)  # 3 algorithms x 3 seeds, one seed per job
    assert [done for done, _ in counts] == sorted(done for done, _ in counts)  # never goes back
    assert counts.count((0, 9)) >= 2  # the first frame and at least one redraw while the first jobs ran
    assert re.search(r"9/9 \[\d\d:\d\d<00:00", drawn[-1])  # elapsed time, then no time left


def test_pool_without_progress_draws_nothing(tmp_path, capsys):
    run_sweep("suite/baselines", tmp_path, overrides=SMALL, backend=PoolBackend(2), progress=False)
    assert frames(capsys.readouterr().err, "suite/baselines:") == []


def test_backend_run_draws_the_bar_with_its_label(capsys):
    jobs = expand(resolve_scenario("suite/baselines", "ci", SMALL, None), 3)
    results = list(PoolBackend(2).run(jobs, progress=True, label="three jobs"))
    assert len(results) == 3
    assert bar_counts(frames(capsys.readouterr().err, "three jobs:")[-1]) == (3, 3)


@pytest.mark.slow
def test_ray_bar_counts_every_job(tmp_path, capsys):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep("suite/baselines", tmp_path, overrides=SMALL, backend=RayBackend(), seeds_per_job=1, progress=True)
    finally:
        ray.shutdown()
    assert bar_counts(frames(capsys.readouterr().err, "suite/baselines:")[-1]) == (9, 9)
