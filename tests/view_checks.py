"""Checks shared by the tests of the single-agent views (plain and linear)."""

import pytest


def assert_step_is_checked(env, num_arms: int) -> None:
    """``env.step`` refuses to run before ``reset``, an arm out of range and a non-integer arm."""
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="out of range"):
        env.step(num_arms)
    with pytest.raises(TypeError, match="integer arm"):
        env.step(0.5)
