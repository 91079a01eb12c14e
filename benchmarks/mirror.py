"""Neo4j mirror benchmarks, against a real Neo4j (scripts/neo4j.sh) and the server as its own process.

    python benchmarks/mirror.py [--neo4j-uri bolt://127.0.0.1:7689] [--only a,b,c] [--turns 2000]
                                [--sessions 500] [--duration 20] [--out artifacts/mirror.json]

  a  write throughput: one recorded Change stream of real negotiations (rule brain, personas), written
     (1) by the mirror's batching writers and (2) one transaction per change, sequentially (the original
     design: each turn in its own transaction; the same statement), on the same Neo4j in the same run. Turns/s = learner
     turns (each is a learner and a vendor change) stored per second.
  b  mirror lag while --sessions bot sessions play (`samvad bots`, a separate process, think 500 ms):
     the server's own p50/p99 of submit -> durable over the run, read from /health, plus the worst
     age of the oldest unwritten change sampled every 0.5 s.
  c  resume after a crash: --sessions sessions created and played (scene + 3 turns each), everything
     stored, `kill -9`, restart on the same port, then every session reconnects at once with its old
     token and resumes from one event behind (the replay buffer died with the process, so each gets a
     snapshot rebuilt from Neo4j). Reported: total time until all have their snapshot, per-session
     p50/p99 to the welcome and to the snapshot.
  d  cost per turn (issue #14): the (a) stream, its sessions interleaved as concurrent learners' are,
     submitted to a running mirror at a steady --rate of learner turns per second for --cost-duration
     seconds, against the same loop with no mirror, alternately, --repeats times. Reported (medians):
     the mirror's CPU per learner turn (this process, its event-loop thread and its other threads), and
     how late a 5 ms sleep on the event loop wakes (p50/p99/max): the mirror's effect on the loop's tails.

Targets: (a) batching >= 20x the one-transaction-per-change throughput; (b) lag p99 < 250 ms.
The database URI comes from --neo4j-uri, else SAMVAD_TEST_NEO4J_URI, else NEO4J_URI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.rules_vendor import RuleBasedVendor  # noqa: E402
from clients.bots.personas import PERSONAS, LearnerView  # noqa: E402
from schemas.frames import SceneFrame, TranscriptFrame  # noqa: E402
from server.mirror import Neo4jMirror, SessionFold, plan  # noqa: E402
from session.mirror import MemoryMirror  # noqa: E402
from session.protocols import Change  # noqa: E402
from session.registry import SessionRegistry  # noqa: E402

PY = sys.executable
SECRET = "mirror-benchmark-secret-" + "m" * 40
BATCHED_RUNS = 5  # the batched run lasts well under a second, so one busy moment moves it: take a median
TICK_S = 0.005  # (d) the ticker's sleep: how late it wakes is how long the loop was held
ITEMS = ("Tomato", "Apple", "Orange", "Pumpkin", "Watermelon")


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, min(len(ordered) - 1, -(-int(q * len(ordered) * 1000) // 1000) - 1))], 2)


# ---------------------------------------------------------------------------- (a) throughput


class Recorder(MemoryMirror):
    """Durable at once (like the memory mirror), and keeps every change."""

    def __init__(self) -> None:
        super().__init__()
        self.stream: list[Change] = []

    def submit(self, change: Change) -> None:
        super().submit(change)
        self.stream.append(change)


class _Conn:
    role, conn_id = "player", 0

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []

    def send_nowait(self, envelope: Any) -> bool:
        event = envelope.event
        if event.type == "reply":
            self.replies.append(event.model_dump(mode="json"))
        return True

    def close_nowait(self, code: int, reason: str) -> None:
        pass


async def record_stream(turns: int) -> list[Change]:
    """Play personas through real actors until `turns` learner turns are recorded."""
    recorder = Recorder()
    registry = SessionRegistry(RuleBasedVendor(), recorder)
    names = sorted(PERSONAS)
    task = asyncio.ensure_future(registry.run())
    await asyncio.sleep(0)
    played, n = 0, 0
    while played < turns:
        persona = PERSONAS[names[n % len(names)]](ITEMS[n % len(ITEMS)])
        actor = registry.create(learner_id=persona.name)
        conn = _Conn()
        conn.conn_id = n + 1
        actor.connect(conn)  # type: ignore[arg-type]
        actor.submit(conn, SceneFrame(type="scene", id="scene", object_grabbed=persona.item))  # type: ignore[arg-type]
        view, k = LearnerView(), 0
        while not view.is_over and k < 30 and played < turns:
            k += 1
            actor.submit(conn, TranscriptFrame(type="transcript", id=f"t{k}", text=persona.next_line(view)))  # type: ignore[arg-type]
            while len(conn.replies) < k:  # noqa: ASYNC110 - the fake connection has nothing to wait on
                await asyncio.sleep(0)
            view = LearnerView.from_reply(conn.replies[-1])
            played += 1
        n += 1
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return recorder.stream


def renamed(stream: list[Change], tag: str) -> list[Change]:
    return [replace(c, session_id=f"{tag}-{c.session_id}") for c in stream]


async def throughput(uri: str, turns: int) -> dict[str, Any]:
    stream = await record_stream(turns)
    learner_turns = sum(1 for c in stream if c.kind == "learner_turn")
    sessions = len({c.session_id for c in stream})
    run = uuid.uuid4().hex[:8]
    print(f"(a) stream: {len(stream)} changes, {learner_turns} learner turns, {sessions} sessions", flush=True)

    # Batched: hand the whole stream to a running mirror, as the actors would, and wait until stored.
    mirror = Neo4jMirror(uri)
    await mirror.ensure_schema()
    for k in range(3):  # plans compiled, connections open, the JVM warm: for both ways of writing
        folds: dict[str, SessionFold] = {}
        warm = renamed(stream[:mirror.batch_max], f"warm{k}-{run}")
        await mirror.write([plan(folds.setdefault(c.session_id, SessionFold()), c, 0.0) for c in warm])
    # One transaction per change, sequentially, same statement, same Neo4j: the whole stream once, in
    # BATCHED_RUNS consecutive slices, one after each batched run. This machine is shared and its load
    # drifts over the ~20 s the one-transaction writes take; interleaved, both ways of writing see the
    # same stretch of it (the short batched run is repeated and its median taken).
    single = Neo4jMirror(uri)
    folds = {}
    entries = [plan(folds.setdefault(c.session_id, SessionFold()), c, 0.0) for c in renamed(stream, f"single-{run}")]
    size = -(-len(entries) // BATCHED_RUNS)
    slices = [entries[i:i + size] for i in range(0, len(entries), size)]
    slice_s: list[float] = []
    runs: list[tuple[float, int]] = []
    for k in range(BATCHED_RUNS):
        batched = renamed(stream, f"batched{k}-{run}")
        runner = asyncio.ensure_future(mirror.run())
        await asyncio.sleep(0.05)
        before = mirror.batches
        started = time.perf_counter()
        for change in batched:
            mirror.submit(change)
        last = {c.session_id: c.version for c in batched}
        while any(mirror.durable_version(sid) < v for sid, v in last.items()):  # noqa: ASYNC110
            await asyncio.sleep(0.002)
        runs.append((time.perf_counter() - started, mirror.batches - before))
        runner.cancel()
        try:
            await runner
        except asyncio.CancelledError:
            pass
        started = time.perf_counter()
        for entry in slices[k] if k < len(slices) else ():
            await single.write([entry])
        slice_s.append(time.perf_counter() - started)
    await single.aclose()
    batched_s, batches = sorted(runs)[len(runs) // 2]
    single_s = sum(slice_s)

    result = {
        "changes": len(stream), "learner_turns": learner_turns, "sessions": sessions,
        "batched": {"seconds": round(batched_s, 3), "turns_per_s": round(learner_turns / batched_s, 1),
                    "changes_per_s": round(len(stream) / batched_s, 1), "batches": batches,
                    "runs_s": [round(r, 3) for r, _ in runs],
                    "batch_max": mirror.batch_max, "flush_ms": mirror.flush_s * 1000,
                    "writers": mirror.writers},
        "one_tx_per_change": {"seconds": round(single_s, 3), "turns_per_s": round(learner_turns / single_s, 1),
                              "changes_per_s": round(len(stream) / single_s, 1),
                              "ms_per_tx": round(1000 * single_s / len(stream), 2),
                              "ms_per_tx_by_slice": [round(1000 * t / len(c), 2)
                                                     for t, c in zip(slice_s, slices, strict=False) if c]},
    }
    # Each batched run against the slice written right after it: how much the ratio moves with the load.
    result["speedup_by_pair"] = [round((t / len(c)) / (r / len(stream)), 1)
                                 for (r, _), t, c in zip(runs, slice_s, slices, strict=False) if c]
    result["speedup"] = round(single_s / batched_s, 1)
    result["target_met"] = result["speedup"] >= 20
    print(f"(a) batched {result['batched']['turns_per_s']} turns/s in {result['batched']['batches']} batches; "
          f"one tx per change {result['one_tx_per_change']['turns_per_s']} turns/s "
          f"({result['one_tx_per_change']['ms_per_tx']} ms/tx): x{result['speedup']} "
          f"(run by run: {result['speedup_by_pair']})", flush=True)
    return result


# ---------------------------------------------------------------------------- (d) cost per turn


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


# ---------------------------------------------------------------------------- the server as a process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# `samvad serve`, plus a gc callback that logs every collection pausing the server >= 20 ms, so that
# tail latencies can be told apart from the mirror's own. Nothing in the server changes.
GC_WATCH = """
import gc, sys, time
_t = [0.0]
def _watch(phase, info):
    if phase == "start":
        _t[0] = time.perf_counter()
        return
    ms = (time.perf_counter() - _t[0]) * 1000
    if ms >= 20:
        print(f"GCPAUSE {info['generation']} {ms:.1f}", file=sys.stderr, flush=True)
gc.callbacks.append(_watch)
from server.cli import main
sys.exit(main(sys.argv[1:]))
"""


def gc_pauses(log: Path, since: int) -> dict[str, Any]:
    """Collections that paused the server >= 20 ms, from the log written after byte `since`."""
    with log.open("rb") as f:
        f.seek(since)
        lines = f.read().decode(errors="replace").splitlines()
    pauses = [float(line.split()[2]) for line in lines if line.startswith("GCPAUSE ")]
    return {"count": len(pauses), "max_ms": max(pauses) if pauses else 0.0, "total_ms": round(sum(pauses), 1)}


class Server:
    def __init__(self, uri: str, logs: Path, port: int | None = None, **settings: object) -> None:
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.ws = f"ws://127.0.0.1:{self.port}"
        self.logs = logs
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMVAD_SECRET": SECRET, "BRAIN": "rules",
                    "MIRROR": "neo4j", "NEO4J_URI": uri, "LOG_LEVEL": "WARNING", "HOST": "127.0.0.1",
                    "SESSION_CREATE_PER_SECOND": "100000", "SESSION_CREATE_BURST": "100000",
                    "RATE_LIMIT_PER_SECOND": "1000", "RATE_LIMIT_BURST": "1000",
                    **{k: str(v) for k, v in settings.items()}}
        self.env.pop("USE_MOCKS", None)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        started = time.perf_counter()
        log = self.logs.open("ab")
        self.proc = subprocess.Popen([PY, "-c", GC_WATCH, "serve", "--port", str(self.port)], cwd=ROOT,
                                     env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited; see {self.logs}")
            try:
                if httpx.get(f"{self.base}/health", timeout=1.0).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            if time.perf_counter() - started > 60:
                raise RuntimeError(f"server did not start; see {self.logs}")
            time.sleep(0.05)

    def health(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.base}/health", timeout=5.0).json())

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# ---------------------------------------------------------------------------- (b) lag under load


async def lag_under_load(uri: str, sessions: int, duration: float, think_ms: float, logs: Path) -> dict[str, Any]:
    server = Server(uri, logs / "server-lag.log")
    server.start()
    samples: list[float] = []
    assert server.proc is not None
    watched = {"server": psutil.Process(server.proc.pid)}
    neo4j = [p for p in psutil.process_iter(["cmdline"]) if "neo4j-launcher.jar" in " ".join(p.info["cmdline"] or ())]
    if neo4j:
        watched["neo4j"] = neo4j[0]
    cpu_before = {name: sum(p.cpu_times()[:2]) for name, p in watched.items()}
    log_at = server.logs.stat().st_size
    machine_before = psutil.cpu_times()
    started = time.perf_counter()
    try:
        out = logs / "bots-lag.json"
        bots = await asyncio.create_subprocess_exec(
            PY, "-m", "server.cli", "bots", "--url", server.base, "--sessions", str(sessions),
            "--think", str(think_ms), "--paced",
            "--duration", str(duration), "--quiet", "--json", str(out), cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        async with httpx.AsyncClient(timeout=5.0) as http:
            while bots.returncode is None:
                try:
                    health = (await http.get(f"{server.base}/health")).json()
                    samples.append(float(health["mirror"]["lag_ms"]))
                except httpx.HTTPError:
                    pass
                try:
                    await asyncio.wait_for(bots.wait(), 0.5)
                except TimeoutError:
                    pass
        printed = (await bots.stdout.read()).decode() if bots.stdout else ""
        wall = time.perf_counter() - started
        cpu = {name: round(sum(p.cpu_times()[:2]) - cpu_before[name], 1) for name, p in watched.items()}
        machine = psutil.cpu_times()
        cpu["machine_busy"] = round(sum(machine[:3]) - sum(machine_before[:3]), 1)
        cpu["wall_s"] = round(wall, 1)
        for _ in range(200):  # let the last changes land
            if server.health()["mirror"]["queue_depth"] == 0:
                break
            await asyncio.sleep(0.05)
        mirror = server.health()["mirror"]
        result_bots = json.loads(out.read_text()).get("samvad", {}) if out.exists() else {"error": printed[-2000:]}
    finally:
        server.stop()
    result = {
        "sessions": sessions, "duration_s": duration, "think_ms": think_ms, "paced": True, "cpu_s": cpu,
        "loadavg_1m_after": round(os.getloadavg()[0], 2), "server_gc_pauses": gc_pauses(server.logs, log_at),
        "turns": result_bots.get("turns"), "turns_per_s": result_bots.get("turns_per_s"),
        "bot_errors": result_bots.get("errors", {}).get("count"),
        "reply_latency_ms": result_bots.get("latency_ms"),
        "mirror": {k: mirror.get(k) for k in ("lag_p50_ms", "lag_p99_ms", "lag_window", "batches", "rows", "turns",
                                               "failures", "retries", "batch_ms_p50", "batch_ms_p99")},
        "oldest_unwritten_ms": {"max": max(samples) if samples else None, "p99": pct(samples, 0.99),
                                "samples": len(samples)},
    }
    lag = mirror.get("lag_p99_ms")
    result["target_met"] = lag is not None and lag < 250
    print(f"(b) {sessions} sessions at one turn per {think_ms:g} ms, {result['turns']} turns "
          f"({result['turns_per_s']}/s): mirror lag "
          f"p50 {mirror.get('lag_p50_ms')} ms, p99 {lag} ms over {mirror.get('lag_window')} changes in "
          f"{mirror.get('batches')} batches (p50 {mirror.get('batch_ms_p50')} ms); oldest unwritten max "
          f"{result['oldest_unwritten_ms']['max']} ms; reply p99 {(result['reply_latency_ms'] or {}).get('p99')} ms; "
          f"server GC pauses >= 20 ms: {result['server_gc_pauses']}",
          flush=True)
    return result


# ---------------------------------------------------------------------------- (c) resume after kill -9


async def resume_after_crash(uri: str, sessions: int, logs: Path) -> dict[str, Any]:
    server = Server(uri, logs / "server-resume.log")
    server.start()
    limit = asyncio.Semaphore(100)
    played: list[dict[str, Any]] = []

    async def create_and_play(http: httpx.AsyncClient, i: int) -> None:
        async with limit:
            body = (await http.post(f"{server.base}/api/sessions", json={"learner_id": f"bench-{i}"})).json()
            url = f"{server.ws}/ws/sessions/{body['session_id']}?token={body['player_token']}"
            async with connect(url, subprotocols=["samvad.v1.json"]) as ws:  # type: ignore[list-item]
                welcome = orjson.loads(await ws.recv())
                last_seq = welcome["seq"]
                frames = [{"type": "scene", "id": "s1", "object_grabbed": ITEMS[i % len(ITEMS)]}]
                frames += [{"type": "transcript", "id": f"t{k}", "text": text} for k, text in
                           enumerate(("Namaste bhaiya!", "Ye kitne ka hai?", "Thoda kam karo na."), 1)]
                acked: set[str] = set()
                answered: set[str] = set()
                for frame in frames:
                    await ws.send(orjson.dumps(frame).decode())
                    # Stored (ack) and, for a transcript, answered (its reply) before the next frame.
                    while frame["id"] not in acked or (frame["type"] == "transcript" and frame["id"] not in answered):
                        event = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
                        if event["type"] == "ack":
                            acked.add(event["id"])
                        if event["type"] == "reply":
                            answered.add(event["in_reply_to"])
                        if event.get("seq"):
                            last_seq = max(last_seq, event["seq"])
                while True:  # the turn's trailing events (mood, stage)
                    try:
                        event = orjson.loads(await asyncio.wait_for(ws.recv(), 0.2))
                    except TimeoutError:
                        break
                    if event.get("seq"):
                        last_seq = max(last_seq, event["seq"])
            played.append({"sid": body["session_id"], "token": body["player_token"], "last_seq": last_seq})

    async with httpx.AsyncClient(timeout=30.0, limits=httpx.Limits(max_connections=100)) as http:
        started = time.perf_counter()
        await asyncio.gather(*(create_and_play(http, i) for i in range(sessions)))
        play_s = time.perf_counter() - started
    while server.health()["mirror"]["queue_depth"]:  # noqa: ASYNC110 - polling another process
        await asyncio.sleep(0.05)
    server.kill9()
    restart_s = server.start()

    async def resume(s: dict[str, Any]) -> dict[str, float]:
        t0 = time.perf_counter()
        url = f"{server.ws}/ws/sessions/{s['sid']}?token={s['token']}"
        async with connect(url, subprotocols=["samvad.v1.json"], open_timeout=60) as ws:  # type: ignore[list-item]
            welcome = orjson.loads(await ws.recv())
            t_welcome = time.perf_counter()
            assert welcome["type"] == "welcome" and welcome["seq"] == s["last_seq"], (welcome["seq"], s)
            await ws.send(orjson.dumps({"type": "resume", "last_seq": s["last_seq"] - 1, "id": "r"}).decode())
            while True:
                event = orjson.loads(await asyncio.wait_for(ws.recv(), 60))
                if event["type"] == "snapshot":
                    assert event["seq"] == s["last_seq"] and event["state"]["turn"] == 3
                    break
            return {"welcome_ms": (t_welcome - t0) * 1000, "snapshot_ms": (time.perf_counter() - t0) * 1000}

    started = time.perf_counter()
    timings = await asyncio.gather(*(resume(s) for s in played))
    total_s = time.perf_counter() - started
    recovered = server.health()["sessions"]["recovered"]
    server.stop()
    welcome = [t["welcome_ms"] for t in timings]
    snapshot = [t["snapshot_ms"] for t in timings]
    result = {
        "sessions": sessions, "play_s": round(play_s, 2), "server_restart_s": round(restart_s, 2),
        "total_s": round(total_s, 3), "recovered": recovered,
        "welcome_ms": {"p50": pct(welcome, 0.5), "p99": pct(welcome, 0.99), "max": round(max(welcome), 2)},
        "snapshot_ms": {"p50": pct(snapshot, 0.5), "p99": pct(snapshot, 0.99), "max": round(max(snapshot), 2)},
    }
    print(f"(c) {sessions} sessions resumed in {result['total_s']} s after a {result['server_restart_s']} s "
          f"restart: snapshot p50 {result['snapshot_ms']['p50']} ms, p99 {result['snapshot_ms']['p99']} ms "
          f"(welcome p50 {result['welcome_ms']['p50']} ms, p99 {result['welcome_ms']['p99']} ms)", flush=True)
    return result


# ---------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--neo4j-uri", default=os.environ.get("SAMVAD_TEST_NEO4J_URI")
                        or os.environ.get("NEO4J_URI") or "bolt://127.0.0.1:7689")
    parser.add_argument("--only", default="a,b,c")
    parser.add_argument("--turns", type=int, default=2000, help="learner turns in the (a) stream")
    parser.add_argument("--sessions", type=int, default=500, help="sessions for (b) and (c)")
    parser.add_argument("--duration", type=float, default=70.0,
                        help="seconds of bot load in (b); over 60 so the server's 60 s lag window is all load")
    parser.add_argument("--think", type=float, nargs="+", default=[5000.0, 2000.0, 1000.0],
                        help="(b) is run once per value: each bot's paced interval between turns, in ms")
    parser.add_argument("--rate", type=float, nargs="+", default=[12.0, 60.0],
                        help="(d) is run once per value: learner turns per second")
    parser.add_argument("--cost-duration", type=float, default=20.0, help="seconds of each (d) run")
    parser.add_argument("--flush-ms", type=float, help="(d) the mirror's MIRROR_FLUSH_MS (default: its own)")
    parser.add_argument("--writers", type=int, help="(d) the mirror's MIRROR_WRITERS (default: its own)")
    parser.add_argument("--repeats", type=int, default=3, help="(d) runs with and without the mirror, alternately")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "mirror.json"))
    parser.add_argument("--logs", default=str(ROOT / "var" / "bench-mirror"))
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65_536), hard))
    logs = Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    results: dict[str, Any] = {"neo4j_uri": args.neo4j_uri, "cpus": os.cpu_count(),
                               "loadavg_1m_before": round(os.getloadavg()[0], 2)}
    if "a" in only:
        results["a_throughput"] = asyncio.run(throughput(args.neo4j_uri, args.turns))
    if "b" in only:
        results["b_lag_under_load"] = [
            asyncio.run(lag_under_load(args.neo4j_uri, args.sessions, args.duration, think, logs))
            for think in args.think]
    if "c" in only:
        results["c_resume_after_crash"] = asyncio.run(resume_after_crash(args.neo4j_uri, args.sessions, logs))
    if "d" in only:
        settings = {name: value for name, value in (("flush_ms", args.flush_ms), ("writers", args.writers))
                    if value is not None}
        results["d_cost_per_turn"] = [
            asyncio.run(cost_per_turn(args.neo4j_uri, rate, args.cost_duration, args.repeats, **settings))
            for rate in args.rate]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and only != {"a", "b", "c"}:  # a partial run keeps the other parts' figures
        results = {**json.loads(out.read_text()), **results}
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
