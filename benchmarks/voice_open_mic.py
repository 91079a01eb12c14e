"""The open-microphone turn: from the learner's last voiced sample to the vendor's first audio.

`python -m benchmarks.voice_turn --open-mic` (issue #34). The same three kinds of process as the
push-to-talk modes (the fake OpenAI server paced like the real services, the real server with
BRAIN=openai, STT=openai and TTS=openai, this load generator), but two servers at once: one with
SPECULATE=true and one with SPECULATE=false, whose turns alternate, so that both see the same
machine at the same moments.

Each turn streams, on an open microphone and in real time (100 ms chunks, as the Unity client's
OpenMicrophone sends them), an espeak-ng line and then silence, as a hands-free client does. The
server finds the end of the turn itself: the first 96 ms of silence are a glance (voice/turn_end.py,
rule 2) at which the fake transcribes the turn so far and, with speculation, the brain is asked;
the level's end-of-turn wait ends the turn (the fake hears the line with its `?`: a finished
sentence, so the shorter wait of rule 3).
The clock starts at the line's last voiced sample (the generator knows it: the line is trimmed to
its speech) and stops at

- `first_audio_ms`: the first `reply.audio` with sound of the turn's reply;
- `any_audio_ms`: the first `reply.audio` with sound of any kind (a thinking sound, marked
  `filler`, when the reply is late; otherwise the same as the first).

The server's overhead is the first audio less what the path would take with a server that took
no time: the end-of-turn wait the policy chose and the fakes' own times, on the wall clock. Where
the policy decided is found by running the server's own open microphone (voice/open_mic.py, Silero)
over the same stream in this process before the run, chunk for chunk: the pause's decode `U` (its
glance; `utterance_end_ms` in the figures) and
the turn's end `E` are the send times of the chunks that completed them. Then, with the fakes'
transcription (`stt`), chat to the speaker's first piece (`chat`: its first clause of four words,
or its first sentence, as voice/sentences.py cuts `reply_text` while the fake streams it) and
speech to the first byte (`tts`):

- the reply's first piece was voiced ahead (its speech request came before `E`: the speculative
  call's first clause, synthesized while the end-of-turn wait ran):
  floor = max(E, U + stt + chat + tts) (the audio waits for the turn, and for the voice);
- the turn took the speculative call (its chat request came before `E`):
  floor = max(E, U + stt + chat) + tts (the speech waits for the turn, and for the words);
- otherwise: floor = E + chat + tts (+ stt when the turn's own transcription came after `E`).

`overhead_less_last_leg_ms` is the overhead less its last leg (the first byte -> the client),
which was mostly the wait for the reply gate to let the first clause's mark out (session/spoken.py
rule 6) until the model was read eagerly to it (brain/turn.py). `per_turn` in the JSON has each
turn's overhead, legs and fakes' times, and its moments on the wall clock (`walls`: the pause's and
the turn's deciding chunks sent, each request received by the fake and answered, the reply's first
piece and first sentence complete in the fake's stream, the first byte of speech and of the
client's audio), to set beside marks taken inside the server. `--line` changes what the learner
says (and the fake hears): one that ends on a filler waits a thinking pause, long enough for the
first clause to be voiced ahead.

Figures (docs/performance.md, "The open-microphone turn"): 2026-11-27,
`python -m benchmarks.voice_turn --open-mic --turns 20` (and `--line "How much are the tomatoes umm"`).
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import websockets

from benchmarks.llm_stream import cpu_seconds, summary

LINE = "How much are the tomatoes today?"  # one utterance, no pause inside, a finished sentence
VOICE, SPEED = "en-us", 150
ALIGN_MS = 800  # every turn's stream is a whole number of these: chunks (100 ms) and Silero windows (32 ms) align
SILENCE_MS = 4800  # after the line: the turn ends and the reply plays out
TURNS_PER_SESSION = 12  # under MAX_TURNS (30) and the wrap-up (25): every turn is a haggling turn


@dataclass(frozen=True)
class Plan:
    """One turn's stream, and where the server's policy will decide (from the replica)."""

    line: bytes  # the line, then silence to a whole number of ALIGN_MS
    voiced_ms: float  # the line's last voiced sample, from the turn's start
    heard_chunk: int  # the chunk whose arrival completes the pause's glance (its partial decode)
    finished_chunk: int  # and the one that ends the turn
    waited_ms: float  # the wait the policy chose
    chunk_ms: int


def plan(level: str, chunk_ms: int, said: str = LINE) -> Plan:
    """The line `said`, and the server's own open microphone run over it (Silero, the pack's words, the level)."""
    from schemas.enums import Level
    from schemas.scenario import load_scenario
    from tests.turn_set import piece
    from voice.open_mic import BYTES_PER_MS, Finished, Heard, OpenMic
    from voice.turn_end import EndOfTurn
    from voice.turn_words import TurnWords
    from voice.vad import default_detector

    speech = piece(said, VOICE, SPEED)
    total = -(-(len(speech) // BYTES_PER_MS + SILENCE_MS) // ALIGN_MS) * ALIGN_MS
    line = speech + b"\0" * (total * BYTES_PER_MS - len(speech))
    mic = OpenMic("r", default_detector(), EndOfTurn(TurnWords.of(load_scenario("jaipur-bazaar")), Level(level)),
                  max_turn_ms=30_000)
    lead = 2 * ALIGN_MS  # silence before, as the server has heard before every turn
    stream = b"\0" * (lead * BYTES_PER_MS) + line
    step = chunk_ms * BYTES_PER_MS
    heard: list[int] = []
    finished: list[tuple[int, float]] = []
    for k, at in enumerate(range(0, len(stream), step)):
        for event in mic.feed(stream[at:at + step]):
            if isinstance(event, Heard):
                heard.append(k - lead // chunk_ms)
                mic.partial(said)  # what the fake transcribes
            elif isinstance(event, Finished):
                finished.append((k - lead // chunk_ms, event.waited_ms))
    if len(finished) != 1 or not heard:
        raise RuntimeError(f"the replica found {len(heard)} pauses and {len(finished)} turn ends; want one turn")
    return Plan(line, len(speech) / BYTES_PER_MS, heard[-1], finished[0][0], finished[0][1], chunk_ms)


async def session_url(client: httpx.AsyncClient, host: str, level: str) -> str:
    created = (await client.post(f"http://{host}/api/sessions", json={"level": level})).json()
    return f"ws://{host}/ws/sessions/{created['session_id']}?token={created['player_token']}&voice=1"


async def one_turn(ws: Any, p: Plan) -> dict[str, Any]:
    """Stream the turn in real time while the replies are read; the turn's times on the wall clock."""
    step = p.chunk_ms * 32
    sent: list[float] = []
    seen: dict[str, float] = {}
    done = anyio.Event()

    async def send() -> None:
        start = time.time()
        chunks = [p.line[at:at + step] for at in range(0, len(p.line), step)]
        seen["start"] = start
        k = 0
        while k < len(chunks) or (k * p.chunk_ms) % ALIGN_MS or not done.is_set():
            chunk = chunks[k] if k < len(chunks) else b"\0" * step  # more silence, until the reply is done
            await anyio.sleep(max(0.0, start + (k + 1) * p.chunk_ms / 1000 - time.time()))
            await ws.send(json.dumps({"type": "audio", "id": "mic", "event": "chunk",
                                      "data": base64.b64encode(chunk).decode()}))
            sent.append(time.time())
            k += 1

    async def receive() -> None:
        replied = final = False
        while not (replied and final):
            frame = json.loads(await ws.recv())
            kind = frame["type"]
            if kind == "reply.audio" and frame["data"]:
                seen.setdefault("any_audio", time.time())
                if not frame.get("filler"):
                    seen.setdefault("first_audio", time.time())
            if kind == "reply.audio" and not frame.get("filler"):
                final = final or frame["final"]
            elif kind == "speech":
                seen["speech"] = time.time()
            elif kind == "reply":
                replied = True
                if frame.get("fallback") or frame.get("mark"):
                    raise RuntimeError(f"not a brain's turn ({frame.get('mark') or 'fallback'}): figures meaningless")
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        tg.start_soon(receive)
    t_voice = seen["start"] + p.voiced_ms / 1000
    return {"voice": t_voice, "heard": sent[p.heard_chunk], "ended": sent[p.finished_chunk],
            "first_audio": seen["first_audio"], "any_audio": seen["any_audio"], "speech": seen.get("speech")}


def fake_path(base_url: str, row: dict[str, Any]) -> None:
    """The fakes' times on the turn's path (then forget them); the floor and the overhead into `row`."""
    root = base_url.removesuffix("/v1")
    audio = httpx.get(f"{root}/_fake/audio").json()
    chats = [c for c in httpx.get(f"{root}/_fake/requests").json()
             if c["kind"] == "reply" and c["body"].get("stream")]  # turns' calls, not running summaries
    httpx.post(f"{root}/_fake/reset")
    chat = max(chats, key=lambda c: c["received_wall"])  # the call that answered (a cancelled one came first)
    stt = [r for r in audio if r["path"] == "transcriptions" and r["received_at"] <= chat["received_wall"]][-1]
    from schemas.scenario import load_scenario

    thinking = {t for sounds in load_scenario("jaipur-bazaar").thinking_sounds.values() for t in sounds}
    tts = next(r for r in audio if r["path"] == "speech" and r["input"] not in thinking)  # the reply's, not a filler
    stt_ms = stt["answered_at"] - stt["received_at"]
    piece = chat.get("first_piece_wall") or chat["finished_wall"]  # the speaker's first piece, a clause
    chat_ms = piece - chat["received_wall"]
    tts_ms = tts["first_byte_at"] - tts["received_at"]
    speculated = chat["received_wall"] < row["ended"]
    voiced_ahead = tts["received_at"] < row["ended"]  # its first clause synthesized before the turn was taken
    if voiced_ahead:
        floor = max(row["ended"], row["heard"] + stt_ms + chat_ms + tts_ms)
    elif speculated:
        floor = max(row["ended"], row["heard"] + stt_ms + chat_ms) + tts_ms
    else:
        floor = row["ended"] + (stt_ms if stt["received_at"] > row["ended"] else 0.0) + chat_ms + tts_ms
    row["legs_ms"] = [round(ms * 1000, 1) for ms in (  # the server's own steps on the path
        stt["received_at"] - row["heard"],  # the pause's chunk -> the transcription asked
        chat["received_wall"] - (stt["answered_at"] if speculated else row["ended"]),  # -> the brain asked
        # the first piece's words (and the turn taken, unless it was voiced ahead) -> speech asked
        tts["received_at"] - (piece if voiced_ahead else max(row["ended"], piece)),
        row["first_audio"] - max(tts["first_byte_at"], row["ended"]))]  # the first byte (and the turn) -> the client
    row["walls"] = {"heard": row["heard"], "ended": row["ended"], "stt_asked": stt["received_at"],
                    "stt_answered": stt["answered_at"], "chat_asked": chat["received_wall"], "piece": piece,
                    "sentence": chat["first_sentence_wall"],
                    "tts_asked": tts["received_at"], "first_byte": tts["first_byte_at"],
                    "first_audio": row["first_audio"]}  # the wall clock, to set beside a probe in the server
    row.update(speculated=speculated, voiced_ahead=voiced_ahead, chat_calls=len(chats),
               floor_ms=(floor - row["voice"]) * 1000,
               overhead_ms=(row["first_audio"] - floor) * 1000,
               fakes_ms={"stt": round(stt_ms * 1000, 1), "chat": round(chat_ms * 1000, 1),
                         "tts": round(tts_ms * 1000, 1)})


def report(rows: list[dict[str, Any]], cpu_s: float, p: Plan) -> dict[str, Any]:
    return {
        "first_audio_ms": summary([(r["first_audio"] - r["voice"]) * 1000 for r in rows]),
        "any_audio_ms": summary([(r["any_audio"] - r["voice"]) * 1000 for r in rows]),
        "end_of_turn_ms": summary([(r["ended"] - r["voice"]) * 1000 for r in rows]),
        "utterance_end_ms": summary([(r["heard"] - r["voice"]) * 1000 for r in rows]),
        "floor_ms": summary([r["floor_ms"] for r in rows]),
        "overhead_ms": summary([r["overhead_ms"] for r in rows]),
        # The same less the last leg (the first byte -> the client): with the reply's first piece
        # voiced ahead, mostly the wait for the gate to let its clause mark out (session/spoken.py rule 6).
        "overhead_less_last_leg_ms": summary([r["overhead_ms"] - r["legs_ms"][3] for r in rows]),
        "last_leg_ms": summary([r["legs_ms"][3] for r in rows]),
        "legs_p50_ms": [summary([r["legs_ms"][i] for r in rows])["p50"] for i in range(4)],
        "speculated": sum(r["speculated"] for r in rows), "voiced_ahead": sum(r["voiced_ahead"] for r in rows),
        "chat_calls": sum(r["chat_calls"] for r in rows),
        "fakes_p50_ms": {k: summary([r["fakes_ms"][k] for r in rows])["p50"] for k in ("stt", "chat", "tts")},
        "server_cpu_ms_per_turn": round(cpu_s * 1000 / len(rows), 1),
        "policy_wait_ms": p.waited_ms,
        "per_turn": [{"overhead_ms": round(r["overhead_ms"], 1), "legs_ms": r["legs_ms"], "fakes_ms": r["fakes_ms"],
                      "walls": r["walls"]} for r in rows],
    }


async def run(base_url: str, servers: dict[str, tuple[str, int]], turns: int, level: str,
              chunk_ms: int, said: str = LINE) -> dict[str, Any]:
    """`turns` measured turns on each server, alternating, after two warm-up turns each."""
    p = await anyio.to_thread.run_sync(plan, level, chunk_ms, said)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
    cpu = dict.fromkeys(servers, 0.0)
    done = 0
    async with httpx.AsyncClient() as client:
        while done < turns + 2:
            block = min(TURNS_PER_SESSION, turns + 2 - done)
            sockets = {}
            for name, (host, _) in servers.items():
                ws = await websockets.connect(await session_url(client, host, level), max_size=None)
                json.loads(await ws.recv())  # welcome
                await ws.send(json.dumps({"type": "audio", "id": "mic", "event": "open", "format": "pcm16"}))
                await ws.send(json.dumps({"type": "audio", "id": "mic", "event": "chunk",
                                          "data": base64.b64encode(b"\0" * 32 * 2 * ALIGN_MS).decode()}))
                sockets[name] = ws
            await anyio.sleep(0.5)  # the microphones' models have loaded
            try:
                for n in range(block):
                    for name, (_, pid) in servers.items():
                        before = cpu_seconds(pid)
                        row = await one_turn(sockets[name], p)
                        spent = cpu_seconds(pid) - before
                        await anyio.to_thread.run_sync(fake_path, base_url, row)
                        if done + n >= 2:  # the first two are the warm-up
                            rows[name].append(row)
                            cpu[name] += spent
            finally:
                for ws in sockets.values():
                    await ws.close()
            done += block
    return {"line": said, "chunk_ms": chunk_ms, "level": level, "turns": turns,
            **{name: report(rows[name], cpu[name], p) for name in servers}}
