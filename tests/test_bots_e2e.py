"""The load bots against the real server running as a separate process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.bots.personas import PERSONAS
from clients.bots.runner import RunConfig, run
from tests.servers import ROOT, Served, server_process

PERSONA_NAMES = ("polite", "lowballer", "walker", "rude")


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with server_process() as s:
        yield s


def check_outcomes(outcomes: dict[str, dict[str, int]]) -> None:
    """Each persona ends where personas.py says it does against the rule-based vendor."""
    assert set(outcomes) == set(PERSONA_NAMES)
    for name, counts in outcomes.items():
        finished = {k: v for k, v in counts.items() if k != "unfinished"}
        assert finished, f"no {name} session finished: {counts}"
        if PERSONAS[name].expected.deal:
            assert set(finished) == {"deal"}, (name, counts)
        else:
            assert "deal" not in finished, (name, counts)


@pytest.mark.anyio
async def test_twenty_bots_play_every_persona_without_errors_or_violations(served: Served) -> None:
    config = RunConfig(url=served.base_url, sessions=20, personas=PERSONA_NAMES, think_ms=25,
                       duration_s=5.0, ramp_s=0.5)
    stats = await run(config)
    summary = stats.summary()
    assert summary["errors"]["count"] == 0, summary["errors"]
    assert summary["violations"]["count"] == 0, summary["violations"]
    assert summary["turns"] > 100
    assert summary["sessions_completed"] >= 20
    assert summary["closing_replies"] == summary["sessions_completed"]
    assert summary["latency_ms"]["count"] == summary["turns"]
    check_outcomes(summary["outcomes"])


def test_samvad_bots_cli_with_msgpack(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "bots.json"
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "bots", "--url", served.base_url, "--sessions", "12",
         "--think", "10", "--duration", "3", "--msgpack", "--quiet", "--json", str(out)],
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True,
        text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    samvad = result["samvad"]
    assert result["config"]["msgpack"] is True
    assert samvad["errors"]["count"] == 0 and samvad["violations"]["count"] == 0
    assert samvad["turns"] > 50
    check_outcomes(samvad["outcomes"])
    assert "turns/s" in done.stdout


def test_the_cli_exits_non_zero_when_the_run_fails(tmp_path: Path) -> None:
    from tests.servers import free_port

    port = free_port()  # nothing listens here: every session creation fails
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "bots", "--url", f"http://127.0.0.1:{port}",
         "--sessions", "2", "--think", "0", "--duration", "1", "--quiet",
         "--json", str(tmp_path / "r.json")],
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True,
        text=True, timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["samvad"]["errors"]["by_kind"]["http_connect"] > 0
