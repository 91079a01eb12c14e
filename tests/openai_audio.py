"""The fake OpenAI server's speech routes (docs/voice.md): `POST /v1/audio/transcriptions` and
`POST /v1/audio/speech`, in the real wire format, scripted through `FakeOpenAI.stt_queue` and
`tts_queue` like chat. Times recorded are `time.time()`, comparable across processes.
Transcriptions answer `verbose_json` with one segment whose `avg_logprob`
carries the scripted confidence; speech streams 24 kHz PCM16 (a tone as long as a voice would take),
after `tts_ttfb_ms`, at `tts_realtime` times real time.

`fake` is the `FakeOpenAI` and `behaviour` its `Behaviour` (typed loosely: that module imports this one).
"""

from __future__ import annotations

import math
import time
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse


async def hang_up(request: Request, seconds: float) -> None:
    """Hold the request open until the client gives up (or `seconds` pass)."""
    with anyio.move_on_after(seconds):
        while not await request.is_disconnected():  # noqa: ASYNC110 (starlette offers no event)
            await anyio.sleep(0.05)


SPEECH_RATE = 24_000  # `response_format="pcm"`: 24 kHz 16-bit mono, as OpenAI sends
SPEECH_CHARS_PER_S = 15.0  # how fast the fake "speaks": about a real voice's pace


def speech_pcm(text: str) -> bytes:
    """A quiet tone as long as a voice would take to say `text`: stands in for speech."""
    from array import array

    samples = max(1, int(len(text) / SPEECH_CHARS_PER_S * SPEECH_RATE))
    tone = array("h", (int(2000 * math.sin(i * 2 * math.pi * 220 / SPEECH_RATE)) for i in range(samples)))
    return tone.tobytes()


def _audio_error(behaviour: Any) -> JSONResponse:
    error = {"message": behaviour.message, "type": "fake_error", "param": None, "code": str(behaviour.status)}
    return JSONResponse({"error": error}, status_code=behaviour.status, headers=behaviour.headers)


async def fake_transcriptions(fake: Any, request: Request, behaviour: Any) -> Any:
    arrived = time.time()
    async with request.form() as form:
        upload = form.get("file")
        audio = await upload.read() if upload is not None and not isinstance(upload, str) else b""
        fields = {k: form.get(k) for k in ("model", "language", "response_format")}
        granularities = form.getlist("timestamp_granularities[]")
    record = {"path": "transcriptions", **fields, "timestamp_granularities": granularities, "bytes": len(audio),
              "received_at": arrived}
    fake.audio_requests.append(record)
    if behaviour.kind == "status":
        return _audio_error(behaviour)
    if behaviour.kind == "hang":
        await hang_up(request, behaviour.hang_s)
        return Response(status_code=504)
    await anyio.sleep((behaviour.ttft_ms if behaviour.ttft_ms is not None else fake.stt_ms) / 1000)
    text = behaviour.content if isinstance(behaviour.content, str) else fake.stt_text
    answer: dict[str, Any] = {"text": text, "task": "transcribe", "language": fields["language"] or "en",
                              "duration": len(audio) / 32000}
    if behaviour.confidence is not None and fields["response_format"] == "verbose_json":
        logprob = math.log(max(behaviour.confidence, 1e-6))
        answer["segments"] = [{"id": 0, "seek": 0, "start": 0.0, "end": answer["duration"], "text": text,
                               "tokens": [1], "temperature": 0.0, "avg_logprob": logprob,
                               "compression_ratio": 1.0, "no_speech_prob": 0.0}]
    if "word" in granularities and fields["response_format"] == "verbose_json":
        answer["words"] = spread_words(text, answer["duration"])
    record["answered_at"] = time.time()
    return JSONResponse(answer)


def spread_words(text: str, duration_s: float) -> list[dict[str, Any]]:
    """Word timings as Whisper gives them, for a fake that does not listen: the words share the
    audio evenly, each taking four fifths of its share (the rest a gap)."""
    said = text.split()
    share = duration_s / len(said) if said else 0.0
    return [{"word": w, "start": round(i * share, 3), "end": round(i * share + 0.8 * share, 3)}
            for i, w in enumerate(said)]


async def fake_speech(fake: Any, request: Request, behaviour: Any) -> Any:
    arrived = time.time()
    body = await request.json()
    record = {"path": "speech", "model": body.get("model"), "voice": body.get("voice"),
              "input": body.get("input"), "response_format": body.get("response_format"), "received_at": arrived}
    fake.audio_requests.append(record)
    if behaviour.kind == "status":
        return _audio_error(behaviour)
    if behaviour.kind == "hang":
        await hang_up(request, behaviour.hang_s)
        return Response(status_code=504)
    pcm = speech_pcm(str(body.get("input", "")))
    ttfb = (behaviour.ttft_ms if behaviour.ttft_ms is not None else fake.tts_ttfb_ms) / 1000
    realtime = fake.tts_realtime

    async def stream() -> Any:
        await anyio.sleep(ttfb)
        record["first_byte_at"] = time.time()
        step = 4800  # 0.1 s of audio per piece
        for i in range(0, len(pcm), step):
            if realtime and i:
                await anyio.sleep(0.1 / realtime)
            yield pcm[i:i + step]

    return StreamingResponse(stream(), media_type="audio/pcm")
