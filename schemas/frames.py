"""Wire frames: what clients send and what the server sends back.

Client frames are validated once, at the edge, into these frozen models. Server events are built
by the session and encoded by `schemas.codec`. docs/protocol.md is the prose form of this module.
"""

from __future__ import annotations

import base64
from enum import Enum
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetPydanticSchema,
    Strict,
    StringConstraints,
    field_serializer,
)
from pydantic_core import core_schema

from schemas.brain import Ledger, Policy
from schemas.enums import LanguageCode, Mood, OfferAssessment, Outcome, Role, Stage
from schemas.errors import ErrorCode
from schemas.fluency import Fluency
from schemas.knowledge import TipCard
from schemas.report import SessionReport
from schemas.state import SessionState, Summary

FrameId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[\x21-\x7e]+$")]
ItemName = Annotated[str, StringConstraints(max_length=64)]


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- client frames


def _from_its_string(source: type[Enum], handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
    return core_schema.chain_schema([core_schema.str_schema(strict=True), handler(source)])


# An enum member named by its string value, and nothing else. Strict mode takes only members from
# Python objects (so no msgpack string would do), lax mode takes bytes too: hence a strict string
# first, then the (lax) lookup by value. All in pydantic-core, no Python call per field.
WireLanguage = Annotated[LanguageCode, Strict(False), GetPydanticSchema(_from_its_string)]
WireStage = Annotated[Stage, Strict(False), GetPydanticSchema(_from_its_string)]


class _ClientFrame(_Frame):
    """A frame a client sends, validated in strict mode: a value of the wrong JSON or msgpack type
    is refused, never coerced (`"final": "no"` is not false, `"confidence": "0.5"` is not a
    number, msgpack bin is not a string). The one leniency pydantic's strict mode keeps is
    deliberate and documented in docs/protocol.md §3: an integer where a float is expected."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class TranscriptFrame(_ClientFrame):
    type: Literal["transcript"]
    id: FrameId
    text: str
    final: bool = True
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    language: WireLanguage | None = None


class SceneFrame(_ClientFrame):
    type: Literal["scene"]
    id: FrameId
    object_grabbed: ItemName | None = None
    object_in_view: ItemName | None = None
    input_language: WireLanguage | None = None
    target_language: WireLanguage | None = None
    # Older Unity builds echo these back; the server is authoritative and ignores them.
    happiness_score: int | None = Field(default=None, ge=0, le=100)
    negotiation_state: WireStage | None = None


class ResumeFrame(_ClientFrame):
    type: Literal["resume"]
    id: FrameId | None = None
    last_seq: int = Field(ge=0)


class CommandFrame(_ClientFrame):
    """A learner's command (docs/coaching.md): `hint`, `repeat`, `undo` or `stop`."""

    type: Literal["command"]
    id: FrameId
    name: Annotated[str, StringConstraints(min_length=1, max_length=32)]


class PlaybackFrame(_ClientFrame):
    """How much of the vendor's reply to `turn` the learner heard before cutting in (barge-in), or,
    with `interrupted` false, that it was heard to the end (docs/protocol.md, barge-in)."""

    type: Literal["playback"]
    id: FrameId
    turn: int = Field(ge=0)
    heard_chars: int = Field(ge=0)
    interrupted: bool


class SilenceFrame(_ClientFrame):
    """The client's own voice detection decided that the learner gave up: handled as a timeout."""

    type: Literal["silence"]
    id: FrameId


AudioEvent = Literal["start", "chunk", "end", "clip", "open", "close"]
AudioFormat = Literal["pcm16", "wav", "ogg", "webm", "auto"]


class AudioFrame(_ClientFrame):
    """The learner's speech (docs/voice.md). A streamed utterance is `start` (with `format`
    `pcm16`: mono 16 kHz little-endian), `chunk`s of `data` and `end`, all with the utterance's
    `id`; a whole recorded clip is one `clip` (WAV, Ogg/Opus or WebM). The `id` becomes the
    transcript's: acknowledged, and idempotent, as one. An open microphone is `open`, `chunk`s and
    `close` with the stream's `id`: the server finds each turn, `id.1`, `id.2`... `data` is bytes in
    msgpack and base64 in JSON."""

    type: Literal["audio"]
    id: FrameId
    event: AudioEvent
    data: bytes | str | None = None
    format: AudioFormat | None = None
    language: WireLanguage | None = None


class PingFrame(_ClientFrame):
    type: Literal["ping"]
    id: FrameId | None = None
    t: float | None = None


ClientFrame = Annotated[
    TranscriptFrame | SceneFrame | ResumeFrame | CommandFrame | PlaybackFrame | SilenceFrame | PingFrame
    | AudioFrame,
    Field(discriminator="type"),
]
CLIENT_FRAME_TYPES: dict[str, type[_ClientFrame]] = {
    "transcript": TranscriptFrame,
    "scene": SceneFrame,
    "resume": ResumeFrame,
    "command": CommandFrame,
    "playback": PlaybackFrame,
    "silence": SilenceFrame,
    "ping": PingFrame,
    "audio": AudioFrame,
}


# --------------------------------------------------------------------------- server events


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    session_id: str


class TurnTimings(Ledger):
    """The per-turn pipeline: the brain's ledger plus where the rest of the time went (ms). A spoken
    turn's adds the voice stages before it (docs/voice.md, "Per-stage timings"): the silence the
    server waited before ending an open microphone's turn, and the time from the utterance's end to
    its transcript, by recogniser `stt`; None on a typed turn (or a push-to-talk turn's wait: the
    client ended it)."""

    brain: str
    queue_ms: float = 0.0
    validation_ms: float = 0.0
    total_ms: float = 0.0
    end_of_turn_ms: float | None = None
    stt_ms: float | None = None
    stt: str | None = None


class SpokenTimings(_Frame):
    """The vendor's first audio after a spoken turn (ms): how long the speech service took to its
    first byte, and the time from the end of the learner's utterance `in_reply_to` (the server's end
    of turn, or the client's `end`) to that audio leaving for the player."""

    in_reply_to: str
    tts_first_byte_ms: float
    first_audio_ms: float


class Welcome(_Event):
    type: Literal["welcome"] = "welcome"
    role: Role
    seq: int
    state: SessionState
    protocol: str = "samvad.v1"
    limits: dict[str, int] = Field(default_factory=dict)


class Ack(_Event):
    type: Literal["ack"] = "ack"
    id: str
    duplicate: bool = False


class Pong(_Event):
    type: Literal["pong"] = "pong"
    id: str | None = None
    t: float | None = None


class Error(_Event):
    type: Literal["error"] = "error"
    code: ErrorCode
    message: str
    id: str | None = None


# A reply that is not a turn: `clarify` asks to hear an unclear transcript again, `nudge` answers
# a silence, `welcome_back` greets a learner back after SESSION_RESTART_SECONDS (docs/coaching.md).
ReplyMark = Literal["clarify", "nudge", "welcome_back"]


class Reply(_Event):
    type: Literal["reply"] = "reply"
    seq: int
    turn: int
    text: str
    happiness_score: int
    negotiation_state: Stage
    vendor_mood: Mood
    counter_price: int | None
    suggested_user_response: str
    is_terminal: bool
    in_reply_to: str | None = None
    learner_text: str | None = None  # the transcript this reply answers, as the server read it
    item: str | None = None
    learner_offer: int | None = None
    offer_read_from: str = ""  # the learner's words the offer was read from ("70 percent"); "" for none
    offer_assessment: OfferAssessment = OfferAssessment.NONE
    fallback: bool = False
    withdrawn_stream: bool = False
    flags: tuple[str, ...] = ()
    timings: TurnTimings | None = None
    policy: Policy = "P3"  # which rule of the response policy answered (docs/knowledge.md)
    mark: ReplyMark | None = None  # a reply that is not a turn (below), or None for a turn's reply
    sources: tuple[str, ...] = ()  # the knowledge chunks a P1 reply was grounded in
    suggested_user_response_english: str = ""  # the suggestion's English, when the brain gave one
    text_english: str = ""  # `text` in English when the brain gave it and the rules kept its words


class ReplyDelta(_Event):
    type: Literal["reply.delta"] = "reply.delta"
    turn: int
    text: str
    end: bool = False  # the reply text is complete (its `text` is then ""); the `reply` may still differ


class ReplyWithdrawn(_Event):
    """The streamed deltas of `turn` will not stand; the coming `reply` replaces them."""

    type: Literal["reply.withdrawn"] = "reply.withdrawn"
    turn: int
    reason: str


class MoodChanged(_Event):
    type: Literal["mood"] = "mood"
    seq: int
    turn: int
    happiness_score: int
    vendor_mood: Mood
    delta: int


class StageChanged(_Event):
    type: Literal["stage"] = "stage"
    seq: int
    turn: int
    from_: Stage = Field(alias="from")
    to: Stage
    forced: bool = False


class SessionEnded(_Event):
    type: Literal["session.ended"] = "session.ended"
    seq: int
    outcome: Outcome
    summary: Summary


class Snapshot(_Event):
    type: Literal["snapshot"] = "snapshot"
    seq: int
    state: SessionState
    replayed: bool = False
    reason: str = ""


class Repeat(_Event):
    """The vendor's last line again, exactly, for the `repeat` command: no state change."""

    type: Literal["repeat"] = "repeat"
    seq: int
    turn: int
    text: str
    in_reply_to: str | None = None  # the command's id


class Tips(_Event):
    """Coaching cards for the learner's turn `turn`, grounded in the scenario's knowledge
    (docs/knowledge.md): each card's words are a chunk's own, or one generic card."""

    type: Literal["tips"] = "tips"
    seq: int
    turn: int
    cards: tuple[TipCard, ...]


class Hint(_Event):
    """A hint for the learner's next line (docs/coaching.md): no state change.

    `level` 0 is `contextual` (what is going on and what this culture expects: `text`, in English),
    1 `structural` (a sentence frame with blanks in the target language, `text`, and its
    `english`), 2 and above `reveal` (a whole line to say, `text`, and its `english`). `offered` is
    true on a hint the server gave unasked (a beginner's, after a silence)."""

    type: Literal["hint"] = "hint"
    seq: int
    turn: int  # the learner turn the hint is for (the next one)
    level: int
    kind: Literal["contextual", "structural", "reveal"]
    situation: str
    text: str
    english: str = ""
    offered: bool = False
    in_reply_to: str | None = None  # the command's id


class Undone(_Event):
    """The learner's turn `turn` was taken back: `state` is the session exactly as before it."""

    type: Literal["undo"] = "undo"
    seq: int
    turn: int
    state: SessionState
    in_reply_to: str | None = None


class Heard(_Event):
    """A `playback` report: how much of the reply to `turn` the learner heard. `quote_unbound` says
    a price named only in the unheard part was taken back; `vendor_quote` is the quote that stands."""

    type: Literal["heard"] = "heard"
    seq: int
    turn: int
    heard_chars: int
    interrupted: bool
    heard_text: str
    quote_unbound: bool = False
    vendor_quote: int | None = None
    in_reply_to: str | None = None


class Speech(_Event):
    """What the recogniser heard in the learner's `audio` utterance `id`, in the sequence before that
    utterance's turn: `confidence` (0-1, or null when the engine gives none), `levels` (the loudness
    every 50 ms, 0-1, for a meter), `fallback`: recognition failed (the turn is an unclear one),
    `fluency`: words per minute, pause ratio, mean length of run and fillers (docs/learning.md), and
    the voice stages so far (docs/voice.md, "Per-stage timings")."""

    type: Literal["speech"] = "speech"
    seq: int
    id: str
    text: str
    confidence: float | None
    language: LanguageCode | None = None
    duration_ms: int
    levels: tuple[float, ...] = ()
    stt: str
    fallback: bool = False
    fluency: Fluency | None = None  # from the words' times; null when the recogniser gives none
    end_of_turn_ms: float | None = None  # the silence that ended an open microphone's turn; None: the client's `end`
    stt_ms: float | None = None  # from the utterance's end to this transcript (None: from an older server)


class SpeechPartial(_Event):
    """What the recogniser has heard so far of open-microphone turn `id`, at a pause in it."""

    type: Literal["speech.partial"] = "speech.partial"
    seq: int
    id: str
    text: str
    confidence: float | None


class ReplyAudio(_Event):
    """A piece of the vendor's spoken reply to `turn`: PCM16 mono at `sample_rate`, sentence by
    sentence (`sentence` from 0, `chunk` from 0 within it; `text` is the sentence, on chunk 0).
    `last` ends a sentence, `final` the reply; `degraded`: synthesis failed, the rest of this reply
    is text only. `data`: bytes in msgpack, base64 in JSON. `visemes`: this chunk's mouth shapes,
    `(start_ms, viseme 0-14)` from its first sample, made by `visemes_source` (docs/voice.md).
    `filler`: a thinking sound ("Hmm...") played while the reply to `turn` is late: `sentence` -1,
    `text` "", not part of the reply's words (count no characters of it for `playback`)."""

    type: Literal["reply.audio"] = "reply.audio"
    turn: int
    sentence: int
    chunk: int
    text: str = ""
    format: Literal["pcm16"] = "pcm16"
    sample_rate: int
    data: bytes = b""
    last: bool = False
    final: bool = False
    degraded: bool = False
    tts: str = ""
    visemes: tuple[tuple[int, int], ...] = ()
    visemes_source: str = ""
    timings: SpokenTimings | None = None  # on the first piece of the reply to a spoken turn
    filler: bool = False

    @field_serializer("data", when_used="json")
    def _base64(self, data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")  # standard alphabet: what atob() reads


class ReplySpoken(_Event):
    """The player heard the first audio of the vendor's reply to `turn` (a spoken turn's): the figures
    its first `reply.audio` carried, for the session's spectators (the watch page's voice pipeline)."""

    type: Literal["reply.spoken"] = "reply.spoken"
    turn: int
    tts: str
    timings: SpokenTimings


ServerEvent = (
    Welcome | Ack | Pong | Error | Reply | ReplyDelta | ReplyWithdrawn | MoodChanged | StageChanged
    | SessionEnded | Snapshot | Tips | SessionReport | Repeat | Hint | Undone | Heard | Speech | SpeechPartial
    | ReplyAudio | ReplySpoken
)
SEQUENCED_TYPES = frozenset({"reply", "mood", "stage", "session.ended", "snapshot", "tips", "session.report",
                             "repeat", "hint", "undo", "heard", "speech", "speech.partial"})

