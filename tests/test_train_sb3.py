"""``examples/train_sb3.py`` at full scale: the PPO policy's regret is clearly below uniform random (slow tier).

MEASURED
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: The least mean paired regret advantage (random - PPO, per agent, over the example's 50 seeds) accepted.
MARGIN = 0.0


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
