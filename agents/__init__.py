"""Reference agents: the protocol a learner implements (:mod:`agents.base`) and the baselines."""

from agents.base import Agent, Coordinator, PerAgentPopulation, Population
from agents.baselines import FullSharingCoordinator, FullSharingUCB, IndependentUCB1, Random, RoundRobin
from agents.sb3 import SB3Agent

__all__ = [
    "Agent",
    "Coordinator",
    "FullSharingCoordinator",
    "FullSharingUCB",
    "IndependentUCB1",
    "PerAgentPopulation",
    "Population",
    "Random",
    "RoundRobin",
    "SB3Agent",
]
