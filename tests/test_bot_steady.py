"""The load generator keeps its own pauses out of what it measures (clients/bots/steady.py)."""

from __future__ import annotations

import gc
import time
import weakref

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from clients.bots.runner import RunStats
from clients.bots.steady import StampedConnection, collector_paused, release, watch_loop_lag


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_a_cycle_made_while_paused_lives_until_the_block_ends_and_no_longer() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        ref = weakref.ref(Node())
        churn = [[i] for i in range(50_000)]  # far past every threshold: passes would have run
        del churn
        assert ref() is not None
    assert gc.isenabled()
    assert ref() is None


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.anyio
async def test_the_loop_lag_watch_sees_a_loop_held_still() -> None:
    late: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_loop_lag, late, 0.01)
        await anyio.sleep(0.05)
        time.sleep(0.08)  # noqa: ASYNC251 - the point: the loop stands still, the watch wakes >= ~70 ms late
        await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert len(late) >= 3
    assert max(late) >= 60
    assert sorted(late)[len(late) // 2] < 60  # the other wake-ups were not held


def test_the_summary_reports_the_generators_lateness() -> None:
    stats = RunStats()
    stats.loop_late_ms.extend([0.1] * 98 + [7.0, 40.0])
    lag = stats.summary()["generator_loop_late_ms"]
    assert lag == {"count": 100, "p50": 0.1, "p99": 7.0, "max": 40.0}
    assert RunStats().summary()["generator_loop_late_ms"]["count"] == 0


@pytest.mark.anyio
async def test_a_released_closed_connection_is_freed_without_the_collector() -> None:
    async def echo(conn: ServerConnection) -> None:
        async for message in conn:
            await conn.send(message)

    async with serve(echo, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        refs = []
        with collector_paused():
            for released in (False, True):
                ws = await connect(f"ws://127.0.0.1:{port}")
                await ws.send("namaste")
                assert await ws.recv() == "namaste"
                await ws.close()
                if released:
                    release(ws)
                refs.append(weakref.ref(ws.protocol))
                del ws
            kept, freed = (ref() is not None for ref in refs)
    assert kept, "without release the closed connection's protocol waits for the collector"
    assert not freed, "a released closed connection is freed by reference counting"
    assert refs[0]() is None  # and the collector, back on, took the other one


@pytest.mark.anyio
async def test_messages_are_stamped_when_read_not_when_taken() -> None:
    async def talk(conn: ServerConnection) -> None:
        await conn.recv()
        await conn.send("one")
        await conn.send(["tw", "o"])  # a fragmented message: one arrival, at its last fragment
        await conn.ping()  # a control frame: no arrival
        await conn.send(b"three")
        await conn.recv()

    async with serve(talk, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", create_connection=StampedConnection) as ws:
            assert isinstance(ws, StampedConnection)
            before = time.time()
            await ws.send("go")
            while len(ws.arrivals) < 3:  # noqa: ASYNC110 - the point: all three read by the loop, none taken
                await anyio.sleep(0.001)
            taken = time.time()
            got = [await ws.recv_stamped() for _ in range(3)]
            await ws.send("bye")
    assert [message for message, _ in got] == ["one", "two", b"three"]
    stamps = [at for _, at in got]
    assert stamps == sorted(stamps)
    assert before <= stamps[0] and stamps[-1] <= taken  # when read, before the task took them
    assert not ws.arrivals
