"""What the voice tests share: tones, the shipped Unity build's WAV, the speech settings."""

from __future__ import annotations

import base64
import math
import struct
from array import array
from typing import Any

from tests.openai_server import FakeOpenAI
from tests.servers import client


def tone(seconds: float, rate: int = 16_000, freq: float = 440.0) -> bytes:
    n = int(seconds * rate)
    return array("h", (int(8000 * math.sin(2 * math.pi * freq * i / rate)) for i in range(n))).tobytes()


def unity_wav(pcm: bytes, freq: int = 16_000, channels: int = 1) -> bytes:
    """Bytes exactly as the shipped build's `WavUtility.FromAudioClip` writes them: a 44-byte
    header written over a zeroed prefix, with the RIFF size as an 8-byte long (so "WAVE" lands at
    12 and the data size overwrites the first two samples)."""
    buf = bytearray(44) + pcm
    header = (b"RIFF" + struct.pack("<q", len(buf) - 8) + b"WAVE" + b"fmt "
              + struct.pack("<IHHIIHH", 16, 1, channels, freq, freq * channels * 2, channels * 2, 16)
              + b"data" + struct.pack("<i", len(pcm)))
    buf[: len(header)] = header
    return bytes(buf)


def speech_settings(fake: FakeOpenAI, **more: Any) -> dict[str, Any]:
    return {"STT": "openai", "TTS": "openai", "SPEECH_API_KEY": "sk-test", "SPEECH_BASE_URL": fake.base_url,
            "AI_TIMEOUT_MS": 3000, "SILENCE_TIMEOUT_MS": 0, **more}


class RecordingTts:
    """A text-to-speech backend for the speaker's own tests: it keeps what it was asked to say and
    answers each with `samples` samples of quiet hum at 8 kHz."""

    name = "fake"
    sample_rate = 8000

    def __init__(self, samples: int = 10) -> None:
        self.said: list[str] = []
        self.samples = samples

    async def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> Any:
        self.said.append(text)
        yield b"\x01\x00" * self.samples


def voiced(served: Any, created: dict[str, Any], **kw: Any) -> Any:
    """The player's socket, asking for the vendor's voice (`?voice=1`)."""
    return client(served.ws_url(created["session_id"], created["player_token"]) + "&voice=1", **kw)


async def say(c: Any, frame_id: str, pcm: bytes, *, chunk: int = 6400) -> None:
    """A streamed utterance: start, chunks of 0.2 s, end (base64 in JSON, bytes in msgpack)."""
    def data(b: bytes) -> Any:
        return b if c.msgpack else base64.b64encode(b).decode()

    await c.send({"type": "audio", "id": frame_id, "event": "start", "format": "pcm16"})
    for i in range(0, len(pcm), chunk):
        await c.send({"type": "audio", "id": frame_id, "event": "chunk", "data": data(pcm[i:i + chunk])})
    await c.send({"type": "audio", "id": frame_id, "event": "end"})
