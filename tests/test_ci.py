"""The CI guard (tests/ci.py and the skip hook in tests/conftest.py), run on a probe file by a real pytest.

In CI every way of skipping fails the test with its reason, and a missing tool fails; outside CI the
same tests skip. An expected failure (xfail) is not a skip and stays what it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ci import in_ci

ROOT = Path(__file__).resolve().parents[1]
PROBE = '''
import pytest
from tests.ci import need_tools

def test_skips_by_call():
    pytest.skip("no reason at all")

@pytest.mark.skipif(True, reason="marked to skip")
def test_skips_by_mark():
    pass

def test_needs_a_missing_tool():
    need_tools("samvad-no-such-tool", install="apt-get install nothing")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_to_fail():
    assert False
'''


def run_probe(tmp_path: Path, ci: str | None) -> str:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci is not None else {})
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout


def test_in_ci_every_skip_and_every_missing_tool_fails(tmp_path: Path) -> None:
    out = run_probe(tmp_path, "true")
    # a skip mark skips during set-up, so its test is reported as an error: a failed run all the same
    assert "2 failed, 1 xfailed, 1 error" in out, out
    assert "skipped" not in out.splitlines()[-1]
    assert "samvad-no-such-tool not found in CI" in out and "apt-get install nothing" in out
    assert "skipped in CI, where every test must run: no reason at all" in out
    assert "skipped in CI, where every test must run: marked to skip" in out


def test_outside_ci_the_same_tests_skip_with_their_reasons(tmp_path: Path) -> None:
    out = run_probe(tmp_path, None)
    assert "3 skipped, 1 xfailed" in out, out
    assert "samvad-no-such-tool not found: apt-get install nothing" in out


def test_the_one_spelling_of_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (("true", True), ("True", True), ("1", True), ("yes", True), ("", False),
                            ("false", False), ("0", False)):
        monkeypatch.setenv("CI", value)
        assert in_ci() is expected, value
    monkeypatch.delenv("CI")
    assert in_ci() is False
