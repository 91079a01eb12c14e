"""An invariant checker for one session's server frames, as one connection receives them.

Feed it every decoded server frame (`feed`) and tell it what the client sent (`sent_transcript`,
`sent_resume`). It never raises on bad input: each broken invariant becomes one string in
`violations`. Pure code: no clock, no I/O, so it is tested with hand-made frame sequences.

What it checks (docs/protocol.md §4-§5, session/rules.py):

- the stream: `seq` rises by exactly 1 per sequenced event (`reply`, `mood`, `stage`,
  `session.ended`, `tips`); a `snapshot` carries the latest seq and does not consume one. An event with
  `seq <= last` is dropped (a violation unless a `resume` is outstanding, since one connection
  never sees an event twice otherwise); a gap is dropped while a `resume` is outstanding and is a
  violation otherwise;
- stages: every `stage` event's `from` is the current stage and `to` is legal per `TRANSITIONS`
  (or `forced: true` to CLOSURE from anywhere); a reply that changes the stage is followed by its
  `stage` event, and a reply that leaves it alone is not;
- mood: `|delta| <= max_mood_delta`, `delta` matches the change, the mood matches the band of
  `happiness_score` (on `reply` and `mood`), and the score is within 0..100;
- turns: `reply.turn` rises by one per learner turn; closing replies (after the end) and replies
  marked `clarify` (unclear speech) repeat the last turn and change nothing; `in_reply_to` names
  a transcript this client sent, when it sent any;
- tips: one `tips` event per answered learner turn, after that turn's reply, mood, stage and end
  events, with 1-6 cards; a grounded card names its sources, an ungrounded one is the only card;
- the end: after `session.ended` only the last turn's `tips`, one `session.report` (its outcome
  and turns those of the end) and closing replies (`is_terminal: true`) may come;
- coaching (clients/bots/coach_checks.py): hints, repeats, `heard` reports and replies marked
  `clarify`, `nudge` or `welcome_back` change nothing; an `undo` restores exactly the stage,
  happiness and turn seen before the turn it takes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clients.bots.coach_checks import SPONTANEOUS, UNDO_DEPTH, CoachingChecks
from clients.bots.coach_checks import STAGES as _STAGES
from schemas.enums import Stage
from session.rules import DEFAULT_MAX_MOOD_DELTA, TRANSITIONS, mood_for

SEQUENCED = frozenset({"reply", "mood", "stage", "session.ended", "tips", "session.report", "repeat", "hint",
                       "undo", "heard", "speech", "speech.partial"})
UNSEQUENCED = frozenset({"welcome", "ack", "pong", "error", "reply.delta", "reply.withdrawn", "reply.spoken"})


@dataclass
class SessionChecker(CoachingChecks):
    """Checks one connection's view of one session; see the module docstring."""

    session_id: str | None = None
    max_mood_delta: int = DEFAULT_MAX_MOOD_DELTA
    max_violations: int = 50  # keep the first few; `count` keeps counting
    violations: list[str] = field(default_factory=list)
    count: int = 0  # violations seen, including those not kept
    last_seq: int | None = None  # None until `welcome`
    stage: Stage | None = None
    happiness: int | None = None
    turn: int = 0
    ended: bool = False
    outcome: str | None = None
    frames: int = 0
    dropped: int = 0  # events dropped as duplicates or gaps
    _resume_id: str | None = None
    _resume_open: bool = False
    _resume_target: int = -1  # the highest seq dropped while resuming without an id
    _sent: set[str] = field(default_factory=set)
    _expect_mood: int | None = None  # the delta the reply just made, until its `mood` event
    _expect_stage: tuple[Stage, Stage] | None = None  # (from, to) the reply just made
    _expect_end: bool = False
    _turn_open: bool = False  # a reply was applied and its follow-up events may still come
    _tips_turn: int = -1  # the turn whose `tips` came last
    reported: bool = False
    _before_turn: list[tuple[int, Stage | None, int | None]] = field(default_factory=list)
    _last_kind: str = ""

    # ------------------------------------------------------------------ what the client did

    def sent_transcript(self, frame_id: str) -> None:
        self._sent.add(frame_id)

    def sent_resume(self, frame_id: str | None = None) -> None:
        self._resume_open = True
        self._resume_id = frame_id
        self._resume_target = -1

    def client_violation(self, message: str) -> None:
        """A broken invariant that only the client can see (what it sent, what it saw before)."""
        self._violate(message)

    @property
    def ok(self) -> bool:
        return self.count == 0

    # ------------------------------------------------------------------ frames

    def feed(self, frame: dict[str, Any]) -> None:
        self.frames += 1
        kind = frame.get("type")
        if not isinstance(kind, str):
            self._violate(f"frame without a string type: {_short(frame)}")
            return
        sid = frame.get("session_id")
        if self.session_id is None:
            if isinstance(sid, str):
                self.session_id = sid
        elif sid != self.session_id:
            self._violate(f"{kind}: session_id {sid!r} is not {self.session_id!r}")
        if kind == "welcome":
            self._welcome(frame)
        elif kind == "snapshot":
            self._snapshot(frame)
        elif kind in SEQUENCED:
            self._sequenced(kind, frame)
        elif kind == "ack":
            resume_id = self._resume_id
            if self._resume_open and resume_id is not None and frame.get("id") == resume_id:
                self._resume_open = False
        elif kind not in UNSEQUENCED:
            self._violate(f"unknown server frame type {kind!r}")

    def finish(self) -> None:
        """Call when the connection is done: a turn's promised follow-up events must have come."""
        self._close_turn("end of stream")

    # ------------------------------------------------------------------ helpers

    def _violate(self, message: str) -> None:
        self.count += 1
        if len(self.violations) < self.max_violations:
            where = f"[{self.session_id[:8]}] " if self.session_id else ""
            self.violations.append(where + message)

    def _load_state(self, state: Any, seq: Any, kind: str) -> None:
        if not isinstance(state, dict):
            self._violate(f"{kind} without a state object")
            return
        stage = _STAGES.get(state.get("stage"))  # type: ignore[arg-type]
        if stage is None:
            self._violate(f"{kind}: unknown stage {state.get('stage')!r}")
        happiness = state.get("happiness_score")
        if not isinstance(happiness, int) or not 0 <= happiness <= 100:
            self._violate(f"{kind}: happiness_score {happiness!r} outside 0..100")
            happiness = None
        elif state.get("vendor_mood") != mood_for(happiness).value:
            self._violate(f"{kind}: vendor_mood {state.get('vendor_mood')!r} does not match "
                          f"happiness {happiness}")
        if isinstance(state.get("seq"), int) and state.get("seq") != seq:
            self._violate(f"{kind}: state.seq {state.get('seq')} differs from seq {seq}")
        self.stage = stage
        self.happiness = happiness
        turn = state.get("turn")
        self.turn = turn if isinstance(turn, int) else self.turn
        self.ended = bool(state.get("is_terminal"))
        if self.ended:
            self.outcome = state.get("outcome") or self.outcome
        self._expect_mood = None
        self._expect_stage = None
        self._expect_end = False
        self._turn_open = False

    def _welcome(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if not isinstance(seq, int) or seq < 0:
            self._violate(f"welcome with a bad seq {seq!r}")
            return
        if self.last_seq is None:
            self.last_seq = seq
            self._load_state(frame.get("state"), seq, "welcome")
        elif seq < self.last_seq:
            self._violate(f"welcome seq {seq} is behind the applied seq {self.last_seq}")
        # A later welcome (a reconnect) keeps the applied state: the client resumes from it.

    def _snapshot(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if not isinstance(seq, int):
            self._violate(f"snapshot with a bad seq {seq!r}")
            return
        if not self._resume_open:
            self._violate(f"snapshot seq {seq} without a resume outstanding")
        if self.last_seq is not None and seq < self.last_seq:
            self._violate(f"snapshot seq {seq} is behind the applied seq {self.last_seq}")
            return
        self.last_seq = seq  # the events missed before it are not ours to check
        self._load_state(frame.get("state"), seq, "snapshot")
        self._resume_open = False

    def _sequenced(self, kind: str, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if not isinstance(seq, int):
            self._violate(f"{kind} without an integer seq")
            return
        if self.last_seq is None:
            self._violate(f"{kind} seq {seq} before welcome")
            self.last_seq = seq - 1
        if seq <= self.last_seq:
            self.dropped += 1
            if not self._resume_open:
                self._violate(f"{kind} seq {seq} repeats (applied {self.last_seq}) with no resume")
            return
        if seq > self.last_seq + 1:
            self.dropped += 1
            if self._resume_open:
                self._resume_target = max(self._resume_target, seq)
            else:
                self._violate(f"{kind} seq {seq} skips from {self.last_seq} with no resume")
            return
        self.last_seq = seq
        if self._resume_open and self._resume_id is None and seq >= self._resume_target:
            self._resume_open = False  # caught up with everything dropped while resuming
        if kind == "reply":
            self._reply(frame)
        elif kind == "mood":
            self._mood(frame)
        elif kind == "stage":
            self._stage(frame)
        elif kind == "tips":
            self._tips(frame)
        elif kind == "session.report":
            self._report(frame)
        elif kind == "repeat":
            self._repeat(frame)
        elif kind == "hint":
            self._hint(frame)
        elif kind == "undo":
            self._undo(frame)
        elif kind == "heard":
            self._heard(frame)
        else:
            self._ended(frame)
        self._last_kind = kind

    def _close_turn(self, why: str) -> None:
        """The previous reply's follow-up events can no longer come: check none is missing."""
        if not self._turn_open:
            return
        if self._expect_mood is not None:
            self._violate(f"turn {self.turn}: happiness moved by {self._expect_mood} but no mood "
                          f"event came before the {why}")
        if self._expect_stage is not None:
            a, b = self._expect_stage
            self._violate(f"turn {self.turn}: stage {a.value}->{b.value} without a stage event "
                          f"before the {why}")
        if self._expect_end:
            self._violate(f"turn {self.turn}: terminal reply without session.ended before the "
                          f"{why}")
        self._expect_mood = None
        self._expect_stage = None
        self._expect_end = False
        self._turn_open = False

    def _check_score(self, kind: str, frame: dict[str, Any]) -> int | None:
        score = frame.get("happiness_score")
        if not isinstance(score, int) or isinstance(score, bool) or not 0 <= score <= 100:
            self._violate(f"{kind} seq {frame.get('seq')}: happiness_score {score!r} outside "
                          "0..100")
            return None
        mood = frame.get("vendor_mood")
        if mood != mood_for(score).value:
            self._violate(f"{kind} seq {frame.get('seq')}: vendor_mood {mood!r} is not the band of "
                          f"happiness {score} ({mood_for(score).value})")
        return score

    def _reply(self, frame: dict[str, Any]) -> None:
        self._close_turn(f"reply seq {frame.get('seq')}")
        seq = frame.get("seq")
        turn = frame.get("turn")
        score = self._check_score("reply", frame)
        stage = _STAGES.get(frame.get("negotiation_state"))  # type: ignore[arg-type]
        if stage is None:
            self._violate(f"reply seq {seq}: unknown negotiation_state "
                          f"{frame.get('negotiation_state')!r}")
        in_reply_to = frame.get("in_reply_to")
        mark = frame.get("mark")
        if self._sent and in_reply_to not in self._sent and mark not in SPONTANEOUS:  # a nudge may name a `silence`
            self._violate(f"reply seq {seq}: in_reply_to {in_reply_to!r} is no transcript we sent")
        if mark is not None:
            self._marked_reply(frame, turn, score, stage)
            return
        if self.ended:
            # A closing reply: no brain, no state change, the same turn, terminal.
            if frame.get("is_terminal") is not True:
                self._violate(f"reply seq {seq} after session.ended is not terminal")
            if turn != self.turn:
                self._violate(f"closing reply seq {seq}: turn {turn} is not the last turn "
                              f"{self.turn}")
            if score is not None and self.happiness is not None and score != self.happiness:
                self._violate(f"closing reply seq {seq}: happiness changed "
                              f"{self.happiness}->{score}")
            if stage is not None and self.stage is not None and stage is not self.stage:
                self._violate(f"closing reply seq {seq}: stage changed {self.stage.value}->"
                              f"{stage.value}")
            return
        if turn != self.turn + 1:
            self._violate(f"reply seq {seq}: turn {turn} does not follow turn {self.turn}")
        if isinstance(turn, int):
            self._before_turn.append((turn, self.stage, self.happiness))  # what an undo of it restores
            del self._before_turn[:-UNDO_DEPTH]
            self.turn = turn
        if score is not None and self.happiness is not None:
            delta = score - self.happiness
            if abs(delta) > self.max_mood_delta:
                self._violate(f"reply seq {seq}: happiness moved {self.happiness}->{score} "
                              f"(|delta| > {self.max_mood_delta})")
            self._expect_mood = delta or None
            self.happiness = score
        elif score is not None:
            self.happiness = score
        if stage is not None and self.stage is not None and stage is not self.stage:
            self._expect_stage = (self.stage, stage)
        if frame.get("is_terminal") is True:
            if stage is not None and not stage.is_terminal:
                self._violate(f"reply seq {seq}: is_terminal with stage {stage.value}")
            self._expect_end = True
        elif stage is not None and stage.is_terminal:
            self._violate(f"reply seq {seq}: stage {stage.value} but is_terminal is false")
        self._turn_open = True

    def _mood(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        score = self._check_score("mood", frame)
        delta = frame.get("delta")
        if not isinstance(delta, int) or abs(delta) > self.max_mood_delta:
            self._violate(f"mood seq {seq}: delta {delta!r} beyond ±{self.max_mood_delta}")
        if self.ended:
            self._violate(f"mood seq {seq} after session.ended")
            return
        if not self._turn_open or self._last_kind != "reply":
            self._violate(f"mood seq {seq} does not directly follow a reply")
        if self._expect_mood is None:
            self._violate(f"mood seq {seq} for a turn whose happiness did not change")
        elif delta != self._expect_mood:
            self._violate(f"mood seq {seq}: delta {delta} but the reply moved happiness by "
                          f"{self._expect_mood}")
        if score is not None and score != self.happiness:
            self._violate(f"mood seq {seq}: happiness {score} differs from the reply's "
                          f"{self.happiness}")
        if frame.get("turn") != self.turn:
            self._violate(f"mood seq {seq}: turn {frame.get('turn')} is not turn {self.turn}")
        self._expect_mood = None

    def _stage(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        src = _STAGES.get(frame.get("from"))  # type: ignore[arg-type]
        dst = _STAGES.get(frame.get("to"))  # type: ignore[arg-type]
        if src is None or dst is None:
            self._violate(f"stage seq {seq}: unknown stage {frame.get('from')!r}->"
                          f"{frame.get('to')!r}")
            return
        if self.ended:
            self._violate(f"stage seq {seq} after session.ended")
            return
        if self.stage is not None and src is not self.stage:
            self._violate(f"stage seq {seq}: from {src.value} but the stage was {self.stage.value}")
        if frame.get("forced") is True and dst is Stage.CLOSURE and self._expect_stage is None:
            # The `stop` command: CLOSURE that no reply announced, then session.ended (stopped).
            self._close_turn(f"stage seq {seq}")
            self.stage = dst
            self._expect_end = True
            self._turn_open = True
            return
        forced = frame.get("forced") is True
        legal = dst in TRANSITIONS[src] or (forced and dst is Stage.CLOSURE)
        if not legal:
            self._violate(f"stage seq {seq}: illegal transition {src.value}->{dst.value}"
                          + (" (forced)" if forced else ""))
        if src is dst:
            self._violate(f"stage seq {seq}: {src.value}->{dst.value} is no change")
        if not self._turn_open or self._last_kind not in ("reply", "mood"):
            self._violate(f"stage seq {seq} does not follow a reply (and its mood)")
        if self._expect_mood is not None:
            self._violate(f"stage seq {seq} came before the turn's mood event")
            self._expect_mood = None
        if self._expect_stage is None:
            self._violate(f"stage seq {seq} for a reply that kept the stage")
        elif self._expect_stage[1] is not dst:
            self._violate(f"stage seq {seq}: to {dst.value} but the reply said "
                          f"{self._expect_stage[1].value}")
        if frame.get("turn") != self.turn:
            self._violate(f"stage seq {seq}: turn {frame.get('turn')} is not turn {self.turn}")
        self._expect_stage = None
        self.stage = dst

    def _ended(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if self.ended:
            self._violate(f"session.ended seq {seq} after session.ended")
            return
        if not self._expect_end:
            self._violate(f"session.ended seq {seq} without a terminal reply before it")
        if self._expect_mood is not None or self._expect_stage is not None:
            self._violate(f"session.ended seq {seq} came before the turn's mood or stage event")
        self._expect_mood = None
        self._expect_stage = None
        self._expect_end = False
        self._turn_open = False
        self.ended = True
        outcome = frame.get("outcome")
        self.outcome = outcome if isinstance(outcome, str) else None
        summary = frame.get("summary")
        if isinstance(summary, dict):
            if summary.get("outcome") != outcome:
                self._violate(f"session.ended seq {seq}: summary outcome "
                              f"{summary.get('outcome')!r} is not {outcome!r}")
            if summary.get("turns") != self.turn:
                self._violate(f"session.ended seq {seq}: summary turns {summary.get('turns')} "
                              f"is not {self.turn}")
        if outcome == "deal" and self.stage is not Stage.DEAL:
            self._violate(f"session.ended seq {seq}: outcome deal in stage "
                          f"{self.stage.value if self.stage else None}")


def _short(frame: Any) -> str:
    text = repr(frame)
    return text if len(text) <= 120 else text[:117] + "..."
