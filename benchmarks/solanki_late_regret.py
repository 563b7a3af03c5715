"""Why larger P-FCB federations add more regret late in the run (Solanki et al., EXP3, normal family).

At the paper scale the per-agent regret of P-FCB (eps = 1) falls with n up to t = 5e4, but the regret each agent
adds from t = 5e4 to T = 1e5 (its *late* regret) grows with n, and the claim "regret falls with n" fails at T (the
replication report of Solanki et al. quotes this script). The last message of the pow2 schedule is sent at
t = 32768: whatever an agent does late, it does with the statistics it held then plus its own data.

``table`` sweeps ``solanki/exp3_normal`` at the paper scale (nested agents, D-23) for n = 10 and 40 under five
variants of P-FCB (:data:`VARIANTS`; each into ``OUT/<variant>``, resumable like any sweep) and prints the mean late
regret per agent: of all agents, of agents 0-9 (in both federations), of the agents n = 40 adds, and the part of it
that the margin gamma alone costs (agents whose best decision under the threshold alpha + gamma differs from
the benchmark's under alpha, with the true qualities: spec D-07).

``agents`` runs P-FCB once per instance and prints every agent whose late regret is above 1000, with how its last
decision differs from the best one and how far its estimates of those producers are from the truth.

Usage::

    python benchmarks/solanki_late_regret.py table --out results/solanki_late --seeds 4 --workers 2
    python benchmarks/solanki_late_regret.py agents --agents 10 40 --seed 0
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.solanki import PFCB, PRESETS
from fedbandit_envs.bench.scenarios import get
from fedbandit_envs.bench.sweep import run_sweep
from fedbandit_envs.core import Step
from fedbandit_envs.families.procurement.env import FedProcurementEnv, ProcurementInstance
from fedbandit_envs.families.procurement.oracles import make_oracle
from fedbandit_envs.run import run

SCENARIO = "solanki/exp3_normal"
MIDPOINT = 50_000
STUCK = 1000.0
#: The options each variant changes (the paper's P-FCB first); keys are P-FCB keywords (agents/solanki_config.py).
VARIANTS: dict[str, dict[str, Any]] = {
    "pfcb": {},
    "noise_off": {"noise": False},
    "weight_1": {"comm_weight": 1.0},
    "noise_off_accept_all": {"noise": False, "accept_width_mult": 1e6},
    "gamma_0": {"gamma": 0.0},
}


def paper_env(num_agents: int, instance: int) -> dict[str, Any]:
    """The scenario's paper-scale environment keywords for instance ``instance`` and its first ``num_agents`` agents."""
    return {**get(SCENARIO).at_scale("paper").env_kwargs, "instance_seed": instance, "num_agents": num_agents}


def problem(num_agents: int, instance: int) -> ProcurementInstance:
    """The paper-scale instance ``instance`` of the scenario with its first ``num_agents`` agents."""
    env = FedProcurementEnv(**paper_env(num_agents, instance))
    env.reset(seed=0)
    return env.problem


def margin_price(instance: ProcurementInstance, gamma: float) -> np.ndarray:
    """(n,) regret per round of each agent's best decision under alpha + gamma, against the best under alpha."""
    oracle = make_oracle("greedy")
    quality = np.broadcast_to(instance.quality, instance.costs.shape)
    args = (quality, quality, instance.costs, instance.capacities)
    best = oracle(*args, instance.alpha, instance.rho)
    careful = oracle(*args, instance.alpha + gamma, instance.rho)
    return ((best - careful) * (instance.rho * quality - instance.costs)).sum(axis=1)


def late_regret(results_dir: Path) -> pd.DataFrame:
    """One row per (n, instance, seed, agent) of a sweep: the regret added from MIDPOINT to T."""
    agents = pd.read_parquet(results_dir / "results_agents.parquet")
    table = agents.pivot_table(index=["num_agents", "instance_seed", "seed", "agent"], columns="slot", values="regret")
    return (table[table.columns.max()] - table[MIDPOINT]).rename("late").reset_index()


def table(out: Path, sizes: list[int], instances: list[int], seeds: int, workers: int) -> None:
    """Sweep every variant (resuming what ``out`` holds) and print the late-regret table."""
    problems = {instance: problem(max(sizes), instance) for instance in instances}
    print("variant | n | late per agent | agents 0-9 | agents n adds | of which the margin gamma (D-07)")
    for name, options in VARIANTS.items():
        sweep = {"env.num_agents": sizes, "env.instance_seed": instances}
        sweep.update({f"alg.{key}": [value] for key, value in options.items()})
        run_sweep(SCENARIO, out / name, scale="paper", overrides={"sweep": sweep}, seeds=seeds, workers=workers)
        late = late_regret(out / name)
        gamma = options.get("gamma", PRESETS["default"]["gamma"])
        prices = {instance: margin_price(problems[instance], gamma) for instance in instances}
        late["margin"] = [prices[i][agent] * MIDPOINT for i, agent in zip(late.instance_seed, late.agent, strict=True)]
        for n, rows in late.groupby("num_agents"):
            added = rows[rows.agent >= min(sizes)]
            print(
                f"{name} | {n} | {rows.late.mean():.1f} | {rows[rows.agent < min(sizes)].late.mean():.1f} | "
                f"{added.late.mean() if len(added) else float('nan'):.1f} | {rows.margin.mean():.1f}"
            )


def stuck_agents(num_agents: int, instance: int, seed: int) -> list[dict[str, float]]:
    """Every agent of one P-FCB run whose late regret exceeds STUCK, with its last decision against the best."""
    env_kwargs = paper_env(num_agents, instance)
    horizon = env_kwargs["horizon"]
    population = PFCB(epsilon=1.0)
    result = run(lambda: population, env_kwargs, [seed], checkpoints=[MIDPOINT, horizon])
    regret = {(row["slot"], row["agent"]): row["regret"] for row in result.agents}
    truth = problem(num_agents, instance)
    state = population.state_dict(0)
    count = np.maximum(state["W"], 1.0)
    mean = np.clip(state["Y"] / count, 0.0, 1.0)
    kept = population.act(Step(horizon - 1)).arms[0]  # the decision of the last slot, from the final statistics
    quality = np.broadcast_to(truth.quality, count.shape)
    best = population.oracle(quality, quality, truth.costs, truth.capacities, truth.alpha, truth.rho)
    profit = truth.rho * quality - truth.costs
    rows = []
    for agent in range(num_agents):
        late = regret[(horizon, agent)] - regret[(MIDPOINT, agent)]
        if late <= STUCK:
            continue
        differ = kept[agent] != best[agent]
        own = state["N"][agent][differ].sum() / max(count[agent][differ].sum(), 1.0)
        rows.append(
            {
                "late": late,
                "producers differing": int(differ.sum()),
                "loss per round x late rounds": float(((best[agent] - kept[agent]) * profit[agent]).sum() * MIDPOINT),
                "largest estimate error there": float(np.abs(mean[agent] - truth.quality)[differ].max(initial=0.0)),
                "own share of W there": float(own),
            }
        )
    return rows


def main() -> None:
    """Run the subcommand given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sweep = commands.add_parser("table", help="the late-regret table of the five variants")
    sweep.add_argument("--out", type=Path, default=Path("results/solanki_late"))
    sweep.add_argument("--agents", type=int, nargs="+", default=[10, 40])
    sweep.add_argument("--instances", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    sweep.add_argument("--seeds", type=int, default=4)
    sweep.add_argument("--workers", type=int, default=None)
    agents = commands.add_parser("agents", help="the stuck agents of P-FCB runs")
    agents.add_argument("--agents", type=int, nargs="+", default=[10, 40])
    agents.add_argument("--instances", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    agents.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "table":
        table(args.out, args.agents, args.instances, args.seeds, args.workers)
        return
    for n in args.agents:
        for instance in args.instances:
            for row in stuck_agents(n, instance, args.seed):
                print(f"n = {n}, instance {instance}:", {key: round(value, 3) for key, value in row.items()})


if __name__ == "__main__":
    main()
