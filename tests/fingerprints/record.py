"""A case's fingerprint: the exact results of its runs, encoded for the JSON fixture, and the fixture's I/O.

A fingerprint holds, per seed:

* ``checkpoints``: every ``curves`` column (group and mean regret, every ledger total, messages per
  direction, epsilon/delta, the family's extra columns such as FRR, violations, reward, rounds) at
  :data:`STORED_CHECKPOINTS` evenly spaced slots, the last one the horizon;
* ``final_agents``: every per-agent column at the horizon (regret, messages and bytes sent, cost,
  epsilon/delta spent, arrivals, violations ...), one list entry per agent;
* ``curves_sha256`` / ``agents_sha256``: digests of both tables at up to :data:`DIGEST_POINTS` evenly
  spaced slots (every slot on short horizons), so a change anywhere in the trajectory shows;
* ``hooks``: the state of every message hook the wrappers installed (a DP privatizer's epsilon and
  delta per agent; a byzantine adversary's agents, exposed and corrupted records; a drop hook's count);
* ``population``: privacy the algorithm accounts itself (Dubey's accountants, Fed_UCB's tree report,
  P-FCB's in-agent report), when it does.

Values are stored exactly: floats as ``float.hex()`` strings, integers and booleans as JSON numbers and
booleans (so a column that changes type also shows).
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy

from agents.dubey import CooperativeUCB, DPUCBInt, PrivateMultiAgentUCB
from agents.solanki import PFCB
from agents.zhu import FedUCB
from fedbandit_envs.algorithms import load_object, registered_algorithms
from fedbandit_envs.run import Results, checkpoint_slots

#: The committed fixture.
FIXTURE = Path(__file__).with_name("fingerprints.json")

#: The runner of each family (``module:function``, all with the signature of ``fedbandit_envs.run.run``).
RUNNERS: dict[str, str] = {
    "mab": "fedbandit_envs.run:run",
    "li_song": "agents.li_song.runner:run",
    "linear": "fedbandit_envs.run:run",
    "procurement": "fedbandit_envs.run:run",
}

#: Wrappers by their short name in a case.
WRAPPERS: dict[str, str] = {
    "laplace": "wrappers.dp:LaplaceMessageDP",
    "gaussian": "wrappers.dp:GaussianMessageDP",
    "tree": "wrappers.dp:TreeMessageDP",
    "byzantine": "wrappers.faults:ByzantineAgents",
    "drops": "wrappers.faults:MessageDrops",
    "delays": "wrappers.faults:MessageDelays",
}

#: The two run paths of every runner.
PATHS = ("batched", "pettingzoo")

#: Checkpoints stored column by column (evenly spaced, the last one the horizon).
STORED_CHECKPOINTS = 4

#: At most this many evenly spaced slots enter the trajectory digests.
DIGEST_POINTS = 250

#: Columns never fingerprinted: the label and wall-clock time.
UNSTABLE = frozenset({"algorithm", "wall_time"})

#: Columns that index a row rather than measure it.
KEYS = frozenset({"seed", "slot", "agent"})


@dataclass(frozen=True)
class Call:
    """A deferred call ``target(*args)`` (``target`` is ``"module:attribute"``).

    Cases hold these instead of objects (a topology, a corruption distribution, an epsilon schedule),
    so a case stays plain data with a readable, stable ``repr``.
    """

    target: str
    args: tuple[Any, ...] = ()

    def __repr__(self) -> str:
        return f"{self.target}({', '.join(repr(a) for a in self.args)})"

    def build(self) -> Any:
        """The object the call returns."""
        return load_object(self.target)(*resolve(self.args))


def resolve(value: Any) -> Any:
    """``value`` with every :class:`Call` inside it (dicts, lists, tuples) replaced by its result."""
    if isinstance(value, Call):
        return value.build()
    if isinstance(value, Mapping):
        return {key: resolve(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(resolve(item) for item in value)
    return value


@dataclass(frozen=True)
class Case:
    """One fingerprinted run: an algorithm on an environment (with wrappers) for a few seeds.

    Attributes:
        name: the test id and the fixture key.
        family: a key of :data:`RUNNERS`.
        algorithm: a registered algorithm name (``fedbandit_envs.algorithms.registered_algorithms``).
        env: keyword arguments of the family's environment (values may be :class:`Call`).
        params: keyword arguments of the algorithm's constructor (values may be :class:`Call`).
        wrappers: ``(name in WRAPPERS, keyword arguments)`` pairs, applied in order.
        seeds: one run per seed.
        check_pettingzoo: also run the PettingZoo path, which must give the same fingerprint.
    """

    name: str
    family: str
    algorithm: str
    env: Mapping[str, Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2)
    check_pettingzoo: bool = False

    def spec(self) -> str:
        """Everything that defines the case's results, as a stable string (kept in the fixture)."""
        return (
            f"{self.family}: {self.algorithm}({_arguments(self.params)}) on {_arguments(self.env)}"
            f" wrappers=[{', '.join(f'{w}({_arguments(kw)})' for w, kw in self.wrappers)}] seeds={list(self.seeds)}"
        )

    @property
    def horizon(self) -> int:
        """T, which every case gives explicitly."""
        return int(self.env["horizon"])


def _arguments(kwargs: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in kwargs.items())


def stored_slots(horizon: int) -> list[int]:
    """The slots whose columns the fixture stores one by one."""
    return checkpoint_slots(horizon, min(horizon, STORED_CHECKPOINTS)).tolist()


def recorded_slots(horizon: int) -> list[int]:
    """Every slot the runs record: the digest grid plus the stored checkpoints."""
    grid = checkpoint_slots(horizon, min(horizon, DIGEST_POINTS)).tolist()
    return sorted({*grid, *stored_slots(horizon)})


# ---------------------------------------------------------------------------------------------------- encoding
def exact(value: Any) -> Any:
    """``value`` as JSON data that keeps it exactly: floats as ``float.hex()``, containers element by element."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value).hex()
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        return [exact(item) for item in value.tolist()]
    if isinstance(value, list | tuple):
        return [exact(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): exact(item) for key, item in value.items()}
    raise TypeError(f"cannot store a {type(value).__name__} exactly ({value!r}); add a case to exact()")


def digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of the rows (without the unstable columns), exactly encoded, in canonical JSON."""
    plain = [exact({k: v for k, v in row.items() if k not in UNSTABLE}) for row in rows]
    return hashlib.sha256(json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------- state
def hook_state(hook: Any, replica: int) -> dict[str, Any]:
    """What one message hook holds about ``replica``: privacy spent per agent, or a fault's ground truth."""
    state: dict[str, Any] = {"hook": type(hook).__name__}
    if hasattr(hook, "epsilon_spent"):  # a DP privatizer: (B, M) arrays
        state["epsilon"] = hook.epsilon_spent()[replica]
        state["delta"] = hook.delta_spent()[replica]
    for name in ("byzantine", "exposed", "corrupted", "dropped"):  # fault hooks: (B, M) or (B,) arrays
        if hasattr(hook, name):
            state[name] = getattr(hook, name)[replica]
    return state


def population_privacy(population: Any, replica: int) -> dict[str, Any] | None:
    """Privacy an algorithm accounts itself (None when it does not): Dubey's accountants, Fed_UCB, P-FCB."""
    if isinstance(population, CooperativeUCB):  # releases exact means: no accountant
        return None
    if isinstance(population, PrivateMultiAgentUCB | DPUCBInt):
        accountant = population.accountant(replica)
        return {"epsilon": accountant.totals(), "delta": accountant.delta_totals()}
    if isinstance(population, FedUCB):
        return population.privacy_report()
    if isinstance(population, PFCB):
        return population.privacy_report(replica)
    return None


# ---------------------------------------------------------------------------------------------------- runs
def run_case(
    case: Case, path: str, adapt: Callable[[type], type] | None = None
) -> tuple[Results, list[tuple[Any, Any, int]]]:
    """Run ``case`` on ``path``; returns the results and, per seed, (env, population, replica) of its run.

    ``adapt`` turns the algorithm's class into the class that plays (e.g. a subclass that misbehaves).
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    cls, params = registered_algorithms()[case.algorithm].factory, case.params
    if adapt is not None:
        cls = adapt(cls)
    populations: list[Any] = []
    envs: list[Any] = []

    def make() -> Any:
        population = cls(**resolve(params))
        populations.append(population)
        return population

    def keep(env: Any) -> Any:
        envs.append(env)
        return env

    def wrapper(name: str, kwargs: Mapping[str, Any]) -> Callable[[Any], Any]:
        return lambda env: load_object(WRAPPERS[name])(env, **resolve(kwargs))

    wrappers = [wrapper(name, kwargs) for name, kwargs in case.wrappers] + [keep]
    run = load_object(RUNNERS[case.family])
    results = run(
        make,
        resolve(case.env),
        list(case.seeds),
        checkpoints=recorded_slots(case.horizon),
        batched=path == "batched",
        label=case.name,
        wrappers=wrappers,
    )
    # runners build probe populations (and Li-Song a probe env) before the real runs, which come last
    if path == "batched":
        runs = [(envs[-1], populations[-1], b) for b in range(len(case.seeds))]
    else:
        count = len(case.seeds)
        runs = [(env, population, 0) for env, population in zip(envs[-count:], populations[-count:])]
    return results, runs


def fingerprint(case: Case, path: str = "batched", adapt: Callable[[type], type] | None = None) -> dict[str, Any]:
    """The case's fingerprint (see the module docstring), computed on ``path`` (``adapt``: as in :func:`run_case`)."""
    return fingerprint_of(case, *run_case(case, path, adapt))


def fingerprint_of(case: Case, results: Results, runs: list[tuple[Any, Any, int]]) -> dict[str, Any]:
    """The fingerprint of a run of ``case`` that :func:`run_case` returned."""
    stored = set(stored_slots(case.horizon))
    seeds: dict[str, Any] = {}
    for seed, (env, population, replica) in zip(case.seeds, runs):
        curves = [row for row in results.curves if row["seed"] == seed]
        agents = [row for row in results.agents if row["seed"] == seed]
        final = [row for row in agents if row["slot"] == case.horizon]
        columns = [name for name in final[0] if name not in UNSTABLE | KEYS]
        record = {
            "checkpoints": {
                str(row["slot"]): exact({k: v for k, v in row.items() if k not in UNSTABLE | KEYS})
                for row in curves
                if row["slot"] in stored
            },
            "final_agents": {name: exact([row[name] for row in final]) for name in columns},
            "curves_sha256": digest(curves),
            "agents_sha256": digest(agents),
            "hooks": [exact(hook_state(hook, replica)) for hook in env.unwrapped.core.message_hooks],
        }
        privacy = population_privacy(population, replica)
        if privacy is not None:
            record["population"] = exact(privacy)
        seeds[str(seed)] = record
    return {"spec": case.spec(), "seeds": seeds}


# ---------------------------------------------------------------------------------------------------- fixture
def load_fixture(path: Path = FIXTURE) -> dict[str, Any]:
    """The committed fingerprints by case name."""
    return json.loads(path.read_text())["cases"]


def dump_fixture(fingerprints: Mapping[str, Any], about: str, path: Path = FIXTURE) -> None:
    """Write the fixture deterministically: sorted keys, one line per scalar or list of scalars.

    ``recorded_with`` notes the Python, numpy and scipy versions and the BLAS of the recording (never
    compared: it helps tell a results change from a platform's floating-point difference).
    """
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    recorded_with = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas": f"{blas['name']} {blas['version']}",
    }
    path.write_text(_format({"about": about, "recorded_with": recorded_with, "cases": fingerprints}, "") + "\n")


def _format(value: Any, indent: str) -> str:
    if isinstance(value, Mapping) and value:
        inner = indent + " "
        items = [f"{inner}{json.dumps(key)}: {_format(value[key], inner)}" for key in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(item, Mapping | list) for item in value):
        inner = indent + " "
        return "[\n" + ",\n".join(inner + _format(item, inner) for item in value) + "\n" + indent + "]"
    return json.dumps(value)


_ABSENT = "<absent>"


def _leaves(value: Any, where: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, (*where, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*where, f"[{index}]"))
    else:
        yield where, value


def _readable(value: Any) -> str:
    """A stored value, with its decimal reading when it is a hex float."""
    if value is _ABSENT:
        return value
    if isinstance(value, str) and value.startswith(("0x", "-0x")):
        return f"{value} ({float.fromhex(value)!r})"
    return repr(value)


@dataclass(frozen=True)
class Difference:
    """One stored leaf that differs from a fresh run (or exists in only one of them)."""

    where: tuple[str, ...]
    fixture: Any
    now: Any

    @property
    def field(self) -> str:
        """The leaf's path below its seed, e.g. ``checkpoints / 50 / cost`` or ``final_agents / regret / [2]``."""
        return " / ".join(self.where[2:] if self.where[:1] == ("seeds",) else self.where)

    def __str__(self) -> str:
        seed = f"seed {self.where[1]} / " if self.where[:1] == ("seeds",) else ""
        return f"{seed}{self.field}: fixture {_readable(self.fixture)}, now {_readable(self.now)}"


def differences(expected: Any, actual: Any) -> list[Difference]:
    """Every leaf that differs in value or type, is missing or is new, in path order."""
    want, got = dict(_leaves(expected)), dict(_leaves(actual))
    found = []
    for where in sorted(want.keys() | got.keys()):
        a, b = want.get(where, _ABSENT), got.get(where, _ABSENT)
        if type(a) is not type(b) or a != b:
            found.append(Difference(where, a, b))
    return found
