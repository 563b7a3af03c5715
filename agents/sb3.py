"""Play a trained stable-baselines3 policy as a per-agent learner in ``FederatedMAB``.

Train a model on :class:`fedbandit_envs.families.mab.views.LocalBanditEnv` (``fedbandit/LocalBandit-v0``), then
run one :class:`SB3Agent` per agent, e.g. ``PerAgentPopulation(lambda: SB3Agent(model))``. The agent
rebuilds the ``LocalBanditEnv`` observation (of the same ``observation`` form) from its own PettingZoo
observations, so the policy sees exactly what it saw in training.

stable-baselines3 is not imported here: any object with ``predict(obs, deterministic=...)`` works,
so ``agents`` stays importable without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbandit_envs.core import AgentContext
from fedbandit_envs.families.mab.views import OBSERVATIONS, local_observation, local_space
from fedbandit_envs.protocol import Agent
from fedbandit_envs.validation import check_choice

__all__ = ["SB3Agent"]


class SB3Agent(Agent):
    """One agent playing a trained policy on its local bandit statistics; it sends no messages.

    Every slot it adds its previous pull (``observation["arm"]``, ``observation["reward"]``) to its own
    counts and sums, builds :func:`~fedbandit_envs.families.mab.views.local_observation` of the given form
    with the episode's horizon, reward bounds and ``observation["slot"]``, and pulls
    ``model.predict(obs, deterministic=...)[0]``.

    Args:
        model: a trained stable-baselines3 model or any object with ``predict(obs, deterministic=...)``
            returning ``(action, state)``. If it has an ``observation_space``, its shape must be the
            ``LocalBanditEnv`` shape of the episode's K and of ``observation`` (checked at reset).
        deterministic: passed to ``predict`` (greedy actions by default).
        observation: the ``observation`` form of the ``LocalBanditEnv`` the model was trained on,
            ``"local"`` or ``"statistics"``.
    """

    def __init__(self, model: Any, deterministic: bool = True, observation: str = "local") -> None:
        if not callable(getattr(model, "predict", None)):
            raise TypeError(
                f"model must have a predict(obs, deterministic=...) method (e.g. a stable-baselines3 model), "
                f"got {type(model).__name__}"
            )
        self.model = model
        self.deterministic = bool(deterministic)
        self.observation_kind = check_choice("observation", observation, OBSERVATIONS)

    def reset(self, agent_id: int, context: AgentContext, rng: np.random.Generator) -> None:
        """Zero the statistics and check the model fits ``context.num_arms``."""
        self.agent_id = agent_id
        self.num_arms = context.num_arms
        self.horizon = context.horizon
        self.reward_bounds = context.reward_bounds
        self._check_model_space(context.num_arms)
        self.counts = np.zeros(context.num_arms, np.int64)
        self.sums = np.zeros(context.num_arms)
        space = getattr(self.model, "observation_space", None)
        self._bounds = (getattr(space, "low", None), getattr(space, "high", None))

    def _check_model_space(self, num_arms: int) -> None:
        """Raise ValueError if the model's observation space does not match K arms."""
        space = getattr(self.model, "observation_space", None)
        shape = getattr(space, "shape", None)
        expected = local_space(self.observation_kind, num_arms, self.reward_bounds).shape
        if shape is not None and tuple(shape) != expected:
            raise ValueError(
                f"the model's observation space has shape {tuple(shape)} but a LocalBanditEnv with "
                f"num_arms={num_arms}, observation={self.observation_kind!r} gives shape {expected}; train the "
                f"model on that LocalBanditEnv, or run it with the num_arms and observation it was trained for"
            )

    def observation_vector(self, observation: Mapping[str, Any]) -> np.ndarray:
        """Record the previous pull from a PettingZoo observation and return the policy input."""
        arm, reward = int(observation["arm"]), float(observation["reward"])
        if arm >= 0:
            self.counts[arm] += 1
            self.sums[arm] += reward
        slot = int(observation["slot"])
        obs = local_observation(
            self.observation_kind, arm, reward, self.counts, self.sums, slot, self.horizon, self.reward_bounds
        )
        low, high = self._bounds
        if low is not None and high is not None:
            obs = np.clip(obs, low, high).astype(np.float32)
        return obs

    def act(self, observation: Mapping[str, Any]) -> int:
        """The model's arm for this slot (an int in ``0..K-1``)."""
        if not hasattr(self, "counts"):
            raise RuntimeError("call reset(agent_id, context, rng) before act()")
        action, _ = self.model.predict(self.observation_vector(observation), deterministic=self.deterministic)
        return self._as_arm(action)

    def _as_arm(self, action: Any) -> int:
        """The single integer arm in ``action``, checked against K."""
        array = np.asarray(action)
        if array.size != 1 or array.dtype.kind not in "iu":
            raise TypeError(
                f"model.predict must return one integer action (Discrete(K) policy), got {action!r}; "
                "train the model on LocalBanditEnv"
            )
        arm = int(array.reshape(-1)[0])
        if not 0 <= arm < self.num_arms:
            raise ValueError(f"model.predict returned arm {arm}, outside 0..{self.num_arms - 1}; check num_arms")
        return arm
