"""Compare the baselines on one federated MAB instance: regret, communication cost, and a plot.

Run: python examples/compare_baselines.py   (writes compare_baselines.csv and compare_baselines.png)
"""

import os

from fedbandit_envs.metrics import summarize
from fedbandit_envs.run import Results, run

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"
ENV = {"num_agents": 10, "num_arms": 20, "horizon": 100 if TINY else 3000, "instance_seed": 0}
SEEDS = range(2 if TINY else 10)

results = Results()
for algorithm in ("random", "independent_ucb1", "full_sharing_ucb"):
    results.extend(run(algorithm, ENV, SEEDS, checkpoints=10))

curves = results.to_frame()
final = curves[curves["slot"] == ENV["horizon"]]
regret = summarize(final, "group_regret").set_index("algorithm")
cost = summarize(final, "cost").set_index("algorithm")
for name, row in regret.iterrows():
    print(f"{name:18s} regret {row['mean']:8.1f} +- {row['sem']:5.1f}   cost {cost.loc[name, 'mean']:8.0f}")

results.save(".", "compare_baselines")
try:
    from fedbandit_envs.bench.plots import plot_regret

    plot_regret(results, "compare_baselines.png", band="ci95")
except ImportError:
    print("install the plot extra for the figure: pip install 'fedbandit-envs[plot]'")
