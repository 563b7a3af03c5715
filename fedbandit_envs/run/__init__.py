"""The run layer: one run loop for every family, its recorder and the tidy results tables."""

from fedbandit_envs.run.loop import (
    DEFAULT_CHECKPOINTS,
    Wrapper,
    build_env,
    clear_reference_cache,
    family_of,
    run,
    run_batched,
    run_pettingzoo,
)
from fedbandit_envs.run.recorder import Recorder, privacy_spent
from fedbandit_envs.run.results import LEDGER_COLUMNS, Results, checkpoint_slots

__all__ = [
    "DEFAULT_CHECKPOINTS",
    "LEDGER_COLUMNS",
    "Recorder",
    "Results",
    "Wrapper",
    "build_env",
    "checkpoint_slots",
    "clear_reference_cache",
    "family_of",
    "privacy_spent",
    "run",
    "run_batched",
    "run_pettingzoo",
]
