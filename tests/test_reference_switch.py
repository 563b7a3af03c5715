"""The reference-mode switch: on and off, nesting, restoring after an error, the environment variable."""

import os
import subprocess
import sys

import pytest

from fedbandit_envs.reference import reference_active, reference_mode


def test_switch_nests_and_restores():
    assert reference_active() is False
    with reference_mode():
        assert reference_active() is True
        with reference_mode(False):
            assert reference_active() is False
        assert reference_active() is True
    assert reference_active() is False


def test_switch_restores_after_an_error():
    with pytest.raises(RuntimeError), reference_mode():
        raise RuntimeError("inside")
    assert reference_active() is False


def test_switch_refuses_a_non_bool():
    with pytest.raises(TypeError, match="active must be True or False"), reference_mode(1):  # type: ignore[arg-type]
        pass


@pytest.mark.parametrize(("value", "expected"), [("1", "True"), ("0", "False"), ("", "False"), ("yes", "True")])
def test_environment_variable_sets_the_start(value, expected):
    env = {**os.environ, "FEDBANDIT_REFERENCE": value}
    code = "from fedbandit_envs.reference import reference_active; print(reference_active())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected
