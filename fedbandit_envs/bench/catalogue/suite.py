"""Scenarios of the suite itself: the baselines on the federated MAB."""

from fedbandit_envs.bench.claims import ordering
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario, register, with_pass_rates

BASELINES = register(
    Scenario(
        name="suite/baselines",
        paper="suite",
        description="Random, independent UCB1 and full-sharing UCB on a homogeneous Bernoulli instance.",
        env_kwargs={"num_agents": 10, "num_arms": 20, "horizon": 5000, "instance_seed": 0},
        algorithms={
            "random": AlgorithmSpec("random"),
            "independent_ucb1": AlgorithmSpec("independent_ucb1"),
            "full_sharing_ucb": AlgorithmSpec("full_sharing_ucb"),
        },
        seeds=10,
        checkpoints=20,
        claims=with_pass_rates(
            (
                ordering(
                    "sharing_helps",
                    "Full sharing beats independent learners, which beat random play (group regret).",
                    ["full_sharing_ucb", "independent_ucb1", "random"],
                ),
            ),
            {"sharing_helps": (10, 10)},
            "0:30 in blocks of 3",
        ),
        scales={"ci": {"horizon": 1000, "seeds": 3}, "paper": {"horizon": 20000, "seeds": 20}},
    )
)
