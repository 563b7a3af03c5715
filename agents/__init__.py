"""The reference agents: baselines and one module per paper.

Importing the package registers their algorithms (``fedbandit_envs`` finds it through the
``fedbandit_envs.algorithms`` entry point). The protocol they implement, :mod:`fedbandit_envs.protocol`, is
re-exported here.
"""

from agents.baselines import FullSharingCoordinator, FullSharingUCB, IndependentUCB1, Random, RoundRobin
from agents.dubey import ByzantineProofUCB, CooperativeUCB, DPUCBInt, IndividualUCB1, PrivateMultiAgentUCB
from agents.li_song import CDPMAB, DDPMAB, HDPMAB, SingleMAB
from agents.li_wang import AsyncLinUCB, AsyncLinUCBAM, NLinUCB, OneLinUCB, SyncLinUCB
from agents.sb3 import SB3Agent
from agents.solanki import PFCB, FCBExp, FCBSync, NonFederated
from agents.zhu import FedUCB, GossipUCB
from fedbandit_envs.protocol import Agent, Coordinator, PerAgentPopulation, Population

__all__ = [
    "CDPMAB",
    "DDPMAB",
    "HDPMAB",
    "PFCB",
    "Agent",
    "AsyncLinUCB",
    "AsyncLinUCBAM",
    "ByzantineProofUCB",
    "CooperativeUCB",
    "DPUCBInt",
    "Coordinator",
    "FCBExp",
    "FCBSync",
    "FedUCB",
    "FullSharingCoordinator",
    "FullSharingUCB",
    "GossipUCB",
    "IndependentUCB1",
    "IndividualUCB1",
    "NLinUCB",
    "NonFederated",
    "OneLinUCB",
    "PerAgentPopulation",
    "Population",
    "PrivateMultiAgentUCB",
    "Random",
    "RoundRobin",
    "SB3Agent",
    "SingleMAB",
    "SyncLinUCB",
]
