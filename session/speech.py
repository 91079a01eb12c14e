"""What the recogniser heard, as the session machine decides it: a sequenced `speech` event.

A connection's transcriber (server/voice.py) decodes an utterance outside the actor and posts
what it heard (`Recognised`), then submits the utterance's transcript with the same id. The
machine gives the `speech` event the next seq (a `SpeechHeard` change), so it goes into the
replay ring and a resuming client gets it like any other event, in its place before the turn
it starts. An utterance the session already took (a re-sent one) is not heard twice. An open
microphone's turn so far, decoded at a pause in it, is a `speech.partial` in the same sequence,
and the brain may be asked about it ahead of the turn (session/speculation.py).
"""

from __future__ import annotations

from typing import NamedTuple

from schemas.enums import LanguageCode, Level
from schemas.frames import Speech, SpeechPartial
from session.changes import SpeechHeard
from session.machine_state import MachineState
from session.messages import Recognised
from session.negotiation import Negotiation
from session.outputs import Output
from session.speculation import speculation

__all__ = ["Hearing", "hearing", "on_recognised"]


class Hearing(NamedTuple):
    """What a transcriber needs to know of the session before it decodes utterance `id` (asked of the
    actor, `SessionActor.hearing`, so that no other task reads the session): whether the session
    already took it (a re-sent one is not decoded again), the learner's language, and the moment the
    recogniser may bias itself to (voice/scene_stt.py): the pack, the item in hand, the standing quote."""

    duplicate: bool
    language: LanguageCode | None
    scenario: str
    item: str | None
    quote: int | None
    level: Level  # an open microphone waits longer for a beginner (voice/turn_end.py)
    scenario_version: int  # whose fillers and backchannels it listens for


def hearing(negotiation: Negotiation, utterance_id: str) -> Hearing:
    return Hearing(negotiation.seen(utterance_id), negotiation.input_language, negotiation.scenario_name,
                   negotiation.object_grabbed or negotiation.item, negotiation.quote, negotiation.level,
                   negotiation.scenario_version)


def on_recognised(m: MachineState, heard: Recognised, now: float, out: list[Output]) -> None:
    negotiation = m.negotiation
    if negotiation.seen(heard.id):
        return  # re-sent: its transcript is answered as a duplicate
    fluency = None if heard.partial else heard.fluency
    negotiation.commit(SpeechHeard(*negotiation.stamp(now), id=heard.id, seq=negotiation.seq + 1, fluency=fluency))
    if heard.partial:
        out.append(SpeechPartial(session_id=negotiation.session_id, seq=negotiation.seq, id=heard.id, text=heard.text,
                                 confidence=heard.confidence))
        ahead = speculation(m, heard, now)  # the brain asked now, before the end-of-turn wait is over
        if ahead is not None:
            out.append(ahead)
        return
    out.append(Speech(session_id=negotiation.session_id, seq=negotiation.seq, id=heard.id, text=heard.text,
                      confidence=heard.confidence, language=heard.language, duration_ms=heard.duration_ms,
                      levels=heard.levels, stt=heard.stt, fallback=heard.fallback, fluency=fluency,
                      end_of_turn_ms=heard.end_of_turn_ms, stt_ms=heard.stt_ms))
