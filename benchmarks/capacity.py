"""How many learners does one server process hold with the LLM brain, streaming and Neo4j on?

A production-shaped load (issue #14): N learners connected at once, each taking a turn every 6-10 s
at random, with the LLM brain streaming from a fake model (`benchmarks.fake_model`: 400 ms to the
first token, then 50 tokens/s) and the session mirror writing to a real Neo4j. Four processes:
Neo4j (started here with scripts/neo4j.sh and warmed up, unless `--neo4j-uri` names one), the
fake model, the Samvad server (`python -m server.cli serve`) and this load generator.

For each N in `--steps` a fresh server is started and warmed up with four learners taking a turn
each (not measured), then the N learners connect (staggered over a few seconds), play for
`--duration` seconds, and leave. Per step it reports:

* the server's overhead on the first-words path, measured against the fake model's clock as
  `benchmarks/llm_stream.py` does: `inbound` (transcript sent -> request at the model) plus
  `outbound` (the chunk that completes the first clause of `reply_text` written -> the first
  `reply.delta` at the client, stamped when the generator's loop read its bytes: see below);
  p50/p95/p99. The session lets the vendor's words out a whole
  clause at a time (issue #30, session/spoken.py), so nothing can reach the learner sooner; the
  same figure from the chunk with the first character (`overhead_from_first_char_ms`, the
  measure before this benchmark followed issue #30) adds the model's own time to write that
  clause, 2-3 of its tokens (40-60 ms) with the fake's lines;
* errors: error frames, fallback replies, turns with no reply within 30 s, dropped sockets;
* the server's CPU per turn and its RSS at the end of the step, and the fake model's CPU per turn
  (so that the fake is shown not to be the bottleneck) and the load generator's own; the ratio of
  the server's CPU to the fake's (issue #33 judges the LLM turn by it: the fake's work per turn
  does not change, so the ratio holds on a slower or busier machine), for the whole step and for
  its steady part, once every learner is connected (`steady_cpu`: without the ramp's session
  creations, whose share of the step grows when a busy machine slows the ramp);
* how late the load generator's own event loop wakes (a 50 ms sleep, again and again), with the
  inbound and outbound parts apart: the generator stamps the send and the first delta, so when
  its loop is late by as much as the overhead, the step measures the generator, not the server.
  The first delta is stamped when the loop's read callback took its bytes from the socket
  (`clients.bots.steady.StampedConnection`), not when the learner's task, one of a thousand,
  next ran; the latter, the measure until 2026-11-27, is printed beside it
  (`overhead_seen_by_task_ms`);
* the load generator runs with its cyclic collector paused for the step (`collector_paused`),
  so that its own pauses do not pass for the server's;
* whether the step passed: overhead p99 <= 10 ms and 0 errors.

With `--no-stream` the server runs with AI_STREAM=false: the first words are the whole `reply`,
and `outbound` runs from the model writing its whole answer to the reply at the client. That is
the CPU of a non-streamed turn at the same load.

The largest passing N is the figure; steps stop after the first that fails (`--all` runs them all,
to see how the figures grow).

    python -m benchmarks.capacity                                # steps 100,250,500,750,1000
    python -m benchmarks.capacity --steps 50,100 --duration 30   # a quick look

Figures are printed and written to artifacts/capacity.json; server logs go to artifacts/capacity.*.log.
Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import websockets

from benchmarks.llm_stream import LINES, cpu_seconds, free_port, marker, start_server, stop, summary
from clients.bots.steady import StampedConnection, collector_paused, watch_loop_lag

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
REPLY_TIMEOUT_S = 30.0
OVERHEAD_P99_MS = 10.0


@dataclass
class Step:
    sessions: int
    turns: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    sent: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # marker -> (sent, first delta)
    seen: dict[str, float] = field(default_factory=dict)  # marker -> when the learner's task saw the first delta
    loop_lag_ms: list[float] = field(default_factory=list)  # how late this generator's own loop woke
    connected: int = 0  # learners whose socket has opened (not decremented when one closes)
    settled: int = 0  # learners connected, or failed before they could connect: the ramp is over at all
    all_connected_at: float | None = None  # wall clock when the last of them connected
    # (turns, server CPU s, fake CPU s) when the last learner connected: the steady part's start
    steady_from: tuple[int, float, float] | None = None

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """User plus system CPU time of the process's main thread (its event loop) and of all its other
    threads together (the mirror's I/O thread, worker threads), from Linux /proc."""
    split = {"main": 0.0, "other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = int(fields[11]) + int(fields[12])
        split["main" if task.name == str(pid) else "other"] += ticks / os.sysconf("SC_CLK_TCK")
    return split


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# --------------------------------------------------------------------------- processes


def start_neo4j(port: int) -> str:
    """A Neo4j of the benchmark's own, on an empty store: every run starts from the same graph, and
    the store does not grow by a few hundred MB a day of runs. (A Neo4j named by `--neo4j-uri` is
    never touched.)"""
    data = ROOT / "var" / "neo4j-capacity"
    shutil.rmtree(data / "data", ignore_errors=True)
    env = {**os.environ, "NEO4J_PORT": str(port), "NEO4J_DATA_DIR": str(data)}
    subprocess.run(["bash", "scripts/neo4j.sh", "start"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return f"bolt://127.0.0.1:{port}"


def stop_neo4j(port: int) -> None:
    env = {**os.environ, "NEO4J_PORT": str(port), "NEO4J_DATA_DIR": str(ROOT / "var" / "neo4j-capacity")}
    subprocess.run(["bash", "scripts/neo4j.sh", "stop"], cwd=ROOT, env=env, check=False,
                   stdout=subprocess.DEVNULL)


def start_fake(ttft_ms: float, tokens_per_s: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fake_model", "--port", "0", "--ttft-ms", str(ttft_ms),
         "--tokens-per-s", str(tokens_per_s)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=(ARTIFACTS / "capacity.fake.log").open("w"), text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"the fake model did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def start_samvad(base_url: str, neo4j_uri: str, stream: bool = True) -> tuple[subprocess.Popen[bytes], str]:
    return start_server({
        "BRAIN": "openai", "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": base_url, "AI_STREAM": str(stream).lower(),
        "SAMVAD_SECRET": "benchmark-" + "s" * 40, "LOG_LEVEL": "WARNING",
        "MIRROR": "neo4j" if neo4j_uri else "none", "NEO4J_URI": neo4j_uri, "USE_MOCKS": "false",
        # one load generator creates every session: lift the per-address creation limit
        "SESSION_CREATE_PER_SECOND": "10000", "SESSION_CREATE_BURST": "10000",
    }, ARTIFACTS / "capacity.samvad.log", wait_s=60)


def warm_neo4j(fake_url: str, neo4j_uri: str, learners: int) -> None:
    """Give a Neo4j this benchmark has just started a production-like warm JVM before any step.

    A fresh Neo4j runs the mirror's queries slowly until its JIT has compiled them: in the first
    45 s at N=1000 it used 21 CPU-seconds (3-6 s once warm) on the two cores the server shares,
    and that step's p99 was 44 ms. Learners as many as the largest step, a turn every 0.5-1.5 s
    for 30 s, against a server of its own, not measured (300 learners for 20 s left the first
    N=1000 step at p99 19-23 ms).
    """
    print(f"warming the new Neo4j up ({learners} learners, 30 s, not measured)", flush=True)
    proc, host = start_samvad(fake_url, neo4j_uri)
    try:
        anyio.run(run_step, host, learners, 30.0, (0.5, 1.5), max(3.0, learners / 100))
    finally:
        stop(proc)


# --------------------------------------------------------------------------- the learners


async def learner(client: httpx.AsyncClient, host: str, index: int, step: Step, start_by: float,
                  until: float, think: tuple[float, float]) -> None:
    rng = random.Random(index)
    opened = False
    await anyio.sleep(rng.uniform(0, start_by))
    try:
        created = (await client.post("/api/sessions", json={})).json()
        url = f"ws://{host}/ws/sessions/{created['session_id']}?token={created['player_token']}"
        async with websockets.connect(url, max_size=None, open_timeout=30,
                                      create_connection=StampedConnection) as ws:
            await ws.recv_stamped()  # welcome
            step.connected += 1
            step.settled += 1
            opened = True
            if step.connected == step.sessions:
                step.all_connected_at = time.time()
            n = 0
            while True:
                await anyio.sleep(rng.uniform(*think))
                if time.time() >= until:
                    return
                mark = marker(rng)
                sent = time.time()
                step.sent[mark] = (sent, None)
                await ws.send(json.dumps({"type": "transcript", "id": f"{mark}-{n}",
                                          "text": f"{LINES[n % len(LINES)]} (ref {mark})"}))
                n += 1
                with anyio.move_on_after(REPLY_TIMEOUT_S) as scope:
                    while True:
                        # The first words are stamped when their bytes were read, not when this
                        # task next ran (`StampedConnection`); the latter is kept as `seen`.
                        message, arrived = await ws.recv_stamped()
                        frame = json.loads(message)
                        kind = frame["type"]
                        first_words = kind == "reply.delta" or kind == "reply"  # a reply: not streaming
                        if first_words and step.sent[mark][1] is None:
                            step.sent[mark] = (sent, arrived)
                            step.seen[mark] = time.time()
                        if kind == "error":
                            step.error(f"error:{frame.get('code')}")
                        elif kind == "reply":
                            step.turns += 1
                            if frame.get("fallback"):
                                step.error("fallback")
                            break
                        elif kind == "session.ended":
                            return
                if scope.cancelled_caught:
                    step.error("no_reply_in_30s")
                    return
    except (OSError, websockets.WebSocketException, httpx.HTTPError, KeyError) as exc:
        step.error(f"socket:{type(exc).__name__}")
        if not opened:
            step.settled += 1


CpuProbe = Callable[[], Awaitable[tuple[float, float]]]  # (server CPU s, fake CPU s) now


async def run_step(host: str, sessions: int, duration: float, think: tuple[float, float],
                   ramp: float | None = None, cpu: CpuProbe | None = None) -> Step:
    step = Step(sessions)
    ramp = max(5.0, sessions / 100) if ramp is None else ramp
    until = time.time() + ramp + duration
    # One HTTP client for every learner: a client each means an SSL context each, milliseconds of
    # this process's CPU per learner that held its loop up for up to a second during the ramp.
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=f"http://{host}", timeout=30, limits=limits) as client, \
            anyio.create_task_group() as tg:
        for index in range(sessions):
            tg.start_soon(learner, client, host, index, step, ramp, until, think)
        tg.start_soon(probe_lag, step, until)
        if cpu is not None:
            tg.start_soon(mark_steady, step, until, cpu)
    return step


async def mark_steady(step: Step, until: float, cpu: CpuProbe) -> None:
    """Note the turns and both CPU clocks once every learner is connected (or has failed to): CPU
    per turn over the rest of the step leaves out the ramp (a thousand sessions created and
    upgraded), whose share of the whole step grows when a busy machine slows the ramp and fewer
    turns follow it."""
    while step.settled < step.sessions:  # a learner that failed to connect does not hold it back
        if time.time() >= until:
            return
        await anyio.sleep(0.05)
    turns = step.turns
    server, fake = await cpu()
    step.steady_from = (turns, server, fake)


async def probe_lag(step: Step, until: float) -> None:
    """How late this process's own event loop wakes, until `until`: its timestamps of sends and first
    deltas are only as good as that, so a busy generator must not pass for a slow server."""
    with anyio.move_on_after(until - time.time()):
        await watch_loop_lag(step.loop_lag_ms)


# --------------------------------------------------------------------------- main


def measure(step: Step, records: list[dict[str, Any]]) -> dict[str, Any]:
    # A running summary (docs/memory.md) quotes earlier lines, markers and all: a marker's turn is
    # the first request that carries it. The model's first words are the chunk with the reply's
    # first character when streaming, else the whole answer.
    by_marker: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("marker"):
            by_marker.setdefault(r["marker"], r)
    overhead: list[float] = []
    inbound: list[float] = []
    outbound: list[float] = []
    from_first_char: list[float] = []
    seen: list[float] = []  # the same, to when the learner's task saw the first words
    steady: list[float] = []  # turns sent once every learner was connected
    for mark, (sent, first) in step.sent.items():
        record = by_marker.get(mark)
        if record is None or first is None:
            continue
        model_words = record.get("first_clause_wall") or record.get("answered_wall")
        if not model_words:
            continue
        inbound.append((record["received_wall"] - sent) * 1000)
        outbound.append((first - model_words) * 1000)
        overhead.append(inbound[-1] + outbound[-1])
        first_char = record.get("first_reply_char_wall") or model_words
        from_first_char.append(inbound[-1] + (first - first_char) * 1000)
        if mark in step.seen:
            seen.append(inbound[-1] + (step.seen[mark] - model_words) * 1000)
        if step.all_connected_at is not None and sent >= step.all_connected_at:
            steady.append(overhead[-1])
    return {"overhead_ms": summary(overhead), "inbound_ms": summary(inbound),
            "outbound_ms": summary(outbound), "steady_overhead_ms": summary(steady),
            "overhead_from_first_char_ms": summary(from_first_char),
            "overhead_seen_by_task_ms": summary(seen),
            "loadgen_loop_lag_ms": summary(step.loop_lag_ms)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.capacity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="100,250,500,750,1000", help="learner counts, comma-separated")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of play per step")
    parser.add_argument("--think-s", default="6:10", help="pause between a learner's turns, LOW:HIGH s")
    parser.add_argument("--neo4j-uri", default="", help="use this Neo4j instead of starting one")
    parser.add_argument("--no-neo4j", action="store_true", help="run without the mirror")
    parser.add_argument("--all", action="store_true", help="run every step, even after one fails")
    parser.add_argument("--ttft-ms", type=float, default=400.0)
    parser.add_argument("--tokens-per-s", type=float, default=50.0)
    parser.add_argument("--no-stream", action="store_true",
                        help="AI_STREAM=false: the first words are the whole reply (the CPU of a non-streamed turn)")
    args = parser.parse_args(argv)
    steps = [int(s) for s in args.steps.split(",")]
    low, _, high = args.think_s.partition(":")
    think = (float(low), float(high or low))
    ARTIFACTS.mkdir(exist_ok=True)
    neo4j_port = free_port()
    neo4j_uri = "" if args.no_neo4j else (args.neo4j_uri or start_neo4j(neo4j_port))
    fake, fake_url = start_fake(args.ttft_ms, args.tokens_per_s)
    fake_base = fake_url.removesuffix("/v1")
    if neo4j_uri and not args.neo4j_uri:
        warm_neo4j(fake_url, neo4j_uri, max(steps))
    results: list[dict[str, Any]] = []
    try:
        for sessions in steps:
            proc, host = start_samvad(fake_url, neo4j_uri, stream=not args.no_stream)
            try:
                # Warm up: a few turns through every path once (imports, caches, the model's
                # connection) before anything is measured; a server is not measured cold.
                anyio.run(run_step, host, 4, 1.5, (0.2, 0.5), 0.0)
                httpx.post(fake_base + "/_fake/reset", timeout=10)
                threads0 = thread_cpu_seconds(proc.pid)
                cpu0, fake0 = cpu_seconds(proc.pid), httpx.get(fake_base + "/_fake/cpu").json()["cpu_s"]
                me0 = resource.getrusage(resource.RUSAGE_SELF)
                started = time.time()
                # uvloop when it is there, as the server and the fake model have: the generator's
                # loop is on the measured path (it stamps the sends and the first deltas).
                async def probe(pid: int = proc.pid) -> tuple[float, float]:
                    async with httpx.AsyncClient(timeout=10) as client:
                        fake_now = (await client.get(fake_base + "/_fake/cpu")).json()["cpu_s"]
                    return cpu_seconds(pid), fake_now

                with collector_paused():
                    step = anyio.run(run_step, host, sessions, args.duration, think, None, probe,
                                     backend_options={"use_uvloop": True})
                wall = time.time() - started
                cpu = cpu_seconds(proc.pid) - cpu0
                threads = thread_cpu_seconds(proc.pid)
                fake_cpu = httpx.get(fake_base + "/_fake/cpu").json()["cpu_s"] - fake0
                me1 = resource.getrusage(resource.RUSAGE_SELF)
                rss = rss_mib(proc.pid)
                records = httpx.get(fake_base + "/_fake/requests", timeout=60).json()
            finally:
                stop(proc)
            figures = measure(step, records)
            turns = max(1, step.turns)
            steady: dict[str, Any] = {}
            if step.steady_from is not None and step.turns > step.steady_from[0]:
                n, server0, fake_0 = step.steady_from
                server_ms = (cpu0 + cpu - server0) * 1000 / (step.turns - n)
                fake_ms = (fake0 + fake_cpu - fake_0) * 1000 / (step.turns - n)
                steady = {"turns": step.turns - n, "server_cpu_ms_per_turn": round(server_ms, 2),
                          "fake_cpu_ms_per_turn": round(fake_ms, 2),
                          "ratio": round(server_ms / fake_ms, 2) if fake_ms > 0 else None}
            p99 = figures["overhead_ms"].get("p99", float("inf"))
            result = {
                "sessions": sessions, "turns": step.turns, "wall_s": round(wall, 1),
                "turns_per_s": round(step.turns / wall, 1), **figures,
                "errors": step.errors, "server_cpu_ms_per_turn": round(cpu * 1000 / turns, 2),
                "server_cpu_ms_per_turn_by_thread": {
                    name: round((seconds - threads0.get(name, 0.0)) * 1000 / turns, 2)
                    for name, seconds in threads.items()},
                "server_cpu_share": round(cpu / wall, 3), "server_rss_mib": rss,
                "fake_cpu_ms_per_turn": round(fake_cpu * 1000 / turns, 2),
                "cpu_ratio": round(cpu / fake_cpu, 2) if fake_cpu > 0 else None,
                "steady_cpu": steady,  # the same figures once every learner was connected
                "loadgen_cpu_ms_per_turn": round((me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime)
                                                 * 1000 / turns, 2),
                "passed": p99 <= OVERHEAD_P99_MS and not step.errors,
            }
            results.append(result)
            o = result["overhead_ms"]
            print(f"N={sessions:5d}: {step.turns} turns ({result['turns_per_s']}/s), first-words "
                  f"overhead p50 {o.get('p50')} p95 {o.get('p95')} p99 {o.get('p99')} ms, errors "
                  f"{step.errors or 0}; server CPU {result['server_cpu_ms_per_turn']} ms/turn "
                  f"({result['server_cpu_share']:.0%} of a core; by thread "
                  f"{result['server_cpu_ms_per_turn_by_thread']}), RSS {rss} MiB; fake "
                  f"{result['fake_cpu_ms_per_turn']} ms/turn -> {'pass' if result['passed'] else 'FAIL'}",
                  flush=True)
            lag, inb, outb = result["loadgen_loop_lag_ms"], result["inbound_ms"], result["outbound_ms"]
            steady = result["steady_overhead_ms"]
            print(f"         once all {sessions} were connected: {steady.get('n')} turns, overhead p50 "
                  f"{steady.get('p50')} p95 {steady.get('p95')} p99 {steady.get('p99')} ms", flush=True)
            sc = result["steady_cpu"]
            print(f"         CPU ratio server/fake {result['cpu_ratio']}; once all were connected: server "
                  f"{sc.get('server_cpu_ms_per_turn')} ms/turn, fake {sc.get('fake_cpu_ms_per_turn')} ms/turn, "
                  f"ratio {sc.get('ratio')} ({sc.get('turns')} turns)", flush=True)
            fc = result["overhead_from_first_char_ms"]
            print(f"         from the model's first character instead of its first clause: overhead p50 "
                  f"{fc.get('p50')} p99 {fc.get('p99')} ms", flush=True)
            sn = result["overhead_seen_by_task_ms"]
            print(f"         to when the learner's task saw the first words instead of their arrival: "
                  f"overhead p50 {sn.get('p50')} p99 {sn.get('p99')} ms", flush=True)
            print(f"         inbound p99 {inb.get('p99')} ms, outbound p99 {outb.get('p99')} ms; load "
                  f"generator {result['loadgen_cpu_ms_per_turn']} ms/turn, its loop late p50 "
                  f"{lag.get('p50')} p99 {lag.get('p99')} ms", flush=True)
            if not result["passed"] and not args.all:
                break
    finally:
        stop(fake)
        if not args.no_neo4j and not args.neo4j_uri:
            stop_neo4j(neo4j_port)
    passed = [r["sessions"] for r in results if r["passed"]]
    summary_out = {
        "config": {"steps": args.steps, "duration_s": args.duration, "think_s": args.think_s,
                   "neo4j": bool(neo4j_uri), "stream": not args.no_stream, "model_ttft_ms": args.ttft_ms,
                   "model_tokens_per_s": args.tokens_per_s, "cpus": os.cpu_count(),
                   "python": sys.version.split()[0]},
        "largest_passing_sessions": max(passed) if passed else 0,
        "target_sessions": 1000, "steps": results,
    }
    (ARTIFACTS / "capacity.json").write_text(json.dumps(summary_out, indent=1))
    print(f"largest N with first-words overhead p99 <= {OVERHEAD_P99_MS:g} ms and 0 errors: "
          f"{summary_out['largest_passing_sessions']} (target 1000); wrote artifacts/capacity.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
