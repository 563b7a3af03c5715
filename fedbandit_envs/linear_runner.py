"""Play linear federated algorithms (Li and Wang) on the linear and replay environments.

:func:`run` has the signature of :func:`fedbandit_envs.runner.run` and returns the same tidy
:class:`~fedbandit_envs.runner.Results` (``curves``: algorithm, seed, slot, group_regret,
mean_regret, the ledger columns, up/down/peer messages, wall_time; ``agents``: one row per client),
so the benchmark harness and the plots work unchanged. Linear runs add the columns ``reward``
(cumulative realised reward) and, on replay data, ``random_reward`` and ``normalised_reward``
(reward / (random + 1), spec D26) to ``curves``, and ``arrivals`` (the client's interactions so far)
to ``agents``. ``group_regret`` is the pseudo-regret R_T summed over clients; the paper's
communication cost C_T is the ``messages`` column (and ``cost`` with the default price of one unit
per message).

Two paths give identical trajectories for the same seeds (a test checks it): **batched** (every seed
is a replica of one :class:`~fedbandit_envs.envs.linear.LinearCore`) and **pettingzoo** (one
:class:`~fedbandit_envs.envs.linear.FederatedLinear` per seed, driven through its public API).

Algorithms implement :class:`LinearPopulation`. It differs from :class:`agents.base.Population`
because the MAB protocol cannot express this paper's slot: there every agent pulls in every slot and
messages travel with the *next* action, whereas here only the active clients pull (on (K, d)
contexts) and their messages depend on the reward just observed and must reach the server, and its
replies the clients, *before the next slot* (spec section 1.1, D6). So a slot is ``act`` ->
``observe`` -> one or more report rounds (``report`` -> channel and server -> ``receive``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fedbandit_envs.channel import MessageBatch, batches_from_messages
from fedbandit_envs.envs.linear import LinearContext, LinearCore, LinearFeedback, LinearStep
from fedbandit_envs.observations import messages_by_sender
from fedbandit_envs.runner import (
    Recorder,
    Results,
    algorithm_name,
    checkpoint_slots,
    dispatch,
    load_object,
    make_algorithm,
)

__all__ = [
    "ENVIRONMENTS",
    "LINEAR_ALGORITHMS",
    "LinearPopulation",
    "build_env",
    "make_linear_algorithm",
    "run",
    "run_batched",
    "run_pettingzoo",
]

#: Environments by the ``"env"`` key of ``env_kwargs`` (default ``"linear"``).
ENVIRONMENTS: dict[str, str] = {
    "linear": "fedbandit_envs.envs.linear:FederatedLinear",
    "replay": "fedbandit_envs.envs.replay:ReplayStandIn",
    "replay_log": "fedbandit_envs.envs.replay:ReplayLogEnv",
}

#: Linear algorithms known by name (resolved lazily: ``fedbandit_envs`` does not import ``agents``).
LINEAR_ALGORITHMS: dict[str, str] = {
    "async_linucb": "agents.li_wang:AsyncLinUCB",
    "async_linucb_am": "agents.li_wang:AsyncLinUCBAM",
    "sync_linucb": "agents.li_wang:SyncLinUCB",
    "one_linucb": "agents.li_wang:OneLinUCB",
    "n_linucb": "agents.li_wang:NLinUCB",
}


class LinearPopulation(ABC):
    """A vectorised learner acting for every client of B replicas of a linear environment.

    A slot calls :meth:`act`, then :meth:`observe`, then ``m`` report rounds (m active clients per
    slot, usually 1), each :meth:`report` -> channel and server -> :meth:`receive`. Randomness may only
    come from ``context.agent_rngs()``; costs come from the ledger, never from the algorithm.
    """

    #: Whether the population can run B > 1 replicas at once (the runner's batched path).
    supports_batching: bool = True

    def make_coordinator(self) -> Any:
        """The server this algorithm needs (an ``agents.base.Coordinator``), or None."""
        return None

    @abstractmethod
    def reset(self, context: LinearContext) -> None:
        """Start an episode."""

    @abstractmethod
    def act(self, step: LinearStep) -> np.ndarray:
        """(B, m) arms of the active clients, chosen from the statistics they hold."""

    @abstractmethod
    def observe(self, feedback: LinearFeedback) -> None:
        """Keep the rewards of the arms just pulled (the update itself may wait for :meth:`report`)."""

    @abstractmethod
    def report(self, slot: int, positions: np.ndarray) -> list[MessageBatch]:
        """Report round: the active client at ``positions[b]`` of each replica updates; return messages."""

    @abstractmethod
    def receive(self, slot: int, inbox: list[MessageBatch]) -> None:
        """Apply the copies delivered to clients in this round (the server's replies)."""


def make_linear_algorithm(algorithm: Any) -> LinearPopulation:
    """A fresh population from a name in :data:`LINEAR_ALGORITHMS`, ``"module:Class"``, a class or a factory."""
    if isinstance(algorithm, str) and algorithm in LINEAR_ALGORITHMS:
        algorithm = LINEAR_ALGORITHMS[algorithm]
    elif isinstance(algorithm, str) and ":" not in algorithm:
        raise ValueError(f"unknown algorithm {algorithm!r}; use one of {sorted(LINEAR_ALGORITHMS)} or 'module:Class'")
    population = make_algorithm(algorithm)
    if not isinstance(population, LinearPopulation):
        raise TypeError(f"{algorithm!r} built a {type(population).__name__}; linear runs need a LinearPopulation")
    return population


Wrapper = Callable[[Any], Any]


def build_env(population: LinearPopulation, env_kwargs: Mapping[str, Any], wrappers: Sequence[Wrapper]) -> Any:
    """The environment named by ``env_kwargs["env"]`` (default ``"linear"``) hosting the population's server."""
    kwargs = dict(env_kwargs)
    name = kwargs.pop("env", "linear")
    if name not in ENVIRONMENTS:
        raise ValueError(f"env_kwargs['env'] must be one of {sorted(ENVIRONMENTS)}, got {name!r}")
    if "coordinator" in kwargs:
        raise ValueError("env_kwargs must not contain 'coordinator': the algorithm provides its own")
    env = load_object(ENVIRONMENTS[name])(**kwargs, coordinator=population.make_coordinator())
    for wrap in wrappers:
        env = wrap(env)
    return env


class _LinearRecorder(Recorder):
    """The runner's recorder plus the linear columns (reward, replay baseline, arrivals per client)."""

    def record(self, slot: int, core: LinearCore, replica_offset: int = 0) -> None:
        if slot not in self.slots:
            return
        first_curve, first_agent = len(self.results.curves), len(self.results.agents)
        super().record(slot, core, replica_offset)
        num_agents = core.config.num_agents
        for b, row in enumerate(self.results.curves[first_curve:]):
            row.update(core.extra_metrics(b))
            arrivals = core.arrivals[b].tolist()
            rows = self.results.agents[first_agent + b * num_agents : first_agent + (b + 1) * num_agents]
            for agent_row, count in zip(rows, arrivals):
                agent_row["arrivals"] = count


def _play_slot(core: LinearCore, population: LinearPopulation) -> None:
    """One slot of the batched path: act, pull, observe, report rounds."""
    step = core.step
    population.observe(core.pull(population.act(step)))
    for _ in range(core.config.active_per_slot):
        positions = core.reporters()
        inbox = core.communicate(population.report(step.slot, positions))
        population.receive(step.slot, inbox)


def run_batched(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
) -> Results:
    """Run all ``seeds`` as replicas of one batched core."""
    population = make_linear_algorithm(algorithm)
    core: LinearCore = build_env(population, env_kwargs, wrappers).unwrapped.core
    slots = checkpoint_slots(core.config.horizon, checkpoints)
    recorder = _LinearRecorder(label or algorithm_name(algorithm), seeds, slots)
    core.reset(list(seeds))
    population.reset(core.context)
    for t in tqdm(range(core.config.horizon), disable=not progress, desc=recorder.label, mininterval=0.5):
        _play_slot(core, population)
        recorder.record(t + 1, core)
    return recorder.results


def _report_actions(batches: list[MessageBatch], names: list[str]) -> dict[str, Any]:
    """Action dicts of a report step: every sender's messages (the arm is ignored in that phase)."""
    return {names[sender]: {"arm": 0, "messages": messages} for sender, messages in messages_by_sender(batches).items()}


def run_pettingzoo(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
) -> Results:
    """Run each seed through the public PettingZoo API of the environment."""
    results = Results()
    for index, seed in enumerate(seeds):
        population = make_linear_algorithm(algorithm)
        env = build_env(population, env_kwargs, wrappers)
        core: LinearCore = env.unwrapped.core
        names = list(env.possible_agents)
        ids = {name: i for i, name in enumerate(names)}
        recorder = _LinearRecorder(
            label or algorithm_name(algorithm), seeds, checkpoint_slots(core.config.horizon, checkpoints)
        )
        observations, _ = env.reset(seed=seed)
        population.reset(env.unwrapped.context)
        for _ in tqdm(range(core.config.horizon), disable=not progress, desc=f"seed {seed}", mininterval=0.5):
            active = [a for a in env.agents if observations[a]["active"]]
            slot = int(observations[active[0]]["slot"])
            clients = np.array([[ids[a] for a in active]], np.int64)
            contexts = np.stack([observations[a]["contexts"] for a in active])[None]
            arms = population.act(LinearStep(slot, clients, contexts))
            observations, rewards, *_ = env.step({a: int(arms[0, j]) for j, a in enumerate(active)})
            population.observe(LinearFeedback(slot, clients, arms, np.array([[rewards[a] for a in active]])))
            for _ in range(len(active)):
                reporter = next(a for a in env.agents if observations[a]["active"])
                batches = population.report(slot, np.array([active.index(reporter)]))
                observations, *_ = env.step(_report_actions(batches, names))
                delivered = [m for a in observations for m in observations[a]["inbox"]]
                population.receive(slot, batches_from_messages(delivered))
            recorder.record(slot + 1, core, replica_offset=index)
        results.extend(recorder.results)
    return results


def run(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    batched: bool | None = None,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
) -> Results:
    """Play a linear ``algorithm`` on the environment of ``env_kwargs`` for every seed.

    Arguments as :func:`fedbandit_envs.runner.run`, except: ``algorithm`` may name an entry of
    :data:`LINEAR_ALGORITHMS`, and the optional ``env_kwargs["env"]`` selects the environment from
    :data:`ENVIRONMENTS` (default ``"linear"``).
    """
    paths = (run_batched, run_pettingzoo)
    return dispatch(
        make_linear_algorithm, paths, algorithm, env_kwargs, seeds, checkpoints, batched, progress, label, wrappers
    )
