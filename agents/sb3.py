"""Play a trained stable-baselines3 policy as a per-agent learner in ``FederatedMAB``.

Train a model on :class:`fedbandit_envs.families.mab.views.LocalBanditEnv` (``fedbandit/LocalBandit-v0``), then
run one :class:`SB3Agent` per agent, e.g. ``PerAgentPopulation(lambda: SB3Agent(model))``. The agent
rebuilds the ``LocalBanditEnv`` observation from its own PettingZoo observations, so the policy sees
exactly what it saw in training.

stable-baselines3 is not imported here: any object with ``predict(obs, deterministic=...)`` works,
so ``agents`` stays importable without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbandit_envs.core import AgentContext
from fedbandit_envs.families.mab.views import local_bandit_observation, local_observation_size
from fedbandit_envs.protocol import Agent

__all__ = ["SB3Agent"]


class SB3Agent(Agent):
    """One agent playing a trained policy on its local bandit statistics; it sends no messages.

    Every slot it adds its previous pull (``observation["arm"]``, ``observation["reward"]``) to its own
    counts and sums, builds :func:`~fedbandit_envs.families.mab.views.local_bandit_observation` with the episode's
    horizon and ``observation["slot"]``, and pulls ``model.predict(obs, deterministic=...)[0]``.

    Args:
        model: a trained stable-baselines3 model or any object with ``predict(obs, deterministic=...)``
            returning ``(action, state)``. If it has an ``observation_space``, its shape must be the
            ``LocalBanditEnv`` shape ``(3 K + 2,)`` of the episode's K (checked at reset).
        deterministic: passed to ``predict`` (greedy actions by default).
    """

    def __init__(self, model: Any, deterministic: bool = True) -> None:
        if not callable(getattr(model, "predict", None)):
            raise TypeError(
                f"model must have a predict(obs, deterministic=...) method (e.g. a stable-baselines3 model), "
                f"got {type(model).__name__}"
            )
        self.model = model
        self.deterministic = bool(deterministic)

    def reset(self, agent_id: int, context: AgentContext, rng: np.random.Generator) -> None:
        """Zero the statistics and check the model fits ``context.num_arms``."""
        self.agent_id = agent_id
        self.num_arms = context.num_arms
        self.horizon = context.horizon
        self._check_model_space(context.num_arms)
        self.counts = np.zeros(context.num_arms, np.int64)
        self.sums = np.zeros(context.num_arms)
        space = getattr(self.model, "observation_space", None)
        self._bounds = (getattr(space, "low", None), getattr(space, "high", None))

    def _check_model_space(self, num_arms: int) -> None:
        """Raise ValueError if the model's observation space does not match K arms."""
        space = getattr(self.model, "observation_space", None)
        shape = getattr(space, "shape", None)
        expected = (local_observation_size(num_arms),)
        if shape is not None and tuple(shape) != expected:
            raise ValueError(
                f"the model's observation space has shape {tuple(shape)} but a LocalBanditEnv with "
                f"num_arms={num_arms} gives shape {expected}; train the model on "
                f"LocalBanditEnv(num_arms={num_arms}) or run it with the num_arms it was trained for"
            )

    def observation_vector(self, observation: Mapping[str, Any]) -> np.ndarray:
        """Record the previous pull from a PettingZoo observation and return the policy input."""
        arm, reward = int(observation["arm"]), float(observation["reward"])
        if arm >= 0:
            self.counts[arm] += 1
            self.sums[arm] += reward
        obs = local_bandit_observation(arm, reward, self.counts, self.sums, int(observation["slot"]), self.horizon)
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
