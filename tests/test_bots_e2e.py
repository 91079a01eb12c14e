"""The load bots against the real server running as a separate process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.bots.coach_personas import ALL_PERSONAS
from clients.bots.personas import PERSONAS
from clients.bots.runner import COACHING_PERSONAS, RunConfig, run
from tests.servers import ROOT, Served, server_process

PERSONA_NAMES = ("polite", "lowballer", "walker", "rude", "relative")


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
         "--think", "10", "--duration", "3", "--msgpack", "--quiet", "--json", str(out),
         "--personas", ",".join(PERSONA_NAMES)],
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
    # The generator's collector was paused for the run, and its own lateness is reported.
    assert result["config"]["collector"] == "paused"
    assert samvad["generator_loop_late_ms"]["count"] > 10
    assert "generator loop late ms" in done.stdout


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


# ---------------------------------------------------------------------------- coaching personas

# What each coaching persona must exercise, and nothing else (the keys of its `coaching` counts).
EXERCISES = {
    "hinter": {"hint_0", "hint_1", "hint_2"},
    "undoer": {"undo", "repeat"},
    "mumbler": {"clarify"},
    "silent": {"nudge"},
    "barger": {"heard", "quote_unbound"},
    "quitter": {"repeat", "stop"},
    "sleeper": {"nudge", "timed_out"},
}
ENDS = {"quitter": {"stopped"}, "sleeper": {"timed_out"}}  # the others make a deal


async def coach_run(served: Served, personas: tuple[str, ...], **kw: object) -> dict[str, object]:
    config = RunConfig(url=served.base_url, sessions=2 * len(personas), personas=personas, think_ms=10,
                       duration_s=3.0, ramp_s=0.3, **kw)  # type: ignore[arg-type]
    return (await run(config)).summary()


@pytest.mark.anyio
async def test_every_coaching_persona_exercises_its_feature_and_ends(served: Served) -> None:
    personas = tuple(p for p in COACHING_PERSONAS if p != "sleeper")
    summary: dict[str, Any] = await coach_run(served, personas)
    assert summary["errors"]["count"] == 0, summary["errors"]
    assert summary["violations"]["count"] == 0, summary["violations"]
    assert summary["closing_replies"] == summary["sessions_completed"] >= 2 * len(personas)
    coaching, outcomes = summary["coaching"], summary["outcomes"]
    assert set(coaching) == set(personas)
    for name in personas:
        counts, ended = coaching[name], outcomes[name]
        assert set(counts) == EXERCISES[name], (name, counts)
        finished = {k: v for k, v in ended.items() if k != "unfinished"}
        assert set(finished) == ENDS.get(name, {"deal"}), (name, ended)
        assert ALL_PERSONAS[name].expected.deal == (name not in ENDS)
    sessions = {name: sum(outcomes[name].values()) for name in personas}
    # Every session did it: the counts grow with the sessions played, not once per run.
    assert coaching["hinter"]["hint_2"] >= sessions["hinter"] - 1
    assert coaching["undoer"]["undo"] >= sessions["undoer"] - 1
    assert coaching["mumbler"]["clarify"] >= sessions["mumbler"] - 1
    # Once, then twice in a row; the two sessions in flight when the run stops may be cut short.
    assert coaching["silent"]["nudge"] >= 3 * (sessions["silent"] - 2)
    barged = coaching["barger"]
    assert barged["quote_unbound"] >= 1 and barged["heard"] > barged["quote_unbound"]  # odd turns only
    assert coaching["quitter"]["stop"] == outcomes["quitter"].get("stopped")


@pytest.mark.anyio
async def test_the_sleeper_is_nudged_until_the_session_times_out(served: Served) -> None:
    summary: dict[str, Any] = await coach_run(served, ("sleeper",))
    assert summary["errors"]["count"] == 0 and summary["violations"]["count"] == 0, summary
    timed_out = summary["outcomes"]["sleeper"]["timed_out"]
    assert timed_out >= 2
    # MAX_CONSECUTIVE_TIMEOUTS is 3: two nudges, then the end. The two sessions in flight when the
    # run stops may have had a nudge or two without reaching their end.
    coaching = summary["coaching"]["sleeper"]
    assert coaching["timed_out"] == timed_out
    assert 2 * timed_out <= coaching["nudge"] <= 2 * timed_out + 2 * 2


@pytest.mark.anyio
async def test_a_transcript_after_a_timed_out_end_gets_a_closing_reply(served: Served) -> None:
    config = RunConfig(url=served.base_url, sessions=1, personas=("sleeper",), think_ms=0, duration_s=0.5,
                       reply_timeout_s=2.0)
    summary = (await run(config)).summary()
    assert summary["errors"]["count"] == 0, summary["errors"]
    assert summary["closing_replies"] == summary["sessions_completed"] >= 1


def test_samvad_bots_cli_plays_the_coaching_personas(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "coach.json"
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "bots", "--url", served.base_url, "--sessions", "7",
         "--personas", "coach", "--think", "10", "--duration", "2", "--msgpack", "--quiet",
         "--json", str(out)],
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True,
        text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    samvad = json.loads(out.read_text())["samvad"]
    assert samvad["violations"]["count"] == 0
    assert {name: set(counts) for name, counts in samvad["coaching"].items()} == EXERCISES
    assert "hinter     exercised {'hint_0'" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "server.cli", "bots", "--personas", "hinter,mumbles"],
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "unknown personas ['mumbles']" in bad.stderr


def test_bots_vouch_for_their_learners_with_the_admin_key_against_a_production_server(tmp_path: Path) -> None:
    key = "bots-admin-key-" + "b" * 24
    with server_process({"SAMVAD_ENV": "production", "ADMIN_KEY": key}) as production:
        for admin_key, works in ((key, True), ("", False)):
            out = tmp_path / f"bots-{works}.json"
            done = subprocess.run(
                [sys.executable, "-m", "server.cli", "bots", "--url", production.base_url, "--sessions", "4",
                 "--think", "10", "--duration", "2", "--quiet", "--json", str(out)],
                cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "SAMVAD_ADMIN_KEY": admin_key},
                capture_output=True, text=True, timeout=60,
            )
            samvad = json.loads(out.read_text())["samvad"]
            assert key not in out.read_text() and key not in done.stdout + done.stderr
            if works:
                assert done.returncode == 0, done.stdout + done.stderr
                assert samvad["errors"]["count"] == 0 and samvad["turns"] > 10
            else:  # a stranger naming learners: refused, no turn played
                assert samvad["turns"] == 0 and "http_401" in json.dumps(samvad["errors"])
