"""Real-data bandit instances: the UCI diabetes data of Zhu et al. (a loader and a synthetic stand-in)."""

from fedbandit_envs.data.diabetes import (
    ARM_DRUGS,
    ARM_NAMES,
    DiabetesRecords,
    diabetes_means,
    load_diabetes_csv,
    records_from_columns,
    standin_means,
    synthetic_diabetes_columns,
    write_diabetes_csv,
)

__all__ = [
    "ARM_DRUGS",
    "ARM_NAMES",
    "DiabetesRecords",
    "diabetes_means",
    "load_diabetes_csv",
    "records_from_columns",
    "standin_means",
    "synthetic_diabetes_columns",
    "write_diabetes_csv",
]
