"""The shared check of a benchmark script's bad input: one message, exit 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def assert_benchmark_refuses(script: str, argv: list[str], expect: str, watch: dict[str, Path]) -> str:
    """Run ``python benchmarks/SCRIPT ARGV`` (one torch thread, ``LVSEARCH_DEBUG`` unset) and
    assert what ``_common.run_main`` promises for bad input: exit status 2, no traceback, one
    ``SCRIPT: error: …`` message containing ``expect``, and every folder in ``watch``
    byte-identical before and after. Returns the message, whitespace collapsed."""
    from test_reliability import tree_digest

    before = {k: tree_digest(p) for k, p in watch.items()}
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent), "OMP_NUM_THREADS": "1"}
    env.pop("LVSEARCH_DEBUG", None)
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *argv], capture_output=True, text=True,
                          timeout=300, env=env, cwd=BENCHMARKS.parent)
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout and f"{script}: error:" in err, err
    assert expect in err, err
    assert {k: tree_digest(p) for k, p in watch.items()} == before
    return err
