"""The one run loop: play an algorithm on any family's environment for several seeds, into tidy results.

Two paths give identical trajectories for the same seeds (a test checks it on every family):

* **batched**: every seed is a replica of one core; the population acts on arrays with a replica axis.
  Used when the population supports batching.
* **pettingzoo**: one environment per seed, driven only through the public ParallelEnv API: act steps
  and message-only steps (the observation says which), actions with :class:`Message` objects.

The environment is chosen by ``env_kwargs["env"]`` (an environment name of a registered family; by
default the first family the algorithm supports). Wrappers (e.g. ``lambda env: LaplaceMessageDP(env,
epsilon=1.0)``) apply on both paths; when they account privacy, the tables get privacy columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from fedbandit_envs.algorithms import algorithm_name, supported_families
from fedbandit_envs.core import checked_action, checked_batches, play_slot, reset_population
from fedbandit_envs.families.registry import Family, family_of_env, find_family
from fedbandit_envs.identity import faithful_key
from fedbandit_envs.protocol import make_population
from fedbandit_envs.run.recorder import Recorder
from fedbandit_envs.run.results import Results, checkpoint_slots
from fedbandit_envs.seeding import explicit_seeds
from fedbandit_envs.validation import check_bool

__all__ = [
    "DEFAULT_CHECKPOINTS",
    "Wrapper",
    "build_env",
    "clear_reference_cache",
    "family_of",
    "run",
    "run_batched",
    "run_pettingzoo",
]

#: A function ``env -> wrapped env`` (DP, faults), applied in order.
Wrapper = Callable[[Any], Any]

#: Evenly spaced checkpoints of a run unless told otherwise.
DEFAULT_CHECKPOINTS = 20

#: The family played when neither ``env_kwargs["env"]`` nor the algorithm names one.
DEFAULT_FAMILY = "mab"


def build_env(
    algorithm: Any, population: Any, env_kwargs: Mapping[str, Any], wrappers: Sequence[Wrapper] = ()
) -> tuple[Any, Family]:
    """The environment of ``env_kwargs`` hosting the population's coordinator, wrapped in order, and its family.

    Fails at once when the algorithm declares families and the environment's is not one of them.
    """
    kwargs = dict(env_kwargs)
    if "coordinator" in kwargs:
        raise ValueError("env_kwargs must not contain 'coordinator': the algorithm provides its own")
    families = supported_families(algorithm, population)
    name = kwargs.pop("env", None)
    if name is None:
        family = find_family(families[0] if families else DEFAULT_FAMILY)
        name = family.default_env
    else:
        family = family_of_env(name)
    if families and family.name not in families:
        raise ValueError(
            f"{algorithm_name(algorithm)} supports the families {list(families)}, "
            f"not {family.name!r} (env {name!r}); choose an environment of a supported family"
        )
    env = family.envs[name](kwargs, population)
    for index, wrap in enumerate(wrappers):
        env = wrap(env)
        if getattr(env, "unwrapped", None) is None:
            raise TypeError(f"wrappers[{index}] ({wrap!r}) returned {type(env).__name__}, not an environment")
    return env, family


@dataclass(frozen=True)
class _Plan:
    """What both paths play: the arguments of :func:`run` that reach the loop."""

    algorithm: Any
    env_kwargs: Mapping[str, Any]
    seeds: Sequence[int]
    checkpoints: int | Sequence[int]
    progress: bool
    label: str | None
    wrappers: Sequence[Wrapper]

    def build(self) -> tuple[Any, Any, Recorder]:
        """A fresh population, its wrapped environment and a recorder of the environment's horizon."""
        population = make_population(self.algorithm)
        env, family = build_env(self.algorithm, population, self.env_kwargs, self.wrappers)
        slots = checkpoint_slots(env.unwrapped.core.horizon, self.checkpoints)
        return population, env, Recorder(family, self.label or algorithm_name(self.algorithm), self.seeds, slots)


def _play_batched(plan: _Plan) -> Results:
    """Play all seeds as replicas of one batched core."""
    population, env, recorder = plan.build()
    core = env.unwrapped.core
    core.reset(list(plan.seeds), hooks=env.message_hooks())
    reset_population(population, core.context)
    recorder.attach(core, population)
    for t in tqdm(range(core.horizon), disable=not plan.progress, desc=recorder.label, mininterval=0.5):
        play_slot(core, population)
        recorder.record(t + 1)
    return recorder.results


def _play_pettingzoo(plan: _Plan) -> Results:
    """Play each seed through the public PettingZoo API of the environment (act and message-only steps).

    The environment translates between its observations and the protocol's data (``step_from``,
    ``actions_from``, ``feedback_from``, ``phase_from``, ``message_actions``, ``inbox_from``; see
    :mod:`fedbandit_envs.env_base`); the run reads the core only to record results.
    """
    results = Results()
    for index, seed in enumerate(plan.seeds):
        population, env, recorder = plan.build()
        base = env.unwrapped
        observations, _ = env.reset(seed=seed)
        reset_population(population, base.context)
        recorder.attach(base.core, population)
        with tqdm(total=base.core.horizon, disable=not plan.progress, desc=f"seed {seed}", mininterval=0.5) as bar:
            step = None
            while env.agents:
                phase = base.phase_from(step, observations)
                if phase is None:
                    step = base.step_from(observations)
                    action = checked_action(population, population.act(step))
                    observations, rewards, *_ = env.step(base.actions_from(step, action))
                    population.observe(base.feedback_from(step, action, observations, rewards))
                else:
                    required = phase.required  # read before the population holds the phase
                    batches = checked_batches(population, phase, population.send(phase))
                    observations, *_ = env.step(base.message_actions(batches))
                    if batches or required:
                        population.receive(phase, base.inbox_from(observations))
                if base.pending_phase is None:
                    recorder.record(base.core.slot, replica_offset=index)
                    bar.update(1)
        results.extend(recorder.results)
    return results


def _with_reference(
    results: Results,
    family: Family,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int],
) -> None:
    """Add the family's reference columns: the reference algorithm's group regret and the ratio to it."""
    reference = family.reference
    if reference is None:
        return
    regret = _reference_regret(reference.algorithm, env_kwargs, seeds, checkpoints)
    for row in results.curves:
        denominator = regret[(row["seed"], row["slot"])]
        row[reference.column] = denominator
        row[reference.ratio] = row["group_regret"] / denominator if denominator > 0 else float("nan")


_REFERENCE_CACHE: dict[tuple, dict[tuple[int, int], float]] = {}


def clear_reference_cache() -> None:
    """Forget the cached reference runs."""
    _REFERENCE_CACHE.clear()


def _reference_regret(
    reference: str, env_kwargs: Mapping[str, Any], seeds: Sequence[int], checkpoints: int | Sequence[int]
) -> dict[tuple[int, int], float]:
    """Group regret of the reference algorithm per (seed, slot), cached per env point, seeds and checkpoints."""
    env_key = faithful_key(dict(env_kwargs))
    key = None
    if env_key is not None:
        points = tuple(checkpoints) if not isinstance(checkpoints, int) else checkpoints
        key = (reference, env_key, tuple(int(s) for s in seeds), points)
        if key in _REFERENCE_CACHE:
            return _REFERENCE_CACHE[key]
    results = run(reference, env_kwargs, seeds, checkpoints, reference=None)
    regret = {(row["seed"], row["slot"]): row["group_regret"] for row in results.curves}
    if key is not None:
        _REFERENCE_CACHE[key] = regret
    return regret


#: ``run(reference=FAMILY_REFERENCE)`` compares with the family's reference algorithm (if it has one).
FAMILY_REFERENCE = "family"


def run(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = DEFAULT_CHECKPOINTS,
    batched: bool | None = None,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
    *,
    reference: str | None = FAMILY_REFERENCE,
) -> Results:
    """Play ``algorithm`` on the environment of ``env_kwargs`` for every seed.

    Args:
        algorithm: a registered name (:func:`~fedbandit_envs.algorithms.registered_algorithms`),
            ``"module:Class"``, or a population class/factory.
        env_kwargs: keyword arguments of the environment, plus optionally ``"env"``: the name of a
            registered family's environment (``"mab"``, ``"linear"``, ``"replay"``, ``"replay_log"``,
            ``"procurement"``; default: the algorithm's first family's default environment). Not
            ``coordinator``: the algorithm brings its own.
        seeds: one run per seed, any sequence of distinct non-negative ints (``[0, 1]``, ``range(100, 110)``);
            the ``seed`` column holds these values; run ``b`` is identical whichever path is taken.
        checkpoints: number of evenly spaced checkpoints, or explicit slot counts.
        batched: force the batched (True) or PettingZoo (False) path; default: batched when supported.
        progress: show a progress bar.
        label: the ``algorithm`` column (default: the algorithm's name).
        wrappers: functions ``env -> wrapped env`` applied in order (DP, faults).
        reference: ``"family"`` adds the family's reference columns (procurement: the non-federated
            baseline's ``nf_group_regret`` and the ratio ``frr``), cached per point; ``None`` adds none.
    """
    seeds = explicit_seeds(seeds)
    if not isinstance(env_kwargs, Mapping):
        raise TypeError(f"env_kwargs must be a mapping of keyword arguments, got {type(env_kwargs).__name__}")
    if batched is not None:
        batched = check_bool("batched", batched)
    if label is not None and not isinstance(label, str):
        raise TypeError(f"label must be a string (the algorithm column), got {type(label).__name__}")
    if callable(wrappers) or not isinstance(wrappers, Sequence):
        raise TypeError(f"wrappers must be a sequence of functions env -> wrapped env, got {type(wrappers).__name__}")
    if reference not in (FAMILY_REFERENCE, None):
        raise ValueError(f"reference must be {FAMILY_REFERENCE!r} or None, got {reference!r}")
    probe = make_population(algorithm)
    if batched is None:
        batched = bool(getattr(probe, "supports_batching", False))
    play = _play_batched if batched else _play_pettingzoo
    results = play(_Plan(algorithm, env_kwargs, seeds, checkpoints, progress, label, wrappers))
    if reference is not None:
        _with_reference(results, family_of(algorithm, probe, env_kwargs), env_kwargs, seeds, checkpoints)
    return results


#: :func:`run` on the batched path (all seeds replicas of one core), without reference columns.
run_batched = functools.partial(run, batched=True, reference=None)
#: :func:`run` through the public PettingZoo API (one environment per seed), without reference columns.
run_pettingzoo = functools.partial(run, batched=False, reference=None)


def family_of(algorithm: Any, population: Any, env_kwargs: Mapping[str, Any]) -> Family:
    """The family ``env_kwargs`` (or the algorithm's declaration) selects, without building an environment."""
    name = env_kwargs.get("env")
    if name is not None:
        return family_of_env(name)
    families = supported_families(algorithm, population)
    return find_family(families[0] if families else DEFAULT_FAMILY)
