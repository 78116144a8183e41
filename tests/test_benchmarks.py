"""The benchmark scripts still run (quick sizes; they write nothing with --quick)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("[a-z]*.py")))
def test_benchmark_quick_run(script: str, redis_url: str, tmp_path: Path) -> None:
    docs_before = {p: p.stat().st_mtime for p in (ROOT / "docs").rglob("*") if p.is_file()}
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env={**os.environ, "FRONTIER_RATE_REDIS_URL": redis_url})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip(), "a benchmark prints its numbers"
    docs_after = {p: p.stat().st_mtime for p in (ROOT / "docs").rglob("*") if p.is_file()}
    assert docs_after == docs_before, "--quick must not overwrite the committed numbers"
