"""Single-agent Gymnasium views of the federated MAB core, for training RL policies.

Both environments drive :class:`~fedbandit_envs.families.mab.core.FederatedMABCore` directly with one
replica (B = 1) and expose a ``Discrete(K)`` action and a flat ``float32`` ``Box`` observation, so any
Gymnasium / stable-baselines3 learner can be trained on them:

* :class:`LocalBanditEnv` (``fedbandit/LocalBandit-v0``): one agent alone with its K-armed bandit.
* :class:`FederatedClientEnv` (``fedbandit/FederatedClient-v0``): the learner is client 0 of a
  federation whose other clients and server run a reference algorithm (see :data:`PEER_ALGORITHMS`).

The observation holds the agent's sufficient statistics, so a memoryless policy can learn a bandit
strategy. Its local part comes in two forms, chosen by the views' ``observation`` argument (see
:data:`OBSERVATIONS`): ``"local"`` (:func:`local_bandit_observation`: last pull, counts, empirical means,
slot) and ``"statistics"`` (:func:`arm_statistics_observation`: per-arm counts, empirical means, UCB1
bonus and index gap, untried flag, slot), from which a small policy learns an index strategy quickly.
:func:`local_observation` builds either; ``agents.sb3.SB3Agent`` reuses it to play a trained policy
inside the multi-agent :class:`~fedbandit_envs.families.mab.env.FederatedMAB`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from fedbandit_envs.algorithms import make_algorithm
from fedbandit_envs.channel import ChannelConfig, CostModel, MessageBatch
from fedbandit_envs.core import message_phases, reset_population
from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.rendering import VIEW_RENDER_MODES, RenderedView
from fedbandit_envs.validation import check_choice, check_render_mode, discrete_action, keyword_checked

__all__ = [
    "OBSERVATIONS",
    "PEER_ALGORITHMS",
    "FederatedClientEnv",
    "LocalBanditEnv",
    "PseudoRegretReward",
    "arm_statistics_observation",
    "arm_statistics_space",
    "local_bandit_observation",
    "local_bandit_space",
    "local_observation",
    "local_observation_size",
    "local_space",
    "statistics_observation_size",
]

#: The learner's agent index in :class:`FederatedClientEnv`.
LEARNER = 0


# ---------------------------------------------------------------------- observation helpers
def local_observation_size(num_arms: int) -> int:
    """Length ``3 K + 2`` of the :func:`local_bandit_observation` vector for ``num_arms`` = K."""
    return 3 * int(num_arms) + 2


def local_bandit_observation(
    last_arm: int,
    last_reward: float,
    counts: np.ndarray,
    sums: np.ndarray,
    slot: int,
    horizon: int,
) -> np.ndarray:
    """The flat ``float32`` observation of one agent's local bandit statistics.

    Layout (K = ``len(counts)``, length ``3 K + 2``):

    * ``[0, K)``: one-hot of the last arm pulled (all zeros before the first pull, ``last_arm = -1``);
    * ``[K]``: the last reward (0 before the first pull);
    * ``[K + 1, 2 K + 1)``: per-arm pull counts divided by ``horizon``;
    * ``[2 K + 1, 3 K + 1)``: per-arm empirical means ``sums / counts`` (0 for untried arms);
    * ``[3 K + 1]``: ``slot / horizon``, the elapsed fraction of the episode (``slot`` is the slot
      about to be played: 0 after reset).

    Args:
        last_arm: the arm pulled in the previous slot, or -1 for none.
        last_reward: the reward of that pull.
        counts: (K,) pulls of each arm so far.
        sums: (K,) summed rewards of each arm so far.
        slot: the index of the slot about to be played.
        horizon: T, the episode length (normalises counts and slot).
    """
    counts, sums = _checked_statistics(counts, sums, horizon)
    num_arms = len(counts)
    if not -1 <= int(last_arm) < num_arms:
        raise ValueError(f"last_arm must be -1 (no pull yet) or an arm in 0..{num_arms - 1}, got {last_arm}")
    one_hot = np.zeros(num_arms)
    if last_arm >= 0:
        one_hot[int(last_arm)] = 1.0
    parts = (one_hot, [float(last_reward)], counts / horizon, _empirical_means(counts, sums), [slot / horizon])
    return np.concatenate(parts).astype(np.float32)


def _checked_statistics(counts: np.ndarray, sums: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """``counts`` and ``sums`` as float arrays, checked to be 1-D of one length K, and ``horizon >= 1``."""
    counts = np.asarray(counts, dtype=np.float64)
    sums = np.asarray(sums, dtype=np.float64)
    if counts.ndim != 1 or counts.shape != sums.shape:
        raise ValueError(
            f"counts and sums must be 1-D arrays of the same length K, got shapes {counts.shape} and {sums.shape}"
        )
    if int(horizon) < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    return counts, sums


def _empirical_means(counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Per-arm ``sums / counts``, 0 for arms never pulled."""
    return np.divide(sums, counts, out=np.zeros(len(counts)), where=counts > 0)


def _value_bounds(reward_bounds: tuple[float, float]) -> tuple[float, float]:
    """Bounds of a reward-valued entry that is 0 when unknown: the reward support widened to hold 0."""
    low, high = reward_bounds
    return min(float(low), 0.0), max(float(high), 0.0)


def local_bandit_space(num_arms: int, reward_bounds: tuple[float, float]) -> spaces.Box:
    """The ``Box`` of :func:`local_bandit_observation` for K arms and rewards in ``reward_bounds``.

    Rewards and empirical means lie in the reward support widened to contain 0 (their value before
    any pull); every other entry lies in [0, 1]. Unbounded reward models give infinite bounds.
    """
    low, high = _value_bounds(reward_bounds)
    lows = np.zeros(local_observation_size(num_arms), np.float32)
    highs = np.ones(local_observation_size(num_arms), np.float32)
    for index in _value_slices(num_arms):
        lows[index], highs[index] = low, high
    return spaces.Box(lows, highs, dtype=np.float32)


def _value_slices(num_arms: int) -> tuple[slice, slice]:
    """Where the reward-valued entries (last reward, empirical means) sit in the local observation."""
    return slice(num_arms, num_arms + 1), slice(2 * num_arms + 1, 3 * num_arms + 1)


def statistics_observation_size(num_arms: int) -> int:
    """Length ``5 K + 1`` of the :func:`arm_statistics_observation` vector for ``num_arms`` = K."""
    return 5 * int(num_arms) + 1


def _reward_width(reward_bounds: tuple[float, float]) -> float:
    """The width of the reward support, the scale of the UCB1 bonus; 1 for an unbounded support."""
    low, high = reward_bounds
    width = float(high) - float(low)
    return width if np.isfinite(width) else 1.0


def arm_statistics_observation(
    counts: np.ndarray,
    sums: np.ndarray,
    slot: int,
    horizon: int,
    reward_bounds: tuple[float, float] = (0.0, 1.0),
) -> np.ndarray:
    """Per-arm sufficient statistics and UCB1 terms of one agent, as a flat ``float32`` vector.

    With K = ``len(counts)``, t = ``counts.sum()`` pulls so far, ``w`` the width of ``reward_bounds``
    (1 if unbounded) and ``c = sqrt(2 ln max(horizon, 2))`` the largest UCB1 bonus of the episode,
    the vector (length ``5 K + 1``) holds five blocks of K entries, then one scalar:

    * ``[0, K)``: pull counts divided by ``horizon`` (in [0, 1]);
    * ``[K, 2 K)``: empirical means ``sums / counts`` (reward-valued, 0 for untried arms);
    * ``[2 K, 3 K)``: the UCB1 bonus ``sqrt(2 ln t / n_k)`` divided by ``c``, clipped to [0, 1]; 1 for
      untried arms;
    * ``[3 K, 4 K)``: the UCB1 index gap ``(I_k - max_j I_j) / w`` with
      ``I_k = mean_k + w sqrt(2 ln t / n_k)`` over the tried arms, clipped to [-1, 0]; 0 for untried
      arms (UCB1 pulls them first), so the arm UCB1 would pull has gap 0;
    * ``[4 K, 5 K)``: 1 for arms never pulled, else 0;
    * ``[5 K]``: ``slot / horizon``, the elapsed fraction of the episode.

    Args:
        counts: (K,) pulls of each arm so far.
        sums: (K,) summed rewards of each arm so far.
        slot: the index of the slot about to be played.
        horizon: T, the episode length.
        reward_bounds: the support of the rewards (scales the bonus and the gap).
    """
    counts, sums = _checked_statistics(counts, sums, horizon)
    tried = counts > 0
    means = _empirical_means(counts, sums)
    width, cap = _reward_width(reward_bounds), np.sqrt(2.0 * np.log(max(int(horizon), 2)))
    log_pulls = np.log(max(float(counts.sum()), 1.0))
    bonus = np.ones(len(counts))
    np.divide(np.sqrt(2.0 * log_pulls / np.maximum(counts, 1.0)), cap, out=bonus, where=tried)
    gap = np.zeros(len(counts))
    if tried.any():
        index = means + width * cap * bonus
        gap[tried] = (index[tried] - index[tried].max()) / width
    parts = (counts / horizon, means, np.minimum(bonus, 1.0), np.maximum(gap, -1.0), ~tried, [slot / horizon])
    return np.concatenate(parts).astype(np.float32)


def arm_statistics_space(num_arms: int, reward_bounds: tuple[float, float]) -> spaces.Box:
    """The ``Box`` of :func:`arm_statistics_observation` for K arms and rewards in ``reward_bounds``.

    Empirical means lie in the reward support widened to contain 0; gaps in [-1, 0]; every other entry
    in [0, 1].
    """
    low, high = _value_bounds(reward_bounds)
    lows = np.zeros(statistics_observation_size(num_arms), np.float32)
    highs = np.ones(statistics_observation_size(num_arms), np.float32)
    lows[num_arms : 2 * num_arms], highs[num_arms : 2 * num_arms] = low, high
    lows[3 * num_arms : 4 * num_arms], highs[3 * num_arms : 4 * num_arms] = -1.0, 0.0
    return spaces.Box(lows, highs, dtype=np.float32)


#: The forms of the local observation of the views (their ``observation`` argument).
OBSERVATIONS: tuple[str, ...] = ("local", "statistics")


def local_space(observation: str, num_arms: int, reward_bounds: tuple[float, float]) -> spaces.Box:
    """The ``Box`` of the local observation named ``observation`` (a member of :data:`OBSERVATIONS`)."""
    if check_choice("observation", observation, OBSERVATIONS) == "statistics":
        return arm_statistics_space(num_arms, reward_bounds)
    return local_bandit_space(num_arms, reward_bounds)


def local_observation(
    observation: str,
    last_arm: int,
    last_reward: float,
    counts: np.ndarray,
    sums: np.ndarray,
    slot: int,
    horizon: int,
    reward_bounds: tuple[float, float],
) -> np.ndarray:
    """The local observation named ``observation``.

    ``"local"``: :func:`local_bandit_observation`; ``"statistics"``: :func:`arm_statistics_observation`
    (which ignores ``last_arm`` and ``last_reward``).
    """
    if check_choice("observation", observation, OBSERVATIONS) == "statistics":
        return arm_statistics_observation(counts, sums, slot, horizon, reward_bounds)
    return local_bandit_observation(last_arm, last_reward, counts, sums, slot, horizon)


class PseudoRegretReward(gymnasium.Wrapper):
    """Training reward for RL learners: minus the pull's pseudo-regret instead of the sampled reward.

    Wraps any view whose info reports ``instant_regret`` (the best arm's mean minus the pulled arm's
    mean: :class:`LocalBanditEnv`, :class:`FederatedClientEnv`, the linear view). In expectation the new
    reward differs from the sampled one by a constant of the instance, so the best policy is unchanged,
    but it carries no reward noise, which makes policy gradients far less noisy. Observations are
    untouched: a policy trained through it plays the unwrapped view, or ``agents.sb3.SB3Agent``, as is.
    It uses the environment's hidden means, so use it for training only, never to score a learner.
    """

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the view; the reward becomes ``-info["instant_regret"]``."""
        observation, _, terminated, truncated, info = self.env.step(action)
        if "instant_regret" not in info:
            raise TypeError(
                f"PseudoRegretReward needs a view whose info reports 'instant_regret'; "
                f"{type(self.env.unwrapped).__name__} reports {sorted(info)}"
            )
        return observation, -float(info["instant_regret"]), terminated, truncated, info


# ---------------------------------------------------------------------- shared state
class _LocalStatistics:
    """One agent's pull counts, reward sums and last pull."""

    def __init__(self, num_arms: int) -> None:
        self.counts = np.zeros(num_arms, np.int64)
        self.sums = np.zeros(num_arms)
        self.last_arm = -1
        self.last_reward = 0.0

    def record(self, arm: int, reward: float) -> None:
        """Add one pull."""
        self.counts[arm] += 1
        self.sums[arm] += reward
        self.last_arm, self.last_reward = arm, reward

    def observation(self, kind: str, slot: int, horizon: int, reward_bounds: tuple[float, float]) -> np.ndarray:
        """The :func:`local_observation` named ``kind`` of these statistics."""
        return local_observation(
            kind, self.last_arm, self.last_reward, self.counts, self.sums, slot, horizon, reward_bounds
        )


def _server_problem(
    num_agents: int,
    num_arms: int,
    horizon: int,
    instance: Any,
    instance_params: Mapping[str, Any] | None,
    reward_model: Any,
    reward_params: Mapping[str, Any] | None,
    instance_seed: int | None,
    channel: ChannelConfig | None = None,
) -> MABConfig:
    """The problem of a single-agent view: the view's instance and rewards around a server (validated here)."""
    return MABConfig(
        num_agents=num_agents,
        num_arms=num_arms,
        horizon=horizon,
        instance=instance,
        instance_params=instance_params,
        reward_model=reward_model,
        reward_params=reward_params,
        topology="server",
        channel=channel or ChannelConfig(),
        instance_seed=instance_seed,
    )


class _CoreView(RenderedView):
    """Seeding, episode bookkeeping and rendering shared by the single-agent views."""

    core: FederatedMABCore
    _local_space: spaces.Box
    #: The form of the local observation, a member of :data:`OBSERVATIONS`.
    observation_kind: str

    def _setup(self, render_mode: str | None, observation: str, config: MABConfig, peers: Any = None) -> None:
        """Check the view's options and build its core on ``config``, hosting the server of the ``peers`` population.

        The core is reset once as a validation probe, so an invalid instance or reward model fails at construction.
        """
        self.render_mode = check_render_mode(render_mode, VIEW_RENDER_MODES)
        self.observation_kind = check_choice("observation", observation, OBSERVATIONS)
        if peers is None:
            self.core = FederatedMABCore(config)
        else:
            self.core = FederatedMABCore(config, peers.make_coordinator(), peers.boundary_hops)
        self.core.reset([0])
        self.action_space = spaces.Discrete(config.num_arms)
        self._local_space = local_space(self.observation_kind, config.num_arms, self.core.reward_model.bounds)
        self._started = False

    def _start(self, core: FederatedMABCore, seed: int | None) -> None:
        """Reset the core with a replica seed derived from ``seed`` (or drawn from ``np_random``)."""
        super().reset(seed=seed)
        replica_seed = int(seed) if seed is not None else int(self.np_random.integers(2**63 - 1))
        core.reset([replica_seed])
        self._stats = _LocalStatistics(core.config.num_arms)
        self._started = True

    @property
    def horizon(self) -> int:
        """T, the number of steps of an episode."""
        return self.core.config.horizon

    def _step_core(self, arms: np.ndarray, messages: list[MessageBatch]) -> tuple[int, float]:
        """Play one slot of the core and record the learner's pull; return (arm, reward)."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        feedback = self.core.step(arms, messages)
        arm, reward = int(feedback.arms[0, LEARNER]), float(feedback.rewards[0, LEARNER])
        self._stats.record(arm, reward)
        self._feedback = feedback
        return arm, reward

    def _local_observation(self) -> np.ndarray:
        """The learner's local statistics, clipped to the space (guards against rounding)."""
        cfg = self.core.config
        obs = self._stats.observation(self.observation_kind, self.core.slot, cfg.horizon, self.core.reward_model.bounds)
        low, high = self._local_space.low, self._local_space.high
        return np.clip(obs, low, high).astype(np.float32)

    def _regret_info(self) -> dict[str, Any]:
        """The learner's cumulative and last-slot pseudo-regret."""
        return {
            "pseudo_regret": float(self.core.regret[0, LEARNER]),
            "instant_regret": float(self.core.last_regret[0, LEARNER]),
        }

    def summary(self) -> str:
        """Slot, last arm and reward, and the info values (what ``render()`` shows in ``"ansi"`` mode)."""
        stats = self._stats
        info = self._info()
        extra = "".join(f"  {k} {v:.2f}" for k, v in info.items() if k != "instant_regret")
        return (
            f"slot {self.core.slot}/{self.core.config.horizon}  last arm {stats.last_arm}  "
            f"reward {stats.last_reward:.3f}{extra}"
        )

    def bars(self) -> tuple[np.ndarray, int | None]:
        """The learner's pulls of each arm relative to its most pulled arm, the last arm highlighted."""
        if not self._started:
            return np.zeros(self.core.config.num_arms), None
        counts = self._stats.counts
        return counts / max(int(counts.max()), 1), (None if self._stats.last_arm < 0 else self._stats.last_arm)

    def _info(self) -> dict[str, Any]:
        """The step's info dict (overridden by each view)."""
        return self._regret_info()


# ---------------------------------------------------------------------- (a) local bandit
@keyword_checked
class LocalBanditEnv(_CoreView):
    """One agent's local K-armed bandit as a single-agent Gymnasium environment.

    The core runs with one agent and no communication. Each step pulls the arm given as action and
    returns the bandit reward. The horizon is a truncation (``terminated`` is always False).

    Observation (flat ``float32``), chosen by ``observation``:

    * ``"local"`` (default): :func:`local_bandit_observation`, length ``3 K + 2``: ``[one-hot last arm (K),
      last reward (1), counts / horizon (K), empirical means (K, 0 if untried), slot / horizon (1)]``.
    * ``"statistics"``: :func:`arm_statistics_observation`, length ``5 K + 1``: ``[counts / horizon (K),
      empirical means (K), UCB1 bonus / its maximum (K), UCB1 index gap to the best arm (K, in [-1, 0]),
      untried flag (K), slot / horizon (1)]``. The UCB1 terms make an index strategy a simple function
      of the observation: PPO trained for 48 000 steps (K = 5, T = 100) halves uniform random's regret
      and comes near UCB1's (``examples/train_sb3.py``; measured in docs/environments.md).

    Info: ``pseudo_regret`` (cumulative, against the best arm) and ``instant_regret`` (of the last pull).

    Seeding: ``reset(seed=s)`` runs the core's replica with seed ``s`` (same streams as
    ``FederatedMAB(num_agents=1).reset(seed=s)``); ``reset()`` draws the replica seed from
    ``np_random``, so it continues the stream of the last seeded reset.

    Args:
        num_arms: K >= 2.
        horizon: T >= 1 slots.
        instance: ``"uniform"``, a (K,) mean vector, a BanditInstance, or a callable ``(rng, 1, K) -> means``.
        instance_params: options of the instance generator.
        reward_model: ``"bernoulli"``, ``"gaussian"``, ``"beta"`` or a RewardModel.
        reward_params: options of the reward model (e.g. ``{"sigma": 1.0}``).
        instance_seed: fix the instance across resets (otherwise drawn from each reset's seed).
        render_mode: None, ``"ansi"`` (a text line) or ``"rgb_array"`` (the learner's pulls per arm as a bar
            chart, the last arm highlighted); see :mod:`fedbandit_envs.rendering`.
        observation: ``"local"`` or ``"statistics"`` (see above; :data:`OBSERVATIONS`).

    The problem is built once at construction, so an invalid instance or reward model fails here.
    """

    def __init__(
        self,
        num_arms: int = 10,
        horizon: int = 200,
        instance: Any = "uniform",
        instance_params: Mapping[str, Any] | None = None,
        reward_model: Any = "bernoulli",
        reward_params: Mapping[str, Any] | None = None,
        instance_seed: int | None = None,
        render_mode: str | None = None,
        observation: str = "local",
    ) -> None:
        problem = (instance, instance_params, reward_model, reward_params, instance_seed)
        self._setup(render_mode, observation, _server_problem(1, num_arms, horizon, *problem))
        self.observation_space = self._local_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode (``options`` is unused)."""
        self._start(self.core, seed)
        return self._local_observation(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Pull arm ``action``; return (observation, reward, False, truncated at the horizon, info)."""
        arm = discrete_action(action, self.core.config.num_arms)
        _, reward = self._step_core(np.array([[arm]], np.int64), [])
        return self._local_observation(), reward, False, self.core.done, self._info()


# ---------------------------------------------------------------------- (b) federated client
#: Reference algorithms the peers of :class:`FederatedClientEnv` can run: name -> registered algorithm.
#: A population is an ``fedbandit_envs.protocol.Population``; its ``make_coordinator()`` is hosted by the core.
#: Li and Song's CDP-MAB runs with epsilon = 1 and its noise left to a DP wrapper; its "pooled" broadcast is observed.
PEER_ALGORITHMS: dict[str, str] = {"full_sharing": "full_sharing_ucb", "cdp_mab": "cdp_mab"}


def _make_population(peer_algorithm: str) -> Any:
    """Build the population named ``peer_algorithm``."""
    return make_algorithm(PEER_ALGORITHMS[check_choice("peer_algorithm", peer_algorithm, sorted(PEER_ALGORITHMS))])


@keyword_checked
class FederatedClientEnv(_CoreView):
    """The learner is client 0 of a federation whose other clients and server run a reference algorithm.

    Every step the peer population (see :data:`PEER_ALGORITHMS`) chooses arms for all M agents; client
    0's arm is replaced by the action. Client 0 follows the population's protocol: its messages are the
    population's rows for agent 0, built from the arm it actually pulled and the reward it got (with
    ``"full_sharing"`` it uploads each (arm, reward) sample to the server one slot later, like every
    peer, and receives the server's pooled statistics).

    Observation (flat ``float32``): the local observation of client 0 (``observation="local"``:
    :func:`local_bandit_observation`, ``3 K + 2``; ``"statistics"``: :func:`arm_statistics_observation`,
    ``5 K + 1``; see :class:`LocalBanditEnv`), then the last ``"pooled"`` broadcast client 0 received:
    per-arm pooled counts divided by ``M * horizon`` (K) and pooled empirical means (K, 0 where the pool
    has no pull). The pooled part is zero until the first broadcast with data.

    Reward: client 0's reward. Info: ``pseudo_regret`` and ``instant_regret`` of client 0,
    ``group_pseudo_regret`` (all agents), and client 0's ``messages_sent``, ``bytes_sent`` and
    ``cost`` from the channel's ledger.

    Args:
        num_agents: M >= 1 (client 0 plus M - 1 peers).
        num_arms: K >= 2.
        horizon: T >= 1 slots.
        peer_algorithm: a key of :data:`PEER_ALGORITHMS`.
        instance, instance_params, reward_model, reward_params, instance_seed: as in :class:`LocalBanditEnv`
            (``instance`` may also be ``"heterogeneous"`` or an (M, K) matrix).
        c1: cost of an agent-server link used in a slot.
        render_mode: None, ``"ansi"`` (a text line) or ``"rgb_array"`` (the learner's pulls per arm as a bar
            chart, the last arm highlighted); see :mod:`fedbandit_envs.rendering`.
        observation: the form of the local part, ``"local"`` or ``"statistics"`` (:data:`OBSERVATIONS`).

    Seeding is as in :class:`LocalBanditEnv`.
    """

    observation_space: spaces.Box

    def __init__(
        self,
        num_agents: int = 5,
        num_arms: int = 10,
        horizon: int = 200,
        peer_algorithm: str = "full_sharing",
        instance: Any = "uniform",
        instance_params: Mapping[str, Any] | None = None,
        reward_model: Any = "bernoulli",
        reward_params: Mapping[str, Any] | None = None,
        c1: float = 1.0,
        instance_seed: int | None = None,
        render_mode: str | None = None,
        observation: str = "local",
    ) -> None:
        self.peer_algorithm = peer_algorithm
        self.population = _make_population(peer_algorithm)
        problem = (instance, instance_params, reward_model, reward_params, instance_seed)
        config = _server_problem(num_agents, num_arms, horizon, *problem, channel=ChannelConfig(CostModel(c1=c1)))
        self._setup(render_mode, observation, config, self.population)
        self.observation_space = self._observation_space(config.num_arms, self.core.reward_model.bounds)

    @property
    def coordinator(self) -> Any:
        """The server hosted by the core (None for algorithms without one)."""
        return self.core.coordinator

    def _observation_space(self, num_arms: int, bounds: tuple[float, float]) -> spaces.Box:
        """The local space followed by the pooled counts ([0, 1]) and pooled means (reward-valued)."""
        low, high = _value_bounds(bounds)
        pooled_low = np.concatenate([np.zeros(num_arms), np.full(num_arms, low)]).astype(np.float32)
        pooled_high = np.concatenate([np.ones(num_arms), np.full(num_arms, high)]).astype(np.float32)
        return spaces.Box(
            np.concatenate([self._local_space.low, pooled_low]),
            np.concatenate([self._local_space.high, pooled_high]),
            dtype=np.float32,
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode (``options`` is unused); the peers and the server reset from the same seed."""
        self._start(self.core, seed)
        reset_population(self.population, self.core.context)
        num_arms = self.core.config.num_arms
        self._pooled_counts = np.zeros(num_arms, np.int64)
        self._pooled_sums = np.zeros(num_arms)
        return self._observation(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Client 0 pulls arm ``action`` while the peers follow their algorithm; see the class docstring."""
        arm = discrete_action(action, self.core.config.num_arms)
        if not self._started:
            raise RuntimeError("call reset() before step()")
        joint = self.population.act(self.core.current_step())
        arms = np.array(joint.arms, dtype=np.int64, copy=True)
        arms[0, LEARNER] = arm
        _, reward = self._step_core(arms, list(joint.messages))
        self.population.observe(self._feedback)
        self._read_pooled(self._feedback.inbox)
        message_phases(self.core, self.population, on_inbox=self._read_pooled)
        return self._observation(), reward, False, self.core.done, self._info()

    def _read_pooled(self, inbox: list[MessageBatch]) -> None:
        """Keep the last ``"pooled"`` broadcast delivered to client 0 in this step."""
        for batch in inbox:
            if batch.kind != "pooled" or not {"counts", "sums"} <= batch.payload.keys():
                continue
            rows = np.flatnonzero((batch.replica == 0) & (batch.recipient == LEARNER))
            if len(rows):
                self._pooled_counts = np.array(batch.payload["counts"][rows[-1]], np.int64)
                self._pooled_sums = np.array(batch.payload["sums"][rows[-1]], np.float64)

    def _observation(self) -> np.ndarray:
        """Local statistics of client 0 followed by the pooled statistics it last received."""
        cfg = self.core.config
        counts = self._pooled_counts
        means = _empirical_means(counts, self._pooled_sums)
        pooled = np.concatenate([counts / (cfg.num_agents * cfg.horizon), means]).astype(np.float32)
        obs = np.concatenate([self._local_observation(), pooled])
        return np.clip(obs, self.observation_space.low, self.observation_space.high).astype(np.float32)

    def _info(self) -> dict[str, Any]:
        """Client 0's regret and communication, and the group's regret."""
        ledger = self.core.channel.ledger
        return {
            **self._regret_info(),
            "group_pseudo_regret": float(self.core.regret[0].sum()),
            "messages_sent": int(ledger.sent_messages[0, LEARNER]),
            "bytes_sent": int(ledger.sent_bytes[0, LEARNER]),
            "cost": float(ledger.node_cost[0, LEARNER]),
        }
