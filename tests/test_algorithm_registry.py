"""The algorithm registry: self-registration, families, and third-party packages found by entry point."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.baselines import NoOptions, Random
from fedbandit_envs.algorithms import find_algorithm, make_algorithm, register_algorithm, registered_algorithms
from fedbandit_envs.run import run

MAB = {"num_agents": 3, "num_arms": 4, "horizon": 20}

LEARNER = '''
"""A third-party learner package: registers one algorithm on import."""

import numpy as np

from fedbandit_envs.algorithms import register_algorithm
from fedbandit_envs.core import Action
from fedbandit_envs.protocol import Population


class AlwaysFirst(Population):
    """Every agent pulls arm 0."""

    families = ("mab",)

    def reset(self, context):
        self.shape = (context.num_replicas, context.num_agents)

    def act(self, step):
        return Action(np.zeros(self.shape, np.int64))

    def observe(self, feedback):
        pass


register_algorithm("always_first", AlwaysFirst)
'''


def test_the_reference_algorithms_register_themselves_with_their_families():
    algorithms = {
        name: spec for name, spec in registered_algorithms().items() if spec.factory.__module__.startswith("agents.")
    }
    assert len(algorithms) == 23  # the reference agents (other tests may register their own learners)
    assert set(registered_algorithms("linear")) == {
        "async_linucb",
        "async_linucb_am",
        "sync_linucb",
        "one_linucb",
        "n_linucb",
    }
    assert set(registered_algorithms("procurement")) == {
        "solanki_nf",
        "solanki_fcb_sync",
        "solanki_fcb",
        "solanki_pfcb",
    }
    assert all(spec.families == ("mab",) for name, spec in algorithms.items() if name in registered_algorithms("mab"))
    assert isinstance(make_algorithm("random"), Random)


def test_registration_refuses_bad_entries():
    with pytest.raises(ValueError, match="already registered"):
        register_algorithm("random", lambda: None, "mab")
    register_algorithm("random", Random, config=NoOptions)  # the same entry again is harmless
    with pytest.raises(ValueError, match="without ':'"):
        register_algorithm("a:b", Random)
    with pytest.raises(TypeError, match="callable"):
        register_algorithm("not_callable", 3, "mab")
    with pytest.raises(ValueError, match="at least one family"):
        register_algorithm("familyless", lambda: None)
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        find_algorithm("nope")


@pytest.mark.parametrize(
    ("algorithm", "env", "families"),
    [
        ("random", {"env": "procurement", "num_agents": 2, "num_producers": 3, "horizon": 5}, "['mab']"),
        ("solanki_nf", {"env": "mab", **MAB}, "['procurement']"),
        ("async_linucb", {"env": "mab", **MAB}, "['linear']"),
        ("agents.solanki:PFCB", {"env": "linear", "horizon": 5}, "['procurement']"),
    ],
)
def test_an_algorithm_on_a_family_it_does_not_support_fails_at_once_naming_its_families(algorithm, env, families):
    with pytest.raises(ValueError, match=rf"supports the families \{families}, not '{env['env']}'"):
        run(algorithm, env, [0], checkpoints=1)


def test_a_third_party_package_registers_through_the_entry_point_group(tmp_path: Path):
    """A distribution declaring ``fedbandit_envs.algorithms`` is found by name in a fresh process and runs."""
    (tmp_path / "mylearner").mkdir()
    (tmp_path / "mylearner" / "__init__.py").write_text(LEARNER)
    info = tmp_path / "mylearner-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylearner\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fedbandit_envs.algorithms]\nmylearner = mylearner\n")
    script = textwrap.dedent(
        f"""
        from fedbandit_envs.algorithms import registered_algorithms
        from fedbandit_envs.run import run

        assert registered_algorithms()["always_first"].families == ("mab",)
        rows = run("always_first", {MAB!r}, [0, 1], checkpoints=1).curves
        print(sorted(row["seed"] for row in rows))
        """
    )
    path = os.pathsep.join([str(tmp_path), *sys.path])
    done = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1]"
    listing = subprocess.run(
        [sys.executable, "-m", "fedbandit_envs.cli", "list"],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
    )
    assert listing.returncode == 0, listing.stderr
    assert "always_first" in listing.stdout and "mylearner:AlwaysFirst" in listing.stdout
