"""Jobs of a sweep: what one unit of work is, how a scenario expands into jobs, and how a job runs.

A **cell** is one (sweep point, algorithm) pair of a scenario, identified by :func:`cell_id` (a hash of
everything that determines its results). A **job** runs some seeds of one cell through the scenario's
runner (``load_object(scenario.runner)``, signature of :func:`fedbandit_envs.run.run`), which plays
all the job's seeds as batched replicas when the algorithm supports it. A job carries plain data only
(import paths, keywords, seeds), so it pickles to a worker process or a Ray task.

Result rows get the columns ``scenario``, ``algorithm``, one column per sweep key named after its
keyword (``"wrapper.epsilon"`` -> ``epsilon``), then the runner's columns (``seed``, ``slot``, regret,
ledger totals, epsilon spent, ``wall_time``).
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

import numpy as np

from fedbandit_envs.algorithms import load_object, resolve_factory
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario, WrapperSpec, get, split_point
from fedbandit_envs.identity import UnfaithfulValue, faithful_form
from fedbandit_envs.run import Results, checkpoint_slots
from fedbandit_envs.seeding import SeedsLike, parse_seeds, resolve_seeds
from fedbandit_envs.topology import Topology

#: Columns every result row starts with (sweep parameters must not reuse them).
KEY_COLUMNS = ("scenario", "algorithm", "seed", "slot", "agent")
#: Override keys that are not environment keywords (see :meth:`Scenario.at_scale`).
SCENARIO_KEYS = ("seeds", "checkpoints", "sweep")


def to_json(value: Any) -> Any:
    """A JSON-friendly form of ``value``, as result rows and ``config.json`` hold it.

    Numpy scalars and arrays become Python numbers and lists, algorithm/wrapper specs and
    ``functools.partial`` objects dicts, functions and classes ``"module:qualname"``, a topology its
    ``repr``; anything else its ``repr`` (for objects with the default repr this includes the address).
    A cell's identity (:func:`cell_id`) is stricter: it holds a topology's structure and refuses functions
    their name does not identify.
    """
    if isinstance(value, AlgorithmSpec | WrapperSpec):
        return {"path": value.path, "kwargs": dict(value.kwargs)}
    if isinstance(value, Topology):
        return repr(value)
    try:
        return faithful_form(value)
    except UnfaithfulValue:
        if callable(value) and hasattr(value, "__qualname__"):
            return f"{value.__module__}:{value.__qualname__}"
        return repr(value)


def _identity_form(value: Any) -> Any:
    """The form of ``value`` in a cell's identity (a function without a faithful form is refused).

    That is :func:`faithful_form`, specs as :func:`to_json` gives them, and other objects without a faithful
    form their ``repr``.
    """
    if isinstance(value, AlgorithmSpec | WrapperSpec):
        return to_json(value)
    try:
        return faithful_form(value)
    except UnfaithfulValue:
        if callable(value):
            raise
        return repr(value)


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, :func:`to_json` for other objects) used for hashing and configs."""
    return json.dumps(value, sort_keys=True, default=to_json)


def param_columns(scenario: Scenario) -> dict[str, str]:
    """Sweep key -> result column (the keyword after the dot); raises ValueError on a clash."""
    columns: dict[str, str] = {}
    for key in scenario.sweep:
        column = key.partition(".")[2]
        if column in KEY_COLUMNS:
            raise ValueError(f"sweep key {key!r} of {scenario.name!r} would overwrite the {column!r} column; rename it")
        clash = [other for other, name in columns.items() if name == column]
        if clash:
            raise ValueError(
                f"sweep keys {clash[0]!r} and {key!r} of {scenario.name!r} both map to the result column {column!r}; "
                "sweep only one of them"
            )
        columns[key] = column
    return columns


def resolve_scenario(
    scenario: Scenario | str,
    scale: str = "ci",
    overrides: Mapping[str, Any] | None = None,
    seeds: SeedsLike | None = None,
) -> Scenario:
    """The scenario at ``scale``, with ``overrides`` (same keys as a scale entry) and a seed count applied.

    Args:
        scenario: a :class:`Scenario` or the name of a registered one.
        scale: ``"ci"`` or ``"paper"``.
        overrides: environment keywords and/or ``seeds`` / ``checkpoints`` / ``sweep``, applied on top of the scale.
        seeds: the seeds, overriding the scenario's: a count ``n`` (runs ``0 .. n-1``), explicit seeds
            (``[100, 101]``, ``range(100, 110)``) or text (``"100:110"``, ``"3,7,9"``).

    Raises:
        ValueError: among others, ``seeds`` given together with ``overrides["seeds"]`` (one would be ignored).
    """
    if isinstance(scenario, str):
        scenario = get(scenario)
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario or a registered name, got {scenario!r}")
    if seeds is not None and overrides and "seeds" in overrides:
        raise ValueError(
            f"--seeds {seeds} and --set seeds={overrides['seeds']} both give the seeds (in Python: seeds= and "
            "overrides['seeds']); give only one of them"
        )
    if overrides:
        for key in overrides:
            target, dot, kwarg = str(key).partition(".")
            if dot and target in ("alg", "wrapper"):
                raise ValueError(
                    f"--set {key}: {'an algorithm' if target == 'alg' else 'a wrapper'} keyword is set through the "
                    f"sweep, e.g. --set 'sweep={{\"{key}\": [{overrides[key]!r}]}}' (--set sets environment "
                    "keywords, seeds, checkpoints and the sweep)"
                )
        if "sweep" in overrides:
            _check_sweep(overrides["sweep"])
        merged = {**scenario.scales.get(scale, {}), **overrides}
        scenario = replace(scenario, scales={**scenario.scales, scale: merged})
    scenario = scenario.at_scale(scale)
    if seeds is not None:
        scenario = replace(scenario, seeds=seeds)
    chosen = parse_seeds(scenario.seeds) if isinstance(scenario.seeds, str) else scenario.seeds
    resolve_seeds(chosen)  # a clear error for a bad count or seed list (at most MAX_SEEDS runs)
    if not isinstance(chosen, int | np.integer):
        chosen = tuple(int(seed) for seed in chosen)
    scenario = replace(scenario, seeds=chosen)
    _check_checkpoints(scenario.checkpoints)
    _check_sweep(scenario.sweep)
    param_columns(scenario)
    return scenario


def _is_int(value: Any) -> TypeGuard[int | np.integer]:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _check_checkpoints(checkpoints: Any) -> None:
    """A count >= 1 or a non-empty list of slot numbers (their range is checked against each cell's horizon)."""
    listed = isinstance(checkpoints, list | tuple) and checkpoints and all(_is_int(slot) for slot in checkpoints)
    if not (listed or (_is_int(checkpoints) and checkpoints >= 1)):
        raise ValueError(f"checkpoints must be a count >= 1 or a list of slots such as [10, 100], got {checkpoints!r}")


def _check_sweep(sweep: Any) -> None:
    """A sweep maps keys to non-empty lists of values (the keys' form is checked by :class:`Scenario`)."""
    if not isinstance(sweep, Mapping):
        raise ValueError(f'sweep must map keys to lists of values, e.g. {{"env.c2": [0.5, 1]}}, got {sweep!r}')
    for key, values in sweep.items():
        if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"sweep values of {key!r} must be a non-empty list, e.g. [1, 2], got {values!r}")


@dataclass(frozen=True)
class Job:
    """Some seeds of one cell (a sweep point and an algorithm), with everything needed to run them.

    Attributes:
        scenario: the scenario's name.
        algorithm: the algorithm's label (the ``algorithm`` column).
        spec: the algorithm's import path and constructor keywords.
        point: sweep key -> value of this job's point.
        seeds: the seeds run, as replicas of one batched run when the algorithm supports it.
        env_kwargs: environment keywords before the point's ``env.*`` values are applied.
        wrappers: wrappers applied to the environment, in order.
        checkpoints: checkpoints per run (a count or explicit slots).
        runner: ``"module:function"`` with the signature of :func:`fedbandit_envs.run.run`.
        cell: the cell's id (:func:`cell_id`).
        params: result column -> value of this job's point (the row prefix).
    """

    scenario: str
    algorithm: str
    spec: AlgorithmSpec
    point: Mapping[str, Any]
    seeds: tuple[int, ...]
    env_kwargs: Mapping[str, Any]
    wrappers: tuple[WrapperSpec, ...] = ()
    checkpoints: Any = 20
    runner: str = "fedbandit_envs.run:run"
    cell: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line naming the job: scenario, algorithm, point and seeds."""
        point = ", ".join(f"{k}={v!r}" for k, v in self.point.items())
        return f"{self.scenario} / {self.algorithm}" + (f" [{point}]" if point else "") + f" seeds {list(self.seeds)}"


@dataclass(frozen=True)
class JobResult:
    """The rows a job produced and how long the simulation itself took (``sim_time``, seconds)."""

    job: Job
    results: Results
    sim_time: float


def import_targets(scenario: Scenario) -> None:
    """Import the scenario's runner, algorithms and wrappers, and check the algorithms' keywords at every point.

    A bad path or keyword fails before any job runs (:meth:`Scenario.check_algorithms`).

    Importing in the parent process also lets forked pool workers share the imported modules.
    """
    targets: list[tuple[str, str, Callable[[str], object]]] = [("runner", scenario.runner, load_object)]
    targets += [(f"algorithm {label!r}", s.path, resolve_factory) for label, s in scenario.algorithms.items()]
    targets += [(f"wrapper {spec.path!r}", spec.path, load_object) for spec in scenario.wrappers]
    for what, path, resolve in targets:
        try:
            resolve(path)
        except (ImportError, AttributeError, ValueError) as error:
            raise ValueError(
                f"{what} of scenario {scenario.name!r}: cannot import {path!r} ({error}); use a registered "
                f"algorithm name (fedbandit list) or an importable 'package.module:Attribute'"
            ) from error
    scenario.check_algorithms()


def cell_id(scenario: Scenario, label: str, point: Mapping[str, Any]) -> str:
    """A 16-hex-digit hash of everything that determines a cell's results (not its seeds).

    Raises:
        ValueError: a setting is a function its ``"module:qualname"`` does not identify (a lambda, a closure,
            a bound method, a partial of one): a later sweep could not tell it from another one of that name.
    """
    identity = {
        "scenario": scenario.name,
        "runner": scenario.runner,
        "algorithm": label,
        "spec": scenario.algorithms[label],
        "point": dict(point),
        "env": dict(scenario.env_kwargs),
        "wrappers": list(scenario.wrappers),
        "checkpoints": scenario.checkpoints,
    }
    try:
        text = json.dumps(identity, sort_keys=True, default=_identity_form)
    except UnfaithfulValue as error:
        raise ValueError(
            f"{_unfaithful_setting(identity)} of scenario {scenario.name!r}: {error} (a sweep reuses stored runs "
            "by their settings, so it must tell every function apart from any other)"
        ) from error
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _unfaithful_setting(identity: Mapping[str, Any]) -> str:
    """Which setting of a cell identity holds a function without a faithful form (for the error message)."""
    names = {"point": "sweep value of {!r}", "env": "environment keyword {!r}", "spec": "algorithm {!r}"}
    for section, value in identity.items():
        entries = value.items() if isinstance(value, dict) else [(identity["algorithm"], value)]
        for key, item in entries:
            try:
                json.dumps(item, default=_identity_form)
            except UnfaithfulValue:
                return names.get(section, section + " of {!r}").format(key)
    return "a setting"


def expand(scenario: Scenario, seeds_per_job: int | None = None) -> list[Job]:
    """Every job of a (resolved) scenario: points x algorithms, each split into chunks of ``seeds_per_job`` seeds.

    The order is canonical (points in sweep order, then algorithms in the scenario's order, then seed
    chunks); results tables follow it. ``seeds_per_job=None`` runs all seeds of a cell in one job.
    """
    if seeds_per_job is not None and (isinstance(seeds_per_job, bool) or seeds_per_job < 1):
        raise ValueError(
            f"seeds_per_job must be a positive integer or None (all seeds in one job), got {seeds_per_job}"
        )
    columns = param_columns(scenario)
    seeds = scenario.seed_list()
    chunk = seeds_per_job or len(seeds)
    jobs = []
    for point in scenario.points():
        params = {columns[key]: value for key, value in point.items()}
        for label, spec in scenario.algorithms.items():
            cell = cell_id(scenario, label, point)
            for start in range(0, len(seeds), chunk):
                jobs.append(
                    Job(
                        scenario=scenario.name,
                        algorithm=label,
                        spec=spec,
                        point=point,
                        seeds=seeds[start : start + chunk],
                        env_kwargs=dict(scenario.env_kwargs),
                        wrappers=tuple(scenario.wrappers),
                        checkpoints=scenario.checkpoints,
                        runner=scenario.runner,
                        cell=cell,
                        params=params,
                    )
                )
    return jobs


def pending(jobs: Sequence[Job], finished: Mapping[str, Collection[int]]) -> list[Job]:
    """The jobs with the seeds already ``finished`` (cell id -> seeds) removed; fully finished jobs dropped."""
    remaining = []
    for job in jobs:
        done = finished.get(job.cell, ())
        seeds = tuple(seed for seed in job.seeds if seed not in done)
        if seeds:
            remaining.append(replace(job, seeds=seeds))
    return remaining


def missing_seeds(results: Results, seeds: Sequence[int]) -> dict[str, list[int]]:
    """Table -> seeds of ``seeds`` without rows in it ({} when complete).

    Every seed needs curves rows; every other table needs rows for every seed or for none (a runner may
    omit a table, never part of one).
    """
    lacking = {}
    for table in ("curves", "agents"):
        present = {row["seed"] for row in getattr(results, table)}
        absent = [seed for seed in seeds if seed not in present]
        if absent and (table == "curves" or len(absent) < len(seeds)):
            lacking[table] = absent
    return lacking


def _runner_call(job: Job, progress: bool, extra_wrappers: Sequence[Any] = ()) -> Results:
    """Call the job's runner on its algorithm, environment keywords, seeds, checkpoints and wrappers."""
    runner = load_object(job.runner)
    parts = split_point(job.point)
    algorithm = _algorithm(job)
    wrappers = [wrapper.factory(parts["wrapper"]) for wrapper in job.wrappers]
    env_kwargs = {**job.env_kwargs, **parts["env"]}
    return runner(
        algorithm,
        env_kwargs,
        list(job.seeds),
        job.checkpoints,
        progress=progress,
        label=job.algorithm,
        wrappers=[*wrappers, *extra_wrappers],
    )


def _algorithm(job: Job) -> Any:
    """The algorithm the job's runner receives: the registered name or path with the cell's ``alg.*`` keywords."""
    return job.spec.factory(split_point(job.point)["alg"])


def _runner_check(job: Job, env: Any) -> None:
    """Call the ``check`` attribute of the job's runner, if it has one, on the algorithm, built env and seeds.

    A runner that prepares more than the environment before it plays (Li and Song's binds the DP wrapper's
    epsilon and ``n_agg`` into its agents) declares ``check(algorithm, env, seeds)``, which raises ValueError for a
    cell it cannot run, so the sweep's pre-check (dry runs included) finds it before anything is written.
    """
    check = getattr(load_object(job.runner), "check", None)
    if check is not None:
        check(_algorithm(job), env, list(job.seeds))


class _Built(BaseException):
    """Raised by the probe wrapper with the environment a job built (a BaseException: runners do not catch it)."""

    def __init__(self, env: Any) -> None:
        super().__init__("environment built")
        self.env = env


def _probe(env: Any) -> Any:
    raise _Built(env)


def _horizon(env: Any) -> int | None:
    """The horizon of an environment (``horizon`` or ``config.horizon`` of the unwrapped env), if it has one."""
    base = getattr(env, "unwrapped", env)
    for owner in (base, getattr(base, "config", None)):
        value = getattr(owner, "horizon", None)
        if _is_int(value):
            return int(value)
    return None


def build_job_env(job: Job) -> Any | None:
    """The (wrapped) environment ``job`` would play, built by its runner's own code and then abandoned.

    The runner is called as in :func:`execute` with one more wrapper, applied last, that stops it as
    soon as the environment is built, so the algorithm, environment and wrapper keywords are checked by
    the very constructors the job uses, and nothing is simulated. Returns None if the runner returned
    without building an environment (it had nothing to run). Runners must apply ``wrappers`` to the
    environment before playing it (as the built-in runners do), or this runs the whole job.
    """
    try:
        _runner_call(job, progress=False, extra_wrappers=(_probe,))
    except _Built as built:
        return built.env
    return None


def env_keys(scenario: Scenario) -> set[str]:
    """The environment keywords a scenario sets itself: its ``env_kwargs`` and its ``env.*`` sweep keys."""
    return {*scenario.env_kwargs, *(key.partition(".")[2] for key in scenario.sweep if key.startswith("env."))}


def check_jobs(
    jobs: Sequence[Job], scenario: Scenario, overrides: Mapping[str, Any] | None = None, defined: Collection[str] = ()
) -> None:
    """Check every cell of ``jobs`` before anything is written (used by sweeps, dry runs included).

    Each cell's environment is built (:func:`build_job_env`: what its constructors check), its runner's
    ``check`` (if it has one, :func:`_runner_check`) is called on it, and its checkpoints are checked against the
    horizon. A failure raises ValueError naming the job, the
    overrides in play and the cause; an override key that is neither one of ``defined`` (the
    environment keywords the scenario sets itself, :func:`env_keys`) nor a keyword of the environment is
    named with the closest keywords ("did you mean").
    """
    overrides = dict(overrides or {})
    seen = set()
    for job in jobs:
        if job.cell in seen:
            continue
        seen.add(job.cell)
        try:
            env = build_job_env(job)
            if env is not None:
                _runner_check(job, env)
            horizon = _horizon(env) if env is not None else None
            if horizon is not None:  # a count above the horizon means every slot: checked as such, not allocated
                count = job.checkpoints
                checkpoint_slots(horizon, int(min(count, horizon)) if _is_int(count) else count)
        except (ValueError, TypeError, KeyError, IndexError, ImportError, AttributeError, ArithmeticError) as error:
            unknown = [key for key in overrides if key not in {*SCENARIO_KEYS, *defined}]
            if unknown:
                _check_keys(job, scenario, unknown)
            given = ", ".join(f"{key}={value!r}" for key, value in overrides.items())
            raise ValueError(
                f"invalid configuration of job {job.describe()}"
                + (f" with --set {given}" if given else "")
                + f": {type(error).__name__}: {' '.join(str(error).split())}"
            ) from error


def _check_keys(job: Job, scenario: Scenario, keys: Sequence[str]) -> None:
    """Raise ValueError with "did you mean" for the first of ``keys`` that the job's environment does not take."""
    base = replace(job, env_kwargs={k: v for k, v in job.env_kwargs.items() if k not in keys})
    try:
        env = build_job_env(base)
    except Exception:  # the cell fails without these keys too: the caller reports the original error
        return
    if env is None:
        return
    signature = inspect.signature(type(env.unwrapped))
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return
    known = sorted({*SCENARIO_KEYS, *base.env_kwargs, *signature.parameters} - {"coordinator"})
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3)
            hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"known keys: {', '.join(known)}"
            raise ValueError(
                f"--set {key}: {key!r} is not a keyword of scenario {scenario.name!r} "
                f"(environment {type(env.unwrapped).__name__}); {hint}"
            )


def check_result(result: JobResult) -> None:
    """Raise ValueError if the job's runner returned no rows for some of its seeds (see :func:`missing_seeds`)."""
    lacking = missing_seeds(result.results, result.job.seeds)
    if lacking:
        raise ValueError(
            f"the runner {result.job.runner!r} returned no rows for "
            + "; ".join(f"seeds {seeds} in the {table} table" for table, seeds in lacking.items())
            + "; a runner must return rows for every seed it is given"
        )


def execute(job: Job, progress: bool = False) -> JobResult:
    """Run a job through its scenario's runner and prefix the rows with scenario, algorithm and parameters."""
    start = time.perf_counter()
    results = _runner_call(job, progress)
    sim_time = time.perf_counter() - start
    prefix = {"scenario": job.scenario, "algorithm": job.algorithm, **job.params}
    tables = {}
    for table in ("curves", "agents"):
        rows = getattr(results, table)
        clash = set(job.params) & set(rows[0]) if rows else set()
        if clash:
            raise ValueError(
                f"the runner {job.runner!r} returns columns {sorted(clash)} that are also sweep parameters of "
                f"{job.scenario!r}; rename the sweep keys"
            )
        tables[table] = [{**prefix, **row} for row in rows]
    return JobResult(job, Results(**tables), sim_time)
