"""PettingZoo wrappers that enforce differential privacy on the agents' outgoing messages.

Each wrapper hands a :class:`~wrappers.dp.privatizer.MessagePrivatizer` to the wrapped environment's
simulation core as a message hook of every episode (see :mod:`wrappers.chain`: the wrapped env itself is
never changed), so the same code noises messages whether the env is stepped through the PettingZoo API
or by the runner's batched path. ``infos[agent]`` gains ``epsilon_spent`` and ``delta_spent`` (basic
composition, the guarantee the accountant can prove for that agent so far).

A chain holds one DP wrapper: ``LaplaceMessageDP(GaussianMessageDP(env))`` or
``LaplaceMessageDP(LaplaceMessageDP(env))`` raises a ``ValueError`` (the fields would be noised twice and
charged by two accountants). DP and fault wrappers compose in order, the innermost first.

Example::

    env = LaplaceMessageDP(FederatedMAB(...), epsilon=0.5, budget=5.0, on_exhausted="block")
"""

from __future__ import annotations

from typing import Any

import numpy as np
from typing_extensions import Unpack

from wrappers.chain import HookClassWrapper, HookWrapper, refuse_to_wrap
from wrappers.dp.privatizer import CalibratedOptions, EpsilonSpec, MessagePrivatizer, NoiseSpec
from wrappers.dp.tree import TreePrivatizer


class MessageDP(HookWrapper):
    """Base class: hands a privatizer to the env's episodes and reports epsilon spent in ``infos``.

    One DP wrapper per chain (a second, of any mechanism, raises ``ValueError``); with fault wrappers it
    composes in order, the innermost first (see :mod:`wrappers.chain`).
    """

    kind = "differential privacy"
    combine = (
        "use one DP wrapper with the mechanism and epsilon wanted (epsilon may be a function of the release index)"
    )
    #: The hook of a DP wrapper is always a privatizer.
    hook: MessagePrivatizer

    def __init__(self, env: Any, hook: MessagePrivatizer) -> None:
        super().__init__(env, hook)  # a second DP wrapper is refused first
        refuse_to_wrap(
            type(self).__name__,
            env,
            "holds_copies",
            "a copy it holds back would reach the DP wrapper only when released, to be checked against what its "
            "sender had observed by then and charged in that slot",
            "noise and charge a message in the slot it is sent, then delay its copies",
        )

    @property
    def privatizer(self) -> MessagePrivatizer:
        """The privatizer this wrapper hands to the core (its accountant holds the privacy spent)."""
        return self.hook

    def epsilon_spent(self) -> np.ndarray:
        """Epsilon spent by each agent in this episode (basic composition)."""
        return self.privatizer.epsilon_spent()[0]

    def delta_spent(self) -> np.ndarray:
        """Delta spent by each agent in this episode (basic composition)."""
        return self.privatizer.delta_spent()[0]

    def _with_epsilon(self, infos: dict[str, dict]) -> dict[str, dict]:
        epsilon, delta = self.epsilon_spent(), self.delta_spent()
        index = {name: i for i, name in enumerate(self.possible_agents)}
        for agent, info in infos.items():
            info["epsilon_spent"] = float(epsilon[index[agent]])
            info["delta_spent"] = float(delta[index[agent]])
        return infos

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Reset the env with the chain's hooks (the privatizer starts a fresh accountant)."""
        observations, infos = super().reset(seed=seed, options=options)
        return observations, self._with_epsilon(infos)

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        """Step the env; outgoing messages are privatized on their way to the channel."""
        observations, rewards, terminations, truncations, infos = super().step(actions)
        return observations, rewards, terminations, truncations, self._with_epsilon(infos)


class LaplaceMessageDP(MessageDP):
    """Laplace noise on every ``Sensitive`` message field (pure epsilon-DP per message).

    Args:
        env: a fedbandit environment.
        epsilon: epsilon per message, or a function of the sender's 1-based release index of that kind.
        secure: release through OpenDP's floating-point-safe sampler (the ``secure`` extra; same scale and charge,
            not reproducible: see :mod:`fedbandit_envs.privacy.secure`) instead of seeded numpy noise.

    Keyword Args:
        calibration (str): ``"strict"`` (each message is epsilon-DP) or ``"paper"`` (noise for
            ``n_agg * epsilon``, charged as ``n_agg * epsilon``; Li and Song's CDP-MAB).
        n_agg (int): agents averaged by the receiver (paper calibration).
        budget (float | None): per-agent epsilon budget (basic composition), or None.
        on_exhausted (str): ``"raise"``, ``"drop"`` or ``"block"`` when a message would exceed the budget
            (epsilon or delta).
        strict (bool): undeclared payload fields, kinds outside the public vocabulary and packed counts raise
            (default) instead of passing with a warning.
        budget_delta (float | None): per-agent delta budget, or None; delta never reaches 1 in any case.
        kinds (Iterable[str]): the message kinds the learner sends (public by construction), besides those registered
            with :func:`~fedbandit_envs.channel.privacy.declare_message_kinds`.
    """

    def __init__(
        self,
        env: Any,
        epsilon: EpsilonSpec,
        secure: bool = False,
        **options: Unpack[CalibratedOptions],
    ) -> None:
        super().__init__(env, MessagePrivatizer(NoiseSpec("laplace", secure=secure), epsilon, **options))


class GaussianMessageDP(MessageDP):
    """Gaussian noise on every ``Sensitive`` message field ((epsilon, delta)-DP per message).

    Args:
        env: a fedbandit environment.
        epsilon: epsilon per message, or a function of the sender's 1-based release index of that kind
            (e.g. Solanki et al.'s ``eps_z`` schedule).
        delta: delta per message, in (0, 1).
        gaussian_calibration: ``"classical"`` (sigma = sqrt(2 ln(1.25/delta)) / epsilon per unit
            sensitivity) or ``"analytic"`` (Balle and Wang's tight sigma).
        allow_large_epsilon: accept epsilon >= 1 with the classical calibration (outside its proof;
            Solanki et al.'s schedule reaches it for large budgets).
        secure: as in :class:`LaplaceMessageDP` (OpenDP's Gaussian noise of the same sigma).

    The keywords ``calibration``, ``n_agg``, ``budget``, ``on_exhausted``, ``strict``, ``budget_delta`` and
    ``kinds`` are as in :class:`LaplaceMessageDP`.
    """

    def __init__(
        self,
        env: Any,
        epsilon: EpsilonSpec,
        delta: float,
        gaussian_calibration: str = "classical",
        allow_large_epsilon: bool = False,
        secure: bool = False,
        **options: Unpack[CalibratedOptions],
    ) -> None:
        noise = NoiseSpec("gaussian", delta, gaussian_calibration, allow_large_epsilon, secure)
        super().__init__(env, MessagePrivatizer(noise, epsilon, **options))


class TreeMessageDP(HookClassWrapper, MessageDP):
    """Continual release of running sums with the binary-tree mechanism (one tree per entry).

    A ``Sensitive(aggregate="sum")`` field is read as a running sum of records: each message's
    increment over the previous one enters the sender's tree for that entry, and the noisy prefix sum
    is sent instead. A whole stream costs ``epsilon`` once (charged at its first release).

    Args:
        env: a fedbandit environment (the horizon is the stream length).
        epsilon: total epsilon of each stream.
        secure: release every tree node through OpenDP (the ``secure`` extra; same scale and charge, not
            reproducible).

    The keywords ``budget``, ``on_exhausted``, ``strict``, ``budget_delta`` and ``kinds`` are as in
    :class:`LaplaceMessageDP`.
    """

    hook_class = TreePrivatizer

    def __init__(self, env: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(env, *args, **kwargs)  # a second DP wrapper, or one around MessageDelays, is refused first
        refuse_to_wrap(
            "TreeMessageDP",
            env,
            "splits_broadcasts",
            "it splits every NEIGHBOURS broadcast into one row per recipient, and a running sum is released once per "
            "slot, not once per copy",
            "noise once, then lose or delay copies",
        )
