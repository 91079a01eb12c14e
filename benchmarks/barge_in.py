"""Barge-in decided on the server, over a live socket (issue #34; docs/voice.md, Barge-in on the
server): every backchannel and interruption of the labelled turn set (tests/turn_set.py) said into
an open microphone while the vendor speaks.

A real server (uvicorn, the real app) with the fake OpenAI speech server (tests/openai_server.py)
as its voice (its recogniser answers each piece's own words: a recogniser that hears right, as the
set's offline figures assume) and a scripted brain that answers every turn with the same three-sentence line. For
each piece: a typed turn, its reply's first audio, then the piece's clip (the set's 500 ms of lead,
the speech, 1.2 s of silence) streamed in 200 ms chunks at real time. It reports:
- backchannels that stopped the vendor (a `heard` came; target at most 5 %), and any that became
  a turn without stopping him (must be none);
- interruptions that stopped him, and the median time from the clip's first speech (the set's
  truth) to the `heard` event, as the client sees it;
- the median characters heard by then.

    python -m benchmarks.barge_in            # the whole set: 60 backchannels, 40 interruptions (about 5 min)
    python -m benchmarks.barge_in --every 4  # every 4th piece

Writes artifacts/barge_in.json and prints the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import Any

from tests.fakes import ScriptedBrain, decision
from tests.openai_server import FakeOpenAI
from tests.servers import client, create, running_server
from tests.turn_set import load_cases, render
from tests.voice_support import speech_settings

LINE = ("Arre bhaiya, these are the best tomatoes in Jaipur. Fresh from the farm this morning! "
        "For you, sixty rupees a kilo.")
STEP = 6400  # 200 ms of PCM16 at 16 kHz
PER_SESSION = 5  # pieces per session: each is a turn, an interruption two, within the pack's turn limit


async def _piece(c: Any, n: int, pcm: bytes, speech_at_ms: float) -> dict[str, Any]:
    reply = (await c.turn(f"t{n}", "Namaste bhaiya"))[0]
    if not any(f["type"] == "reply.audio" and f["turn"] == reply["turn"] for f in c.seen):
        await c.until("reply.audio", turn=reply["turn"], wait=10)
    mark = len(c.seen)
    started = time.monotonic()
    until = started + len(pcm) / 32_000 + 0.6

    async def speak() -> None:
        for at in range(0, len(pcm), STEP):
            await c.send({"type": "audio", "id": "mic", "event": "chunk",
                          "data": base64.b64encode(pcm[at:at + STEP]).decode()})
            await asyncio.sleep(max(0.0, started + (at + STEP) / 32_000 - time.monotonic()))

    async def listen() -> None:  # read as frames arrive, so each is timed when it came
        with contextlib.suppress(TimeoutError):
            while (left := until - time.monotonic()) > 0:
                await c.recv(left)

    await asyncio.gather(speak(), listen())
    after = c.seen[mark:]
    heard = next((f for f in after if f["type"] == "heard" and f["turn"] == reply["turn"]), None)
    row: dict[str, Any] = {"stopped": heard is not None,
                           "turn": any(f["type"] == "speech" for f in after)}
    if heard is not None:
        row["heard_chars"] = heard["heard_chars"]
        row["stop_ms"] = (c.arrived[id(heard)] - started) * 1000 - speech_at_ms
        while not any(f["type"] == "reply" and str(f.get("in_reply_to", "")).startswith("mic.")
                      for f in c.seen[mark:]):
            await c.recv(10)  # the interruption is a turn: let it be answered before the next piece
    return row


def _timed(c: Any) -> Any:
    """The test client, noting each frame's arrival time in `c.arrived` (by the frame's id())."""
    receive = c.recv
    c.arrived = {}

    async def recv(wait: float = 5.0) -> dict[str, Any]:
        frame: dict[str, Any] = await receive(wait)
        c.arrived[id(frame)] = time.monotonic()
        return frame

    c.recv = recv
    return c


async def run(every: int) -> dict[str, Any]:
    cases = load_cases()
    pieces = [c for c in cases if c.kind in ("backchannel", "interrupt")][::every]
    fake = FakeOpenAI().start()
    rows: dict[str, list[dict[str, Any]]] = {"backchannel": [], "interrupt": []}
    try:
        brain = ScriptedBrain(lambda r: decision(LINE, 50, r.stage))
        async with running_server(brain=brain, **speech_settings(fake, THINKING_SOUND_AFTER_MS=0)) as served:
            for first in range(0, len(pieces), PER_SESSION):
                created = await create(served)
                url = served.ws_url(created["session_id"], created["player_token"]) + "&voice=1"
                async with client(url) as raw:
                    c = _timed(raw)
                    await c.until("welcome")
                    await c.send({"type": "audio", "id": "mic", "event": "open", "format": "pcm16"})
                    for n, case in enumerate(pieces[first:first + PER_SESSION]):
                        pcm, truth = render(case)
                        fake.stt_text = " ".join(case.pieces)  # the recogniser hears what was said
                        rows[case.kind].append({"id": case.id, **await _piece(c, n, pcm, truth.pieces[0][0])})
    finally:
        fake.stop()
    back, inter = rows["backchannel"], rows["interrupt"]
    stops = [r["stop_ms"] for r in inter if r["stopped"]]
    return {
        "backchannels": len(back),
        "backchannels_stopped": sum(r["stopped"] for r in back),
        "backchannels_stopped_pct": round(100 * sum(r["stopped"] for r in back) / max(1, len(back)), 1),
        "backchannels_turned_without_stop": sum(r["turn"] and not r["stopped"] for r in back),
        "interruptions": len(inter),
        "interruptions_stopped": len(stops),
        "stop_ms_p50": round(statistics.median(stops)) if stops else None,
        "heard_chars_p50": statistics.median(r["heard_chars"] for r in inter if r["stopped"]) if stops else None,
        "stopped_backchannels": [r["id"] for r in back if r["stopped"]],
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=int, default=1, help="take every n-th piece of the set")
    args = parser.parse_args()
    results = asyncio.run(run(args.every))
    out = Path("artifacts/barge_in.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", "utf-8")
    print(json.dumps({k: v for k, v in results.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
