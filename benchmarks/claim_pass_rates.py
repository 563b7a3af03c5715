"""How often each claim of a scenario holds over disjoint blocks of seeds (the claims' pass rates).

A claim checked on the seeds of its own test may pass by luck. This script runs a scenario at a scale on
``--blocks`` disjoint blocks of seeds, each block as many seeds as the scale uses (block ``b`` is seeds
``b n .. (b + 1) n - 1``, so block 0 is the seeds the tests use), checks every claim on each block and reports
how many blocks each claim passed. A claim that holds in fewer than 9 of 10 blocks needs a larger scale, more
seeds or a better-posed statistic (never a looser band). The rates are recorded beside the claims in the
catalogue (``Claim.pass_rate``).

Usage::

    python benchmarks/claim_pass_rates.py dubey/fig1b_byzantine --blocks 10 --root /tmp/pass_rates
    python benchmarks/claim_pass_rates.py li_wang/fig2a_uniform zhu/sa_collaboration --workers 2 --json rates.json

Each block is an ordinary sweep into ``<root>/<scenario>/block<b>``: re-running resumes, and the blocks'
results stay available for inspection (``fedbandit report <root>/<scenario>/block<b>``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from fedbandit_envs.bench.jobs import resolve_scenario
from fedbandit_envs.bench.report import evaluate_claims
from fedbandit_envs.bench.store import load_results
from fedbandit_envs.bench.sweep import run_sweep
from fedbandit_envs.cli import _parse_setting


def block_seeds(count: int, block: int) -> range:
    """Seeds of block ``block`` when each block has ``count`` seeds (block 0 is ``0 .. count - 1``)."""
    return range(block * count, (block + 1) * count)


def pass_rates(
    name: str,
    blocks: int,
    root: Path,
    scale: str,
    backend: str,
    workers: int | None,
    overrides: dict | None = None,
    first: int = 0,
) -> dict:
    """Run ``blocks`` disjoint seed blocks of scenario ``name``; per claim the blocks passed and the evidence.

    ``overrides`` are scale overrides as ``fedbandit sweep --set`` takes them; ``first`` is the first block's index.
    """
    scenario = resolve_scenario(name, scale, overrides)
    count = len(scenario.seed_list())
    claims = {claim.name: {"passed": 0, "failed_blocks": [], "evidence": []} for claim in scenario.claims}
    start = time.perf_counter()
    for block in range(first, first + blocks):
        seeds = block_seeds(count, block)
        out = root / name / f"block{block}"
        run_sweep(name, out, scale, overrides, seeds=seeds, backend=backend, workers=workers)
        for outcome in evaluate_claims(scenario.claims, load_results(out)):
            entry = claims[outcome.name]
            entry["evidence"].append(f"block {block} ({seeds.start}:{seeds.stop}) {outcome.status}: {outcome.evidence}")
            if outcome.status == "PASS":
                entry["passed"] += 1
            else:
                entry["failed_blocks"].append(block)
        print(f"{name}: block {block + 1 - first}/{blocks} done ({time.perf_counter() - start:.0f} s)", flush=True)
    return {
        "scenario": name,
        "scale": scale,
        "overrides": overrides or {},
        "blocks": blocks,
        "seeds_per_block": count,
        "seeds": f"{first * count}:{(first + blocks) * count} in blocks of {count}",
        "wall_time": time.perf_counter() - start,
        "claims": claims,
    }


def main() -> None:
    """Measure and print the pass rates; optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="+", help="scenario names (fedbandit list)")
    parser.add_argument("--blocks", type=int, default=10, help="number of disjoint seed blocks (default 10)")
    parser.add_argument("--scale", choices=("ci", "paper"), default="ci")
    parser.add_argument("--root", type=Path, default=Path("results/pass_rates"), help="where the blocks' sweeps go")
    parser.add_argument("--backend", choices=("inprocess", "pool"), default="pool")
    parser.add_argument("--workers", type=int, default=None, help="pool size (default: all cores)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rates to this JSON file")
    parser.add_argument("--first", type=int, default=0, help="index of the first block (default 0: the test's seeds)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="as fedbandit sweep --set"
    )
    args = parser.parse_args()
    if args.blocks < 1 or args.first < 0:
        parser.error(f"--blocks must be at least 1 and --first at least 0, got {args.blocks} and {args.first}")
    overrides = dict(_parse_setting(text) for text in args.overrides)
    workers = args.workers if args.backend == "pool" else None
    report = []
    for name in args.scenarios:
        rates = pass_rates(name, args.blocks, args.root, args.scale, args.backend, workers, overrides, args.first)
        report.append(rates)
        print(f"\n{name} ({rates['seeds']}, {rates['wall_time']:.0f} s):")
        for claim, entry in rates["claims"].items():
            failed = f"; failed blocks {entry['failed_blocks']}" if entry["failed_blocks"] else ""
            print(f"  {claim:45s} {entry['passed']}/{args.blocks}{failed}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
