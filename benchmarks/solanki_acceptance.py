"""How many shared message entries FCB and P-FCB accept (Solanki et al., EXP1): the cost of privacy, measured.

The paper's P-FCB(eps = 1) has 2.36 (uniform) / 3.35 (normal) times FCB's regret; ours about 1.2-1.5. This
script runs FCB (P-FCB with the noise off, decision D-21) and P-FCB at eps = 1 and 0.3 on one instance and seed
of ``solanki/exp1_<family>`` at the CI scale and prints, per algorithm, how many (sender, receiver, producer)
entries the acceptance test (Procedure 1) accepted out of those offered, the regret per agent and the FRR. The
replication report of Solanki et al. quotes its output (``fedbandit_envs/bench/papers/solanki.py``).

Usage::

    python benchmarks/solanki_acceptance.py uniform normal --instance 0 --seed 0
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agents.solanki import PFCB, FCBExp
from fedbandit_envs.bench.scenarios import get
from fedbandit_envs.run import run

ALGORITHMS: dict[str, Callable[[], PFCB]] = {
    "fcb": FCBExp,
    "pfcb_eps1": lambda: PFCB(epsilon=1.0),
    "pfcb_eps0.3": lambda: PFCB(epsilon=0.3),
}


def acceptance(family: str, instance: int, seed: int) -> list[str]:
    """One line per algorithm: accepted / offered entries, regret per agent and FRR at T."""
    scenario = get(f"solanki/exp1_{family}").at_scale("ci")
    env = {**scenario.env_kwargs, "instance_seed": instance}
    lines = []
    for label, make in ALGORITHMS.items():
        population = make()
        result = run(lambda population=population: population, env, [seed], checkpoints=2)
        state = population.state_dict(0)
        accepted, offered = int(state["accepted"].sum()), int(state["offered"].sum())
        final = max(result.curves, key=lambda row: row["slot"])
        lines.append(
            f"{family} {label}: accepted {accepted} of {offered} offered entries ({accepted / offered:.1%}), "
            f"regret per agent {final['mean_regret']:.1f}, FRR {final['frr']:.3f}"
        )
    return lines


def main() -> None:
    """Print the acceptance counts of each family given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="+", choices=("uniform", "normal"))
    parser.add_argument("--instance", type=int, default=0, help="instance_seed (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    args = parser.parse_args()
    for family in args.families:
        print("\n".join(acceptance(family, args.instance, args.seed)))


if __name__ == "__main__":
    main()
