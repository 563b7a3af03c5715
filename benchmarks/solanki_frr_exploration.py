"""How the exploration length sets FCB's FRR (Solanki et al., EXP1): the normal-family gap, measured.

The paper's FCB has an implied FRR (regret of FCB / regret of the non-federated learner at T) of about 0.30
(uniform) and 0.20 (normal); ours is about 0.30 and 0.35 at the spec's defaults (zeta = 1, y = 1, decision D-13;
the paper gives neither). This script runs the non-federated learner and FCB on instances of
``solanki/exp1_<family>`` at the CI scale for several zeta, and prints per family and zeta both exploration
lengths, the mean FRR at T and the mean FRR of the regret after the non-federated learner's exploration
(slots tau0_NF + 1 .. T, where both algorithms choose by their indices). The replication report of Solanki et
al. quotes its output (``fedbandit_envs/bench/papers/solanki.py``).

Usage::

    python benchmarks/solanki_frr_exploration.py uniform normal --zeta 1.0 0.7 0.5 --instances 0 1 2 3
    python benchmarks/solanki_frr_exploration.py normal --normal-std 0.1 --zeta 1.0 0.5
"""

from __future__ import annotations

import argparse
import statistics

from agents.solanki import FCBExp, NonFederated, explore_len
from fedbandit_envs.bench.scenarios import get
from fedbandit_envs.run import run


def final_and_after(make: type[NonFederated], zeta: float, env: dict, explored: int) -> tuple[float, float]:
    """Regret per agent at T, and its part after slot ``explored`` (seed 0)."""
    horizon = env["horizon"]
    result = run(lambda: make(zeta=zeta), env, [0], checkpoints=[explored, horizon])
    curve = {row["slot"]: row["mean_regret"] for row in result.curves}
    return curve[horizon], curve[horizon] - curve[explored]


def frr_line(family: str, zeta: float, instances: list[int], std: float | None = None) -> str:
    """One line: exploration lengths, mean FRR at T and after the NF exploration, over ``instances``.

    ``std``: the normal family's standard deviation of qualities and costs (None: the scenario's 0.2).
    """
    scenario = get(f"solanki/exp1_{family}").at_scale("ci")
    horizon, agents = scenario.env_kwargs["horizon"], scenario.env_kwargs["num_agents"]
    shape = dict(scenario.env_kwargs)
    if family == "normal" and std is not None:
        shape["instance_params"] = {"std": std}
    label = f"{family} (std {shape['instance_params']['std']})" if family == "normal" else family
    tau_nf, tau_fcb = explore_len(1, horizon, zeta), explore_len(agents, horizon, zeta)
    at_end, after = [], []
    for instance in instances:
        env = {**shape, "instance_seed": instance}
        nf_final, nf_after = final_and_after(NonFederated, zeta, env, tau_nf)
        fcb_final, fcb_after = final_and_after(FCBExp, zeta, env, tau_nf)
        at_end.append(fcb_final / nf_final)
        after.append(fcb_after / nf_after)
    return (
        f"{label} zeta={zeta}: tau0 NF {tau_nf}, FCB {tau_fcb}; FRR at T {statistics.mean(at_end):.3f} "
        f"(instances {min(at_end):.3f}-{max(at_end):.3f}); FRR after slot {tau_nf} {statistics.mean(after):.3f} "
        f"({min(after):.3f}-{max(after):.3f})"
    )


def main() -> None:
    """Print one line per family and zeta given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="+", choices=("uniform", "normal"))
    zetas = [1.0, 0.7, 0.5]
    parser.add_argument("--zeta", type=float, nargs="+", default=zetas, help="zeta values (default 1, 0.7, 0.5)")
    parser.add_argument("--instances", type=int, nargs="+", default=[0, 1, 2, 3], help="instance seeds (default 0-3)")
    parser.add_argument("--normal-std", type=float, help="the normal family's std (default: the scenario's 0.2)")
    args = parser.parse_args()
    for family in args.families:
        for zeta in args.zeta:
            print(frr_line(family, zeta, args.instances, args.normal_std), flush=True)


if __name__ == "__main__":
    main()
