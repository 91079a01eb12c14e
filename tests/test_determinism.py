"""Determinism across processes: the same inputs give the same outputs under two different hash seeds.

Calling a function twice in one process proves little: a cache answers the second call, and
`hash()` of a string is the same all through one process. tests/determinism_probe.py is run in two
fresh interpreters with different PYTHONHASHSEED values and must print the same thing, byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def probe(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.determinism_probe"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_two_processes_with_different_hash_seeds_agree_byte_for_byte() -> None:
    first, second = probe("1"), probe("2")
    seen = json.loads(first)
    # the probe saw real work, not empty answers
    assert all(seen["hits"].values()) and all(seen["cards"].values()) and all(seen["notes"])
    assert len(seen["games"]) >= 8 and all(len(turns) >= 3 for turns in seen["games"].values())
    if first != second:
        other = json.loads(second)
        differing = sorted(k for k in seen if seen[k] != other[k])
        raise AssertionError(f"PYTHONHASHSEED 1 and 2 disagree on {differing}")
