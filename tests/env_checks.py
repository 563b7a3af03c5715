"""Environment checkers shared by the test modules: Gymnasium's and SB3's, with every warning an error."""

import warnings
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env


def gymnasium_check_env_without_warnings(env: Any) -> None:
    """Gymnasium's ``check_env`` on the unwrapped ``env``; any warning it raises fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)


def sb3_check_env_without_warnings(env: Any) -> None:
    """Stable-Baselines3's ``check_env`` on ``env`` (the test is skipped without SB3); any warning fails the test."""
    checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checker.check_env(env, warn=True)
