"""Statistical behaviour of the baselines (fixed seeds; tolerances from measured spread)."""

import numpy as np

from fedbandit_envs.run import run


def test_independent_ucb1_regret_grows_logarithmically():
    # Fixed instance, 20 seeds x 5 agents = 100 UCB1 runs. With logarithmic regret the increment over
    # each doubling of T is constant: (R(T) - R(T/2)) / (R(T/2) - R(T/4)) -> 1; sqrt(T) growth gives
    # 1.41 and linear growth 2. Measured over three disjoint seed groups: 1.09, 1.06, 0.96 (sd ~0.065),
    # so the band [0.8, 1.2] is about 3 sd wide and excludes sqrt(T) growth.
    horizon = 16000
    results = run(
        "independent_ucb1",
        {"num_agents": 5, "num_arms": 5, "horizon": horizon, "instance": [0.9, 0.8, 0.7, 0.5, 0.3]},
        seeds=list(range(20)),
        checkpoints=[horizon // 4, horizon // 2, horizon],
    )
    regret = {
        s: np.mean([r["mean_regret"] for r in results.curves if r["slot"] == s])
        for s in (horizon // 4, horizon // 2, horizon)
    }
    increment_ratio = (regret[horizon] - regret[horizon // 2]) / (regret[horizon // 2] - regret[horizon // 4])
    assert 0.8 < increment_ratio < 1.2
    assert regret[horizon] < 0.02 * horizon  # far below the linear regret of a non-learner (0.3 per slot here)


def test_full_sharing_group_regret_below_m_times_single_agent_regret():
    # M x (single-agent regret) is the group regret of M independent UCB1 agents. Measured on this
    # instance: independent 1806 (sd 39), full sharing 524 (sd 32) over 10 seeds; we require the
    # gap to exceed 4 standard errors of each mean.
    env = {"num_agents": 10, "num_arms": 10, "horizon": 2000, "instance_seed": 1}
    seeds = list(range(10))
    independent = run("independent_ucb1", env, seeds, checkpoints=1).column("group_regret")
    sharing = run("full_sharing_ucb", env, seeds, checkpoints=1).column("group_regret")
    sem = lambda x: x.std(ddof=1) / np.sqrt(len(x))  # noqa: E731
    assert sharing.mean() + 4 * sem(sharing) < independent.mean() - 4 * sem(independent)
