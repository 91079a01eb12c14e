"""Silence and presence (seed 002; docs/coaching.md): the player's silence timer, the vendor's
nudges, the end after too many silences, and the welcome back.

The timer runs only while a player is connected and the vendor is waiting for the learner (no
turn in flight, the session not over). It starts when the player connects and after every reply
(`Listen`), with `limits.silence_s` (SILENCE_TIMEOUT_MS, 30 s), or `silence_extended_s`
(SILENCE_EXTENDED_TIMEOUT_MS, 60 s) when the learner is mid-sentence (a non-final transcript
arrived, or their audio is streaming in: a `Speaking` message for each `audio` frame) or has just had a
hint. A `playback` report that the reply was heard to the end restarts
it from then, since the vendor only now finished speaking. A final transcript stops it while the
vendor thinks. Every session's timer lives in one heap served by one task
(`session/timers.py`); the timer itself never touches the state, it posts `SilenceDue`.

A timeout (the timer, or a `silence` frame from a client whose own voice detection decided the
learner gave up) is counted. Below `limits.max_timeouts` (MAX_CONSECUTIVE_TIMEOUTS, 3) in a row
the vendor nudges in character and in the session's language: a `reply` marked `nudge` (the pack's
`nudge` lines), which changes nothing and is not a turn. Where the learner's level says so
(`hint_after_timeouts`, a beginner's 1), a level-0 hint follows it, `offered`. The last one in a
row ends the session as `timed_out`: a forced CLOSURE, `session.ended` and the report. Any learner
turn or command starts the count again.

Welcome back (seed 001): a player who connects to a live session with turns after more than
`limits.restart_after_s` (SESSION_RESTART_SECONDS, 7,200) since anything happened in it is greeted
with a recap, a `reply` marked `welcome_back`: the item, the vendor's last quote, and his mood in
the choice of line (`welcome_back`, `welcome_back_cool` below happiness 50, `welcome_back_plain`
without a quote).

Here are the decisions (the machine's inputs `SilenceDue`, a `silence` frame and `PlayerJoined`);
the timer itself, which needs a player connected, is the actor's (`Listen`, `Hush`).
"""

from __future__ import annotations

from schemas.enums import Outcome
from schemas.frames import Reply, ServerEvent, SilenceFrame
from schemas.lines import say
from session.changes import Nudged, WelcomedBack
from session.ending import end_now
from session.hints import build_hint
from session.machine_state import MachineState
from session.messages import Frame, PlayerJoined, SilenceDue, Speaking
from session.negotiation import Negotiation
from session.outputs import Acknowledge, Hush, Listen, Output
from session.protocols import TipSource

__all__ = ["nudge_reply", "on_player_joined", "on_silence_due", "on_silence_frame", "on_speaking", "silence_passed",
           "welcome_back_reply"]

COOL_BELOW = 50  # below this happiness the welcome back is a cool one
HUSH = Hush()
LISTEN = Listen()
SPEAKING = Listen(extended=True)


def nudge_reply(negotiation: Negotiation, client_id: str | None = None, seq: int | None = None) -> Reply:
    """The vendor's nudge after a silence, made after the `Nudged` change that took its seq
    (`client_id`: the `silence` frame's, if one said so)."""
    scenario = negotiation.scenario
    line = say(scenario, negotiation.target_language, "nudge", negotiation.coaching.timeouts,
               scenario.item(negotiation.item), negotiation.level)
    return negotiation.standing_reply(line, client_id, mark="nudge", seq=seq)


def silence_passed(negotiation: Negotiation, now: float, client_id: str | None, max_timeouts: int,
                   tips: TipSource | None) -> list[ServerEvent]:
    """A silence (the timer ran out, or a `silence` frame with `client_id` said so): a nudge (a
    `Nudged` change), with a level-0 hint where the learner's level offers one, or the end when it
    is the `max_timeouts`-th in a row (`end_now`)."""
    silences = negotiation.coaching.consecutive_timeouts + 1
    if silences >= max_timeouts:
        return end_now(negotiation, now, Outcome.TIMED_OUT, tips, client_id)
    offered = negotiation.level_params.hint_after_timeouts == silences
    negotiation.commit(Nudged(*negotiation.stamp(now), id=client_id, seq=negotiation.seq + 1 + offered,
                              offered_hint=offered))
    events: list[ServerEvent] = [nudge_reply(negotiation, client_id, negotiation.seq - offered)]
    if offered:
        events.append(build_hint(negotiation, negotiation.seq, 0, offered=True))
    return events


def welcome_back_reply(negotiation: Negotiation, now: float, after_s: float) -> Reply | None:
    """The recap for a player back after `after_s` of quiet, or None (a new session, a short absence,
    or one that is over)."""
    if negotiation.turn == 0 or negotiation.is_terminal or now - negotiation.updated_at <= after_s:
        return None
    scenario = negotiation.scenario
    quote = negotiation.quote
    key = "welcome_back_plain" if quote is None else (
        "welcome_back_cool" if negotiation.happiness < COOL_BELOW else "welcome_back")
    fields = {} if quote is None else {"price": quote}
    line = say(scenario, negotiation.target_language, key, negotiation.seq, scenario.item(negotiation.item),
               negotiation.level, **fields)
    negotiation.commit(WelcomedBack(*negotiation.stamp(now), seq=negotiation.seq + 1, text=line))
    return negotiation.standing_reply(line, None, mark="welcome_back")


def on_silence_due(m: MachineState, message: SilenceDue, now: float, out: list[Output]) -> None:
    """The timer ran out (the actor posts it only with a player connected and nothing held)."""
    if m.negotiation.is_terminal or m.thinking is not None:
        return  # moved on since the timer was armed
    _timeout(m, None, now, out)


def on_silence_frame(m: MachineState, message: Frame, now: float, out: list[Output]) -> None:
    frame = message.frame
    assert isinstance(frame, SilenceFrame)
    _timeout(m, frame.id, now, out)


def _timeout(m: MachineState, frame_id: str | None, now: float, out: list[Output]) -> None:
    events = silence_passed(m.negotiation, now, frame_id, m.limits.max_timeouts, m.tips)
    out.append(HUSH if m.negotiation.is_terminal else LISTEN)
    if frame_id is not None:
        out.append(Acknowledge(frame_id))
    out += events


def on_speaking(m: MachineState, message: Speaking, now: float, out: list[Output]) -> None:
    """The learner's audio is arriving: not a silence. The timer starts again, with its extended length."""
    if m.waits_for_learner:
        out.append(SPEAKING)


def on_player_joined(m: MachineState, message: PlayerJoined, now: float, out: list[Output]) -> None:
    reply = welcome_back_reply(m.negotiation, now, m.limits.restart_after_s)
    if reply is not None:
        out.append(reply)
    out.append(LISTEN)
