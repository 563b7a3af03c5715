"""Throughput of fedbandit-envs: the public PettingZoo API, the batched core, and a bare-numpy floor.

Usage::

    python benchmarks/throughput.py [--quick] [--repeats N] [--clock wall|cpu] [--out benchmarks/results.json]
    python benchmarks/throughput.py --profile independent_ucb1 [--profile-slots 5000]
    python benchmarks/throughput.py --message-volume [--clock cpu]   # array vs single messages, 100-5000 per slot

Every row plays Bernoulli bandits (``instance="uniform"``, ``topology="server"``, seed 0 or seeds
0..B-1) and reports **agent-slots per second** = B * M * slots / wall seconds (B = 1 outside the
batched path). All rows are measured in one process, with the repeats of every row interleaved, so
the ratios compare like with like; each row reports its best and its median repeat (targets use the median).

Rows:

* ``api``: the loop a user writes against the ``FederatedMAB`` ParallelEnv (action dicts, observation
  dicts, ``feedback_from_observations``), timed over the slot loop only (not construction or reset). The
  env is built with ``inbox="batches"`` and the translation methods send array messages (each agent's rows
  as a sub-batch), as the runner's PettingZoo path does.
* ``api_messages``: the same loop with one :class:`Message` object per message, sent and received (every
  agent's sub-batches converted with ``MessageBatch.messages()``, ``inbox="messages"``): the form of the
  API before array messages.
* ``per_agent``: :class:`~fedbandit_envs.protocol.PerAgentPopulation` of a per-agent UCB1 learner
  (:class:`UCB1Agent`, one object per agent reading its PettingZoo observation dict) on the core (B = 1),
  slot loop only; it makes IndependentUCB1's choices, so it is compared with the same floor.
* ``run_pettingzoo``: ``fedbandit_envs.run.run_pettingzoo`` end to end (checkpoints=1), including
  construction and reset: shows whether the runner adds anything to the ``api`` loop.
* ``batched``: the same population on ``FederatedMABCore`` with B replicas (the loop of
  ``run_batched``), slot loop only; ``run_batched``: the runner end to end (construction, reset of B
  replicas, recording).
* ``floor``: a bare numpy loop doing the same work on the same numbers: the same reward noise (blocks
  of (256, M) uniforms per replica from the same ``rewards`` stream), the same UCB1 index operations as
  the populations: ``agents.baselines.ucb1_arms`` (untried arms first, rotated per agent; argmax) while
  an arm is untried, ``ucb1_tried_arms`` (no untried test, no clamps) once every arm is tried; the same
  count/sum updates and the same pseudo-regret accumulation; no env, no dicts, no messages. For full
  sharing it pools the previous slot's samples per replica (the one-slot upload lag of ``FullSharingUCB``).
  The floors mirror the populations' index operations op by op: if they change, change the floors with them.
* ``floor_tuned`` (context): a hand-tuned IndependentUCB1 floor (float counts, ``out=`` buffers, no
  untried test after K slots); column ``tuned`` is its throughput over the row's.

Before timing, every row is run for a few hundred slots next to its floor and the final per-agent
pseudo-regret is compared exactly (column ``same``): the floor does the same work, not less.

``ratio`` = floor agent-slots/s / row agent-slots/s, for the floor with the same algorithm, B, M and
K. Benchmarks measure and report; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agents.baselines import FullSharingUCB, IndependentUCB1
from fedbandit_envs.channel import MessageBatch
from fedbandit_envs.core import Action, AgentContext, Feedback, Step
from fedbandit_envs.families.mab.core import NOISE_BLOCK, FederatedMABCore, MABConfig
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.protocol import Agent, PerAgentPopulation, Population
from fedbandit_envs.run import run_batched, run_pettingzoo
from fedbandit_envs.seeding import SeedStreams

ALGORITHMS = {"independent_ucb1": IndependentUCB1, "full_sharing_ucb": FullSharingUCB}

#: The acceptance targets: floor / row throughput at M = 50, K = 100, by row.
TARGETS = {
    "api/independent_ucb1/M50": 3.0,
    "api/full_sharing_ucb/M50": 6.0,
    "per_agent/independent_ucb1/M50": 6.0,
}

#: The clock of the timed parts: wall time (``time.perf_counter``), or the process's CPU time with ``--clock cpu``
#: (``time.process_time``: what the process itself spent, less disturbed by other jobs on a shared machine).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]

#: A run: slots -> (seconds of the timed part, final (B, M) pseudo-regret).
Runner = Callable[[int], tuple[float, np.ndarray]]


# ---------------------------------------------------------------------- the measured paths
def single_messages(actions: dict[str, Any]) -> dict[str, Any]:
    """``actions`` with every agent's array messages as single :class:`Message` objects."""
    return {
        agent: {"arm": action["arm"], "messages": [m for batch in action["messages"] for m in batch.messages()]}
        if isinstance(action, dict)
        else action
        for agent, action in actions.items()
    }


def run_api(
    algorithm: str, num_agents: int, num_arms: int, slots: int, arrays: bool = True
) -> tuple[float, np.ndarray]:
    """The public PettingZoo loop (the runner's PettingZoo path, written out); times the slot loop.

    ``arrays``: send and receive array messages (else one Message object per message).
    """
    population = ALGORITHMS[algorithm]()
    return time_api(population, arrays, num_agents, num_arms, slots, coordinator=population.make_coordinator())


def time_api(population: Any, arrays: bool, *args: Any, **env_kwargs: Any) -> tuple[float, np.ndarray]:
    """``population`` driving ``FederatedMAB(*args, **env_kwargs)`` through ``step()`` (seed 0); times the slot loop.

    ``arrays``: send and receive array messages (else one Message object per message).
    """
    env = FederatedMAB(*args, inbox="batches" if arrays else "messages", **env_kwargs)
    obs, infos = env.reset(seed=0)
    population.reset(env.context)
    start = clock()
    for _ in range(env.config.horizon):
        step = env.step_from(obs)
        action = population.act(step)
        actions = env.actions_from(step, action)
        obs, rewards, term, trunc, infos = env.step(actions if arrays else single_messages(actions))
        population.observe(env.feedback_from(step, action, obs, rewards))
    elapsed = clock() - start
    return elapsed, env.core.regret.copy()


class UCB1Agent(Agent):
    """Per-agent UCB1 making exactly ``agents.baselines.ucb1_arms``'s choices, from the agent's observation dict.

    Untried arms first in the agent's rotated order (agent i starts at arm i), then the argmax of
    ``sums / counts + sqrt(2 ln t / counts)``, with the empirical means kept up to date one arm at a time.
    """

    def reset(self, agent_id: int, context: AgentContext, rng: np.random.Generator) -> None:
        """Zero the statistics; tabulate 2 ln t for every slot."""
        k = self.num_arms = context.num_arms
        self.first = agent_id
        self.pulls, self.totals = [0] * k, [0.0] * k  # per arm, as Python numbers (cheap to update one at a time)
        self.counts, self.means, self.index = np.zeros(k), np.zeros(k), np.empty(k)
        self.two_log = (2.0 * np.log(np.maximum(np.arange(context.horizon + 1), 1))).tolist()

    def act(self, observation: Any) -> int:
        """Learn from the last pull, then choose."""
        arm, t = observation["arm"], observation["slot"]
        if arm >= 0:
            pulls = self.pulls[arm] = self.pulls[arm] + 1
            total = self.totals[arm] = self.totals[arm] + float(observation["reward"])
            self.counts[arm] = pulls
            self.means[arm] = total / pulls
        if t < self.num_arms:  # an untried arm remains exactly while t < K: the rotated order
            return (self.first + t) % self.num_arms
        index = self.index
        np.divide(self.two_log[t], self.counts, out=index)
        np.sqrt(index, out=index)
        index += self.means
        return int(index.argmax())


def run_per_agent(num_agents: int, num_arms: int, slots: int) -> tuple[float, np.ndarray]:
    """``PerAgentPopulation(UCB1Agent)`` on the core (B = 1), the loop of ``run_batched``; times the slot loop."""
    return time_core(PerAgentPopulation(UCB1Agent), 1, num_agents, num_arms, slots)


def run_runner_pettingzoo(algorithm: str, num_agents: int, num_arms: int, slots: int) -> tuple[float, np.ndarray]:
    """``run_pettingzoo`` end to end (construction, reset, loop, one checkpoint)."""
    start = clock()
    results = run_pettingzoo(algorithm, {"num_agents": num_agents, "num_arms": num_arms, "horizon": slots}, [0], 1)
    elapsed = clock() - start
    regret = np.array([[row["regret"] for row in sorted(results.agents, key=lambda r: r["agent"])]])
    return elapsed, regret


def run_core(algorithm: str, replicas: int, num_agents: int, num_arms: int, slots: int) -> tuple[float, np.ndarray]:
    """The batched loop of ``run_batched`` on ``FederatedMABCore``; times the slot loop."""
    return time_core(ALGORITHMS[algorithm](), replicas, num_agents, num_arms, slots)


def time_core(population: Any, replicas: int, num_agents: int, num_arms: int, slots: int) -> tuple[float, np.ndarray]:
    """``population`` on ``FederatedMABCore`` with seeds 0..B-1 (the loop of ``run_batched``); times the slot loop."""
    env = FederatedMAB(num_agents, num_arms, slots, coordinator=population.make_coordinator())
    core = env.core
    core.reset(list(range(replicas)))
    population.reset(core.context)
    start = clock()
    for _ in range(slots):
        feedback = core.play(population.act(core.current_step()))
        population.observe(feedback)
    elapsed = clock() - start
    return elapsed, core.regret.copy()


def run_runner_batched(
    algorithm: str, replicas: int, num_agents: int, num_arms: int, slots: int
) -> tuple[float, np.ndarray]:
    """``run_batched`` end to end (construction, reset of every replica, loop, one checkpoint)."""
    env_kwargs = {"num_agents": num_agents, "num_arms": num_arms, "horizon": slots}
    start = clock()
    results = run_batched(algorithm, env_kwargs, list(range(replicas)), 1)
    elapsed = clock() - start
    regret = np.zeros((replicas, num_agents))
    for row in results.agents:
        regret[row["seed"], row["agent"]] = row["regret"]
    return elapsed, regret


# ---------------------------------------------------------------------- the numpy floor
@dataclass
class FloorProblem:
    """A floor's set-up (not timed): the instance of seeds 0..B-1 flattened, its index offsets and reward noise."""

    shape: tuple[int, int, int]  # (B, M, K)
    means_flat: np.ndarray  # (B*M*K,) the per-agent means
    gaps_flat: np.ndarray  # (B*K,) the gaps
    cell: np.ndarray  # (B, M) flat offset of (replica, agent, arm 0) in means_flat
    replica_row: np.ndarray  # (B, 1) flat offset of (replica, arm 0) in gaps_flat and in (B, K) arrays
    rank: np.ndarray  # (M, K) each agent's rotated order of untried arms
    rngs: list[np.random.Generator]  # the reward generators

    def uniforms(self, slots: int) -> Iterator[np.ndarray]:
        """The (B, M) reward uniforms of each slot, drawn in blocks of ``NOISE_BLOCK`` slots as the core does."""
        block = np.empty((NOISE_BLOCK, *self.shape[:2]))
        for t in range(slots):
            offset = t % NOISE_BLOCK
            if offset == 0:
                block = np.stack([rng.random((NOISE_BLOCK, self.shape[1])) for rng in self.rngs], axis=1)
            yield block[offset]


def floor_problem(replicas: int, num_agents: int, num_arms: int) -> FloorProblem:
    """The problem of seeds 0..B-1 as :class:`FederatedMABCore` draws it, with fresh reward generators."""
    core = FederatedMABCore(MABConfig(num_agents, num_arms, 1))
    seeds = list(range(replicas))
    core.reset(seeds)
    b, m, k = core.means.shape
    return FloorProblem(
        (b, m, k),
        core.means.copy().reshape(-1),
        core.gaps.copy().reshape(-1),
        (np.arange(b * m) * k).reshape(b, m),
        (np.arange(b) * k)[:, None],
        (np.arange(k)[None, :] - np.arange(m)[:, None]) % k,
        [SeedStreams.from_seed(s).generator("rewards") for s in seeds],
    )


def floor_independent(replicas: int, num_agents: int, num_arms: int, slots: int) -> tuple[float, np.ndarray]:
    """Bare numpy: every agent runs UCB1 on its own counts; Bernoulli rewards; pseudo-regret."""
    problem = floor_problem(replicas, num_agents, num_arms)
    b, m, k = problem.shape
    counts = np.zeros((b, m, k), np.int64)
    sums = np.zeros((b, m, k))
    counts_flat, sums_flat = counts.reshape(-1), sums.reshape(-1)
    log_t = np.log(np.maximum(np.arange(slots, dtype=np.float64), 1.0))  # totals == t for every agent
    regret = np.zeros((b, m))
    some_untried = True
    start = clock()
    for t, uniforms in enumerate(problem.uniforms(slots)):
        if some_untried:
            untried = counts == 0
            safe = np.maximum(counts, 1)
            index = sums / safe + np.sqrt(2.0 * log_t[t] / safe)
            arms = index.argmax(axis=-1)
            if untried.any():
                first_untried = np.where(untried, problem.rank, k).argmin(axis=-1)
                arms = np.where(untried.any(axis=-1), first_untried, arms)
        else:  # ucb1_tried_arms: no untried test, no clamps
            index = sums / counts
            index += np.sqrt(2.0 * log_t[t] / counts)
            arms = index.argmax(axis=-1)
        _pull_and_count(problem, arms, uniforms, counts_flat, sums_flat, regret)
        if some_untried:
            some_untried = not counts.all()
    elapsed = clock() - start
    return elapsed, regret


def _pull_and_count(
    problem: FloorProblem,
    arms: np.ndarray,
    uniforms: np.ndarray,
    counts_flat: np.ndarray,
    sums_flat: np.ndarray,
    regret: np.ndarray,
) -> None:
    """Each agent's Bernoulli reward of its (B, M) ``arms`` added to its own counts and sums; the gaps to ``regret``."""
    flat = problem.cell + arms
    rewards = (uniforms < problem.means_flat[flat]).astype(np.float64)
    counts_flat[flat] += 1
    sums_flat[flat] += rewards
    regret += problem.gaps_flat[problem.replica_row + arms]


def floor_full_sharing(replicas: int, num_agents: int, num_arms: int, slots: int) -> tuple[float, np.ndarray]:
    """Bare numpy: UCB1 on per-replica pooled statistics that include the samples up to slot t - 2."""
    problem = floor_problem(replicas, num_agents, num_arms)
    b, m, k = problem.shape
    counts = np.zeros((b, k), np.int64)
    sums = np.zeros((b, k))
    pool = problem.replica_row
    regret = np.zeros((b, m))
    pending: tuple[np.ndarray, np.ndarray] | None = None
    some_untried = True
    start = clock()
    for uniforms in problem.uniforms(slots):
        if some_untried:
            untried = counts == 0
            safe = np.maximum(counts, 1)
            totals = counts.sum(axis=-1)
            index = sums / safe + np.sqrt(2.0 * np.log(np.maximum(totals, 1))[:, None] / safe)
            arms = np.broadcast_to(index.argmax(axis=-1)[:, None], (b, m))
            if untried.any():
                first_untried = np.where(untried[:, None, :], problem.rank, k).argmin(axis=-1)
                arms = np.where(untried.any(axis=-1)[:, None], first_untried, arms)
            some_untried = not counts.all()  # the pooled counts only grow
        else:  # ucb1_tried_arms on the pooled statistics
            index = sums / counts
            index += np.sqrt(2.0 * np.log(np.einsum("bk->b", counts))[:, None] / counts)
            arms = np.broadcast_to(index.argmax(axis=-1)[:, None], (b, m))
        rewards = (uniforms < problem.means_flat[problem.cell + arms]).astype(np.float64)
        regret += problem.gaps_flat[pool + arms]
        if pending is not None:  # the server pools last slot's uploads and broadcasts them now
            counts += np.bincount(pending[0], minlength=b * k).reshape(b, k)
            sums += np.bincount(pending[0], weights=pending[1], minlength=b * k).reshape(b, k)
        pending = ((pool + arms).reshape(-1), rewards.reshape(-1))
    elapsed = clock() - start
    return elapsed, regret


def floor_tuned_independent(replicas: int, num_agents: int, num_arms: int, slots: int) -> tuple[float, np.ndarray]:
    """A hand-tuned floor (context only): float counts, preallocated buffers, no untried test after K slots.

    The index is computed as ``sums * (1 / counts) + sqrt(2 ln t * (1 / counts))``, which may differ from
    ``ucb1_arms`` in the last bit (so its trajectory is not guaranteed identical; column ``same``).
    """
    problem = floor_problem(replicas, num_agents, num_arms)
    b, m, k = problem.shape
    counts = np.zeros((b, m, k))
    sums = np.zeros((b, m, k))
    counts_flat, sums_flat = counts.reshape(-1), sums.reshape(-1)
    two_log_t = 2.0 * np.log(np.maximum(np.arange(slots, dtype=np.float64), 1.0))
    inverse, index = np.empty_like(counts), np.empty_like(counts)
    regret = np.zeros((b, m))
    start = clock()
    for t, uniforms in enumerate(problem.uniforms(slots)):
        if t < k:  # an agent with an untried arm always pulls one, so none is left after K slots
            untried = counts == 0
            safe = np.maximum(counts, 1.0)
            exploit = (sums / safe + np.sqrt(two_log_t[t] / safe)).argmax(axis=-1)
            arms = np.where(untried.any(axis=-1), np.where(untried, problem.rank, k).argmin(axis=-1), exploit)
        else:
            np.reciprocal(counts, out=inverse)
            np.multiply(inverse, two_log_t[t], out=index)
            np.sqrt(index, out=index)
            np.multiply(sums, inverse, out=inverse)
            np.add(index, inverse, out=index)
            arms = index.argmax(axis=-1)
        _pull_and_count(problem, arms, uniforms, counts_flat, sums_flat, regret)
    elapsed = clock() - start
    return elapsed, regret


FLOORS = {"independent_ucb1": floor_independent, "full_sharing_ucb": floor_full_sharing}


# ---------------------------------------------------------------------- rows
@dataclass
class Row:
    name: str
    path: str  # api | api_messages | per_agent | run_pettingzoo | batched | run_batched | floor | floor_tuned
    algorithm: str
    replicas: int
    num_agents: int
    num_arms: int
    run: Runner
    floor: str | None = None  # name of the matching floor row
    tuned_floor: str | None = None  # name of the hand-tuned floor row (context)
    slots: int = 0
    seconds: list[float] = field(default_factory=list)
    same_as_floor: bool | None = None

    @property
    def agent_slots(self) -> int:
        return self.replicas * self.num_agents * self.slots

    def best_seconds(self) -> float:
        return min(self.seconds)

    def median_seconds(self) -> float:
        return statistics.median(self.seconds)


def build_rows() -> list[Row]:
    rows: list[Row] = []
    k = 100
    for m in (10, 50, 200):
        for algo in ALGORITHMS:
            floor = f"floor/{algo}/M{m}"
            tuned = f"floor_tuned/{algo}/M{m}" if algo == "independent_ucb1" else None
            rows.append(Row(f"api/{algo}/M{m}", "api", algo, 1, m, k, partial(run_api, algo, m, k), floor, tuned))
            rows.append(Row(floor, "floor", algo, 1, m, k, partial(FLOORS[algo], 1, m, k)))
            if tuned is not None:
                rows.append(Row(tuned, "floor_tuned", algo, 1, m, k, partial(floor_tuned_independent, 1, m, k), floor))
    for m in (3, 10, 50):
        algo, floor = "independent_ucb1", f"floor/independent_ucb1/M{m}"
        rows.append(Row(f"per_agent/{algo}/M{m}", "per_agent", algo, 1, m, k, partial(run_per_agent, m, k), floor))
        if m == 3:
            rows.append(Row(floor, "floor", algo, 1, m, k, partial(floor_independent, 1, m, k)))
    algo, m = "full_sharing_ucb", 50
    single = partial(run_api, algo, m, k, arrays=False)
    rows.append(Row(f"api_messages/{algo}/M{m}", "api_messages", algo, 1, m, k, single, f"floor/{algo}/M{m}"))
    algo, m = "independent_ucb1", 50
    runner_row = partial(run_runner_pettingzoo, algo, m, k)
    rows.append(
        Row(
            f"run_pettingzoo/{algo}/M{m}",
            "run_pettingzoo",
            algo,
            1,
            m,
            k,
            runner_row,
            f"floor/{algo}/M{m}",
            f"floor_tuned/{algo}/M{m}",
        )
    )
    b, m, k = 100, 3, 5
    for algo in ALGORITHMS:
        shape = f"B{b}xM{m}xK{k}"
        floor = f"floor/{algo}/{shape}"
        rows.append(Row(f"batched/{algo}/{shape}", "batched", algo, b, m, k, partial(run_core, algo, b, m, k), floor))
        batched_runner = partial(run_runner_batched, algo, b, m, k)
        rows.append(Row(f"run_batched/{algo}/{shape}", "run_batched", algo, b, m, k, batched_runner, floor))
        rows.append(Row(floor, "floor", algo, b, m, k, partial(FLOORS[algo], b, m, k)))
    return rows


def selected_rows(rows: list[Row], prefixes: list[str]) -> list[Row]:
    """The rows whose name starts with one of ``prefixes``, and the floors they are compared with, in order."""
    chosen = {r.name for r in rows if r.name.startswith(tuple(prefixes))}
    if not chosen:
        raise SystemExit(f"--rows {' '.join(prefixes)} matches no row; rows are named like {rows[0].name!r}")
    chosen |= {name for r in rows if r.name in chosen for name in (r.floor, r.tuned_floor) if name is not None}
    return [r for r in rows if r.name in chosen]


def nice(n: float) -> int:
    """Round up to two significant digits."""
    n = max(int(np.ceil(n)), 1)
    step = 10 ** max(len(str(n)) - 2, 0)
    return -(-n // step) * step


def calibrate(row: Row, target: float) -> int:
    """Slots for about ``target`` seconds: grow a pilot run until it takes >= min(0.1 s, target / 3)."""
    slots = 32
    while True:
        elapsed, _ = row.run(slots)
        if elapsed >= min(0.1, target / 3) or slots >= 1 << 24:
            break
        slots *= 4
    return nice(max(slots, target * slots / elapsed))


def verify(rows: list[Row], slots: int) -> None:
    """Run every row and its floor for ``slots`` slots and compare the final per-agent pseudo-regret exactly."""
    by_name = {r.name: r for r in rows}
    cache: dict[str, np.ndarray] = {}
    for row in rows:
        if row.floor is None:
            continue
        if row.floor not in cache:
            cache[row.floor] = by_name[row.floor].run(slots)[1]
        row.same_as_floor = bool(np.array_equal(row.run(slots)[1], cache[row.floor]))


# ---------------------------------------------------------------------- reporting
def machine_info() -> dict:
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "fedbandit_envs": version("fedbandit-envs"),
        "pettingzoo": version("pettingzoo"),
        "gymnasium": version("gymnasium"),
        "load_average_at_start": list(os.getloadavg()),
    }


def summarise(rows: list[Row]) -> list[dict]:
    by_name = {r.name: r for r in rows}
    table = []
    for row in rows:
        best = row.best_seconds()
        entry = {
            "name": row.name,
            "path": row.path,
            "algorithm": row.algorithm,
            "B": row.replicas,
            "M": row.num_agents,
            "K": row.num_arms,
            "slots": row.slots,
            "repeats_seconds": row.seconds,
            "best_seconds": best,
            "median_seconds": statistics.median(row.seconds),
            "slots_per_s": row.slots / best,
            "agent_slots_per_s": row.agent_slots / best,
            "floor": row.floor,
            "ratio_floor_over_row": None,
            "median_ratio_floor_over_row": None,
            "tuned_floor": row.tuned_floor,
            "ratio_tuned_floor_over_row": None,
            "same_trajectory_as_floor": row.same_as_floor,
        }
        if row.floor is not None:
            floor = by_name[row.floor]
            entry["ratio_floor_over_row"] = (floor.agent_slots / floor.best_seconds()) / entry["agent_slots_per_s"]
            entry["median_ratio_floor_over_row"] = (floor.agent_slots / floor.median_seconds()) / (
                row.agent_slots / row.median_seconds()
            )
        if row.tuned_floor is not None:
            tuned = by_name[row.tuned_floor]
            entry["ratio_tuned_floor_over_row"] = (tuned.agent_slots / tuned.best_seconds()) / entry[
                "agent_slots_per_s"
            ]
        table.append(entry)
    return table


def print_table(table: list[dict]) -> None:
    header = f"{'row':<44} {'B':>4} {'M':>4} {'K':>4} {'slots':>8} {'best s':>7} {'slots/s':>10} {'agent-slots/s':>14}"
    header += f" {'ratio':>6} {'median':>6} {'tuned':>6} {'same':>5}"
    print(header)
    print("-" * len(header))
    order = ["api", "api_messages", "per_agent", "run_pettingzoo", "floor", "floor_tuned", "batched", "run_batched"]
    for entry in sorted(table, key=lambda e: (e["B"] > 1, order.index(e["path"]), e["algorithm"], e["M"])):
        ratio = "" if entry["ratio_floor_over_row"] is None else f"{entry['ratio_floor_over_row']:.2f}"
        median = "" if entry["median_ratio_floor_over_row"] is None else f"{entry['median_ratio_floor_over_row']:.2f}"
        tuned = "" if entry["ratio_tuned_floor_over_row"] is None else f"{entry['ratio_tuned_floor_over_row']:.2f}"
        same = (
            "" if entry["same_trajectory_as_floor"] is None else ("yes" if entry["same_trajectory_as_floor"] else "NO")
        )
        print(
            f"{entry['name']:<44} {entry['B']:>4} {entry['M']:>4} {entry['K']:>4} {entry['slots']:>8} "
            f"{entry['best_seconds']:>7.3f} {entry['slots_per_s']:>10,.0f} {entry['agent_slots_per_s']:>14,.0f} "
            f"{ratio:>6} {median:>6} {tuned:>6} {same:>5}"
        )


class Chatter(Population):
    """Every agent sends ``rows`` messages to each of its two ring neighbours every slot and pulls arm 0."""

    families = ("mab",)

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def reset(self, context: AgentContext) -> None:
        """Fix the rows of every slot: agent i's ``rows`` to i + 1, then ``rows`` to i - 1."""
        m = self.num_agents = context.num_agents
        self.sender = np.repeat(np.arange(m), 2 * self.rows)
        self.recipient = (self.sender + np.tile(np.repeat([1, -1], self.rows), m)) % m
        self.replica = np.zeros(len(self.sender), np.int64)
        self.values = np.arange(len(self.sender), dtype=np.float64)

    def act(self, step: Step) -> Action:
        """Arm 0 for everyone, and the slot's messages as one batch."""
        batch = MessageBatch("chat", self.replica, self.sender, self.recipient, {"value": self.values})
        return Action(np.zeros((1, self.num_agents), np.int64), [batch])

    def observe(self, feedback: Feedback) -> None:
        """Nothing to learn."""


def run_chatter(rows: int, arrays: bool, num_agents: int = 50, slots: int = 60) -> float:
    """Seconds per slot of :class:`Chatter` through the API (ring of ``num_agents``): array or single messages."""
    return time_api(Chatter(rows), arrays, num_agents, 10, slots, topology="ring")[0] / slots


def message_volume(repeats: int) -> None:
    """Print the API's time per slot with array and with single messages as the messages per agent grow (M = 50)."""
    print(f"M = 50 agents on a ring, {repeats} interleaved repeats, median; messages sent and received per slot")
    for rows in (1, 10, 50):
        seconds: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for arrays in (True, False):
                seconds[arrays].append(run_chatter(rows, arrays))
        array, single = statistics.median(seconds[True]), statistics.median(seconds[False])
        print(
            f"{2 * rows * 50:>6} messages/slot: array messages {array * 1e6:9,.0f} us/slot, "
            f"single messages {single * 1e6:9,.0f} us/slot, {single / array:5.1f}x"
        )


def profile(algorithm: str, slots: int, top: int, batched: bool = False) -> None:
    """cProfile the API loop at M = 50, K = 100 (or, ``batched``, the batched core at B = 100, M = 3, K = 5) and print
    the top functions by cumulative and own time."""
    run: Runner = partial(run_core, algorithm, 100, 3, 5) if batched else partial(run_api, algorithm, 50, 100)
    run(200)  # warm up imports and caches
    profiler = cProfile.Profile()
    profiler.enable()
    elapsed, _ = run(slots)
    profiler.disable()
    shape = "batched core, B=100, M=3, K=5" if batched else "API loop, M=50, K=100"
    print(f"{shape}, {algorithm}, {slots} slots: {elapsed:.3f} s under the profiler")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~0.3 s per measurement, one repeat")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats per row (default 5, quick 1)")
    parser.add_argument("--seconds", type=float, default=None, help="target seconds per measurement (default 2)")
    parser.add_argument("--check-slots", type=int, default=400, help="slots of the same-trajectory check")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall time or the process's CPU time")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results.json", help="JSON output path"
    )
    parser.add_argument("--profile", choices=sorted(ALGORITHMS), help="only profile the API loop at M=50, K=100")
    parser.add_argument("--profile-slots", type=int, default=5000)
    parser.add_argument(
        "--profile-batched", action="store_true", help="profile the batched core (B=100, M=3, K=5) instead"
    )
    parser.add_argument("--profile-top", type=int, default=30)
    parser.add_argument(
        "--message-volume", action="store_true", help="only compare array and single messages as their number grows"
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        metavar="PREFIX",
        help="only the rows whose name starts with a PREFIX (e.g. batched/ api/), and their floors",
    )
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]

    if args.profile:
        profile(args.profile, args.profile_slots, args.profile_top, args.profile_batched)
        return 0
    if args.message_volume:
        message_volume(args.repeats or 3)
        return 0

    target = args.seconds or (0.3 if args.quick else 2.0)
    repeats = args.repeats or (1 if args.quick else 5)
    rows = build_rows() if args.rows is None else selected_rows(build_rows(), args.rows)
    info = machine_info()
    info["load_average_at_start"] = list(os.getloadavg())
    print(
        f"fedbandit-envs throughput  {info['date']}  {info['platform']}  "
        f"numpy {info['numpy']}  cpus {info['cpu_count']}"
    )
    print(
        f"target {target} s per measurement ({args.clock} clock), {repeats} interleaved repeat(s), "
        "best and median repeats reported"
    )

    started = time.perf_counter()
    verify(rows, args.check_slots)
    for row in rows:
        row.slots = calibrate(row, target)
    for _ in range(repeats):
        for row in rows:
            gc.collect()
            row.seconds.append(row.run(row.slots)[0])
    table = summarise(rows)
    print()
    print_table(table)

    by_name = {e["name"]: e for e in table}
    targets = []
    print()
    for name, limit in TARGETS.items():
        if name not in by_name:
            continue
        best, median = by_name[name]["ratio_floor_over_row"], by_name[name]["median_ratio_floor_over_row"]
        verdict = "MET" if median <= limit else "MISSED"
        print(f"target: floor / row <= {limit} for {name}: median {median:.2f} (best {best:.2f}) -> {verdict}")
        targets.append({"row": name, "max_ratio": limit, "ratio": best, "median_ratio": median, "met": median <= limit})
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")

    result = {
        "machine": info,
        "settings": {
            "quick": args.quick,
            "target_seconds": target,
            "repeats": repeats,
            "check_slots": args.check_slots,
            "clock": args.clock,
        },
        "targets": targets,
        "rows": table,
    }
    result["machine"]["load_average_at_end"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
