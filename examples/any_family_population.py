"""One learner, written once against the population protocol, on all three families.

``EpsilonGreedy`` implements ``fedbandit_envs.protocol.Population`` and declares the three families. It reads
the episode's ``context`` at reset to learn which family it plays and keeps the statistics that family needs:

* MAB (``AgentContext``): an empirical mean per (agent, arm); the action is an arm per agent.
* linear (``LinearContext``): a ridge regression per client; the action is an arm per *acting* client
  (``step.clients``), chosen from the contexts it observes (``step.contexts``).
* procurement (``ProcurementContext``): a quality estimate per (aggregator, producer); the action is the
  units bought from each producer, up to ``context.capacities``. In the report round after every round
  (a message-only ``Phase``), each aggregator tells its neighbours what it bought and how many units were
  good, and every aggregator adds what it receives to its estimates.

Run it through ``fedbandit_envs.run.run`` (below), or benchmark it from this folder::

    fedbandit compare --agent any_family_population:EpsilonGreedy --path examples --scenario suite/baselines
    fedbandit compare --agent any_family_population:EpsilonGreedy --path examples \\
        --scenario li_wang/fig2c_global_dimension --set horizon=500
"""

from __future__ import annotations

import os

import numpy as np

from fedbandit_envs import NEIGHBOURS, MessageBatch
from fedbandit_envs.families.linear.env import LinearContext
from fedbandit_envs.families.procurement.env import ProcurementContext
from fedbandit_envs.protocol import Action, AgentContext, Phase, Population, Step
from fedbandit_envs.run import run

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"


class EpsilonGreedy(Population):
    """Explore uniformly with probability ``explore``, otherwise play the best estimate, on any family.

    Args:
        explore: the probability of a uniformly random action (per agent and slot).
        ridge: the ridge penalty of the linear family's per-client regression.
    """

    families = ("mab", "linear", "procurement")

    def __init__(self, explore: float = 0.1, ridge: float = 1.0) -> None:
        if not 0.0 <= explore <= 1.0:
            raise ValueError(f"explore must be a probability in [0, 1], got {explore}")
        if ridge <= 0.0:
            raise ValueError(f"ridge must be positive, got {ridge}")
        self.explore = explore
        self.ridge = ridge

    # ------------------------------------------------------------------ the protocol
    def reset(self, context: AgentContext) -> None:
        """Fresh statistics shaped for the family the context describes; randomness from the replicas' streams."""
        self.context = context
        self.rngs = context.agent_rngs()
        b, m = context.num_replicas, context.num_agents
        if isinstance(context, LinearContext):
            d = context.dimension
            self.gram = np.broadcast_to(self.ridge * np.eye(d), (b, m, d, d)).copy()
            self.targets = np.zeros((b, m, d))
        else:  # MAB: agents x arms; procurement: aggregators x producers (num_arms is m, the producers)
            self.counts = np.zeros((b, m, context.num_arms))
            self.sums = np.zeros((b, m, context.num_arms))

    def act(self, step: Step) -> Action:
        """The family's action: arms per agent (MAB), per acting client (linear), units per producer (procurement)."""
        if isinstance(self.context, LinearContext):
            return Action(self._linear_arms(step))
        if isinstance(self.context, ProcurementContext):
            return Action(self._units())
        means = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), np.inf)  # unpulled arms first
        return Action(self._greedy_or_random(means))

    def observe(self, feedback) -> None:
        """Add the step's outcomes to the statistics (the feedback type is the family's)."""
        if isinstance(self.context, LinearContext):
            replica = np.arange(len(feedback.clients))[:, None]
            x = self._played  # (B, m, d): the contexts of the arms just pulled
            self.gram[replica, feedback.clients] += x[..., :, None] * x[..., None, :]
            self.targets[replica, feedback.clients] += feedback.rewards[..., None] * x
        elif isinstance(self.context, ProcurementContext):
            self.counts += feedback.units
            self.sums += feedback.successes
            self.last_units, self.last_successes = feedback.units, feedback.successes
        else:
            replica, agent = np.indices(feedback.arms.shape)
            self.counts[replica, agent, feedback.arms] += 1
            self.sums[replica, agent, feedback.arms] += feedback.rewards

    def send(self, phase: Phase) -> list[MessageBatch]:
        """Procurement report round: every aggregator shares its last round's units and good units."""
        if not isinstance(self.context, ProcurementContext):
            return []
        b, n, _ = self.last_units.shape
        replica, sender = np.indices((b, n))
        return [
            MessageBatch(
                "outcomes",
                replica.ravel(),
                sender.ravel(),
                np.full(b * n, NEIGHBOURS),
                {"units": self.last_units.reshape(b * n, -1), "successes": self.last_successes.reshape(b * n, -1)},
            )
        ]

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:
        """Add the outcomes the neighbours reported to the recipient's quality estimates."""
        for batch in inbox:
            np.add.at(self.counts, (batch.replica, batch.recipient), batch.payload["units"])
            np.add.at(self.sums, (batch.replica, batch.recipient), batch.payload["successes"])

    # ------------------------------------------------------------------ one helper per family
    def _greedy_or_random(self, scores: np.ndarray) -> np.ndarray:
        """Argmax of ``scores`` (B, m, K) per row, replaced by a uniform choice with probability ``explore``."""
        choice = scores.argmax(axis=-1)
        for b, rng in enumerate(self.rngs):
            explore = rng.random(choice.shape[1:]) < self.explore
            choice[b, explore] = rng.integers(scores.shape[-1], size=int(explore.sum()))
        return choice

    def _linear_arms(self, step: Step) -> np.ndarray:
        """Each acting client's arm: the best predicted reward of its contexts under its ridge estimate."""
        replica = np.arange(len(step.clients))[:, None]
        theta = np.linalg.solve(self.gram[replica, step.clients], self.targets[replica, step.clients][..., None])
        arms = self._greedy_or_random((step.contexts @ theta)[..., 0])
        self._played = np.take_along_axis(step.contexts, arms[..., None, None], axis=2)[:, :, 0]
        return arms

    def _units(self) -> np.ndarray:
        """Buy full capacity from the producers whose estimated quality clears alpha and pays, else explore."""
        context = self.context
        quality = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), 1.0)  # untried: optimistic
        pays = (quality >= context.alpha) & (context.rho * quality > context.costs)
        units = np.where(pays, context.capacities, 0)
        for b, rng in enumerate(self.rngs):
            explore = rng.random(units.shape[1]) < self.explore
            units[b, explore] = rng.integers(context.capacities[explore] + 1)
        return units


if __name__ == "__main__":
    horizon = 60 if TINY else 1000
    problems = {
        "mab": {"num_agents": 4, "num_arms": 5, "horizon": horizon, "instance_seed": 0},
        "linear": {"env": "linear", "num_clients": 4, "num_arms": 5, "dimension": 3, "horizon": horizon},
        "procurement": {"env": "procurement", "num_agents": 3, "num_producers": 5, "horizon": horizon},
    }
    for family, env_kwargs in problems.items():
        results = run(EpsilonGreedy, env_kwargs, seeds=range(2), checkpoints=1)
        regret = np.mean([row["group_regret"] for row in results.curves])
        print(f"{family:12s} group regret {regret:9.1f}   messages {results.curves[0]['messages']}")
