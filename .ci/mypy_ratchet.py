#!/usr/bin/env python3
"""Type-check with mypy and fail if the error count rises above the committed baseline.

The baseline lives in ``.ci/mypy_baseline`` (one integer). The count may only fall: when it drops
below the baseline the script passes and says how to lower the baseline, so the gain is kept.
Run from anywhere: ``python .ci/mypy_ratchet.py`` (mypy reads its settings from ``pyproject.toml``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "mypy_baseline"
SUMMARY = re.compile(r"^Found (\d+) errors? in \d+ files?", re.MULTILINE)
SUCCESS = re.compile(r"^Success: no issues found", re.MULTILINE)


def count_errors(output: str) -> int:
    """Return the error count from mypy's summary line; raise ``RuntimeError`` if there is none."""
    found = SUMMARY.search(output)
    if found:
        return int(found.group(1))
    if SUCCESS.search(output):
        return 0
    raise RuntimeError(f"mypy printed no summary line (did it crash?):\n{output}")


def main() -> int:
    """Run mypy, compare its error count with the baseline and return the process exit code."""
    baseline = int(BASELINE.read_text().strip())
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    output = result.stdout + result.stderr
    errors = count_errors(output)
    if errors > baseline:
        print(output)
        print(f"mypy: {errors} errors, above the baseline of {baseline} in {BASELINE.relative_to(ROOT)}.")
        print("Fix the new type errors (listed above); the baseline may only fall.")
        return 1
    if errors < baseline:
        print(f"mypy: {errors} errors, below the baseline of {baseline}. Lock the gain in with:")
        print(f"    echo {errors} > {BASELINE.relative_to(ROOT)}")
        return 0
    print(f"mypy: {errors} errors, at the baseline.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
