"""The UCI "Diabetes 130-US hospitals 1999-2008" bandit of Zhu et al. (spec zhu-gossip-ucb §4.1, §4.3, D22, D23).

Records (Strack et al. 2014; 101,766 inpatient encounters, file ``diabetic_data.csv``) become a federated bandit:

* **Arms** (D23): five drug classes. A record is eligible for an arm if any drug of the class has the value
  ``Steady``, ``Up`` or ``Down`` (see :data:`ARM_DRUGS`); a record may be eligible for several arms.
* **Reward**: 1 if ``readmitted`` is ``">30"`` (the treatment "worked"), 0 for ``"<30"`` and ``"NO"`` (§4.1).
* **Agents** (D22): the records are split into ``num_agents`` equal parts, contiguous in file order by default
  (``split="random"``: a seeded random permutation first).
* Pulling arm k as agent i draws an eligible record of i's part uniformly with replacement and returns its reward.
  That is exactly a Bernoulli draw with mean ``mu[i, k]`` = the part's empirical mean, so the environment is
  ``FederatedMAB(instance=means, reward_model="bernoulli")``; the global mean is the plain average of the parts'
  means (not the pooled mean).

The dataset is never downloaded here. :func:`load_diabetes_csv` reads a copy the user has; without one,
:func:`standin_means` gives a **synthetic stand-in**: records generated with the same schema from approximate
marginals of the real file (drug prevalences) with arm effects larger than the real data's and a drift in file
order, so that the contiguous split has local bias as the paper reports. Its numbers are not the real data's.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from fedbandit_envs.validation import check_int

__all__ = [
    "ACTIVE_VALUES",
    "ARM_DRUGS",
    "ARM_NAMES",
    "MEDICATION_COLUMNS",
    "SCHEMA_COLUMNS",
    "SPLITS",
    "DiabetesRecords",
    "StringColumn",
    "diabetes_means",
    "load_diabetes_csv",
    "records_from_columns",
    "standin_means",
    "synthetic_diabetes_columns",
    "write_diabetes_csv",
]

#: One column of records as string values: a sequence of str or a string array (read with ``np.asarray(c, str)``).
StringColumn = Sequence[str] | np.ndarray

#: The 23 medication columns of ``diabetic_data.csv``, in file order.
MEDICATION_COLUMNS: tuple[str, ...] = (
    "metformin",
    "repaglinide",
    "nateglinide",
    "chlorpropamide",
    "glimepiride",
    "acetohexamide",
    "glipizide",
    "glyburide",
    "tolbutamide",
    "pioglitazone",
    "rosiglitazone",
    "acarbose",
    "miglitol",
    "troglitazone",
    "tolazamide",
    "examide",
    "citoglipton",
    "insulin",
    "glyburide-metformin",
    "glipizide-metformin",
    "glimepiride-pioglitazone",
    "metformin-rosiglitazone",
    "metformin-pioglitazone",
)

#: The 50 columns of ``diabetic_data.csv``, in file order.
SCHEMA_COLUMNS: tuple[str, ...] = (
    "encounter_id",
    "patient_nbr",
    "race",
    "gender",
    "age",
    "weight",
    "admission_type_id",
    "discharge_disposition_id",
    "admission_source_id",
    "time_in_hospital",
    "payer_code",
    "medical_specialty",
    "num_lab_procedures",
    "num_procedures",
    "num_medications",
    "number_outpatient",
    "number_emergency",
    "number_inpatient",
    "diag_1",
    "diag_2",
    "diag_3",
    "number_diagnoses",
    "max_glu_serum",
    "A1Cresult",
    *MEDICATION_COLUMNS,
    "change",
    "diabetesMed",
    "readmitted",
)

#: Arm names (D23).
ARM_NAMES: tuple[str, ...] = ("metformin", "sulfonylureas", "insulin", "thiazolidinediones", "other")

#: The drugs of each arm (D23); together they are the 23 medication columns.
ARM_DRUGS: tuple[tuple[str, ...], ...] = (
    ("metformin",),
    ("chlorpropamide", "glimepiride", "acetohexamide", "glipizide", "glyburide", "tolbutamide", "tolazamide"),
    ("insulin",),
    ("pioglitazone", "rosiglitazone", "troglitazone"),
    (
        "repaglinide",
        "nateglinide",
        "acarbose",
        "miglitol",
        "examide",
        "citoglipton",
        "glyburide-metformin",
        "glipizide-metformin",
        "glimepiride-pioglitazone",
        "metformin-rosiglitazone",
        "metformin-pioglitazone",
    ),
)

#: Medication values that mean the drug was given.
ACTIVE_VALUES: tuple[str, ...] = ("Steady", "Up", "Down")

#: Ways to divide the records among agents (D22).
SPLITS: tuple[str, ...] = ("contiguous", "random")

#: Approximate share of records on each drug in the real file (used only by the synthetic stand-in).
_PREVALENCE = {
    "metformin": 0.196,
    "repaglinide": 0.015,
    "nateglinide": 0.007,
    "chlorpropamide": 0.001,
    "glimepiride": 0.051,
    "acetohexamide": 0.0001,
    "glipizide": 0.125,
    "glyburide": 0.105,
    "tolbutamide": 0.0002,
    "pioglitazone": 0.072,
    "rosiglitazone": 0.063,
    "acarbose": 0.003,
    "miglitol": 0.0004,
    "troglitazone": 0.0001,
    "tolazamide": 0.0004,
    "examide": 0.0001,
    "citoglipton": 0.0001,
    "insulin": 0.534,
    "glyburide-metformin": 0.007,
    "glipizide-metformin": 0.0001,
    "glimepiride-pioglitazone": 0.0001,
    "metformin-rosiglitazone": 0.0001,
    "metformin-pioglitazone": 0.0001,
}

#: Stand-in ">30" probability: base + sum over the record's arms of (effect + drift * (position - 1/2)). The effects
#: are larger than the real data's (chosen so that CI-scale runs resolve the arms); the drift creates local bias.
_BASE_RATE = 0.15
_ARM_EFFECT = np.array([-0.10, 0.10, 0.25, 0.20, 0.05])
_ARM_DRIFT = np.array([-0.20, 0.0, 0.20, 0.30, -0.60])


@dataclass(frozen=True)
class DiabetesRecords:
    """Records reduced to what the bandit needs.

    Attributes:
        eligible: (R, 5) bool, whether each record can be drawn by each arm (:data:`ARM_DRUGS`).
        rewards: (R,) float64, 1.0 for ``">30"`` and 0.0 otherwise.
    """

    eligible: np.ndarray
    rewards: np.ndarray

    def split_means(self, num_agents: int = 3, split: str = "contiguous", seed: int | None = None) -> np.ndarray:
        """The (num_agents, 5) mean reward of each arm's eligible records in each agent's part (D22).

        ``split="contiguous"`` cuts the records into ``num_agents`` consecutive parts (``numpy.array_split``);
        ``"random"`` permutes them first with ``numpy.random.default_rng(seed)``.
        """
        num_agents = check_int("num_agents", num_agents, 1)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if len(self.rewards) < num_agents:
            raise ValueError(f"{len(self.rewards)} records cannot be split among num_agents={num_agents}")
        order = np.arange(len(self.rewards))
        if split == "random":
            order = np.random.default_rng(seed).permutation(order)
        means = np.empty((num_agents, len(ARM_NAMES)))
        for i, part in enumerate(np.array_split(order, num_agents)):
            eligible = self.eligible[part]
            counts = eligible.sum(axis=0)
            if np.any(counts == 0):
                arm = ARM_NAMES[int(np.argmin(counts))]
                raise ValueError(f"agent {i}'s part has no record eligible for arm {arm!r}; use more records")
            means[i] = self.rewards[part] @ eligible / counts
        return means


def records_from_columns(columns: Mapping[str, StringColumn]) -> DiabetesRecords:
    """Eligibility per arm and 0/1 rewards from the medication columns and ``readmitted`` (string values)."""
    missing = [c for c in (*MEDICATION_COLUMNS, "readmitted") if c not in columns]
    if missing:
        raise ValueError(f"the diabetes records lack the columns {missing}; expected the UCI diabetic_data.csv schema")
    readmitted = np.asarray(columns["readmitted"], dtype=str)
    unknown = sorted(set(np.unique(readmitted)) - {"NO", ">30", "<30"})
    if unknown:
        raise ValueError(f"readmitted must be 'NO', '>30' or '<30', found {unknown[:5]}")
    eligible = np.zeros((len(readmitted), len(ARM_DRUGS)), bool)
    for k, drugs in enumerate(ARM_DRUGS):
        for drug in drugs:
            eligible[:, k] |= np.isin(np.asarray(columns[drug], dtype=str), ACTIVE_VALUES)
    return DiabetesRecords(eligible, (readmitted == ">30").astype(np.float64))


def load_diabetes_csv(path: str | Path) -> DiabetesRecords:
    """Read ``diabetic_data.csv`` (the UCI file, or any CSV with its medication and ``readmitted`` columns)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"no diabetes CSV at {str(path)!r}; download 'Diabetes 130-US hospitals for years 1999-2008' from the "
            "UCI repository yourself and pass the path of diabetic_data.csv"
        )
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{str(path)!r} is empty; expected a header row and records")
        rows = list(reader)
    values = np.array(rows, dtype=str).reshape(len(rows), len(header))
    return records_from_columns({name: values[:, c] for c, name in enumerate(header)})


def diabetes_means(
    path: str | Path, num_agents: int = 3, split: str = "contiguous", seed: int | None = None
) -> np.ndarray:
    """The (num_agents, 5) instance of the real data: ``FederatedMAB(instance=this, reward_model="bernoulli")``."""
    return load_diabetes_csv(path).split_means(num_agents, split, seed)


def synthetic_diabetes_columns(num_records: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Synthetic records of the schema's medication and ``readmitted`` columns (string arrays).

    Each drug is given (value ``Steady``, ``Up`` or ``Down`` with probabilities 0.8, 0.1, 0.1) with its
    approximate prevalence in the real file, independently. A record's ``">30"`` probability is
    ``0.15 + sum over its arms of (effect_k + drift_k * (position - 1/2))``, clipped to [0, 1], with position in
    [0, 1) its place in file order; the other records are ``"<30"`` with probability 0.112 / 0.651 and ``"NO"``
    otherwise. The arm effects are exaggerated against the real data so that CI-scale runs resolve the arms.
    """
    num_records = check_int("num_records", num_records, 1)
    columns: dict[str, np.ndarray] = {}
    for drug in MEDICATION_COLUMNS:
        given = rng.random(num_records) < _PREVALENCE[drug]
        change = rng.choice(np.array(ACTIVE_VALUES), size=num_records, p=[0.8, 0.1, 0.1])
        columns[drug] = np.where(given, change, "No")
    eligible = records_from_columns({**columns, "readmitted": np.full(num_records, "NO")}).eligible
    position = np.arange(num_records) / num_records
    effect = _ARM_EFFECT[None, :] + _ARM_DRIFT[None, :] * (position[:, None] - 0.5)
    p_late = np.clip(_BASE_RATE + (eligible * effect).sum(axis=1), 0.0, 1.0)
    u = rng.random(num_records)
    early = rng.random(num_records) < 0.112 / 0.651
    columns["readmitted"] = np.where(u < p_late, ">30", np.where(early, "<30", "NO"))
    return columns


def write_diabetes_csv(path: str | Path, columns: Mapping[str, StringColumn]) -> Path:
    """Write records in the 50-column schema of ``diabetic_data.csv``; columns not given are ``"?"`` (missing)."""
    path = Path(path)
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"every column needs the same number of records, got lengths {sorted(lengths)}")
    num_records = lengths.pop()
    table = [np.asarray(columns[c], dtype=str) if c in columns else np.full(num_records, "?") for c in SCHEMA_COLUMNS]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SCHEMA_COLUMNS)
        writer.writerows(zip(*table))
    return path


@lru_cache(maxsize=8)
def standin_means(
    num_agents: int = 3, split: str = "contiguous", seed: int = 0, num_records: int = 101_766
) -> np.ndarray:
    """The (num_agents, 5) instance of the synthetic stand-in (:func:`synthetic_diabetes_columns`, same size).

    Read-only; the same numbers for the same arguments. Not the real data: see the module docstring.
    """
    columns = synthetic_diabetes_columns(num_records, np.random.default_rng(seed))
    means = records_from_columns(columns).split_means(num_agents, split, seed)
    means.flags.writeable = False
    return means
