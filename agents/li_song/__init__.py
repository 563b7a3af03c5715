"""Li and Song, "Privacy-Preserving Communication-Efficient Federated Multi-Armed Bandits" (IEEE JSAC 2022).

Implements ``shared/specs/li-song-fmab.md``: CDP-MAB and its communication-constrained variant
(:class:`CDPMAB`, server :class:`CDPServer`), DDP-MAB with GIS (:class:`DDPMAB`), HDP-MAB with Find
Sink Agents and SAC (:class:`HDPMAB`, :class:`HDPServer`, :func:`find_sink_agents`,
:func:`hybrid_topology`), the Single-MAB baseline (:class:`SingleMAB`), :class:`LiSongMAB` (the
structure chosen from the topology), the public schedules (:mod:`agents.li_song.schedules`) and
:func:`run`, the runner that binds the DP wrapper's epsilon and the instance's gap into the agents, and the
shapes of Theorems 1-4 for plotting (:mod:`agents.li_song.bounds`).
Spec decisions are the defaults; see :mod:`agents.li_song.engine` for the time model (one slot per
hop) and each module for its protocol.
"""

from agents.li_song.cdp import CDPMAB, CDPServer
from agents.li_song.ddp import DDPMAB
from agents.li_song.engine import LiSongConfig, LiSongPopulation
from agents.li_song.hdp import HDPMAB, HDPServer, SinkPlan, find_sink_agents, hybrid_topology, sink_plan
from agents.li_song.runner import run
from agents.li_song.schedules import EpochPlan, epoch_plan, participants, target_accuracy
from agents.li_song.single import SingleMAB
from agents.li_song.structures import LiSongMAB, structure_of
from fedbandit_envs.algorithms import register_algorithm

__all__ = [
    "CDPMAB",
    "DDPMAB",
    "HDPMAB",
    "CDPServer",
    "EpochPlan",
    "HDPServer",
    "LiSongConfig",
    "LiSongMAB",
    "LiSongPopulation",
    "SingleMAB",
    "SinkPlan",
    "epoch_plan",
    "find_sink_agents",
    "hybrid_topology",
    "participants",
    "run",
    "sink_plan",
    "structure_of",
    "target_accuracy",
]

register_algorithm("cdp_mab", CDPMAB)
register_algorithm("ddp_mab", DDPMAB)
register_algorithm("hdp_mab", HDPMAB)
