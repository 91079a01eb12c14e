"""Silence and presence (seed 002; docs/coaching.md): the player's silence timer, the vendor's
nudges, the end after too many silences, and the welcome back. A part of the session actor.

The timer runs only while a player is connected and the vendor is waiting for the learner (no
turn in flight, the session not over). It starts when the player connects and after every reply
(`_listen`), with `limits.silence_s` (SILENCE_TIMEOUT_MS, 30 s), or `silence_extended_s`
(SILENCE_EXTENDED_TIMEOUT_MS, 60 s) when the learner is mid-sentence (a non-final transcript
arrived) or has just had a hint. A `playback` report that the reply was heard to the end restarts
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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from schemas.codec import Envelope
from schemas.enums import Outcome
from schemas.frames import Reply, ServerEvent, SilenceFrame
from schemas.lines import say
from session.changes import Nudged, WelcomedBack
from session.ending import end_now
from session.fanout import ActorFanout
from session.hints import build_hint
from session.messages import ClientFrame, Frame, Handler, Message, SilenceDue
from session.negotiation import Negotiation
from session.protocols import TipSource
from session.records import PendingTurn
from session.timers import SilenceTimers

__all__ = ["FRAME_HANDLERS", "MESSAGE_HANDLERS", "ActorSilence", "nudge_reply", "silence_passed", "welcome_back_reply"]

COOL_BELOW = 50  # below this happiness the welcome back is a cool one


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


class ActorSilence(ActorFanout):
    """The player's silence timer, nudges, the timed-out end and the welcome back."""

    timers: SilenceTimers | None  # the registry's shared heap; None: no silence handling
    _silence_due: float | None
    _silence_queued: float | None
    _thinking: PendingTurn | None  # the turn in flight (session/turns.py)
    _waiting: deque[Frame] | None  # frames queued behind it
    _post_nowait: Callable[[Message], None]  # the actor's: post into its own inbox

    # ------------------------------------------------------------------ the timer

    def silence_due(self) -> None:
        self._post_nowait(SilenceDue())

    def _listen(self, extended: bool = False) -> None:
        """(Re)start the silence timer, if a player is there and the vendor waits for the learner."""
        if self.timers is None or self.player is None or self.negotiation.is_terminal or self._thinking is not None:
            return
        self.timers.arm(self, self.limits.silence_extended_s if extended else self.limits.silence_s)

    def _hush(self) -> None:
        """Stop the silence timer (a turn in flight, the player gone, the session over)."""
        self._silence_due = None

    def _player_joined(self) -> None:
        reply = welcome_back_reply(self.negotiation, self.clock(), self.limits.restart_after_s)
        if reply is not None:
            self._store()
            self._fanout(Envelope(reply))
            self._changed()
        self._listen()

    def _player_left(self) -> None:
        self._hush()

    # ------------------------------------------------------------------ timeouts

    def _on_silence_due(self, message: SilenceDue) -> None:
        if self.player is None or self.negotiation.is_terminal or self._thinking is not None or self._waiting:
            return  # moved on since the timer was armed
        self._timeout(None, None)

    def _on_silence_frame(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, SilenceFrame)
        self._timeout(message, frame.id)

    def _queue_behind_turn(self, message: Frame) -> bool:
        """Hold a frame while a turn is in flight (True); the turn pipeline applies it, in order,
        when the turn is answered (`session/turns.py`)."""
        if self._thinking is None:
            return False
        if self._waiting is None or self._waiting_ids is None:
            self._waiting, self._waiting_ids = deque(), set()
        self._waiting.append(message)
        self._waiting_ids.add(message.frame.id)  # type: ignore[arg-type]
        return True

    def _timeout(self, message: Frame | None, frame_id: str | None) -> None:
        now = message.received_at if message is not None else self.clock()
        events = silence_passed(self.negotiation, now, frame_id, self.limits.max_timeouts, self.tips)
        if self.negotiation.is_terminal:
            self._hush()
        else:
            self._listen()
        version = self._store()
        if message is not None and frame_id is not None:
            self._ack_when_durable(version, message.conn, frame_id, False)
        for event in events:
            self._fanout(Envelope(event))
        self._changed()


# This part's entries in the actor's dispatch tables (`session/actor.py`).
MESSAGE_HANDLERS: dict[type[Message], Handler] = {SilenceDue: ActorSilence._on_silence_due}
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = {SilenceFrame: ActorSilence._on_silence_frame}
