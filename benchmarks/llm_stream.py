"""How much sooner does the learner hear Ramesh when the LLM brain streams?

Starts two processes -- the fake OpenAI server (`python -m tests.openai_server`, paced like a
real model: 400 ms to the first token, then 50 tokens/s) and the real Samvad server
(`python -m server.cli serve` with BRAIN=openai) -- and plays the same turns over WebSockets twice:
with AI_STREAM=true, and with AI_STREAM=false (the original design, where the first words the
learner gets are the whole final reply). For every turn it records, on the client:

* first words: from sending the transcript to the first `reply.delta` (streaming) or to the
  `reply` (not streaming);
* reply: from sending the transcript to the final `reply`.

The server's own share of the first-words path is measured against the fake model's clock
(both processes share the machine's wall clock): `inbound` is transcript sent -> request received
by the model, `outbound` is the model sending the chunk that completes the first clause of
`reply_text` (the session lets the vendor's words out a whole clause at a time, session/spoken.py)
-> that clause arriving at the client as a `reply.delta`; their sum is the server overhead.
`--numbers-first` has the fake write the decision's numbers before `reply_text`, the alternative
design docs/llm.md weighs. The simpler figure "p99 first delta - 400 ms" is reported too; it also contains the
~60 ms the fake model spends writing `{"reply_text": "` before the first word.

    python -m benchmarks.llm_stream                     # 200 turns per mode
    python -m benchmarks.llm_stream --turns 40 --concurrency 4 --think-ms 0

Sessions are played `--concurrency` at a time, each learner pausing a random 0.3-1.5 s before
speaking, so that turns arrive at random moments as they would from real learners (with no pause
the sessions march in lockstep and every turn lands in the same millisecond).

Figures are printed and written to artifacts/llm_stream.json. Server logs (JSON lines on stderr)
go to artifacts/llm_stream.*.log.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import websockets

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
MARK_LETTERS = "qxjv"  # no item name (English or Hindi) can be spelled from these
LINES = (
    "Namaste bhaiya, how are you today?",
    "Your tomatoes look very fresh, where do they come from?",
    "Tell me, are the apples from Kashmir or from Himachal?",
    "Do you have any watermelon that is sweet today?",
    "My friend bought pumpkin here last week, she liked it.",
)


@dataclass
class Turn:
    mode: str
    marker: str
    sent_wall: float
    first_words_ms: float
    reply_ms: float
    first_delta_wall: float | None
    deltas: int
    fallback: bool
    inbound_ms: float | None = None
    outbound_ms: float | None = None


CPU_MS_PER_TURN: dict[str, float] = {}


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"n": len(values), "p50": round(percentile(values, 50), 2),
            "p95": round(percentile(values, 95), 2), "p99": round(percentile(values, 99), 2),
            "max": round(max(values), 2)}


# --------------------------------------------------------------------------- processes


def start_fake(ttft_ms: float, tokens_per_s: float, log: Path,
               numbers_first: bool = False) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.openai_server", "--port", "0", "--ttft-ms", str(ttft_ms),
         "--tokens-per-s", str(tokens_per_s), *(["--numbers-first"] if numbers_first else [])],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"the fake OpenAI server did not start: {line!r} (see {log})")
    return proc, line.removeprefix("listening on ")


def start_server(env: dict[str, str], log: Path, wait_s: float = 20.0) -> tuple[subprocess.Popen[bytes], str]:
    """`samvad serve` on a free port with these settings over the environment's; returns the
    process and its host:port once /health answers. The benchmarks all start the server this way."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--port", str(port)],
                            cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=log.open("w"))
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"samvad exited with {proc.returncode} (see {log})")
        try:
            if httpx.get(f"http://{host}/health", timeout=1).status_code == 200:
                return proc, host
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"samvad did not become healthy (see {log})")


def start_samvad(base_url: str, stream: bool, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    return start_server({"BRAIN": "openai", "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": base_url,
                         "AI_STREAM": "true" if stream else "false", "SAMVAD_SECRET": "benchmark-" + "s" * 40,
                         "LOG_LEVEL": "INFO", "MIRROR": "none", "USE_MOCKS": "false"}, log)


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- the client


def marker(rng: random.Random) -> str:
    return "".join(rng.choice(MARK_LETTERS) for _ in range(14))


async def play_session(host: str, mode: str, turns: int, rng: random.Random,
                       think: tuple[float, float], out: list[Turn]) -> None:
    async with httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = (await client.post("/api/sessions", json={})).json()
    url = f"ws://{host}/ws/sessions/{created['session_id']}?token={created['player_token']}"
    async with websockets.connect(url, max_size=None) as ws:
        json.loads(await ws.recv())  # welcome
        for n in range(turns):
            await anyio.sleep(rng.uniform(*think))  # the learner thinks and speaks
            mark = marker(rng)
            text = f"{LINES[n % len(LINES)]} (ref {mark})"
            sent_wall, sent = time.time(), time.perf_counter()
            await ws.send(json.dumps({"type": "transcript", "id": f"{mark}-{n}", "text": text}))
            first: float | None = None
            first_wall: float | None = None
            deltas = 0
            while True:
                frame = json.loads(await ws.recv())
                kind = frame["type"]
                if kind == "reply.delta":
                    deltas += 1
                    if first is None:
                        first, first_wall = time.perf_counter(), time.time()
                elif kind == "reply":
                    done = time.perf_counter()
                    break
            words = first if first is not None else done
            out.append(Turn(mode=mode, marker=mark, sent_wall=sent_wall,
                            first_words_ms=(words - sent) * 1000, reply_ms=(done - sent) * 1000,
                            first_delta_wall=first_wall, deltas=deltas,
                            fallback=bool(frame.get("fallback"))))


async def play(host: str, mode: str, total: int, per_session: int, concurrency: int,
               seed: int, think: tuple[float, float] = (0.0, 0.0)) -> list[Turn]:
    out: list[Turn] = []
    sessions = [per_session] * (total // per_session)
    if total % per_session:
        sessions.append(total % per_session)
    limiter = anyio.Semaphore(concurrency)

    async def one(index: int, turns: int) -> None:
        async with limiter:
            rng = random.Random(seed * 1000 + index)
            await play_session(host, mode, turns, rng, think, out)

    async with anyio.create_task_group() as tg:
        for index, turns in enumerate(sessions):
            tg.start_soon(one, index, turns)
    return out


def attach_model_times(turns: list[Turn], fake_url: str) -> None:
    records = httpx.get(fake_url.removesuffix("/v1") + "/_fake/requests", timeout=30).json()
    by_marker: dict[str, dict[str, Any]] = {}
    for record in records:
        text = record.get("last_user", "")
        at = text.rfind("(ref ")
        if at >= 0:  # the turn's own request: a running summary that comes later quotes it too
            by_marker.setdefault(text[at + 5: at + 19], record)
    for turn in turns:
        record = by_marker.get(turn.marker)
        if record is None:
            continue
        turn.inbound_ms = (record["received_wall"] - turn.sent_wall) * 1000
        clause = record.get("first_clause_wall") or record.get("first_reply_char_wall")
        if turn.first_delta_wall is not None and clause:
            turn.outbound_ms = (turn.first_delta_wall - clause) * 1000


# --------------------------------------------------------------------------- main


def run_mode(stream: bool, fake_url: str, args: argparse.Namespace) -> list[Turn]:
    mode = "streaming" if stream else "non_streaming"
    httpx.post(fake_url.removesuffix("/v1") + "/_fake/reset", timeout=10)
    proc, host = start_samvad(fake_url, stream, ARTIFACTS / f"llm_stream.samvad.{mode}.log")
    low, _, high = args.think_ms.partition(":")
    think = (float(low) / 1000, float(high or low) / 1000)
    try:
        cpu_before = cpu_seconds(proc.pid)
        turns = anyio.run(play, host, mode, args.turns, args.per_session, args.concurrency,
                          args.seed, think)
        cpu = cpu_seconds(proc.pid) - cpu_before
    finally:
        stop(proc)
    attach_model_times(turns, fake_url)
    CPU_MS_PER_TURN[mode] = round(cpu * 1000 / max(1, len(turns)), 2)
    return turns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llm_stream", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200, help="turns per mode")
    parser.add_argument("--per-session", type=int, default=20, help="turns per session")
    parser.add_argument("--concurrency", type=int, default=8, help="sessions played at once")
    parser.add_argument("--think-ms", default="300:1500",
                        help="pause before each transcript, uniform in LOW:HIGH ms (0 for none)")
    parser.add_argument("--ttft-ms", type=float, default=400.0)
    parser.add_argument("--tokens-per-s", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--numbers-first", action="store_true",
                        help="the fake model writes the decision's numbers and stage before reply_text")
    parser.add_argument("--out", default="llm_stream.json", help="file name under artifacts/")
    args = parser.parse_args(argv)
    ARTIFACTS.mkdir(exist_ok=True)
    fake, fake_url = start_fake(args.ttft_ms, args.tokens_per_s, ARTIFACTS / "llm_stream.fake.log",
                                args.numbers_first)
    try:
        streaming = run_mode(True, fake_url, args)
        plain = run_mode(False, fake_url, args)
    finally:
        stop(fake)

    s_first = [t.first_words_ms for t in streaming]
    n_first = [t.first_words_ms for t in plain]
    inbound = [t.inbound_ms for t in streaming if t.inbound_ms is not None]
    outbound = [t.outbound_ms for t in streaming if t.outbound_ms is not None]
    overhead = [t.inbound_ms + t.outbound_ms for t in streaming
                if t.inbound_ms is not None and t.outbound_ms is not None]
    result: dict[str, Any] = {
        "config": {"turns_per_mode": args.turns, "turns_per_session": args.per_session,
                   "concurrency": args.concurrency, "think_ms": args.think_ms,
                   "cpus": os.cpu_count(), "model_ttft_ms": args.ttft_ms,
                   "model_tokens_per_s": args.tokens_per_s, "python": sys.version.split()[0],
                   "numbers_first": args.numbers_first},
        "streaming": {"first_words_ms": summary(s_first),
                      "reply_ms": summary([t.reply_ms for t in streaming]),
                      "deltas_per_turn": summary([float(t.deltas) for t in streaming]),
                      "fallbacks": sum(t.fallback for t in streaming)},
        "non_streaming": {"first_words_ms": summary(n_first),
                          "reply_ms": summary([t.reply_ms for t in plain]),
                          "fallbacks": sum(t.fallback for t in plain)},
        "first_words_speedup": {p: round(percentile(n_first, q) / percentile(s_first, q), 2)
                                for p, q in (("p50", 50), ("p95", 95), ("p99", 99))},
        "server_overhead_ms": {
            "inbound": summary(inbound), "outbound": summary(outbound), "total": summary(overhead),
            "p99_first_delta_minus_ttft": round(percentile(s_first, 99) - args.ttft_ms, 2),
        },
        "server_cpu_ms_per_turn": CPU_MS_PER_TURN,
        "targets": {"speedup_at_least": 4.0, "overhead_p99_below_ms": 10.0},
    }
    result["targets"]["speedup_met"] = result["first_words_speedup"]["p50"] >= 4.0
    result["targets"]["overhead_met"] = bool(overhead) and percentile(overhead, 99) < 10.0
    (ARTIFACTS / args.out).write_text(json.dumps(
        {**result, "turns": [asdict(t) for t in streaming + plain]}, indent=1))

    def row(name: str, stats: dict[str, float]) -> str:
        return (f"  {name:<34} p50 {stats['p50']:8.1f}  p95 {stats['p95']:8.1f}  "
                f"p99 {stats['p99']:8.1f}  (n={stats['n']})")

    print(f"model: {args.ttft_ms:g} ms to first token, {args.tokens_per_s:g} tokens/s; "
          f"{args.turns} turns per mode, {args.concurrency} sessions at once, "
          f"{args.think_ms} ms think time, {os.cpu_count()} CPUs")
    print("milliseconds from sending the transcript:")
    print(row("streaming: first reply.delta", result["streaming"]["first_words_ms"]))
    print(row("streaming: final reply", result["streaming"]["reply_ms"]))
    print(row("non-streaming: reply (= first words)", result["non_streaming"]["first_words_ms"]))
    speed = result["first_words_speedup"]
    print(f"first words sooner by: p50 {speed['p50']}x, p95 {speed['p95']}x, p99 {speed['p99']}x")
    print("server overhead on the first-words path (ms):")
    print(row("inbound (transcript -> model)", result["server_overhead_ms"]["inbound"]))
    print(row("outbound (model clause -> client)", result["server_overhead_ms"]["outbound"]))
    print(row("total", result["server_overhead_ms"]["total"]))
    print(f"  p99 first delta - {args.ttft_ms:g} ms: "
          f"{result['server_overhead_ms']['p99_first_delta_minus_ttft']} ms")
    print(f"server CPU per turn (ms): {CPU_MS_PER_TURN}")
    print(f"fallbacks: streaming {result['streaming']['fallbacks']}, "
          f"non-streaming {result['non_streaming']['fallbacks']}")
    print(f"wrote {ARTIFACTS / args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
