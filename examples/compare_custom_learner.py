"""Benchmark your own learners against the reference agents of a scenario, with the Python API.

1. A custom vectorised learner (Thompson sampling, an ``fedbandit_envs.protocol.Population``) is added to the
   ``suite/baselines`` scenario and swept with it: same instances, seeds, checkpoints and cost model
   as the reference agents. The leaderboard ranks everything by final group regret; a report with
   figures is written to ``results/compare_custom_learner/``.
2. A stable-baselines3 policy trained on the single-agent Gymnasium view ``fedbandit/LocalBandit-v0``
   (``observation="statistics"``) plays every agent of the federation (``agents.sb3.SB3Agent``) and is
   benchmarked the same way (training as in ``examples/train_sb3.py``, longer for 20 arms).

After each leaderboard the script says in words why each learner ranks where it does.

The command-line equivalent of step 1 for a learner in an importable module is
``fedbandit compare --agent mypkg.module:MyLearner --scenario suite/baselines``.
Needs the plot and sb3 extras: pip install torch==2.13.0 && pip install 'fedbandit-envs[plot,sb3]'
"""

import os

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import fedbandit_envs  # noqa: F401  (registers the Gymnasium ids)
from agents.sb3 import SB3Agent
from fedbandit_envs.bench.compare import compare
from fedbandit_envs.bench.report import write_report
from fedbandit_envs.bench.scenarios import get
from fedbandit_envs.families.mab.views import PseudoRegretReward
from fedbandit_envs.protocol import Action, Population

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"
SCENARIO = "suite/baselines"
# ci scale of the scenario (1000 slots, 3 seeds); tiny: 60 slots, 2 seeds.
OVERRIDES = {"horizon": 60, "seeds": 2, "checkpoints": 3} if TINY else {}


class ThompsonSampling(Population):
    """Each agent keeps Beta posteriors over its own arms and pulls the arm whose posterior sample is largest.

    Agents do not communicate. Rewards must lie in [0, 1] (the scenario's arms are Bernoulli).

    Args:
        prior: both parameters of the Beta(prior, prior) prior of every arm.
    """

    def __init__(self, prior: float = 1.0) -> None:
        self.prior = prior

    def reset(self, context):
        """Fresh posteriors; randomness only from the replicas' own generators."""
        self.rngs = context.agent_rngs()
        shape = (context.num_replicas, context.num_agents, context.num_arms)
        self.wins = np.full(shape, self.prior)
        self.losses = np.full(shape, self.prior)

    def act(self, step):
        """One posterior sample per (replica, agent, arm); pull the argmax."""
        samples = np.stack([rng.beta(wins, losses) for rng, wins, losses in zip(self.rngs, self.wins, self.losses)])
        return Action(samples.argmax(axis=-1))

    def observe(self, feedback):
        """Update the posterior of the pulled arm of every agent."""
        replica, agent = np.indices(feedback.arms.shape)
        self.wins[replica, agent, feedback.arms] += feedback.rewards
        self.losses[replica, agent, feedback.arms] += 1.0 - feedback.rewards


def explain(comparison) -> None:
    """Print, for each entry of the leaderboard, its rank and the entries the tests could not separate it from."""
    print(f"Why this order (lower final group regret is better; {comparison.entries[0]['n']} seeds per learner):")
    for entry in comparison.entries:
        tied = entry["unseparated"]
        verdict = (
            f"its difference to {', '.join(tied)} is not significant (Welch t-tests, Holm-corrected, 5%), "
            "so they share a rank: more seeds would be needed to order them"
            if tied
            else "significantly different from every other entry"
        )
        print(f"  {entry['algorithm']}: rank {entry['rank']}, regret {entry['mean']:.0f}; {verdict}")


# 1. A custom learner against the reference agents, with a report.
out = "results/compare_custom_learner"
thompson = compare(ThompsonSampling, SCENARIO, label="thompson", out=out, overrides=OVERRIDES)
print(thompson.summary.describe())
print(thompson.markdown())
explain(thompson)
print(
    "Thompson sampling and independent UCB1 learn alone; full sharing pools every agent's samples through the "
    "server and pays for its messages (the cost column); random play never learns.\nreport:",
    write_report(out)[1],
)

# 2. A stable-baselines3 policy trained on one agent's bandit, then benchmarked as every agent's learner.
# The recipe of examples/train_sb3.py: 8 episodes of 100 slots per rollout, minus the pseudo-regret as the
# training reward; 20 arms need more steps than 5 (200 000: about 45 s on an idle core).
torch.set_num_threads(1)  # a tiny network: one thread is fastest
num_arms = get(SCENARIO).at_scale("ci").env_kwargs["num_arms"]
view = {"num_arms": num_arms, "horizon": 100, "observation": "statistics"}
envs = make_vec_env("fedbandit/LocalBandit-v0", n_envs=8, seed=0, env_kwargs=view, wrapper_class=PseudoRegretReward)
steps = 1_600 if TINY else 200_000
model = PPO("MlpPolicy", envs, n_steps=100, batch_size=200, gamma=0.9, learning_rate=1e-3, seed=0)
model.learn(steps, progress_bar=True)
agent_kwargs = {"model": model, "observation": "statistics"}
ppo = compare(SB3Agent, SCENARIO, label="ppo", agent_kwargs=agent_kwargs, overrides=OVERRIDES)
print(ppo.markdown())
explain(ppo)
entries = {entry["algorithm"]: entry for entry in ppo.entries}
means = {name: entry["mean"] for name, entry in entries.items()}
if entries["ppo"]["n"] > 1 and entries["ppo"]["ci95"] == 0:
    verdict = (
        "where it does with the same regret on every seed: its pulls did not depend on the rewards drawn, so "
        "on this one fixed instance its place says which arms its fixed schedule happens to favour, not what "
        "it learned (over fresh instances such a policy scores like random play on average)"
    )
elif means["ppo"] >= means["random"]:
    verdict = "below random play: it has not learned to use what it observes"
else:
    verdict = "above random play: its pulls follow the rewards it observed"
print(
    f"PPO (trained {steps} steps on episodes of 100 slots, played here for {OVERRIDES.get('horizon', 1000)}) "
    f"ranks {verdict}. It learns alone, like independent UCB1 ({means['independent_ucb1']:.0f}); full sharing "
    "pools every agent's samples. examples/train_sb3.py trains on 5 arms and compares PPO with UCB1 over 50 seeds."
)
