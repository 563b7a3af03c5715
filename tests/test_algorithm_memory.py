"""The reference agents declare the memory of their large tables (``memory_parts``) and are refused before reset.

Absurd sizes (a million agents on a complete graph, agents^3 request tables) raise a ``MemoryLimitError`` naming
the algorithm, the total and its largest parts before :meth:`reset` allocates anything; the papers' largest
configurations pass under the default limit. (The run paths' check is tested in ``test_algorithm_configs``.)
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs.algorithms import make_algorithm
from fedbandit_envs.bench.catalogue import dubey as dubey_catalogue
from fedbandit_envs.bench.catalogue import li_song as li_song_catalogue
from fedbandit_envs.bench.catalogue import solanki as solanki_catalogue
from fedbandit_envs.core import AgentContext, reset_population
from fedbandit_envs.run.loop import build_env
from fedbandit_envs.validation import MemoryLimitError, memory_limit


def huge_context(num_agents: int, num_arms: int = 5, horizon: int = 1000) -> AgentContext:
    """A context of ``num_agents`` agents on a complete graph, with a stand-in topology that has only degrees.

    (A real topology of a million agents would itself need a terabyte; the agents read only the degrees.)
    """
    complete = SimpleNamespace(degree=lambda: np.array([num_agents - 1]))
    return AgentContext(num_agents, num_arms, horizon, (complete,), (0.0, 1.0), (np.random.SeedSequence(0),))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("algorithm", "options", "num_agents", "pattern"),
    [
        (
            "dubey_private_ucb",
            {},
            10**6,
            r"PrivateMultiAgentUCB \(1 replica\(s\) of 1000000 agents\) would need about 3\.95e\+05 GiB of memory "
            r"\(flooded copies of one slot, .* 2\.98e\+05 GiB, newest record per agent pair .* 8\.94e\+04 GiB",
        ),
        (
            "dubey_cooperative_ucb",
            {"gamma": 2},
            10**6,
            r"CooperativeUCB \(1 replica\(s\) of 1000000 agents\) .*flooded copies of one slot",
        ),
        (
            "dubey_byzantine_ucb",
            {"backend": "sorted"},
            10**6,
            r"ByzantineProofUCB \(1 replica\(s\) of 1000000 agents\) .*samples held",
        ),
        ("ddp_mab", {}, 10**5, r"DDPMAB \(1 replica\(s\) of 100000 agents\) .*GIS request candidates"),
        ("hdp_mab", {}, 10**6, r"HDPMAB \(1 replica\(s\) of 1000000 agents\) .*convergecast pending and collected"),
        ("cdp_mab", {}, 10**9, r"CDPMAB \(1 replica\(s\) of 1000000000 agents\) .*epoch and exploration sums"),
        ("solanki_pfcb", {}, 10**5, r"PFCB \(1 replica\(s\) of 100000 agents\) .*received messages"),
    ],
)
def test_an_absurd_size_is_refused_before_the_agents_allocate(algorithm, options, num_agents, pattern):
    population = make_algorithm(algorithm, **options)
    with pytest.raises(MemoryLimitError, match=pattern):
        reset_population(population, huge_context(num_agents))
    assert not hasattr(population, "context")  # reset never ran


def declared(algorithm: str, env: dict[str, Any], replicas: int, **options: Any) -> float:
    """The bytes ``algorithm`` declares for ``replicas`` replicas of the environment ``env`` (one graph repeated)."""
    population = make_algorithm(algorithm, **options)
    wrapped, _ = build_env(algorithm, population, env, ())
    core = wrapped.unwrapped.core
    core.reset([0])
    context = dataclasses.replace(
        core.context,
        topologies=core.context.topologies * replicas,
        agent_seeds=core.context.agent_seeds * replicas,
    )
    return sum(population.memory_parts(context).values())


DUBEY = {**dubey_catalogue.PAPER_ENV, "env": "mab", "topology": "erdos_renyi"}
DUBEY.pop("graph")
LI_SONG = {"env": "mab", "num_agents": 100, "num_arms": 100, "horizon": li_song_catalogue.PAPER_HORIZON}


@pytest.mark.parametrize(
    ("algorithm", "env", "replicas", "options"),
    [
        # the catalogue floods at most 2e6 copies per batch: 50 replicas on the complete graph, 2 at gamma = 3
        ("dubey_private_ucb", {**DUBEY, "topology": "complete", "topology_params": None}, 50, {}),
        ("dubey_cooperative_ucb", {**DUBEY, "topology": "complete", "topology_params": None}, 50, {}),
        ("dubey_byzantine_ucb", DUBEY, 2, {"gamma": 3}),
        ("dubey_private_ucb", DUBEY, 2, {"gamma": 3}),
        ("cdp_mab", {**LI_SONG, "topology": "server"}, 20, {}),
        ("ddp_mab", {**LI_SONG, "topology": "complete"}, 20, {}),
        ("hdp_mab", {**LI_SONG, "topology": li_song_catalogue.TABLE2["case1"]}, 20, {}),
        ("solanki_pfcb", {**solanki_catalogue.COMMON, "env": "procurement"}, 20, {}),
        ("solanki_fcb_sync", {**solanki_catalogue.COMMON, "env": "procurement"}, 20, {}),
    ],
)
def test_the_papers_scales_pass_the_default_limit(algorithm, env, replicas, options, monkeypatch):
    monkeypatch.delenv("FEDBANDIT_MEMORY_LIMIT_GIB", raising=False)
    assert 0 < declared(algorithm, env, replicas, **options) < memory_limit()
