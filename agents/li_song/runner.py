"""Run Li-Song agents with the DP wrapper's epsilon and the instance's gap bound into them.

The schedules S(r) and C(r) need epsilon, and the capped schedule needs the gap Delta (D6), but a
population cannot see the wrapper or the instance. :func:`run` reads them and hands them over, then
calls :func:`fedbandit_envs.run.run`. It has the signature of that function, so scenarios use it
as their ``runner`` and sweep the wrapper's epsilon (``"wrapper.epsilon"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents.li_song.engine import LiSongPopulation
from fedbandit_envs.algorithms import algorithm_name, make_algorithm
from fedbandit_envs.families.mab.core import FederatedMABCore
from fedbandit_envs.run import DEFAULT_CHECKPOINTS, Results, build_env
from fedbandit_envs.run import run as run_algorithm

__all__ = ["add_round_columns", "check", "dp_privatizer", "oracle_gap", "run"]


def dp_privatizer(env: Any) -> Any | None:
    """The message privatizer of the outermost DP wrapper around ``env`` (None without one)."""
    layer = env
    while layer is not None:
        privatizer = getattr(layer, "privatizer", None)
        if privatizer is not None and hasattr(privatizer, "calibration"):
            return privatizer
        layer = getattr(layer, "env", None)
    return None


def oracle_gap(env: Any, seeds: Sequence[int]) -> float:
    """The minimum gap Delta of the instance of every seed (D6 ``"oracle"``); they must agree."""
    core = FederatedMABCore(env.unwrapped.config)  # no coordinator: it would need the gap already
    core.reset(list(seeds))
    gaps = {instance.min_gap for instance in core.instances}
    if len(gaps) != 1:
        raise ValueError(
            "delta_schedule_base='oracle' needs the same instance in every run: fix it with instance_seed, "
            "or pass delta_schedule_base=<float>"
        )
    return gaps.pop()


def run(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = DEFAULT_CHECKPOINTS,
    **options: Any,
) -> Results:
    """:func:`fedbandit_envs.run.run` with Li-Song agents bound to the DP wrapper and the instance.

    A population with ``noise="wrapper"`` takes the wrapper's epsilon and calibration (the wrapper's
    ``n_agg`` must be the agents averaged per round under the paper calibration); a capped schedule
    with ``delta_schedule_base="oracle"`` takes the instance's minimum gap. Other algorithms run unchanged.
    ``options``: ``batched``, ``progress``, ``label``, ``wrappers`` as in :func:`fedbandit_envs.run.run`.
    """
    probe = make_algorithm(algorithm)
    if not isinstance(probe, LiSongPopulation):
        return run_algorithm(algorithm, env_kwargs, seeds, checkpoints, **options)
    env, _ = build_env(algorithm, probe, env_kwargs, options.get("wrappers", ()))
    binding = _binding(probe, env, seeds)

    created: list[LiSongPopulation] = []

    def factory() -> LiSongPopulation:
        population = make_algorithm(algorithm)
        population.bind(**binding)
        created.append(population)
        return population

    options["label"] = options.get("label") or algorithm_name(algorithm)
    results = run_algorithm(factory, env_kwargs, seeds, checkpoints, **options)
    add_round_columns(results, [p for p in created if hasattr(p, "context")], seeds)
    return results


def _binding(probe: LiSongPopulation, env: Any, seeds: Sequence[int]) -> dict[str, Any]:
    """What :func:`run` binds into every population: the agents, the gap if needed, the DP wrapper's settings."""
    needs_gap = probe.config.rounds is not None and probe.config.delta_schedule_base == "oracle"
    binding = {
        "num_agents": env.unwrapped.config.num_agents,
        "delta": oracle_gap(env, seeds) if needs_gap else None,
    }
    privatizer = dp_privatizer(env)
    if privatizer is not None:
        binding.update(epsilon=privatizer.epsilon, calibration=privatizer.calibration, n_agg=privatizer.n_agg)
    return binding


def check(algorithm: Any, env: Any, seeds: Sequence[int]) -> None:
    """The sweep's pre-check of a cell (``run.check``): bind a population to ``env`` as :func:`run` would.

    Raises ValueError where :func:`run` would, e.g. for a DP wrapper whose ``n_agg`` is not the agents averaged per
    round; nothing is played.
    """
    probe = make_algorithm(algorithm)
    if isinstance(probe, LiSongPopulation):
        probe.bind(**_binding(probe, env, seeds))


run.check = check  # type: ignore[attr-defined]  # read by the sweep's pre-check (fedbandit_envs.bench.jobs)


def add_round_columns(results: Results, populations: Sequence[LiSongPopulation], seeds: Sequence[int]) -> None:
    """Add ``rounds_done`` and ``delay_slots`` (completed by each checkpoint) to every ``curves`` row.

    ``populations`` are the ones that ran, in order: one batched population (replica b = seeds[b]) or
    one single-replica population per seed.
    """
    runs: dict[int, tuple[LiSongPopulation, int]] = {}
    for population in populations:
        for replica in range(population.context.num_replicas):
            runs[seeds[len(runs)]] = (population, replica)
    for row in results.curves:
        population, replica = runs[row["seed"]]
        row["rounds_done"], row["delay_slots"] = population.completed(replica, row["slot"])
