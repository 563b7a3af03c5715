"""Run a population as a real federation on Flower (``pip install fedbandit-envs[flower]``).

The adapter turns a reference algorithm of the MAB, linear or procurement family into a Flower
``ServerApp`` (the coordinator and referee: channel, ledger, regret; peer messages relayed and charged
as agent links) and a ``ClientApp`` per agent (its own learner, its own arms' rewards; the DP wrappers as
a client mod). :func:`run_flower` runs it on Flower's simulation
engine and returns the simulator's result tables; ``docs/deploying-with-flower.md`` tells the design and
its limits.

Importing this package turns Flower's and Ray's usage telemetry off unless the environment already
sets ``FLWR_TELEMETRY_ENABLED`` / ``RAY_USAGE_STATS_ENABLED`` (Flower reads its flag when first imported).
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

try:
    import flwr  # noqa: F401
except ImportError as error:
    raise ImportError("the Flower adapter needs flwr: pip install 'fedbandit-envs[flower]'") from error

from fedbandit_envs.flower.agent import SUPPORTED_FAMILIES, AgentHooks, AgentShard, FederationSpec  # noqa: E402
from fedbandit_envs.flower.apps import FlowerRun, client_app, drive, privacy_mod, server_app  # noqa: E402
from fedbandit_envs.flower.local import LocalGrid, run_local  # noqa: E402
from fedbandit_envs.flower.simulation import run_flower  # noqa: E402

__all__ = [
    "SUPPORTED_FAMILIES",
    "AgentHooks",
    "AgentShard",
    "FederationSpec",
    "FlowerRun",
    "LocalGrid",
    "client_app",
    "drive",
    "privacy_mod",
    "run_flower",
    "run_local",
    "server_app",
]
