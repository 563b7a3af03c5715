"""Train a stable-baselines3 policy on one agent's bandit, then play it inside a federation.

Needs the sb3 extra: pip install torch==2.13.0 && pip install 'fedbandit-envs[sb3]'
"""

import os

import gymnasium
import numpy as np
from stable_baselines3 import PPO

import fedbandit_envs
from agents.sb3 import SB3Agent

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"
NUM_ARMS, HORIZON = 5, 100

env = gymnasium.make("fedbandit/LocalBandit-v0", num_arms=NUM_ARMS, horizon=HORIZON)
model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, seed=0).learn(256 if TINY else 20_000)

federation = fedbandit_envs.FederatedMAB(num_agents=3, num_arms=NUM_ARMS, horizon=HORIZON)
observations, _ = federation.reset(seed=0)
players = {a: SB3Agent(model) for a in federation.agents}
for i, player in enumerate(players.values()):
    player.reset(i, federation.context, np.random.default_rng(i))
while federation.agents:
    observations, rewards, _, _, infos = federation.step(
        {a: players[a].act(observations[a]) for a in federation.agents}
    )
print("pseudo-regret per agent:", [round(info["pseudo_regret"], 1) for info in infos.values()])
