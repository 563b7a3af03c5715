"""Single-client Gymnasium view of the linear contextual bandit, for training RL policies.

:class:`LinearBanditEnv` (``fedbandit/LinearBandit-v0``) drives the batched
:class:`~fedbandit_envs.families.linear.env.LinearCore` with one client and one replica: every step shows the
K arm contexts (a ``float32`` Box, flattened to (K d,) by default, or (K, d) with ``flatten=False``), takes a
``Discrete(K)`` arm and returns the linear reward ``theta^T x + eta``. With a fixed ``instance_seed``
theta is the same in every episode, so a memoryless policy can learn ``argmax_k theta^T x_k``
(stable-baselines3 trains on it). Pseudo-regret and the expected rewards stay in ``info``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_envs.families.linear.env import ContextMode, LinearConfig, LinearCore, NoiseKind
from fedbandit_envs.rendering import VIEW_RENDER_MODES, RenderedView
from fedbandit_envs.validation import check_bool, check_render_mode, discrete_action, keyword_checked

__all__ = ["LinearBanditEnv"]


@keyword_checked
class LinearBanditEnv(RenderedView):
    """One client's linear contextual bandit (the paper's setting with N = 1).

    Observation: the K contexts of the slot, ``float32`` in [-1, 1], flattened to shape (K d,) (the
    default: stable-baselines3's MLP policies expect 1-D vectors) or a (K, d) matrix with ``flatten=False``.
    Action: the arm index. Reward: ``theta^T x_arm + eta``. ``terminated`` is always False;
    the horizon is a truncation. Info: ``expected_rewards`` (K,), ``instant_regret`` and
    ``pseudo_regret`` (cumulative).

    Seeding: ``reset(seed=s)`` runs the core's replica with seed ``s`` (the same streams as the
    PettingZoo environment with one client); ``reset()`` draws the replica seed from ``np_random``.

    Args:
        num_arms: K >= 2.
        dimension: d >= 1.
        horizon: T >= 1 steps.
        noise: ``"gaussian"``, ``"uniform"`` or ``"rademacher"``.
        sigma: the noise scale.
        context_mode: ``"ball"`` or ``"pool"``.
        flatten: observe a flat (K d,) vector (default) instead of a (K, d) matrix.
        instance_seed: fix theta across resets (otherwise drawn from each reset's seed).
        render_mode: None, ``"ansi"`` (a text line) or ``"rgb_array"`` (a bar chart of the expected rewards of
            the last slot's K arms mapped from [-1, 1] to [0, 1], the pulled arm highlighted; before the first
            pull, those of the current arms); see :mod:`fedbandit_envs.rendering`.
    """

    def __init__(
        self,
        num_arms: int = 10,
        dimension: int = 5,
        horizon: int = 200,
        noise: NoiseKind = "gaussian",
        sigma: float = 0.1,
        context_mode: ContextMode = "ball",
        flatten: bool = True,
        instance_seed: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.render_mode = check_render_mode(render_mode, VIEW_RENDER_MODES)
        config = LinearConfig(
            num_clients=1,
            num_arms=num_arms,
            dimension=dimension,
            horizon=horizon,
            noise=noise,
            sigma=sigma,
            context_mode=context_mode,
            instance_seed=instance_seed,
        )
        self.core = LinearCore(config)
        self.flatten = check_bool("flatten", flatten)
        num_arms, dimension = config.num_arms, config.dimension
        shape = (num_arms * dimension,) if self.flatten else (num_arms, dimension)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=shape, dtype=np.float32)
        self.action_space = spaces.Discrete(num_arms)
        self._started = False
        self._last_pull: tuple[np.ndarray, int | None] = (np.zeros(num_arms), None)

    @property
    def horizon(self) -> int:
        """T, the number of steps of an episode."""
        return self.core.config.horizon

    def _observation(self) -> np.ndarray:
        contexts = self.core.contexts[0, 0] if not self.core.done else np.zeros(self.core.contexts.shape[2:])
        obs = np.clip(contexts, -1.0, 1.0).astype(np.float32)
        return obs.reshape(self.observation_space.shape)

    def _info(self) -> dict[str, Any]:
        return {"pseudo_regret": float(self.core.regret[0, 0])}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode (``options`` is unused)."""
        super().reset(seed=seed)
        replica_seed = int(seed) if seed is not None else int(self.np_random.integers(2**63 - 1))
        self.core.reset([replica_seed])
        self._started = True
        self._last_pull = (self.core.means[0, 0].copy(), None)
        return self._observation(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Pull arm ``action``; return (observation, reward, False, truncated at the horizon, info)."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        arm = discrete_action(action, self.core.config.num_arms)
        expected = self.core.means[0, 0].copy()
        reward = float(self.core.pull(np.array([[arm]], np.int64)).rewards[0, 0])
        instant = float(self.core.last_regret[0, 0])
        self.core.communicate()
        self._last_pull = (expected, arm)
        info = {**self._info(), "expected_rewards": expected, "instant_regret": instant}
        return self._observation(), reward, False, self.core.done, info

    def summary(self) -> str:
        """Slot and pseudo-regret (what ``render()`` shows in ``"ansi"`` mode)."""
        return f"slot {self.core.slot}/{self.core.config.horizon}  pseudo-regret {self.core.regret[0, 0]:.3f}"

    def bars(self) -> tuple[np.ndarray, int | None]:
        """Expected rewards of the last slot's arms mapped from [-1, 1] to [0, 1], and the arm pulled."""
        expected, arm = self._last_pull
        return (expected + 1.0) / 2.0, arm
