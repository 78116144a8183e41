"""The README's test command runs the whole suite, and when Redis 7 is missing the skip says how.

The Redis 7 half of the store and Lua tests needs Debian's redis-server 7 (tests/redis_servers.py
``DEBIAN_REDIS``); without it those tests are skipped with one reason, ``REDIS7_MISSING``, that
names the binary and the command that installs it. An older redis-server at that path (Ubuntu
22.04's apt gives 6.0) counts as missing rather than failing the Redis 7 tests.
"""

from __future__ import annotations

import re
from pathlib import Path

from redis_servers import DEBIAN_REDIS, REDIS7_INSTALL, REDIS7_MISSING, debian_redis

ROOT = Path(__file__).resolve().parent.parent


def _fake_server(path: Path, version: str) -> str:
    """An executable that answers ``--version`` as a redis-server of ``version`` does."""
    path.write_text(f"#!/bin/sh\necho 'Redis server v={version} sha=00000000:0 malloc=libc bits=64'\n")
    path.chmod(0o755)
    return str(path)


def test_the_skip_reason_names_the_binary_and_the_command():
    assert DEBIAN_REDIS in REDIS7_MISSING and REDIS7_INSTALL in REDIS7_MISSING
    for name in ("conftest.py", "test_scripting.py", "test_reliability_faults.py"):
        text = (ROOT / "tests" / name).read_text()
        assert "REDIS7_MISSING" in text and "apt-get install" not in text, name


def test_only_a_redis_server_7_or_later_is_taken(tmp_path):
    assert debian_redis(str(tmp_path / "absent")) is None
    assert debian_redis(_fake_server(tmp_path / "six", "6.0.16")) is None
    seven = _fake_server(tmp_path / "seven", "7.0.15")
    assert debian_redis(seven) == seven


def test_the_readme_installs_redis7_before_it_runs_the_suite():
    readme = (ROOT / "README.md").read_text()
    for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.S):
        lines = block.splitlines()
        runs = [i for i, line in enumerate(lines) if "-m pytest" in line]
        if runs:
            installs = [i for i, line in enumerate(lines) if line.startswith(REDIS7_INSTALL)]
            assert installs and installs[0] < runs[0], block
