"""Single-MAB: every agent runs CDP-MAB alone (Algorithm 1 with M = 1), the baseline of Fig. 8 (D24).

Each agent explores, privatizes its own epoch means with Lap(1/(epsilon n_r)) (n_agg = 1, the same
epsilon as the federated runs), eliminates on its own y-bar with C(r) for n_agg = 1 and commits; it
never communicates, so it needs no slot for a round. Agents keep separate active sets and epochs.
Regret is scored against the global means (D14), so under heterogeneous rewards an agent that commits
to its local best arm has linear regret.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from agents.li_song.engine import LiSongPopulation, aggregate_values
from fedbandit_envs.core import AgentContext

__all__ = ["SingleMAB"]


class SingleMAB(LiSongPopulation):
    """Algorithm 1 with M = 1 for every agent, without communication (D24).

    Keywords: ``epsilon`` (each agent's own mechanism) and ``privacy_calibration`` (identical here: n_agg = 1),
    see :class:`LiSongConfig`.
    """

    options = ("epsilon", "privacy_calibration")
    fixed = MappingProxyType({"noise": "agent"})

    def n_agg(self, num_agents: int) -> int:
        """Each agent averages only itself."""
        return 1

    def _federation_of(self, num_replicas: int, num_agents: int) -> np.ndarray:
        """One federation per agent."""
        return np.arange(num_replicas * num_agents).reshape(num_replicas, num_agents)

    def _num_federations(self, num_replicas: int, num_agents: int) -> int:
        return num_replicas * num_agents

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The engine's tables and the per-agent sums of the privatized epoch means."""
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        return {
            **super().memory_parts(context),
            "sums of the epoch means (replicas x agents x arms x 8 B)": 8.0 * b * m * k,
        }

    def reset(self, context: AgentContext) -> None:
        """Per-agent sums of the privatized epoch means."""
        super().reset(context)
        self.totals = np.zeros((context.num_replicas, context.num_agents, context.num_arms))

    def _epoch_done(self, f: int, slot: int, means: np.ndarray) -> None:
        """Eliminate at once on the agent's own y-bar (no communication, no delay)."""
        state, replica, agent = self.states[f], self.fed_replica[f], self.fed_members[f]
        arms = np.flatnonzero(state.active)
        self.totals[replica, agent[:, None], arms[None, :]] += state.current_plan().pulls * means
        values = np.zeros(len(state.active))
        values[arms] = aggregate_values(
            self.totals[replica, agent][:, arms], means, state.current_plan().samples, 1, self.config.aggregate
        )
        survivors, commit = state.decide(values)
        self._finish(f, slot, survivors, commit, values)
