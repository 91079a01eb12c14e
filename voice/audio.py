"""Audio in and out: PCM16 mono, WAV headers (the Unity build's quirks included), containers
through PyAV, and the level envelope the spectator view draws.

Everything inside the server is PCM16 little-endian mono at 16 kHz for speech in (`RATE_IN`);
speech out keeps the synthesizer's own rate, said on every `reply.audio` chunk.
"""

from __future__ import annotations

import io
import math
import struct
from array import array

import numpy as np

from voice.errors import AudioRejected

RATE_IN = 16_000  # what STT engines want and what the Unity build records
BYTES_PER_SECOND_IN = RATE_IN * 2
CONTAINERS = ("wav", "ogg", "webm")
LEVEL_STEP_MS = 50  # one level per 50 ms: 20 points a second, enough for a meter or a waveform


def _sniff(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and b"WAVE" in (data[8:12], data[12:16]):
        return "wav"
    if data[:4] == b"OggS":
        return "ogg"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    return None


def parse_wav(data: bytes) -> tuple[bytes, int, int, int]:
    """`(frames, rate, channels, bits)` of a RIFF/WAVE clip, tolerant of wrong sizes.

    Sizes are trusted only when they fit; otherwise the data chunk runs to the end. The shipped
    Unity build (`WavUtility.FromAudioClip`) writes the RIFF size as an 8-byte integer, which
    pushes every later field 4 bytes on ("WAVE" at 12, the data's size over its first 2 samples):
    that layout is read as it is.
    """
    if len(data) < 16 or data[:4] != b"RIFF":
        raise AudioRejected("audio_unsupported", "not a RIFF/WAVE clip")
    if data[8:12] == b"WAVE":
        pos = 12
    elif data[12:16] == b"WAVE":
        pos = 16  # the Unity build's 8-byte RIFF size
    else:
        raise AudioRejected("audio_unsupported", "not a RIFF/WAVE clip")
    fmt = None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = pos + 8
        if cid == b"fmt ":
            if size < 16 or body + 16 > len(data):
                raise AudioRejected("audio_unsupported", "WAV fmt chunk is too short")
            tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if tag not in (1, 0xFFFE) or bits != 16:
                raise AudioRejected("audio_unsupported", f"WAV must be 16-bit PCM (format {tag}, {bits} bits)")
            fmt = (rate, channels, bits)
        elif cid == b"data":
            if fmt is None:
                raise AudioRejected("audio_unsupported", "WAV data before its fmt chunk")
            end = body + size if 0 < size <= len(data) - body else len(data)
            frames = data[body:end]
            return frames[: len(frames) - len(frames) % (2 * fmt[1])], fmt[0], fmt[1], fmt[2]
        pos = body + size + (size & 1)
    raise AudioRejected("audio_unsupported", "WAV has no data chunk")


def to_mono_16k(frames: bytes, rate: int, channels: int) -> bytes:
    """PCM16 of any rate and channel count as mono 16 kHz (channel mean, linear resampling)."""
    samples = array("h", frames)
    if channels > 1:
        samples = array("h", (sum(samples[i:i + channels]) // channels for i in range(0, len(samples), channels)))
    if rate == RATE_IN or not samples:
        return samples.tobytes()
    n = int(len(samples) * RATE_IN / rate)
    ratio = rate / RATE_IN
    out = array("h", bytes(2 * n))
    last = len(samples) - 1
    for i in range(n):
        x = i * ratio
        j = int(x)
        k = min(j + 1, last)
        out[i] = int(samples[j] + (samples[k] - samples[j]) * (x - j))
    return out.tobytes()


def _decode_container(data: bytes) -> bytes:
    """Ogg/Opus, WebM/Opus (as browsers record) or any WAV, through PyAV (FFmpeg's decoders)."""
    import av  # imported here: only clips that are not plain PCM WAV need FFmpeg

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise AudioRejected("audio_unsupported", "the clip has no audio stream")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE_IN)
            out = bytearray()
            for frame in container.decode(audio=0):
                for res in resampler.resample(frame):
                    out += bytes(res.planes[0])[: res.samples * 2]
            for res in resampler.resample(None):
                out += bytes(res.planes[0])[: res.samples * 2]
            return bytes(out)
    except AudioRejected:
        raise
    except (av.FFmpegError, ValueError, EOFError) as exc:
        raise AudioRejected("audio_unsupported", f"cannot decode the clip: {str(exc)[:120]}") from None


def decode_clip(data: bytes, fmt: str | None = None) -> bytes:
    """A whole clip (WAV, Ogg/Opus or WebM) as PCM16 mono 16 kHz."""
    kind = _sniff(data)
    if kind is None:
        raise AudioRejected("audio_unsupported", "the clip is not WAV, Ogg or WebM")
    if fmt not in (None, "auto") and fmt != kind:
        raise AudioRejected("audio_unsupported", f"the clip is {kind}, not {fmt}")
    if kind == "wav":
        frames, rate, channels, _ = parse_wav(data)
        return to_mono_16k(frames, rate, channels)
    return _decode_container(data)


def wav_bytes(pcm: bytes, rate: int) -> bytes:
    """PCM16 mono in a canonical 44-byte WAV header (what the Unity build's loader expects)."""
    return b"".join((
        b"RIFF", struct.pack("<I", 36 + len(pcm)), b"WAVE",
        b"fmt ", struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16),
        b"data", struct.pack("<I", len(pcm)), pcm,
    ))


def duration_ms(pcm: bytes, rate: int = RATE_IN) -> int:
    return len(pcm) * 1000 // (2 * rate)


def levels(pcm: bytes, rate: int = RATE_IN, step_ms: int = LEVEL_STEP_MS, most: int = 600) -> list[float]:
    """RMS level per `step_ms` window, 0-1 on a log scale (-60 dBFS is 0), at most `most` points."""
    samples = np.frombuffer(pcm, dtype="<i2", count=len(pcm) // 2).astype(np.int64)
    step = max(1, rate * step_ms // 1000)
    windows = max(1, math.ceil(len(samples) / step))
    if windows > most:
        step = math.ceil(len(samples) / most)
    # Each window's sum of squares in one vectorised pass, exact in int64 as it was in Python ints.
    squares = np.add.reduceat(samples * samples, range(0, len(samples), step)).tolist() if len(samples) else []
    out = []
    for i, total in zip(range(0, len(samples), step), squares, strict=True):
        rms = math.sqrt(total / min(step, len(samples) - i)) / 32768.0
        db = 20 * math.log10(rms) if rms > 0 else -60.0
        out.append(round(max(0.0, min(1.0, (db + 60) / 60)), 2))
    return out
