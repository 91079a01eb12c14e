"""A sample of the session machine's random sequences, through the real Neo4j mirror and a restart.

`tests/test_session_machine.py` checks that folding a session's changes gives the live state. Here
a sample of its sequences is written by a running `Neo4jMirror`, and a second mirror, as after a
restart, rebuilds each session from the graph alone: the rebuilt `Negotiation` must equal the live
one at the end of the sequence, field for field, and so must its snapshot.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace

import anyio
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from session.changes import Change
from session.negotiation import Negotiation
from session.rules import Limits
from tests.neo4j_support import running_mirror
from tests.test_session_machine import SessionMachine

pytestmark = [pytest.mark.neo4j, pytest.mark.anyio]

SAMPLES: list[tuple[list[Change], Negotiation]] = []


def differences(a: list[object], b: list[object]) -> list[tuple[int, object, object]]:
    """The records that differ, side by side (the assertion's message)."""
    return [(k, x, y) for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y] + (
        [(-1, len(a), len(b))] if len(a) != len(b) else [])


class SampledMachine(SessionMachine):
    """The same machine, keeping each sequence's changes and its live state at the end."""

    def teardown(self) -> None:
        SAMPLES.append((list(self.mirror.log), copy.deepcopy(self.actor.negotiation)))


async def test_a_sample_of_sequences_rebuilt_from_neo4j_after_a_restart_equals_the_live_state(
        neo4j_uri: str) -> None:
    SAMPLES.clear()
    await anyio.to_thread.run_sync(lambda: run_state_machine_as_test(SampledMachine, settings=settings(
        max_examples=12, stateful_step_count=30, deadline=None, derandomize=True)))
    assert len(SAMPLES) >= 10
    tag = f"machine-{time.time_ns()}"
    live: dict[str, Negotiation] = {}
    async with running_mirror(neo4j_uri) as mirror:
        for k, (changes, state) in enumerate(SAMPLES):
            sid = f"{tag}-{k}"
            for change in changes:
                mirror.submit(change._replace(session_id=sid))
            live[sid] = replace(state, session_id=sid)
        for sid in live:
            assert await mirror.flushed(sid, 30), mirror.last_error
    # A new process: nothing in memory, everything from the graph.
    checked = 0
    async with running_mirror(neo4j_uri) as restarted:
        for sid, state in live.items():
            loaded = await restarted.load(sid, Limits())
            assert loaded is not None
            rebuilt, version = loaded
            assert version == state.version == rebuilt.version
            assert rebuilt.history == state.history, differences(rebuilt.history, state.history)
            assert rebuilt.stage_changes == state.stage_changes
            assert rebuilt == state, sid
            assert rebuilt.snapshot() == state.snapshot()
            checked += 1
    assert checked == len(SAMPLES)
