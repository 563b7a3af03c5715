"""Benchmark harness: the scenario catalogue, claims, sweeps, reports and learner comparisons."""

from fedbandit_envs.bench.compare import compare
from fedbandit_envs.bench.report import write_report
from fedbandit_envs.bench.scenarios import (
    AlgorithmSpec,
    Claim,
    ClaimVerdict,
    FigureSpec,
    Scenario,
    WrapperSpec,
    get,
    names,
    register,
)
from fedbandit_envs.bench.store import load_frame, load_results
from fedbandit_envs.bench.sweep import run_sweep

__all__ = [
    "AlgorithmSpec",
    "Claim",
    "ClaimVerdict",
    "FigureSpec",
    "Scenario",
    "WrapperSpec",
    "compare",
    "get",
    "load_frame",
    "load_results",
    "names",
    "register",
    "run_sweep",
    "write_report",
]
