"""``GuessEnv``: the toy family's PettingZoo environment, a thin dict view over :class:`GuessCore` (B = 1).

Observation of each agent: ``"phase"`` (0 act step, 1 report step), ``"slot"`` (the slot about to be
played), ``"arm"`` (its last guess, -1 before the first), ``"hint"`` (+1 higher, -1 lower, 0 hit or none yet)
and ``"inbox"``. Action: a guess, or ``{"arm": guess}``; in a report step ``{"messages": [Message, ...]}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_envs.core import Action, Step
from fedbandit_envs.env_base import ProtocolParallelEnv
from fedbandit_envs.observations import MessageSequence, inboxes_by_agent, split_action
from fedbandit_envs.seeding import EpisodeSeeds
from toy_family.core import GuessCore, GuessFeedback


class GuessEnv(ProtocolParallelEnv):
    """M agents guess a hidden integer in ``0 .. N-1`` and may tell their neighbours after every slot.

    Args:
        num_agents: M >= 2.
        num_values: N >= 2.
        horizon: T >= 1 slots.
        topology: the agents' graph (default ``"ring"``).
        c2: the price of an agent-agent link used in a slot.
    """

    metadata = {"name": "toy/Guess-v0", "render_modes": [], "is_parallelizable": True}

    def __init__(
        self, num_agents: int = 4, num_values: int = 32, horizon: int = 20, *, topology: str = "ring", c2: float = 1.0
    ) -> None:
        self.core = GuessCore(num_agents, num_values, horizon, topology, c2)
        self.render_mode = None
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        observation = spaces.Dict(
            {
                "phase": spaces.Discrete(2),
                "slot": spaces.Discrete(horizon + 1),
                "arm": spaces.Discrete(num_values + 1, start=-1),
                "hint": spaces.Discrete(3, start=-1),
                "inbox": MessageSequence(),
            }
        )
        action = spaces.Dict({"arm": spaces.Discrete(num_values), "messages": MessageSequence()})
        self._observation_spaces = dict.fromkeys(self.possible_agents, observation)
        self._action_spaces = dict.fromkeys(self.possible_agents, action)
        self._episode_seeds = EpisodeSeeds()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start an episode; ``seed`` fixes every random stream (a wrapper chain hands its hooks in ``options``)."""
        self.reset_core(seed, options)
        m = len(self.possible_agents)
        self._last = GuessFeedback(-1, np.full((1, m), -1), np.zeros((1, m)), np.zeros((1, m), np.int64))
        return self._observations([]), self._infos()

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Play an act step (every live agent's guess) or the pending report step (messages)."""
        self.require_live(actions)
        if self.pending_phase is not None:
            inbox = self.play_phase(actions)
            rewards = dict.fromkeys(self.agents, 0.0)
        else:
            self.check_action_agents(actions)
            guesses = np.zeros((1, len(self.possible_agents)), np.int64)
            for agent, action in actions.items():
                guesses[0, self._index[agent]], sent = split_action(action)
                if sent:
                    raise ValueError(f"{agent} sent messages with its guess; send them in the report step")
            self._last = self.core.play(Action(guesses))
            self.pending_phase = self.core.first_phase()
            inbox, rewards = [], dict(zip(self.agents, self._last.rewards[0].tolist()))
        truncated = self.core.done and self.pending_phase is None
        return self.step_result(self._observations(inbox), rewards, self._infos(), truncated)

    def _observations(self, inbox: list) -> dict[str, dict[str, Any]]:
        inboxes = inboxes_by_agent(inbox, len(self.possible_agents), replica=0)
        return {
            a: {
                "phase": self.phase_flag,
                "slot": self.core.slot,
                "arm": int(self._last.arms[0, i]),
                "hint": int(self._last.hints[0, i]),
                "inbox": tuple(inboxes[i]),
            }
            for i, a in enumerate(self.possible_agents)
        }

    def _infos(self) -> dict[str, dict[str, Any]]:
        regret, sent = self.core.regret[0], self.ledger.sent_messages[0]
        return {a: {"regret": float(regret[i]), "messages_sent": int(sent[i])} for i, a in enumerate(self.agents)}

    # ------------------------------------------------------------------ protocol translation
    def step_from(self, observations: Mapping[str, Mapping[str, Any]]) -> Step:
        """The act phase the observations describe: the slot about to be played."""
        return Step(int(observations[self.possible_agents[0]]["slot"]))

    def actions_from(self, step: Step, action: Action) -> dict[str, Any]:
        """The act step's action dict: every agent's guess of a population's (B = 1) action."""
        return {a: int(action.arms[0, i]) for i, a in enumerate(self.possible_agents)}

    def feedback_from(
        self, step: Step, action: Action, observations: Mapping[str, Mapping[str, Any]], rewards: Mapping[str, float]
    ) -> GuessFeedback:
        """The slot's feedback rebuilt from the observations (guesses, hints) and the rewards."""
        guesses, hints = self.agent_rows(observations, "arm"), self.agent_rows(observations, "hint")
        return GuessFeedback(step.slot, guesses, self.agent_rows(rewards), hints)
