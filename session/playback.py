"""Barge-in: what the learner actually heard of the vendor's reply (docs/protocol.md, `playback`).

In voice play the learner often talks over the vendor. A `playback` frame says how much of the
reply to learner turn `turn` was heard (`heard_chars`, counted in the reply's `text`) and whether
the learner cut in (`interrupted`). The policy:

- What was heard is recorded: on the vendor's history line (in memory), in a `heard` event every
  viewer gets, and on the vendor's Turn node in Neo4j (`heard_chars`, `interrupted`).
- The brain's next prompt shows only the heard part of that line, ending in an em dash
  (`TurnRecord.as_line`).
- A price the vendor named only in the unheard part does not bind: when the reply set a new
  standing quote and its number is not wholly within the heard characters (or the line said it in
  words and was cut short), the standing quote returns to the one before the reply, and the
  `heard` event says so (`quote_unbound`, `vendor_quote`). Only the latest reply can be unbound,
  and only before the learner's next turn has started: by then the learner has answered it.
- What the learner's own words changed (happiness, the stage, the turn count) stands.
- A report that the reply was heard to the end (`interrupted` false) restarts the learner's
  silence timer from now, since the vendor only now finished speaking; a barge-in gives the
  extended timer, since the learner is speaking.

A `playback` after the end gets `session_ended`; one for a turn the vendor has not answered (or
that was undone) `unknown_turn`; one with `heard_chars` beyond the reply's text
`heard_out_of_range`. None of them changes anything.
"""

from __future__ import annotations

import re

from schemas.errors import ErrorCode
from schemas.frames import Error, Heard, PlaybackFrame
from session.changes import PlaybackHeard
from session.machine_state import MachineState
from session.messages import Frame
from session.negotiation import Negotiation
from session.outputs import Acknowledge, Answer, Listen, Output
from session.records import TurnRecord

__all__ = ["on_playback", "price_heard", "unheard_quote"]


def price_heard(text: str, price: int, heard_chars: int) -> bool:
    """Whether `price` was said within the first `heard_chars` characters of `text`.

    The number counts as heard only when all of its digits were (as "120" or "1,200"). A price the
    line does not spell in digits counts as heard only if the whole line was."""
    forms = {str(price), f"{price:,}"}
    ends = [m.end() for form in forms for m in re.finditer(rf"(?<![\d,]){re.escape(form)}(?![\d])", text)]
    if not ends:
        return heard_chars >= len(text)
    return min(ends) <= heard_chars


def unheard_quote(negotiation: Negotiation, record: TurnRecord, heard_chars: int) -> tuple[bool, int | None]:
    """Whether the standing quote that vendor line `record` set went unheard when the learner cut it
    off after `heard_chars` characters, and if so the quote that stands again (None: no quote).
    Decides only: a `PlaybackHeard` change applies it (session/fold.py)."""
    if record.quote is None or record.item is None:
        return False, None
    learner = next((h for h in reversed(negotiation.history) if h.role == "user" and h.turn == record.turn), None)
    before = learner.quote if learner is not None else None
    if before == record.quote or price_heard(record.text, record.quote, heard_chars):
        return False, None
    return True, before


def on_playback(m: MachineState, message: Frame, now: float, out: list[Output]) -> None:
    frame = message.frame
    assert isinstance(frame, PlaybackFrame)
    negotiation = m.negotiation
    sid = negotiation.session_id
    record = next((h for h in reversed(negotiation.history) if h.role == "vendor" and h.turn == frame.turn), None)
    if record is None:
        out.append(Answer(Error(session_id=sid, code=ErrorCode.UNKNOWN_TURN,
                                message=f"the vendor has not answered turn {frame.turn}", id=frame.id)))
        return
    if frame.heard_chars > len(record.text):
        out.append(Answer(Error(
            session_id=sid, code=ErrorCode.HEARD_OUT_OF_RANGE, id=frame.id,
            message=f"heard_chars {frame.heard_chars} is beyond the reply's {len(record.text)} characters")))
        return
    latest = record is negotiation.history[-1] and m.thinking is None and not negotiation.is_terminal
    quote_unbound, unbound_to = (unheard_quote(negotiation, record, frame.heard_chars)
                                 if latest and frame.interrupted else (False, None))
    negotiation.commit(PlaybackHeard(
        *negotiation.stamp(now), id=frame.id, turn=record.turn, heard_chars=frame.heard_chars,
        interrupted=frame.interrupted, seq=negotiation.seq + 1, quote_unbound=quote_unbound,
        unbound_item=record.item if quote_unbound else None, unbound_to=unbound_to))
    standing = negotiation.quotes.get(record.item) if record.item else None
    if frame.id is not None:
        out.append(Acknowledge(frame.id))
    out.append(Heard(session_id=sid, seq=negotiation.seq, turn=record.turn, heard_chars=frame.heard_chars,
                     interrupted=frame.interrupted, heard_text=record.text[: frame.heard_chars],
                     quote_unbound=quote_unbound, vendor_quote=standing, in_reply_to=frame.id))
    if latest:
        out.append(Listen(extended=frame.interrupted))
