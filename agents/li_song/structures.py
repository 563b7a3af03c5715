"""One Li-Song population for all three communication structures, chosen from the topology at reset.

Scenarios that compare structures on one sweep axis (Fig. 12: centralized, decentralized and hybrid
under homogeneous and heterogeneous rewards) sweep ``env.topology`` and run :class:`LiSongMAB`:

* every agent linked to the server and no agent-agent edge: CDP-MAB (:class:`~agents.li_song.cdp.CDPMAB`);
* an agent graph without a server: DDP-MAB with GIS (:class:`~agents.li_song.ddp.DDPMAB`, agent noise);
* components each with one server-linked sink: HDP-MAB with SAC (:class:`~agents.li_song.hdp.HDPMAB`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from agents.configured import option_names
from agents.li_song.cdp import CDPMAB, CDPServer
from agents.li_song.ddp import DDPMAB
from agents.li_song.engine import LiSongConfig, LiSongPopulation, LiSongServer
from agents.li_song.hdp import HDPMAB, HDPServer
from agents.li_song.schedules import participants
from fedbandit_envs.channel import MessageBatch
from fedbandit_envs.core import Action, AgentContext, Feedback, Phase, Step
from fedbandit_envs.topology import Topology

__all__ = ["STRUCTURES", "LiSongMAB", "StructureServer", "structure_of"]

#: The communication structures, in the paper's order.
STRUCTURES = ("centralized", "decentralized", "hybrid")


def structure_of(topology: Topology) -> str:
    """``"centralized"`` (server star), ``"decentralized"`` (no server) or ``"hybrid"`` (sinks)."""
    if topology.server_links.all() and topology.num_edges == 0:
        return "centralized"
    return "hybrid" if topology.has_server else "decentralized"


def _population(structure: str, config: LiSongConfig) -> LiSongPopulation:
    if structure == "centralized":
        return CDPMAB.from_config(config)
    if config.participation < 1.0:
        raise ValueError(f"partial participation is a CDP-MAB variant; the {structure} structure needs participation=1")
    if structure == "decentralized":
        return DDPMAB.from_config(replace(config, noise="agent"))
    return HDPMAB.from_config(config)


class StructureServer(LiSongServer):
    """The server of :class:`LiSongMAB`: CDP-MAB's or HDP-MAB's, or none for DDP-MAB."""

    def reset(self, context: AgentContext, rngs: list[np.random.Generator]) -> None:
        """Pick the server of the topology's structure."""
        structure = structure_of(context.topologies[0])
        servers = {"centralized": CDPServer, "hybrid": HDPServer}
        self.server = servers[structure](self.config) if structure in servers else None
        if self.server is not None:
            self.server.reset(context, rngs)

    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        """Delegate to the structure's server."""
        return self.server.step(slot, inbox) if self.server is not None else []


class LiSongMAB(LiSongPopulation):
    """CDP-, DDP- or HDP-MAB, whichever the environment's topology calls for (see the module docstring).

    Keywords: every :class:`LiSongConfig` field (``participation`` applies to CDP-MAB, ``hybrid_aggregation``
    to HDP-MAB; DDP-MAB always draws its own noise).
    """

    options = option_names(LiSongConfig)

    def n_agg(self, num_agents: int) -> int:
        """N = ceil(p M) (p < 1 only with the centralized structure)."""
        return participants(self.config.participation, num_agents)

    def make_coordinator(self) -> StructureServer:
        """The structure's server, chosen at reset."""
        return StructureServer(self.config)

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The memory of the structure's population."""
        return _population(structure_of(context.topologies[0]), self.config).memory_parts(context)

    def reset(self, context: AgentContext) -> None:
        """Build and reset the population of the topology's structure."""
        self.context = context
        self.inner = _population(structure_of(context.topologies[0]), self.config)
        self.inner.reset(context)

    def act(self, step: Step) -> Action:
        """The structure's action."""
        return self.inner.act(step)

    def observe(self, feedback: Feedback) -> None:
        """The structure's update."""
        self.inner.observe(feedback)

    def send(self, phase: Phase) -> list[MessageBatch]:
        """The structure's boundary hop."""
        return self.inner.send(phase)

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:
        """The structure's reading of the boundary hop."""
        self.inner.receive(phase, inbox)

    def completed(self, replica: int, slots: int) -> tuple[int, int]:
        """The structure's completed rounds and delay slots."""
        return self.inner.completed(replica, slots)
