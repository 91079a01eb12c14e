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
  d  the mirror's CPU per turn and its effect on the loop's tails: benchmarks/mirror_cost.py.

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
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import mirror_cost  # noqa: E402
from benchmarks.mirror_stream import ITEMS, pct, record_stream, renamed  # noqa: E402
from server.mirror import Neo4jMirror, SessionFold, plan  # noqa: E402

PY = sys.executable
SECRET = "mirror-benchmark-secret-" + "m" * 40
BATCHED_RUNS = 5  # the batched run lasts well under a second, so one busy moment moves it: take a median
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
    mirror_cost.add_arguments(parser)
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
        results["d_cost_per_turn"] = mirror_cost.run(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and only != {"a", "b", "c"}:  # a partial run keeps the other parts' figures
        results = {**json.loads(out.read_text()), **results}
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
