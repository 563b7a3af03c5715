"""Benchmark harness: the scenario catalogue, claims, sweeps and reports."""

from fedbandit_envs.bench.scenarios import (
    AlgorithmSpec,
    Claim,
    ClaimVerdict,
    Scenario,
    WrapperSpec,
    get,
    names,
    register,
)

__all__ = ["AlgorithmSpec", "Claim", "ClaimVerdict", "Scenario", "WrapperSpec", "get", "names", "register"]
