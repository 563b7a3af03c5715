"""Train one shared stable-baselines3 policy for every agent of a gossip federation, through SuperSuit.

The fixed-shape form (fedbandit_envs.interop) gives each agent a flat Box observation of its own per-arm
statistics and of those its gossip partners sent it; SuperSuit turns the agents into a vector env.

Needs the interop and sb3 extras: pip install torch==2.13.0 && pip install 'fedbandit-envs[interop,sb3]'
"""

import os

import supersuit
from stable_baselines3 import PPO
from stable_baselines3.common.utils import set_random_seed

from fedbandit_envs.interop import make_fixed_shape

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"
KWARGS = {"num_agents": 4, "num_arms": 3, "horizon": 60}

env = make_fixed_shape("fedbandit/GossipMAB-v0", **KWARGS)
vec = supersuit.pettingzoo_env_to_vec_env_v1(env)
vec = supersuit.concat_vec_envs_v1(vec, 2, num_cpus=0, base_class="stable_baselines3")
set_random_seed(0)
vec.venv.reset(seed=0)  # SuperSuit's SB3 wrapper cannot take PPO(seed=...): seed the envs directly
model = PPO("MlpPolicy", vec, n_steps=32, batch_size=64, n_epochs=1 if TINY else 4)
model.learn(total_timesteps=256 if TINY else 50_000)

evaluation = make_fixed_shape("fedbandit/GossipMAB-v0", **KWARGS)
observations, _ = evaluation.reset(seed=1)
while evaluation.agents:
    actions = {a: model.predict(o, deterministic=True)[0] for a, o in observations.items()}
    observations, rewards, _, _, infos = evaluation.step(actions)
regret = [round(info["pseudo_regret"], 1) for info in infos.values()]
print("pseudo-regret per agent:", regret, "messages:", evaluation.unwrapped.ledger.totals()["messages"])
