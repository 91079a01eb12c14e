"""The server's collector policy: survivors of young passes are frozen, a full pass frees them."""

from __future__ import annotations

import gc
import json
import time
import weakref
from pathlib import Path

from server import gcpolicy
from tests.servers import server_process


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_survivors_are_frozen_and_only_the_full_pass_frees_a_frozen_cycle() -> None:
    saved = gc.get_threshold()
    try:
        gcpolicy.install()
        assert gcpolicy.installed()
        assert gc.get_threshold() == (gcpolicy.YOUNG_THRESHOLD, gcpolicy.GEN1_EVERY, gcpolicy.FULL_EVERY)
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the collector can free it
        dead = weakref.ref(a)
        frozen_before = gc.get_freeze_count()
        gc.collect(1)  # it survives a gen1 pass ...
        assert gc.get_freeze_count() > frozen_before  # ... and is frozen with the other survivors
        del a, b
        gc.collect(1)
        gc.collect(2)  # frozen objects are not scanned, not even by a full pass
        assert dead() is not None
        figures = gcpolicy.full_collection()  # the planned pass unfreezes first
        assert dead() is None
        assert figures["collected"] >= 2 and figures["frozen"] > 0
    finally:
        gcpolicy.uninstall()
        gc.set_threshold(*saved)
    assert not gcpolicy.installed() and gc.get_freeze_count() == 0
    assert gcpolicy._freeze_survivors not in gc.callbacks


def test_samvad_serve_runs_the_planned_full_pass_and_logs_it(tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    with server_process({"LOG_LEVEL": "INFO", "GC_FULL_EVERY_SECONDS": "0.3"}, log_path=log_path):
        deadline = time.monotonic() + 10
        while "full garbage collection" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    records = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    passes = [r for r in records if r["msg"] == "full garbage collection"]
    assert passes and passes[0]["logger"] == "samvad.gc"
    assert {"ms", "collected", "frozen"} <= set(passes[0]) and passes[0]["frozen"] > 1000
