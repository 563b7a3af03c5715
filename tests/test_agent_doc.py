"""``docs/writing-an-agent.md`` runs: its Python blocks, in order, in one module (as a reader's script would)."""

import re
import sys
import types
from pathlib import Path

from fedbandit_envs import algorithms

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-an-agent.md"


def test_writing_an_agent_blocks_run_in_order(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    # an importable module, as for a script run with ``python``: the benchmark tools import learners by path
    module = types.ModuleType("writing_an_agent")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    algorithms.registered_algorithms()  # load the entry points first, so the copy below holds the reference agents
    monkeypatch.setattr(algorithms, "_REGISTRY", dict(algorithms._REGISTRY))  # the doc's registration is undone
    for index, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name} block {index}", "exec"), module.__dict__)
    assert module.shared.curves[0]["messages"] > 0
    # array messages: the batches and the single messages were routed, noised and charged alike
    assert module.as_arrays[1] == module.as_messages[1] and module.as_arrays[1]["messages"] == 4 * 2 * 49
    assert module.as_arrays[0] == module.as_messages[0] and (module.as_arrays[2] > 0).all()
    assert {entry["algorithm"] for entry in module.comparison.entries} >= {"EpsilonGreedyMAB", "independent_ucb1"}
