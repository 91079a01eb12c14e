"""Python memory per ended session kept for its report (issue #33), in process, with tracemalloc.

Plays SESSIONS sessions of TURNS rule-brain turns each, ends them with `stop`, disconnects, and
measures the allocations they hold: once in their grace, when the registry has swapped each for
its record as its socket left and keeps its replay ring beside it, packed, and once after the
grace, as records alone (a few fields and the negotiation as bytes, session/ended.py). It checks
that a record's report is the one the actor gave, and times rebuilding an actor from a record.

    .venv/bin/python benchmarks/ended_memory.py [--sessions 500] [--turns 5]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

import anyio
import anyio.lowlevel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.fakes, for its in-memory connection

from brain.policy import with_policy  # noqa: E402
from brain.rules_vendor import RuleBasedVendor  # noqa: E402
from schemas.frames import CommandFrame, TranscriptFrame  # noqa: E402
from session.mirror import MemoryMirror  # noqa: E402
from session.registry import SessionRegistry  # noqa: E402
from session.report import learner_report  # noqa: E402
from tests.fakes import FakeConnection  # noqa: E402

LINES = ("tamatar kitne ka?", "bahut mehenga hai, 80 dedo", "100 final?", "90 mein do na", "theek hai")


def held() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def tracked() -> int:
    """Objects the collector tracks: what a full pass walks."""
    gc.collect()
    return len(gc.get_objects())


async def main(sessions: int, turns: int) -> None:
    now = [1000.0]
    registry = SessionRegistry(with_policy(RuleBasedVendor()), MemoryMirror(), max_sessions=sessions + 10,
                               idle_seconds=1800, ended_grace_seconds=60, clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        tracemalloc.start()
        before, objects_before = held(), tracked()
        reports: dict[str, str] = {}  # each session's report as it ended, as JSON (one untracked string)
        replay = 0
        for _ in range(sessions):
            actor = registry.create()
            player = FakeConnection()
            actor.connect(player)
            for t in range(turns):
                actor.submit(player, TranscriptFrame(type="transcript", id=f"t{t}", text=LINES[t % len(LINES)],
                                                     final=True))
                while actor.busy:
                    await anyio.lowlevel.checkpoint()
            actor.submit(player, CommandFrame(type="command", id="stop", name="stop"))
            while not actor.negotiation.is_terminal or actor.busy:
                await anyio.lowlevel.checkpoint()
            replay += actor.fanout.replay_len
            reports[actor.session_id] = learner_report(actor.negotiation, None).model_dump_json()
            actor.disconnect(player)
            while registry.live(actor.session_id) is not None:  # swapped as its socket leaves
                await anyio.lowlevel.checkpoint()
            del actor, player
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        kept_reports = sys.getsizeof(reports) + sum(map(sys.getsizeof, reports.values()))  # not the sessions'
        graced, objects_graced = held() - kept_reports, tracked()
        assert registry.statistics()["replays_in_grace"] == sessions and not registry.actors()
        now[0] += 61
        registry.evict_idle()  # the grace is over: the rings go
        swapped, objects_swapped = held() - kept_reports, tracked()
        assert len(registry) == sessions and len(registry.ended()) == sessions
        assert registry.statistics()["replays_in_grace"] == 0
        state_bytes = sum(len(r.state) for r in registry.ended()) / sessions
        tracemalloc.stop()
        started = time.perf_counter()
        revived = [await registry.get(sid) for sid in reports]
        revive_us = (time.perf_counter() - started) / sessions * 1e6
        for actor, report in zip(revived, reports.values(), strict=True):
            assert actor is not None and learner_report(actor.negotiation, None).model_dump_json() == report
        tg.cancel_scope.cancel()
    print(f"{sessions} sessions of {turns} turns, ended and closed ({replay / sessions:.1f} events kept each "
          "for replay)")
    print(f"in its grace:           {(graced - before) / sessions / 1024:.1f} KiB per session (a record and its "
          f"replay ring, packed), {(objects_graced - objects_before) / sessions:.1f} objects tracked by the collector")
    print(f"kept as records:        {(swapped - before) / sessions / 1024:.1f} KiB per session "
          f"(the negotiation {state_bytes:.0f} bytes of it), "
          f"{(objects_swapped - objects_before) / sessions:.1f} objects tracked")
    print(f"rebuilt from a record:  {revive_us:.0f} us per session (`registry.get`), every report as before")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.sessions, args.turns)
