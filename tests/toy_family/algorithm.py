"""A learner for the toy "guess" family: binary search, sharing the narrowed interval with the neighbours."""

from __future__ import annotations

import numpy as np

from fedbandit_envs.algorithms import register_algorithm
from fedbandit_envs.channel import NEIGHBOURS, MessageBatch
from fedbandit_envs.core import Action, AgentContext, Phase, Step
from fedbandit_envs.protocol import Population
from toy_family.core import GuessFeedback


class IntervalSharing(Population):
    """Every agent guesses uniformly in the interval it knows holds the number, and reports a narrowed one.

    Args:
        share: send narrowed intervals to the neighbours in the report phase (False: every agent alone).
    """

    families = ("guess",)

    def __init__(self, share: bool = True) -> None:
        self.share = share

    def reset(self, context: AgentContext) -> None:
        """Every agent starts with the whole range; one generator per replica."""
        b, m = context.num_replicas, context.num_agents
        self.rngs = context.agent_rngs()
        self.low = np.zeros((b, m), np.int64)
        self.high = np.full((b, m), context.num_arms - 1, np.int64)
        self.narrowed = np.zeros((b, m), bool)

    def act(self, step: Step) -> Action:
        """A uniform guess in each agent's interval."""
        return Action(np.stack([rng.integers(lo, hi + 1) for rng, lo, hi in zip(self.rngs, self.low, self.high)]))

    def observe(self, feedback: GuessFeedback) -> None:
        """Narrow each interval by the hint."""
        low = np.where(feedback.hints > 0, np.maximum(self.low, feedback.arms + 1), self.low)
        high = np.where(feedback.hints < 0, np.minimum(self.high, feedback.arms - 1), self.high)
        hit = feedback.hints == 0
        low, high = np.where(hit, feedback.arms, low), np.where(hit, feedback.arms, high)
        self.narrowed = (low != self.low) | (high != self.high)
        self.low, self.high = low, high

    def send(self, phase: Phase) -> list[MessageBatch]:
        """The narrowed intervals, to every neighbour (nothing when no interval changed)."""
        if not self.share or not self.narrowed.any():
            return []
        replica, sender = np.nonzero(self.narrowed)
        payload = {"low": self.low[replica, sender], "high": self.high[replica, sender]}
        return [MessageBatch("interval", replica, sender, np.full(len(sender), NEIGHBOURS), payload)]

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:
        """Intersect each interval with the neighbours' reports."""
        for batch in inbox:
            np.maximum.at(self.low, (batch.replica, batch.recipient), batch.payload["low"])
            np.minimum.at(self.high, (batch.replica, batch.recipient), batch.payload["high"])


register_algorithm("interval_sharing", IntervalSharing)
register_algorithm("interval_alone", lambda: IntervalSharing(share=False), families="guess")
