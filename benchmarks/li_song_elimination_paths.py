"""Elimination paths of two Li-Song structures on one seed: why a delayed run can leave the common-random-numbers path.

Under the reward tape (common random numbers) the n-th pull of (agent, arm) gets the n-th draw whatever the pull
is for, so the exploitation pulls of a delay shift the draws that later exploration reads. This script runs two
structures of a Li-Song scenario at the paper scale on one seed, records the number of active arms of the first
federation after every slot and prints, per structure, the active arms after each elimination with its slot and the
group regret at T. The Li-Song replication report quotes its output (``fedbandit_envs/bench/papers/li_song.py``).

Usage::

    python benchmarks/li_song_elimination_paths.py li_song/fig10_graphs --seed 13 --points 0 4   # CDP and the ring
    python benchmarks/li_song_elimination_paths.py li_song/fig11_hybrid --seed 8 --points 0 3    # cases 1 and 4
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from agents.li_song.engine import LiSongPopulation
from agents.li_song.runner import run
from fedbandit_envs.bench.scenarios import get


@contextmanager
def recording_active_arms(record: list[int]) -> Iterator[None]:
    """While open, every Li-Song population appends the active arms of its federation 0 after each slot."""
    observe = LiSongPopulation.observe

    def recorded(self: LiSongPopulation, feedback: Any) -> None:
        observe(self, feedback)
        record.append(int(np.asarray(self.states[0].active).sum()))

    LiSongPopulation.observe = recorded  # type: ignore[method-assign]
    try:
        yield
    finally:
        LiSongPopulation.observe = observe  # type: ignore[method-assign]


def elimination_path(scenario: str, point: int, seed: int) -> tuple[str, list[tuple[int, int]], float]:
    """(topology label, [(active arms, slot of the change)], group regret at T) of one point of ``scenario``."""
    spec = get(scenario).at_scale("paper")
    topology = spec.sweep["env.topology"][point]
    algorithm = spec.algorithms[next(iter(spec.algorithms))]
    record: list[int] = []
    with recording_active_arms(record):
        results = run(algorithm.factory(), {**spec.env_kwargs, "topology": topology}, [seed], checkpoints=2)
    active = np.array(record)
    changes = np.flatnonzero(np.diff(active)) + 1
    path = [(int(active[0]), 0)] + [(int(active[c]), int(c)) for c in changes]
    label = getattr(topology, "name", None) or str(topology)
    return label, path, max(row["group_regret"] for row in results.curves)


def main() -> None:
    """Print the elimination path of each point given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", help="a Li-Song scenario whose sweep is over env.topology")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--points", type=int, nargs="+", default=[0, 1], help="indices into the topology sweep")
    args = parser.parse_args()
    for point in args.points:
        label, path, regret = elimination_path(args.scenario, point, args.seed)
        print(f"{label}: active arms (slot) {path}; group regret at T {regret:.1f}", flush=True)


if __name__ == "__main__":
    main()
