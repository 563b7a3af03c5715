"""The procurement family: aggregators buy units from producers under a quality constraint (env, oracles, views)."""

from fedbandit_envs.families.procurement.env import FAMILY, FedProcurementEnv, ProcurementCore, ProcurementInstance

__all__ = ["FAMILY", "FedProcurementEnv", "ProcurementCore", "ProcurementInstance"]
