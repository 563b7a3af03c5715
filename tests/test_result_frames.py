"""Results as typed pandas DataFrames: dtypes, columns, round trips through the store, and the table format."""

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from fedbandit_envs.bench.jobs import canonical_json
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario
from fedbandit_envs.bench.store import (
    DEFAULT_FORMAT,
    ResultStore,
    load_frame,
    load_results,
    read_frame,
    recorded_format,
    write_table,
)
from fedbandit_envs.bench.sweep import repair_sweep, run_sweep
from fedbandit_envs.metrics import SUMMARY_COLUMNS, final_checkpoint, summarize
from fedbandit_envs.run import Results, run
from fedbandit_envs.run.results import frame_from_rows, typed_frame

ENV = {"num_agents": 3, "num_arms": 4, "horizon": 40, "instance_seed": 0}
CURVE_DTYPES = {
    "algorithm": "string",
    "seed": "int64",
    "slot": "int64",
    "group_regret": "float64",
    "mean_regret": "float64",
    "messages": "int64",
    "copies": "int64",
    "scalars": "int64",
    "bytes": "int64",
    "links": "int64",
    "link_cost": "float64",
    "cost": "float64",
    "dropped": "int64",
    "up_messages": "int64",
    "down_messages": "int64",
    "peer_messages": "int64",
    "wall_time": "float64",
}
AGENT_DTYPES = {
    "algorithm": "string",
    "seed": "int64",
    "slot": "int64",
    "agent": "int64",
    "regret": "float64",
    "messages_sent": "int64",
    "bytes_sent": "int64",
    "cost": "float64",
}
# One column per typing rule; "missing_*" columns lack a value in some rows.
ROWS = [
    {"n": 1, "x": 1, "f": 0.5, "flag": True, "name": "a", "mixed": 1, "nested": [1, 2], "missing_int": 4},
    {"n": 2, "x": 2.5, "f": math.nan, "flag": False, "name": "b", "mixed": "t", "nested": {"k": 1}, "none": None},
    {"n": np.int64(3), "x": np.float32(0.25), "f": np.float64(2.0), "flag": np.bool_(True), "name": "c", "mixed": True},
]
ROW_DTYPES = {
    "n": "int64",
    "x": "float64",
    "f": "float64",
    "flag": "bool",
    "name": "string",
    "mixed": "string",
    "nested": "string",
    "missing_int": "Int64",
    "none": "object",
}


def dtypes(frame):
    return {name: str(dtype) for name, dtype in frame.dtypes.items()}


def test_run_results_are_frames_with_documented_dtypes():
    results = run("full_sharing_ucb", ENV, [0, 1], checkpoints=2)
    curves, agents = results.to_frame(), results.to_frame("agents")
    assert dtypes(curves) == CURVE_DTYPES
    assert dtypes(agents) == AGENT_DTYPES
    assert (len(curves), len(agents)) == (2 * 2, 2 * 2 * ENV["num_agents"])
    assert curves.drop(columns="wall_time").to_dict("records") == [
        {k: v for k, v in row.items() if k != "wall_time"} for row in results.curves
    ]
    assert Results.from_frames(curves=curves, agents=agents) == results
    with pytest.raises(ValueError, match=r"table must be one of \('curves', 'agents'\), got 'rows'"):
        results.to_frame("rows")


def test_privacy_columns_are_floats_with_nan_where_nothing_is_accounted():
    from wrappers.dp import LaplaceMessageDP

    results = run("independent_ucb1", ENV, [0], checkpoints=1)
    results.extend(run("independent_ucb1", ENV, [0], checkpoints=1, wrappers=[lambda e: LaplaceMessageDP(e, 1.0)]))
    curves = results.to_frame()
    assert str(curves["epsilon_max"].dtype) == "float64"
    assert curves["epsilon_max"].isna().tolist() == [True, False]
    assert curves["epsilon_max"].iloc[1] == results.curves[1]["epsilon_max"]


def test_rows_are_typed_one_dtype_per_column():
    frame = frame_from_rows(ROWS)
    assert dtypes(frame) == ROW_DTYPES
    assert list(frame.columns) == list(ROW_DTYPES)  # the union of the rows' columns, in first-seen order
    assert frame["x"].tolist() == [1.0, 2.5, 0.25]
    assert frame["mixed"].tolist() == ["1", "t", "true"]  # a mixture of kinds: JSON text, strings as they are
    assert frame["nested"].tolist()[:2] == ["[1, 2]", '{"k": 1}'] and frame["nested"].isna().tolist()[2]
    assert frame["missing_int"].isna().tolist() == [False, True, True]
    assert frame["none"].tolist() == [None, None, None]


def test_reading_any_dtype_backend_gives_the_same_typed_frame():
    frame = frame_from_rows(ROWS)
    pd.testing.assert_frame_equal(typed_frame(frame.convert_dtypes()), frame)
    pd.testing.assert_frame_equal(typed_frame(frame.astype(object)), frame)


@pytest.mark.parametrize("table_format", ["parquet", "csv"])
def test_written_tables_read_back_into_the_same_frame(tmp_path, table_format):
    rows = [{k: v for k, v in row.items() if k != "mixed"} for row in ROWS]  # CSV cannot tell "1" from 1
    path = write_table(rows, tmp_path / f"t.{table_format}", table_format)
    pd.testing.assert_frame_equal(read_frame(path), frame_from_rows(rows, text=canonical_json))


def test_parquet_written_before_frames_reads_into_the_same_frame(tmp_path):
    # Older versions wrote Parquet from Python lists (no pandas metadata: an integer column with a gap has no
    # dtype pandas could restore, NaN is stored as NaN, not as null).
    rows = [{k: v for k, v in row.items() if k not in ("mixed", "none")} for row in ROWS]
    columns = {
        "n": [1, 2, 3],
        "x": [1.0, 2.5, 0.25],
        "f": [0.5, math.nan, 2.0],
        "flag": [True, False, True],
        "name": ["a", "b", "c"],
        "nested": ["[1, 2]", '{"k": 1}', None],
        "missing_int": [4, None, None],
    }
    pq.write_table(pa.table(columns), tmp_path / "old.parquet")
    pd.testing.assert_frame_equal(read_frame(tmp_path / "old.parquet"), frame_from_rows(rows, text=canonical_json))


def tiny_scenario():
    return Scenario(
        name="test/frames",
        paper="test",
        description="frame round trip",
        env_kwargs={"num_agents": 3, "num_arms": 3, "horizon": 20},
        algorithms={"random": AlgorithmSpec("random"), "ucb": AlgorithmSpec("independent_ucb1")},
        sweep={"env.c2": (1, 0.5), "env.topology": ("complete", "ring")},
        seeds=2,
        checkpoints=2,
    )


def test_a_saved_sweep_reads_back_with_one_pandas_call(tmp_path):
    summary = run_sweep(tiny_scenario(), tmp_path, backend="inprocess")
    assert [path.name for path in summary.tables] == ["results.parquet", "results_agents.parquet"]
    for table, stem in (("curves", "results"), ("agents", "results_agents")):
        frame = pd.read_parquet(tmp_path / f"{stem}.parquet")
        pd.testing.assert_frame_equal(frame, load_frame(tmp_path, table))
        pd.testing.assert_frame_equal(frame, load_results(tmp_path).to_frame(table))
    curves = load_frame(tmp_path)
    assert dtypes(curves)["scenario"] == "string" and dtypes(curves)["c2"] == "float64"
    assert dtypes(curves)["topology"] == "string" and dtypes(curves)["seed"] == "int64"
    assert len(curves) == 4 * 2 * 2 * 2  # points x algorithms x seeds x checkpoints


def test_the_table_format_is_chosen_not_detected(tmp_path):
    assert DEFAULT_FORMAT == "parquet" and ResultStore(tmp_path).format == "parquet"
    with pytest.raises(ValueError, match=r"one of \('parquet', 'csv'\), got 'auto' \('auto' was removed"):
        ResultStore(tmp_path, "auto")
    with pytest.raises(ValueError, match=r"got 'xlsx'"):
        ResultStore(tmp_path, "xlsx")
    assert [recorded_format(c) for c in ({"format": "auto"}, {}, {"format": "csv"})] == ["parquet", "parquet", "csv"]


def test_csv_sweeps_keep_their_format_and_old_auto_sweeps_repair_to_parquet(tmp_path):
    overrides = {"horizon": 30, "checkpoints": 2}
    run_sweep("suite/baselines", tmp_path, overrides=overrides, seeds=2, backend="inprocess", table_format="csv")
    csv_frame = load_frame(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("results*")) == ["results.csv", "results_agents.csv"]
    repair_sweep(tmp_path, backend="inprocess")
    assert sorted(p.name for p in tmp_path.glob("results*")) == ["results.csv", "results_agents.csv"]
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "format": "auto"}))  # as older versions wrote it
    repair_sweep(tmp_path, backend="inprocess")
    assert sorted(p.name for p in tmp_path.glob("results*")) == ["results.parquet", "results_agents.parquet"]
    drop = ["wall_time"]
    pd.testing.assert_frame_equal(load_frame(tmp_path).drop(columns=drop), csv_frame.drop(columns=drop))


def test_summarize_groups_in_order_of_appearance_with_exact_statistics():
    frame = pd.DataFrame(
        {
            "algorithm": ["b", "a", "b", "a", "b", "c", "d", "d"],
            "slot": [1, 1, 1, 1, 1, 1, 1, 1],
            "value": [1.0, 4.0, 2.0, 4.0, 6.0, 7.5, 1.0, math.nan],
        }
    )
    summary = summarize(frame, "value")
    assert list(summary.columns) == ["algorithm", "slot", *SUMMARY_COLUMNS]
    assert str(summary["n"].dtype) == "int64" and summary["algorithm"].tolist() == ["b", "a", "c", "d"]
    b, a, c, d = summary.to_dict("records")
    half = stats.t.ppf(0.975, 2) * (math.sqrt(7) / math.sqrt(3))  # b: 1, 2, 6 has mean 3 and variance 7
    assert (b["n"], b["mean"], b["min"], b["max"]) == (3, 3.0, 1.0, 6.0)
    assert b["std"] == pytest.approx(math.sqrt(7), rel=1e-15) and b["ci95_high"] == pytest.approx(3 + half, rel=1e-15)
    assert (a["std"], a["sem"], a["ci95_low"], a["ci95_high"]) == (0.0, 0.0, 4.0, 4.0)  # constant: no spread at all
    assert (c["n"], c["std"], c["ci95_low"], c["ci95_high"]) == (1, 0.0, 7.5, 7.5)  # one seed: no interval
    assert d["n"] == 2 and all(math.isnan(d[k]) for k in ("mean", "std", "min", "max", "ci95_high"))
    rows = frame.to_dict("records")
    pd.testing.assert_frame_equal(summarize(rows, "value"), summary)


def test_final_checkpoint_keeps_each_runs_last_rows_in_order():
    frame = pd.DataFrame(
        {"algorithm": ["a", "a", "a", "b", "b"], "seed": [0, 0, 1, 0, 0], "slot": [5, 10, 5, 10, 20], "v": range(5)}
    )
    assert final_checkpoint(frame).index.tolist() == [1, 2, 4]
    assert final_checkpoint(frame, ["seed"]).index.tolist() == [2, 4]
    assert final_checkpoint(frame, ["algorithm", "absent"]).index.tolist() == [1, 4]
