"""The labelled set of the end-of-turn and barge-in work (issue #34): learners who pause to think,
fill the pause, finish, or answer the vendor with a backchannel or a real interruption.

Cases (`Case`, committed in tests/data/turn_set.json; `python -m tests.turn_set` rewrites them and
tests/test_turn_end.py checks the file is what this code makes):
- `turn`: one English or Hinglish line of a pack (`pack_lines`: every pack's coaching lines in
  English, Jaipur's hints and phrases in Hinglish, and offers with a price in each pack), with one
  pause inside or none. `pause` says which:
  `filler` (a filler of the pack's, "umm", "matlab", then silence: "I will give umm ... ninety"),
  `mid` (silence after a word no sentence ends on: "Can you give me a discount on ... this"),
  `bare` (silence at a word boundary with no such cue: the set's hardest, reported apart) or `none`.
  Pauses last 0.8-2.2 s (seed 002's thinking pause is 2 s).
- `backchannel`: while the vendor speaks, a backchannel of the pack's ("haan", "accha ji", "okay").
- `interrupt`: while the vendor speaks, a real interruption ("Wait, that is too much", "Ruko bhaiya").

Audio (`render`): each piece spoken by espeak-ng in the case's voice and speed (110 words a minute
for a slow learner, 140, 175), trimmed of espeak's own leading and trailing silence, laid out with
the case's gaps after `LEAD_MS` of silence and before `TAIL_MS`, then clean or with white noise at
20 or 10 dB SNR (tests/speech_set.py's `add_noise`). Pieces are cached as raw PCM under
var/turn_set/ (not committed). The truth (`Truth`) is measured from the laid-out pieces: where each
piece's speech starts and ends, so where the utterance really ends and where each pause lies.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from schemas.enums import Level
from schemas.scenario import Item, load_scenario
from tests.speech_set import ROOT, add_noise
from voice.barge_in import BargeIn, VerdictKind
from voice.turn_end import EndOfTurn, TurnEnded, UtteranceEnded
from voice.turn_words import CONTINUATIONS, TurnWords, words
from voice.vad import Detector, VadFrame, VadStream

LABELS = ROOT / "tests" / "data" / "turn_set.json"
AUDIO = ROOT / "var" / "turn_set"
SEED = 34
VOICES = ("en-us", "en-us+f3", "en-gb", "en-us+m3")
SPEEDS = (110, 140, 175)
LEAD_MS = 500
TAIL_MS = 3800  # past the longest thinking wait (voice/turn_end.py), so every policy can decide
VENDOR_TAIL_MS = 1200
PAUSES = ("filler", "mid", "bare", "none")
INTERRUPTIONS = ("Wait, that is too much.", "No no, listen to me.", "Ruko bhaiya, itna nahi.",
                 "Nahi nahi, bahut mehenga hai.", "Stop, I want the other one.", "Excuse me, one question.",
                 "Sorry, what did you say?", "Bhaiya, suno.", "Too expensive!", "Ek minute, bhaiya.")
OFFERS = ("I will give you {n} {cur}.", "Can you do {n} {cur}?", "That is too much. My best offer is {n} {cur}.",
          "How about {n} {cur} for the {item}?", "Okay, {n} {cur}, final offer.")
_RATE_MS = 32  # bytes of PCM16 mono 16 kHz per millisecond


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    language: str  # en or hi-EN
    pack: str


def _fill(text: str, rng: random.Random, items: list[Item]) -> str:
    item = rng.choice(items)
    quote = item.opening_quote
    offer = max(1, quote * rng.randrange(50, 90) // 100)
    return (text.replace("{local}", item.local).replace("{items}", item.spoken or item.name.lower())
            .replace("{offer}", str(offer)).replace("{price}", str(quote)))


def pack_lines(rng: random.Random) -> list[Line]:
    """The learner's lines the set is made of, read off the packs (their fields filled in with an
    item in the scene, its opening quote and an offer under it)."""
    out: list[Line] = []
    for pack in ("jaipur-bazaar", "kyoto-antiques", "marrakech-souk"):
        scenario = load_scenario(pack)
        items = [i for i in scenario.items if i.in_scene] or list(scenario.items)

        out.extend(Line(_fill(help_.english, rng, items), "en", pack) for _, help_ in sorted(scenario.coaching.items()))
        if pack == "jaipur-bazaar":
            out.extend(Line(_fill(hint, rng, items), "hi-EN", pack) for _, hint in sorted(scenario.hints.items()))
            out.extend(Line(phrase.text, "hi-EN", pack) for phrase in scenario.phrases)
        for n in range(16):
            item = rng.choice(items)
            offer = max(1, item.opening_quote * rng.randrange(40, 90) // 100)
            out.append(Line(OFFERS[n % len(OFFERS)].format(n=offer, cur=scenario.currency_word,
                                                           item=item.spoken or item.name.lower()), "en", pack))
    return out


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    kind: str  # turn, backchannel, interrupt
    pack: str
    language: str  # en or hi-EN
    voice: str
    speed: int
    pieces: tuple[str, ...]
    gaps_ms: tuple[int, ...]  # silence between consecutive pieces
    pause: str  # a turn's pause (PAUSES); "" for the others


@dataclass(frozen=True, slots=True)
class Truth:
    """Where each piece's speech lies in the rendered clip, in ms from its start."""

    pieces: tuple[tuple[float, float], ...]
    length_ms: float

    @property
    def end_ms(self) -> float:
        """Where the utterance really ends."""
        return self.pieces[-1][1]

    @property
    def pauses(self) -> tuple[tuple[float, float], ...]:
        return tuple((a[1], b[0]) for a, b in zip(self.pieces, self.pieces[1:], strict=False))


def _pack_language(pack: str, language: str) -> str:
    """The pack's language code for a line's language (English is en-IN in Jaipur)."""
    codes = [c.value for c in load_scenario(pack).vendor.languages]
    return language if language in codes else next(c for c in codes if c.startswith("en"))


def _split(text: str, rng: random.Random, mid: bool) -> int | None:
    """A word boundary to pause at (the count of words before it): after a continuation word
    (`mid`) or after a word that is none (the others); None if the line has no such place."""
    said = text.split()
    places = [n for n in range(1, len(said))
              if (words(said[n - 1])[-1:] and words(said[n - 1])[-1] in CONTINUATIONS) == mid
              and not said[n - 1].endswith((".", "?", "!"))]
    return rng.choice(places) if places else None


def cases() -> list[Case]:
    rng = random.Random(SEED)
    lines = pack_lines(rng)
    out: list[Case] = []

    def voice() -> tuple[str, int]:
        return rng.choice(VOICES), rng.choice(SPEEDS)

    for n, line in enumerate(lines):
        pause = PAUSES[n % len(PAUSES)]
        v, s = voice()
        said = line.text.split()
        at = _split(line.text, rng, pause == "mid") if pause != "none" else None
        if pause != "none" and at is None:
            pause, at = "filler", max(1, len(said) // 2)
        pieces: tuple[str, ...] = (line.text,)
        gaps: tuple[int, ...] = ()
        if at is not None:
            head = " ".join(said[:at]).rstrip(",")
            if pause == "filler":
                fillers = load_scenario(line.pack).fillers
                code = _pack_language(line.pack, line.language)
                head += " " + rng.choice([f for f in fillers[next(c for c in fillers if c.value == code)]
                                          if " " not in f])
            pieces = (head, " ".join(said[at:]))
            gaps = (rng.randrange(800, 2201, 10),)
        out.append(Case(f"turn-{n:03d}", "turn", line.pack, line.language, v, s, pieces, gaps, pause))
    packs = sorted({line.pack for line in lines})
    for n in range(60):
        pack = packs[n % len(packs)]
        language = "hi-EN" if pack == "jaipur-bazaar" and n % 2 else "en"
        backchannels = load_scenario(pack).backchannels
        code = _pack_language(pack, language)
        said = rng.choice(backchannels[next(c for c in backchannels if c.value == code)])
        if n % 5 == 0:
            said = f"{said} {said}"
        v, s = voice()
        out.append(Case(f"backchannel-{n:03d}", "backchannel", pack, language, v, s, (said,), (), ""))
    for n in range(40):
        text = INTERRUPTIONS[n % len(INTERRUPTIONS)]
        v, s = voice()
        out.append(Case(f"interrupt-{n:03d}", "interrupt", "jaipur-bazaar", "hi-EN" if n % 10 in (2, 3, 7, 9) else "en",
                        v, s, (text,), (), ""))
    return out


def load_cases() -> list[Case]:
    return [Case(**{**row, "pieces": tuple(row["pieces"]), "gaps_ms": tuple(row["gaps_ms"])})
            for row in json.loads(LABELS.read_text("utf-8"))]


def _espeak(text: str, voice: str, speed: int) -> bytes:
    from voice.audio import decode_clip

    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "--stdout", "--stdin"],
                         input=text.encode("utf-8"), capture_output=True, check=True, timeout=30).stdout
    return decode_clip(wav)


def _trim(pcm: bytes) -> bytes:
    """espeak-ng's silence before and after the speech cut off (10 ms windows under 1 % of full
    scale at either end)."""
    import numpy as np

    samples = np.frombuffer(pcm, dtype="<i2")
    loud = np.flatnonzero(np.abs(samples[: len(samples) // 160 * 160].reshape(-1, 160)).max(axis=1) > 327)
    if not loud.size:
        return b""
    return pcm[int(loud[0]) * 320: (int(loud[-1]) + 1) * 320]


def piece(text: str, voice: str, speed: int, cache: Path | None = AUDIO) -> bytes:
    """One piece spoken and trimmed, PCM16 mono 16 kHz (cached under `cache`)."""
    path = None
    if cache is not None:
        digest = hashlib.sha256(f"{text}|{voice}|{speed}".encode()).hexdigest()[:20]
        path = cache / f"{digest}.pcm"
        if path.exists():
            return path.read_bytes()
    pcm = _trim(_espeak(text, voice, speed))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pcm)
    return pcm


def render(case: Case, noise_db: int | None = None, cache: Path | None = AUDIO) -> tuple[bytes, Truth]:
    """The case's clip and where its speech lies."""
    clip = bytearray(b"\0" * LEAD_MS * _RATE_MS)
    spans: list[tuple[float, float]] = []
    for n, text in enumerate(case.pieces):
        if n:
            clip += b"\0" * case.gaps_ms[n - 1] * _RATE_MS
        start = len(clip) / _RATE_MS
        clip += piece(text, case.voice, case.speed, cache)
        spans.append((start, len(clip) / _RATE_MS))
    clip += b"\0" * (TAIL_MS if case.kind == "turn" else VENDOR_TAIL_MS) * _RATE_MS
    pcm = bytes(clip)
    if noise_db is not None:
        pcm = add_noise(pcm, noise_db, f"{SEED}:{case.id}:{noise_db}")
    return pcm, Truth(tuple(spans), len(pcm) / _RATE_MS)


def partials(case: Case, truth: Truth, latency_ms: float = 150.0) -> list[tuple[float, str]]:
    """What a streaming recogniser would have said and when: each word once its share of its
    piece (by letters) has been spoken, `latency_ms` later (seed 002's STT budget), the text so far."""
    out: list[tuple[float, str]] = []
    said: list[str] = []
    for text, (start, end) in zip(case.pieces, truth.pieces, strict=True):
        found = text.split()
        total = sum(len(w) for w in found) or 1
        done = 0
        for word in found:
            done += len(word)
            said.append(word)
            out.append((start + (end - start) * done / total + latency_ms, " ".join(said)))
    return out


# ---------------------------------------------------------------------------- replaying the policies


def vad_frames(pcm: bytes, detector: Detector) -> list[VadFrame]:
    """The clip through a fresh stream of `detector`, in 20 ms chunks as a browser sends them."""
    detector.reset()
    stream = VadStream(detector)
    return [frame for at in range(0, len(pcm), 640) for frame in stream.feed(pcm[at:at + 640])]


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    ended_ms: float | None  # when the policy ended the turn (None: never)
    truth_ms: float  # where the utterance really ends
    thinking: bool  # the wait that ended it was a thinking wait
    waited_ms: float | None = None  # the wait that ended it
    heard: str = ""  # the last text the policy was given before it ended

    @property
    def premature(self) -> bool:
        """Ended before the learner had finished: inside a pause, or a comma's silence."""
        return self.ended_ms is not None and self.ended_ms < self.truth_ms

    @property
    def delay_ms(self) -> float | None:
        return None if self.ended_ms is None or self.premature else self.ended_ms - self.truth_ms


def replay_turn(case: Case, truth: Truth, frames: list[VadFrame], turn_words: TurnWords, level: Level,
                with_text: bool = True, heard: Callable[[float], str] | None = None) -> TurnOutcome:
    """The end-of-turn policy over the clip's decisions, with the partial text as it would come:
    the set's timed text, or with `heard` what a recogniser made of the audio up to each utterance's
    end (`heard(at_ms)`), as a server without streaming partials feeds the policy."""
    policy = EndOfTurn(turn_words, level)
    texts = partials(case, truth) if with_text and heard is None else []
    given = 0
    last = ""
    for frame in frames:
        while given < len(texts) and texts[given][0] <= frame.end_ms:
            policy.partial(last := texts[given][1])
            given += 1
        for event in policy.frame(frame):
            if isinstance(event, UtteranceEnded) and heard is not None:
                policy.partial(last := heard(event.at_ms))
            elif isinstance(event, TurnEnded):
                return TurnOutcome(event.at_ms, truth.end_ms, event.thinking, event.waited_ms, last)
    return TurnOutcome(None, truth.end_ms, False, None, last)


@dataclass(frozen=True, slots=True)
class BargeOutcome:
    interrupted_ms: float | None  # when the vendor was stopped, from the learner's first speech

    @property
    def interrupted(self) -> bool:
        return self.interrupted_ms is not None


def replay_barge(case: Case, truth: Truth, frames: list[VadFrame], turn_words: TurnWords,
                 with_text: bool = True) -> BargeOutcome:
    """The barge-in decision over the clip while the vendor speaks all along."""
    decide = BargeIn(turn_words, streaming=with_text)
    texts = partials(case, truth) if with_text else []
    given = 0
    for frame in frames:
        verdicts = []
        while given < len(texts) and texts[given][0] <= frame.end_ms:
            verdicts.append(decide.partial(texts[given][1], texts[given][0]))
            given += 1
        verdicts.append(decide.frame(frame))
        for verdict in verdicts:
            if verdict is not None and verdict.kind is VerdictKind.INTERRUPT:
                return BargeOutcome(verdict.at_ms - truth.pieces[0][0])
    return BargeOutcome(None)


if __name__ == "__main__":
    rows = [asdict(case) for case in cases()]
    LABELS.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"{len(rows)} cases -> {LABELS.relative_to(ROOT)}")
