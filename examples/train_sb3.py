"""Train a stable-baselines3 PPO policy on one agent's bandit, then benchmark it inside a federation.

1. PPO trains on ``fedbandit/LocalBandit-v0`` with ``observation="statistics"``: per-arm pull counts,
   empirical means, UCB1 bonus and index gap, untried flags and the elapsed fraction of the episode
   (see ``docs/environments.md``). From these a small policy learns an index strategy within the
   training budget (about 15-20 regret per agent, against 33 for random and 18 for UCB1; the same
   training on the default ``"local"`` observation reached 21).
   During training the reward is the negative pseudo-regret of the pull (``PseudoRegretReward``):
   the same objective as the sampled reward in expectation, without the Bernoulli noise. The policy
   still observes only its own pulls and rewards, so it plays the federation unchanged.
2. The trained policy plays every agent of a ``FederatedMAB`` (``agents.sb3.SB3Agent``, no messages),
   benchmarked with ``run`` against uniform random and independent UCB1 on the same instances and seeds.

Needs the sb3 extra (its progress bar needs tqdm and rich):
pip install torch==2.13.0 && pip install 'fedbandit-envs[sb3]'
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from tqdm import TqdmExperimentalWarning

import fedbandit_envs  # noqa: F401  (registers the Gymnasium ids)
from agents.sb3 import SB3Agent
from fedbandit_envs.families.mab.views import PseudoRegretReward
from fedbandit_envs.protocol import PerAgentPopulation
from fedbandit_envs.run import run

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"
#: The instance: K Bernoulli arms whose means are drawn U[0, 1] afresh for every seed, T slots.
NUM_ARMS, HORIZON = 5, 100
#: Agents of the federation the trained policy is benchmarked in (each learns alone: no messages).
NUM_AGENTS = 3
#: PPO environment steps (8 parallel episodes per rollout; 48 000 steps take 12 s on an idle core, ~2 min under load).
TRAIN_STEPS = 1_600 if TINY else 48_000
#: Seeds of the benchmark runs, one fresh instance each (training episodes start from seeds 0..7 and then
#: draw their instances from the environments' own streams, so the benchmark instances are new to the policy).
EVAL_SEEDS = range(1000, 1002 if TINY else 1050)
VIEW = {"num_arms": NUM_ARMS, "horizon": HORIZON, "observation": "statistics"}


def train(seed: int = 0, steps: int = TRAIN_STEPS, progress_bar: bool = True) -> PPO:
    """PPO on 8 copies of ``fedbandit/LocalBandit-v0`` (statistics observation), seeded with ``seed``.

    Hyper-parameters: one rollout is one episode of each copy (``n_steps = HORIZON``); ``gamma = 0.9``
    (an exploratory pull pays off within a few slots); learning rate 1e-3; everything else SB3's default.
    """
    torch.set_num_threads(1)  # a tiny network: one thread is fastest and leaves the other core free
    warnings.filterwarnings("ignore", category=TqdmExperimentalWarning)  # SB3's bar uses tqdm.rich
    envs = make_vec_env(
        "fedbandit/LocalBandit-v0", n_envs=8, seed=seed, env_kwargs=VIEW, wrapper_class=PseudoRegretReward
    )
    model = PPO("MlpPolicy", envs, n_steps=HORIZON, batch_size=200, gamma=0.9, learning_rate=1e-3, seed=seed)
    return model.learn(steps, progress_bar=progress_bar)


def benchmark(model: PPO, seeds: range = EVAL_SEEDS) -> dict[str, np.ndarray]:
    """Final pseudo-regret per agent (``mean_regret``) of each learner, one value per seed, same instances."""
    env_kwargs = {"num_agents": NUM_AGENTS, "num_arms": NUM_ARMS, "horizon": HORIZON}
    learners = {
        "PPO (statistics observation)": lambda: PerAgentPopulation(lambda: SB3Agent(model, observation="statistics")),
        "independent UCB1": "independent_ucb1",
        "uniform random": "random",
    }
    return {
        name: np.array([row["mean_regret"] for row in run(learner, env_kwargs, seeds, checkpoints=[HORIZON]).curves])
        for name, learner in learners.items()
    }


def main() -> None:
    """Train, benchmark and explain the numbers."""
    start = time.perf_counter()
    model = train()
    print(f"trained PPO (seed 0) for {TRAIN_STEPS} steps in {time.perf_counter() - start:.0f} s")
    regrets = benchmark(model)
    print(
        f"\nPseudo-regret per agent after {HORIZON} slots: the sum over slots of (best arm's mean - pulled arm's "
        f"mean),\nin a FederatedMAB of {NUM_AGENTS} agents and {NUM_ARMS} Bernoulli arms (means drawn U[0, 1] per "
        f"seed). Lower is better.\nMean +- standard error of the mean over {len(EVAL_SEEDS)} seeds "
        f"({EVAL_SEEDS.start}..{EVAL_SEEDS.stop - 1}); every learner plays the same instances and reward draws."
    )
    for name, values in regrets.items():
        sem = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
        print(f"  {name:30s} {values.mean():6.1f} +- {sem:.1f}")
    ppo, random = regrets["PPO (statistics observation)"], regrets["uniform random"]
    print(
        f"\nPPO's regret is {ppo.mean() / random.mean():.0%} of uniform random's. A policy that keeps to one arm "
        "scores like random on average,\nso a value well below random means the policy reacts to what it observed; "
        "near or below UCB1 means it learned\nan index strategy (UCB1's bonus is tuned for long horizons and "
        f"explores more than {HORIZON} slots repay)."
    )


if __name__ == "__main__":
    main()
