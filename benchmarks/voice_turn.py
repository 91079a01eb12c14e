"""The spoken turn: how soon after the learner stops speaking does Ramesh's voice start?

Three processes: the fake OpenAI server (`python -m tests.openai_server`, paced like the real
services: transcription 150 ms; chat 400 ms to the first token, then 50 tokens/s; speech 150 ms
to the first byte, then streamed 4x faster than it is spoken), the real Samvad server
(`python -m server.cli serve`, BRAIN=openai, STT=openai, TTS=openai, every call to the fake), and
this load generator. Each turn streams 1 s of microphone audio in 200 ms chunks, in real time,
then `end`; the clock starts at `end` and stops at the first `reply.audio` with sound in it.
Before the measured session, two turns of another session warm the server up (not measured).

It runs twice: by sentence (TTS_BY_SENTENCE=true, the server's design) and whole (false: the
reply is synthesized once it is complete and sent once synthesized, as seed 000 did).

The server's share is the first-audio time less the fakes' own time on that path, read from the
fake's records on the same wall clock: the transcription (received -> answered), the chat
(received -> the speaker's first piece of `reply_text` complete, a clause of four words or a
sentence; whole: the end of the stream) and the speech (received -> first byte). What remains
is the server: decoding, the SDK calls, the actor's turn, the sentence cutting, and the four
hops over loopback.

    python -m benchmarks.voice_turn               # 30 turns per mode
    python -m benchmarks.voice_turn --turns 10
    python -m benchmarks.voice_turn --open-mic    # hands-free: speculation on and off, alternated
    python -m benchmarks.voice_turn --no-visemes  # the client opts out (`?visemes=0`): their cost
    python -m benchmarks.voice_turn --repeated-lines  # the fake's three fixed lines (see below)

Every reply is a line the server has not heard before (the fake's `--new-lines`), as a real
model's are: with the fake's three fixed lines a session's turns all land on the same one, and what
the server keeps per line (espeak-ng's timings for the visemes) makes every turn after the first
cheaper than a real one. `--repeated-lines` measures that case (the figures before 2026-11-27).

`--open-mic` measures the open microphone instead (benchmarks/voice_open_mic.py): from the
learner's last voiced sample, with the server's own end-of-turn wait, SPECULATE=true against
false; written to artifacts/voice_turn_open_mic.json.

Figures are printed and written to artifacts/voice_turn.json (logs: artifacts/voice_turn.*.log),
with the server's CPU time per spoken turn and per spoken sentence (user + system, from /proc),
and the visemes that came with the audio (on by default: the estimate, for this TTS).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import anyio
import httpx
import websockets

from benchmarks.llm_stream import cpu_seconds, start_server, stop, summary
from schemas.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
PACING = {"--stt-ms": "150", "--ttft-ms": "400", "--tokens-per-s": "50", "--tts-ttfb-ms": "150",
          "--tts-realtime": "4"}
CHUNK_S = 0.2


def tone(seconds: float) -> bytes:
    n = int(seconds * 16_000)
    return array("h", (int(6000 * math.sin(2 * math.pi * 300 * i / 16_000)) for i in range(n))).tobytes()


def start_fake(log: Path, *more: str) -> tuple[subprocess.Popen[str], str]:
    args = [a for pair in PACING.items() for a in pair] + list(more)
    proc = subprocess.Popen([sys.executable, "-m", "tests.openai_server", "--port", "0", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"the fake OpenAI server did not start: {line!r} (see {log})")
    return proc, line.removeprefix("listening on ")


def start_samvad(base_url: str, by_sentence: bool, log: Path, **more: str) -> tuple[subprocess.Popen[bytes], str]:
    return start_server({"BRAIN": "openai", "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": base_url,
                         "STT": "openai", "TTS": "openai", "TTS_BY_SENTENCE": "true" if by_sentence else "false",
                         "SAMVAD_SECRET": "benchmark-" + "s" * 40, "LOG_LEVEL": "INFO", "MIRROR": "none",
                         "USE_MOCKS": "false", "SILENCE_TIMEOUT_MS": "0", **more}, log, wait_s=30)


async def one_turn(ws: Any, n: int, speech: bytes) -> dict[str, Any]:
    uid = f"u{n}"
    await ws.send(json.dumps({"type": "audio", "id": uid, "event": "start", "format": "pcm16"}))
    step = int(CHUNK_S * 32_000)
    for i in range(0, len(speech), step):
        await anyio.sleep(CHUNK_S)  # the learner is still speaking
        data = base64.b64encode(speech[i:i + step]).decode()
        await ws.send(json.dumps({"type": "audio", "id": uid, "event": "chunk", "data": data}))
    ended = time.time()
    await ws.send(json.dumps({"type": "audio", "id": uid, "event": "end"}))
    first: float | None = None
    replied = final = False
    sentences = visemes = 0
    while not (replied and final):
        frame = json.loads(await ws.recv())
        if frame["type"] == "reply.audio" and not frame.get("filler"):  # a thinking sound is not the reply
            if first is None and frame["data"]:
                first = time.time()
            final = final or frame["final"]
            sentences += bool(frame["last"] and not frame["degraded"])
            visemes += len(frame.get("visemes", ()))
        elif frame["type"] == "reply" and frame.get("in_reply_to") == uid:
            replied = True
            if frame.get("fallback"):
                raise RuntimeError("the brain fell back; the figures would be meaningless")
    assert first is not None
    return {"ended": ended, "first_audio": first, "first_audio_ms": (first - ended) * 1000,
            "sentences": sentences, "visemes": visemes}


def fake_share(base_url: str, row: dict[str, Any], by_sentence: bool = True) -> float:
    """The fakes' own time on the first-audio path of the last turn, in ms; the server's four
    legs go into `row` (end -> STT request, STT answer -> chat request, first piece -> speech
    request (below zero when it was asked ahead, before it could be cut), first speech byte ->
    the client)."""
    root = base_url.removesuffix("/v1")
    audio = httpx.get(f"{root}/_fake/audio").json()
    chats = [c for c in httpx.get(f"{root}/_fake/requests").json() if c["kind"] == "reply"]
    stt = next(r for r in audio if r["path"] == "transcriptions")
    thinking = {t for sounds in load_scenario("jaipur-bazaar").thinking_sounds.values() for t in sounds}
    tts = next(r for r in audio if r["path"] == "speech" and r["input"] not in thinking)  # the reply's
    chat = chats[0]  # the turn's: a running summary (every 10 turns) starts after it
    # The speaker's first piece (a clause of four words, or a sentence), not the first sentence: it
    # is what the server speaks first, and its audio is asked before it can be cut (the open
    # microphone's floor counts it the same way, benchmarks/voice_open_mic.py).
    piece = chat.get("first_piece_wall") or chat["first_sentence_wall"] if by_sentence else None
    llm_end = piece or chat["finished_wall"]
    httpx.post(f"{root}/_fake/reset")
    row["legs_ms"] = [round((b - a) * 1000, 1) for a, b in (
        (row["ended"], stt["received_at"]), (stt["answered_at"], chat["received_wall"]),
        (llm_end, tts["received_at"]), (tts["first_byte_at"], row["first_audio"]))]
    return ((stt["answered_at"] - stt["received_at"]) + (llm_end - chat["received_wall"])
            + (tts["first_byte_at"] - tts["received_at"])) * 1000


async def voice_session(host: str, visemes: bool = True) -> str:
    async with httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = (await client.post("/api/sessions", json={})).json()
    return (f"ws://{host}/ws/sessions/{created['session_id']}?token={created['player_token']}&voice=1"
            + ("" if visemes else "&visemes=0"))


async def run_mode(base_url: str, host: str, turns: int, pid: int, by_sentence: bool = True,
                   visemes: bool = True) -> dict[str, Any]:
    speech = tone(1.0)
    # Warm up: two turns of another session through every path once (imports, caches, the
    # connections to the fake) before anything is measured; a server is not measured cold.
    async with websockets.connect(await voice_session(host, visemes), max_size=None) as ws:
        json.loads(await ws.recv())  # welcome
        for n in range(2):
            await one_turn(ws, n, speech)
    async with httpx.AsyncClient() as client:  # the fake's records start with the measured turns
        await client.post(base_url.removesuffix("/v1") + "/_fake/reset")
    rows = []
    async with websockets.connect(await voice_session(host, visemes), max_size=None) as ws:
        json.loads(await ws.recv())  # welcome
        cpu_before = cpu_seconds(pid)
        for n in range(turns):
            row = await one_turn(ws, n, speech)
            row["fakes_ms"] = await anyio.to_thread.run_sync(fake_share, base_url, row, by_sentence)
            row["overhead_ms"] = row["first_audio_ms"] - row["fakes_ms"]
            rows.append(row)
        cpu = cpu_seconds(pid) - cpu_before
    return {"first_audio_ms": summary([r["first_audio_ms"] for r in rows]),
            "fakes_ms": summary([r["fakes_ms"] for r in rows]),
            "overhead_ms": summary([r["overhead_ms"] for r in rows]),
            "legs_p50_ms": [summary([r["legs_ms"][i] for r in rows])["p50"] for i in range(4)],
            "server_cpu_ms_per_turn": round(cpu * 1000 / turns, 1),
            "sentences": sum(r["sentences"] for r in rows), "visemes": sum(r["visemes"] for r in rows),
            "server_cpu_ms_per_sentence": round(cpu * 1000 / max(1, sum(r["sentences"] for r in rows)), 1),
            "per_turn": [{k: r[k] for k in ("first_audio_ms", "fakes_ms", "overhead_ms", "legs_ms")} for r in rows]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.voice_turn", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--no-visemes", action="store_true", help="the client opts out of visemes (?visemes=0)")
    parser.add_argument("--mode", choices=("both", "by_sentence", "whole"), default="both",
                        help="which of the two runs (by sentence, the server's design; whole, the seed's)")
    parser.add_argument("--repeated-lines", action="store_true",
                        help="the fake's three fixed lines (a session's turns repeat one), not a new line a turn")
    parser.add_argument("--open-mic", action="store_true", help="hands-free turns, speculation on and off")
    parser.add_argument("--level", default="intermediate", help="--open-mic: the learner's level (its wait)")
    parser.add_argument("--chunk-ms", type=int, default=100, help="--open-mic: the client's chunk")
    parser.add_argument("--line", default=None, help="--open-mic: the learner's line, said and heard (default: "
                        "benchmarks/voice_open_mic.py's LINE; one ending on a filler waits a thinking pause)")
    args = parser.parse_args(argv)
    ARTIFACTS.mkdir(exist_ok=True)
    if args.open_mic:
        return open_mic(args.turns, args.level, args.chunk_ms, args.line)
    results: dict[str, Any] = {"pacing": PACING, "turns": args.turns, "visemes": not args.no_visemes,
                               "lines": "repeated" if args.repeated_lines else "new"}
    fake, base_url = start_fake(ARTIFACTS / "voice_turn.fake.log", *(() if args.repeated_lines else ("--new-lines",)))
    try:
        for mode, by_sentence in (("by_sentence", True), ("whole", False)):
            if args.mode not in ("both", mode):
                continue
            server, host = start_samvad(base_url, by_sentence, ARTIFACTS / f"voice_turn.{mode}.log")
            try:
                results[mode] = anyio.run(run_mode, base_url, host, args.turns, server.pid, by_sentence,
                                          not args.no_visemes)
            finally:
                stop(server)
            print(mode, json.dumps({k: v for k, v in results[mode].items() if k != "per_turn"}), flush=True)
    finally:
        stop(fake)
    if args.mode == "both":
        results["speedup_p50"] = round(results["whole"]["first_audio_ms"]["p50"]
                                       / results["by_sentence"]["first_audio_ms"]["p50"], 2)
        print("first audio, whole / by sentence (p50):", results["speedup_p50"])
    (ARTIFACTS / "voice_turn.json").write_text(json.dumps(results, indent=2))
    return 0


def open_mic(turns: int, level: str, chunk_ms: int, line: str | None = None) -> int:
    from benchmarks import voice_open_mic

    said = line or voice_open_mic.LINE
    results: dict[str, Any] = {"pacing": PACING}
    fake, base_url = start_fake(ARTIFACTS / "voice_turn.fake.log", "--stt-text", said)
    servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        for name, on in (("speculation_on", "true"), ("speculation_off", "false")):
            servers[name] = start_samvad(base_url, True, ARTIFACTS / f"voice_turn.{name}.log", SPECULATE=on)
        results.update(anyio.run(voice_open_mic.run, base_url,
                                 {name: (host, proc.pid) for name, (proc, host) in servers.items()},
                                 turns, level, chunk_ms, said))
    finally:
        for proc, _ in servers.values():
            stop(proc)
        stop(fake)
    for name in servers:
        print(name, json.dumps({k: v for k, v in results[name].items() if k != "per_turn"}), flush=True)
    (ARTIFACTS / "voice_turn_open_mic.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
