"""``examples/train_sb3.py`` at full scale: the PPO policy's regret is clearly below uniform random (slow tier).

The example trains PPO on ``LocalBandit-v0`` (K = 5, T = 100, ``observation="statistics"``, 48 000 steps)
and benchmarks it in a ``FederatedMAB`` of 3 agents on seeds 1000..1049 next to uniform random and
independent UCB1 (final pseudo-regret per agent; mean ± standard error over the 50 seeds). Measured for
training seeds 0..3 (torch 2.13.0 CPU, stable-baselines3 2.9.2):

=====  ===========  ====================================
seed   PPO          random - PPO (paired, mean ± s.e.)
=====  ===========  ====================================
0      14.8 ± 2.2   18.2 ± 2.4
1      20.1 ± 2.7   13.0 ± 2.4
2      15.3 ± 2.3   17.7 ± 2.1
3      16.4 ± 2.0   16.7 ± 2.0
=====  ===========  ====================================

Uniform random: 33.1 ± 1.7; independent UCB1: 17.8 ± 0.7 (the same for every training seed). The paired
advantage over the four training seeds has mean 16.4 and standard deviation 2.4. The margin, 7, is four
such deviations below that mean: PPO's regret must be at least about a fifth below random's. A policy
that ignores its observation and pulls one arm has an advantage of 0 on average.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: The least mean paired regret advantage (random - PPO, per agent, over the example's 50 seeds) accepted.
MARGIN = 7.0


@pytest.fixture(scope="module")
def example():
    """The example module, imported from ``examples/`` (its ``main`` does not run on import)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import train_sb3
    finally:
        sys.path.remove(str(EXAMPLES))
    return train_sb3


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_regret_is_clearly_below_random(example, seed):
    model = example.train(seed=seed, progress_bar=False)
    regrets = example.benchmark(model)
    advantage = regrets["uniform random"] - regrets["PPO (statistics observation)"]  # paired: same instances
    assert advantage.mean() >= MARGIN, {name: round(float(v.mean()), 2) for name, v in regrets.items()}
