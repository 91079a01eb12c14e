"""The server's collector policy: start-up frozen, young passes small, the planned full pass only when short."""

from __future__ import annotations

import gc
import json
import logging
import time
import weakref
from pathlib import Path

import pytest

from server import gcpolicy
from tests.servers import server_process


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_start_up_stays_frozen_and_only_the_planned_pass_frees_an_old_cycle() -> None:
    saved = gc.get_threshold()
    startup = Node()
    startup.other = startup  # a cycle built before serving: frozen for good
    try:
        gcpolicy.install()
        assert gcpolicy.installed()
        assert gc.get_threshold() == (gcpolicy.YOUNG_THRESHOLD, gcpolicy.GEN1_EVERY, gcpolicy.NEVER)
        frozen = gc.get_freeze_count()
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the collector can free it
        dead = weakref.ref(a)
        gc.collect(1)  # it survives a gen1 pass into the oldest generation, not frozen
        # frozen objects other threads let go of leave the count, so it may fall but never grow
        assert gc.get_freeze_count() <= frozen
        assert any(o is a for o in gc.get_objects(generation=2))
        del a, b
        gc.collect(1)  # young passes do not walk the oldest generation
        assert dead() is not None
        gone = weakref.ref(startup)
        del startup
        figures = gcpolicy.full_collection()  # small: due at once
        assert figures is not None and dead() is None and figures["collected"] >= 2
        assert gc.get_freeze_count() <= frozen and gone() is not None  # the start-up objects are not walked
    finally:
        gcpolicy.uninstall()
        gc.set_threshold(*saved)
    assert not gcpolicy.installed() and gc.get_freeze_count() == 0


def test_the_planned_pass_waits_while_it_would_be_long_but_not_for_ever() -> None:
    budget, most = gcpolicy.FULL_PAUSE_BUDGET_MS, gcpolicy.FULL_MAX_DEFER_S
    assert gcpolicy.full_pass_due(budget, 0.0)
    assert not gcpolicy.full_pass_due(budget + 0.1, 0.0)
    assert not gcpolicy.full_pass_due(10 * budget, most - 1)
    assert gcpolicy.full_pass_due(10 * budget, most)


def test_a_long_pass_is_put_off_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    saved = gc.get_threshold()
    try:
        gcpolicy.install()
        # in the oldest generation: twice the objects the budget allows at the rate assumed before a first pass
        heap = [[i] for i in range(int(2 * gcpolicy.FULL_PAUSE_BUDGET_MS / gcpolicy.INITIAL_MS_PER_OBJECT))]
        gc.collect(1)
        gc.collect(1)  # a gen1 pass moves what survives it to the oldest generation
        assert gcpolicy.old_objects() >= len(heap)
        assert gcpolicy.expected_pause_ms() > gcpolicy.FULL_PAUSE_BUDGET_MS
        with caplog.at_level(logging.INFO, logger="samvad.gc"):
            assert gcpolicy.full_collection() is None
            assert gcpolicy.full_collection(waited_s=gcpolicy.FULL_MAX_DEFER_S) is not None
        assert [r.msg for r in caplog.records] == ["full garbage collection deferred", "full garbage collection"]
        del heap
    finally:
        gcpolicy.uninstall()
        gc.set_threshold(*saved)


def test_what_the_collector_does_not_track_does_not_put_the_pass_off() -> None:
    """Bytes and tuples of atoms (the ended sessions' records, the learner store's profiles) take
    memory but no walk: the expectation counts the tracked objects, not the heap."""
    saved = gc.get_threshold()
    try:
        gcpolicy.install()
        kept = [(f"s{i}", float(i), None, b"x" * 40) for i in range(200_000)]
        gc.collect(1)
        gc.collect(1)
        assert gcpolicy.old_objects() < 10_000  # the tuples are untracked, the list is one object
        assert gcpolicy.expected_pause_ms() <= gcpolicy.FULL_PAUSE_BUDGET_MS
        figures = gcpolicy.full_collection()
        assert figures is not None and figures["objects"] < 10_000
        # a count made before (the app's, with the sockets run between) is what decides
        assert gcpolicy.full_collection(counted=(10**9, 12.5)) is None
        figures = gcpolicy.full_collection(counted=(0, 12.5))
        assert figures is not None and figures["count_ms"] == 12.5
        del kept
    finally:
        gcpolicy.uninstall()
        gc.set_threshold(*saved)


def test_samvad_serve_runs_the_planned_full_pass_and_logs_it(tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    with server_process({"LOG_LEVEL": "INFO", "GC_FULL_EVERY_SECONDS": "0.3"}, log_path=log_path):
        deadline = time.monotonic() + 10
        while "full garbage collection" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    records = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    passes = [r for r in records if r["msg"] == "full garbage collection"]
    assert passes and passes[0]["logger"] == "samvad.gc"
    assert {"ms", "collected", "objects", "count_ms", "blocks", "expected_ms"} <= set(passes[0])
