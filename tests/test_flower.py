"""The Flower adapter: a federation on Flower's simulation engine gives the simulator's run, slot for slot."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # before flwr is first imported
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
pytest.importorskip("flwr")

from fedbandit_envs.algorithms import make_algorithm  # noqa: E402
from fedbandit_envs.flower import FederationSpec, run_flower  # noqa: E402
from fedbandit_envs.run import run  # noqa: E402


class Recording:
    """A population that records the arms and rewards of every slot (for the slot-for-slot comparison)."""

    def __init__(self, algorithm: str) -> None:
        self.inner = make_algorithm(algorithm)
        self.arms: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def observe(self, feedback) -> None:
        self.arms.append(feedback.arms[0].copy())
        self.rewards.append(feedback.rewards[0].copy())
        self.inner.observe(feedback)


def simulate(algorithm: str, env_kwargs: dict, seed: int, wrappers=()):
    """The simulator's PettingZoo path: results at every slot, and the arms and rewards of every slot."""
    made: list[Recording] = []

    def factory() -> Recording:
        made.append(Recording(algorithm))
        return made[-1]

    horizon = env_kwargs["horizon"]
    results = run(
        factory,
        env_kwargs,
        [seed],
        checkpoints=list(range(1, horizon + 1)),
        batched=False,
        label=algorithm,
        wrappers=wrappers,
        reference=None,
    )
    return results, np.array(made[-1].arms), np.array(made[-1].rewards)


def without_wall_time(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "wall_time"} for row in rows]


def assert_same_run(algorithm: str, env_kwargs: dict, seed: int, wrappers=()) -> None:
    horizon = env_kwargs["horizon"]
    expected, arms, rewards = simulate(algorithm, env_kwargs, seed, wrappers)
    flower = run_flower(FederationSpec(algorithm, env_kwargs, seed, wrappers), checkpoints=list(range(1, horizon + 1)))
    np.testing.assert_array_equal(flower.arms, arms)
    np.testing.assert_array_equal(flower.rewards, rewards)
    np.testing.assert_array_equal(flower.referee_rewards, rewards)
    assert without_wall_time(flower.results.curves) == without_wall_time(expected.curves)
    assert without_wall_time(flower.results.agents) == without_wall_time(expected.agents)


def test_full_sharing_ucb_matches_the_simulator():
    assert_same_run("full_sharing_ucb", {"num_agents": 3, "num_arms": 4, "horizon": 8}, seed=3)
