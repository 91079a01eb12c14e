"""Part (d) of benchmarks/mirror.py: the Neo4j mirror's cost per learner turn (issue #14).

The (a) stream, its sessions interleaved as concurrent learners' are, is submitted to a running
mirror at a steady rate of learner turns per second, against the same loop with no mirror,
alternately; see benchmarks/mirror.py's docstring for what is reported. Run it from there:

    python benchmarks/mirror.py --only d [--rate 12 60] [--cost-duration 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

import psutil

from benchmarks.mirror_stream import pct, record_stream, renamed
from server.mirror import Neo4jMirror
from session.changes import Change
from session.mirror import MemoryMirror

TICK_S = 0.005  # the ticker's sleep: how late it wakes is how long the loop was held



def interleaved(stream: list[Change]) -> list[Change]:
    """The stream's sessions played side by side: one change of each session in turn, as concurrent
    learners' arrive (in the recorded stream each session plays to its end before the next starts)."""
    by_session: dict[str, list[Change]] = {}
    for change in stream:
        by_session.setdefault(change.session_id, []).append(change)
    lists = list(by_session.values())
    out: list[Change] = []
    for k in range(max(len(changes) for changes in lists)):
        out.extend(changes[k] for changes in lists if k < len(changes))
    return out


class _NoMirror(MemoryMirror):
    async def run(self) -> None:
        await asyncio.Event().wait()


def neo4j_process(uri: str) -> psutil.Process | None:
    """The local process listening on the URI's port (to count Neo4j's own CPU), if there is one."""
    port = int(uri.rsplit(":", 1)[1])
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return psutil.Process(conn.pid)
    return None


def process_cpu_s(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    times = proc.cpu_times()
    return float(times.user + times.system)


async def paced(mirror: Neo4jMirror | _NoMirror, stream: list[Change], per_s: float,
                neo4j: psutil.Process | None) -> dict[str, Any]:
    """Submit `stream` at `per_s` changes per second while a ticker measures the event loop's lateness;
    the CPU this process spends until every change is durable."""
    lateness: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(TICK_S)
            lateness.append((time.perf_counter() - started - TICK_S) * 1000)

    runner = asyncio.ensure_future(mirror.run())
    ticks = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.2)
    cpu0, main0, db0 = time.process_time(), time.thread_time(), process_cpu_s(neo4j)
    started = time.perf_counter()
    for k, change in enumerate(stream):
        delay = started + k / per_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        mirror.submit(change)
    last = {c.session_id: c.version for c in stream}
    while any(mirror.durable_version(sid) < v for sid, v in last.items()):  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    cpu, main, db = time.process_time() - cpu0, time.thread_time() - main0, process_cpu_s(neo4j) - db0
    stop.set()
    await ticks
    runner.cancel()
    try:
        await runner
    except asyncio.CancelledError:
        pass
    return {"cpu_s": cpu, "main_s": main, "neo4j_s": db, "lateness_ms": lateness,
            "batches": getattr(mirror, "batches", 0)}


async def cost_per_turn(uri: str, turns_per_s: float, duration: float, repeats: int,
                        **settings: Any) -> dict[str, Any]:
    recorded = await record_stream(int(turns_per_s * duration) + 10)
    turns = sum(1 for c in recorded if c.kind == "learner_turn")
    per_s = turns_per_s * len(recorded) / turns
    run = uuid.uuid4().hex[:8]
    neo4j = neo4j_process(uri)
    mirror = Neo4jMirror(uri, **settings)
    await mirror.ensure_schema()
    await paced(mirror, renamed(interleaved(recorded), f"warm-{run}"), per_s * 4, neo4j)  # plans compiled, JVM warm
    figures: dict[str, list[dict[str, Any]]] = {"none": [], "neo4j": []}
    for k in range(repeats):
        stream = renamed(interleaved(recorded), f"cost{k}-{run}")
        figures["none"].append(await paced(_NoMirror(), stream, per_s, neo4j))
        figures["neo4j"].append(await paced(Neo4jMirror(uri, **settings), stream, per_s, neo4j))

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    def per_turn(name: str, key: str) -> float:
        return median([r[key] * 1000 / turns for r in figures[name]])

    result: dict[str, Any] = {"turns_per_s": turns_per_s, "learner_turns": turns, "changes": len(recorded),
                              "repeats": repeats, "settings": settings,
                              "batches": median([r["batches"] for r in figures["neo4j"]])}
    for name in figures:
        lateness = [median([pct(r["lateness_ms"], q) or 0.0 for r in figures[name]]) for q in (0.5, 0.99)]
        result[name] = {"cpu_ms_per_turn": round(per_turn(name, "cpu_s"), 3),
                        "loop_thread_cpu_ms_per_turn": round(per_turn(name, "main_s"), 3),
                        "loop_late_ms": {"p50": lateness[0], "p99": lateness[1],
                                         "max": round(median([max(r["lateness_ms"]) for r in figures[name]]), 2)}}
    result["mirror_cpu_ms_per_turn"] = round(result["neo4j"]["cpu_ms_per_turn"] - result["none"]["cpu_ms_per_turn"], 3)
    result["neo4j_process_cpu_ms_per_turn"] = round(per_turn("neo4j", "neo4j_s") - per_turn("none", "neo4j_s"), 3)
    result["mirror_loop_thread_cpu_ms_per_turn"] = round(
        result["neo4j"]["loop_thread_cpu_ms_per_turn"] - result["none"]["loop_thread_cpu_ms_per_turn"], 3)
    n, x = result["none"], result["neo4j"]
    print(f"(d) {turns_per_s:g} turns/s: mirror CPU {result['mirror_cpu_ms_per_turn']} ms/turn "
          f"(loop thread {result['mirror_loop_thread_cpu_ms_per_turn']}), Neo4j's own "
          f"{result['neo4j_process_cpu_ms_per_turn']} ms/turn, {result['batches']} batches; loop late p50/p99/max "
          f"{x['loop_late_ms']['p50']}/{x['loop_late_ms']['p99']}/{x['loop_late_ms']['max']} ms with the mirror, "
          f"{n['loop_late_ms']['p50']}/{n['loop_late_ms']['p99']}/{n['loop_late_ms']['max']} ms without", flush=True)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, nargs="+", default=[12.0, 60.0],
                        help="(d) is run once per value: learner turns per second")
    parser.add_argument("--cost-duration", type=float, default=20.0, help="seconds of each (d) run")
    parser.add_argument("--flush-ms", type=float, help="(d) the mirror's MIRROR_FLUSH_MS (default: its own)")
    parser.add_argument("--writers", type=int, help="(d) the mirror's MIRROR_WRITERS (default: its own)")
    parser.add_argument("--repeats", type=int, default=3, help="(d) runs with and without the mirror, alternately")


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = {name: value for name, value in (("flush_ms", args.flush_ms), ("writers", args.writers))
                if value is not None}
    return [asyncio.run(cost_per_turn(args.neo4j_uri, rate, args.cost_duration, args.repeats, **settings))
            for rate in args.rate]
