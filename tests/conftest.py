"""Fixtures shared by the test modules."""

from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def sb3() -> ModuleType:
    """``stable_baselines3`` (the test is skipped without it), with torch on one intra-op thread.

    The tests train tiny MLPs, where threads gain nothing; on a busy 2-core machine OpenMP's waiting threads
    tripled their CPU time (two PPO smoke tests: 20 s of CPU with torch's default 2 threads, 7.5 s with one).
    """
    module = pytest.importorskip("stable_baselines3")
    import torch

    torch.set_num_threads(1)
    return module
