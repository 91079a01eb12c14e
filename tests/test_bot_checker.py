"""The bots' invariant checker, fed hand-made frame sequences that must and must not pass."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from clients.bots.checker import SessionChecker
from schemas.enums import Stage
from session.rules import TRANSITIONS, mood_for

SID = "s" * 32


class Stream:
    """Builds the frames a correct server would send for a scripted session."""

    def __init__(self, happiness: int = 50, stage: Stage = Stage.GREETING) -> None:
        self.seq = 0
        self.turn = 0
        self.happiness = happiness
        self.stage = stage
        self.ended = False
        self.outcome: str | None = None
        self.frames: list[dict[str, Any]] = [self.welcome()]

    def state(self) -> dict[str, Any]:
        return {"session_id": SID, "stage": self.stage.value, "happiness_score": self.happiness,
                "vendor_mood": mood_for(self.happiness).value, "turn": self.turn, "seq": self.seq,
                "is_terminal": self.stage.is_terminal, "outcome": self.outcome}

    def welcome(self) -> dict[str, Any]:
        return {"type": "welcome", "session_id": SID, "role": "player", "seq": self.seq,
                "state": self.state()}

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def turn_(self, happiness: int, stage: Stage, *, forced: bool = False,
              reply_to: str | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.ended:
            out.append({"type": "reply", "session_id": SID, "seq": self._next(), "turn": self.turn,
                        "text": "closed", "happiness_score": self.happiness,
                        "negotiation_state": self.stage.value,
                        "vendor_mood": mood_for(self.happiness).value, "is_terminal": True,
                        "in_reply_to": reply_to})
            self.frames += out
            return out
        self.turn += 1
        previous_h, previous_s = self.happiness, self.stage
        self.happiness, self.stage = happiness, stage
        out.append({"type": "reply", "session_id": SID, "seq": self._next(), "turn": self.turn,
                    "text": "hi", "happiness_score": happiness, "negotiation_state": stage.value,
                    "vendor_mood": mood_for(happiness).value, "is_terminal": stage.is_terminal,
                    "in_reply_to": reply_to})
        if happiness != previous_h:
            out.append({"type": "mood", "session_id": SID, "seq": self._next(), "turn": self.turn,
                        "happiness_score": happiness, "vendor_mood": mood_for(happiness).value,
                        "delta": happiness - previous_h})
        if stage is not previous_s:
            out.append({"type": "stage", "session_id": SID, "seq": self._next(), "turn": self.turn,
                        "from": previous_s.value, "to": stage.value, "forced": forced})
        if stage.is_terminal:
            self.ended = True
            self.outcome = "deal" if stage is Stage.DEAL else (
                "turn_limit" if forced else "no_deal")
            out.append({"type": "session.ended", "session_id": SID, "seq": self._next(),
                        "outcome": self.outcome,
                        "summary": {"outcome": self.outcome, "turns": self.turn}})
        self.frames += out
        return out


def check(frames: list[dict[str, Any]], **kw: Any) -> SessionChecker:
    checker = SessionChecker(**kw)
    for frame in frames:
        checker.feed(frame)
    checker.finish()
    return checker


def happy_path() -> Stream:
    s = Stream()
    s.turn_(55, Stage.INQUIRY)
    s.turn_(55, Stage.INQUIRY)
    s.turn_(60, Stage.HAGGLING)
    s.turn_(70, Stage.HAGGLING)
    s.turn_(80, Stage.DEAL)
    s.turn_(80, Stage.DEAL)  # a closing reply after the end
    return s


# ---------------------------------------------------------------------------- must pass


def test_a_correct_session_passes() -> None:
    c = check(happy_path().frames)
    assert c.violations == []
    assert c.ended and c.outcome == "deal" and c.turn == 5 and c.last_seq == happy_path().seq


def test_acks_pongs_and_errors_do_not_disturb_the_stream() -> None:
    frames = happy_path().frames
    noise = [{"type": "ack", "session_id": SID, "id": "t1", "duplicate": False},
             {"type": "pong", "session_id": SID, "id": None, "t": 1.0},
             {"type": "error", "session_id": SID, "code": "invalid", "message": "x"},
             {"type": "reply.delta", "session_id": SID, "turn": 1, "text": "he"}]
    mixed = [frames[0], *noise, *frames[1:], *noise]
    assert check(mixed).violations == []


def test_forced_closure_may_leave_any_stage() -> None:
    s = Stream()
    s.turn_(50, Stage.INQUIRY)
    s.turn_(50, Stage.CLOSURE, forced=True)  # INQUIRY -> CLOSURE is only legal when forced
    assert check(s.frames).violations == []


def test_duplicates_and_gaps_are_dropped_while_a_resume_is_outstanding() -> None:
    s = happy_path()
    events = s.frames[1:]
    c = SessionChecker()
    c.feed(s.frames[0])
    c.feed(events[0])
    c.sent_resume("r1")
    c.feed(events[3])  # a live event beyond a gap: dropped, the replay brings it
    for frame in events:  # the replay, from the start: seq <= last are dropped
        c.feed(frame)
    c.feed({"type": "ack", "session_id": SID, "id": "r1"})
    c.finish()
    assert c.violations == [] and c.last_seq == s.seq and c.dropped == 2


def test_a_snapshot_replaces_the_state_and_does_not_consume_a_seq() -> None:
    s = Stream()
    s.turn_(55, Stage.INQUIRY)
    early = list(s.frames)
    s.turn_(60, Stage.HAGGLING)
    s.turn_(70, Stage.HAGGLING)
    snapshot = {"type": "snapshot", "session_id": SID, "seq": s.seq, "state": s.state(),
                "replayed": False, "reason": "gap"}
    later = s.turn_(75, Stage.HAGGLING)
    c = SessionChecker()
    for frame in early[:2]:
        c.feed(frame)  # welcome and turn 1's reply; the rest was missed
    c.sent_resume()
    c.feed(snapshot)
    for frame in later:
        c.feed(frame)
    c.finish()
    assert c.violations == [] and c.last_seq == s.seq and c.turn == 4


def test_replies_to_our_transcripts_pass() -> None:
    s = Stream()
    s.turn_(55, Stage.INQUIRY, reply_to="t1")
    c = SessionChecker()
    c.sent_transcript("t1")
    for frame in s.frames:
        c.feed(frame)
    assert c.ok


# ---------------------------------------------------------------------------- must fail


def mutated(change: Any) -> list[str]:
    frames = copy.deepcopy(happy_path().frames)
    change(frames)
    return check(frames).violations


def find(frames: list[dict[str, Any]], kind: str, n: int = 0) -> dict[str, Any]:
    return [f for f in frames if f["type"] == kind][n]


def test_a_seq_gap_without_resume_is_a_violation() -> None:
    frames = happy_path().frames
    violations = check([frames[0], *frames[2:]]).violations
    assert any("skips" in v for v in violations)


def test_a_repeated_seq_without_resume_is_a_violation() -> None:
    frames = happy_path().frames
    violations = check([*frames[:3], frames[2], *frames[3:]]).violations
    assert any("repeats" in v for v in violations)


def test_an_illegal_transition_is_a_violation() -> None:
    s = Stream()
    s.turn_(50, Stage.HAGGLING)  # GREETING -> HAGGLING skips INQUIRY
    assert any("illegal transition GREETING->HAGGLING" in v for v in check(s.frames).violations)


def test_unforced_closure_from_inquiry_is_a_violation() -> None:
    s = Stream()
    s.turn_(50, Stage.INQUIRY)
    s.turn_(50, Stage.CLOSURE, forced=False)
    assert any("illegal transition INQUIRY->CLOSURE" in v for v in check(s.frames).violations)


def test_a_mood_jump_over_the_limit_is_a_violation() -> None:
    s = Stream()
    s.turn_(70, Stage.INQUIRY)  # +20
    violations = check(s.frames).violations
    assert any("|delta| > 15" in v for v in violations)
    assert any("delta 20 beyond" in v for v in violations)


def test_a_mood_outside_its_band_is_a_violation() -> None:
    def change(frames: list[dict[str, Any]]) -> None:
        find(frames, "reply", 0)["vendor_mood"] = "angry"  # 55 is neutral

    assert any("is not the band of happiness 55" in v for v in mutated(change))


def test_a_mood_event_band_is_checked_too() -> None:
    def change(frames: list[dict[str, Any]]) -> None:
        find(frames, "mood", 0)["vendor_mood"] = "enthusiastic"

    assert any("mood seq" in v and "band" in v for v in mutated(change))


def test_happiness_out_of_range_is_a_violation() -> None:
    s = Stream(happiness=95)
    s.turn_(105, Stage.INQUIRY)
    assert any("outside 0..100" in v for v in check(s.frames).violations)


def test_a_turn_that_skips_is_a_violation() -> None:
    def change(frames: list[dict[str, Any]]) -> None:
        find(frames, "reply", 1)["turn"] = 5

    assert any("does not follow turn" in v for v in mutated(change))


def test_a_closing_reply_must_repeat_the_last_turn() -> None:
    def change(frames: list[dict[str, Any]]) -> None:
        frames[-1]["turn"] += 1

    assert any("is not the last turn" in v for v in mutated(change))


def test_events_after_the_end_are_violations() -> None:
    s = happy_path()
    extra = {"type": "mood", "session_id": SID, "seq": s.seq + 1, "turn": 5,
             "happiness_score": 85, "vendor_mood": "enthusiastic", "delta": 5}
    assert any("after session.ended" in v for v in check([*s.frames, extra]).violations)


def test_a_non_terminal_reply_after_the_end_is_a_violation() -> None:
    def change(frames: list[dict[str, Any]]) -> None:
        frames[-1]["is_terminal"] = False

    assert any("after session.ended is not terminal" in v for v in mutated(change))


def test_a_missing_stage_event_is_a_violation() -> None:
    s = Stream()
    s.turn_(55, Stage.INQUIRY)
    out = s.turn_(60, Stage.HAGGLING)
    stage = out[-1]  # the last event of the stream, so no seq gap gives it away
    violations = check([f for f in s.frames if f is not stage]).violations
    assert any("without a stage event" in v for v in violations)


def test_a_mood_delta_that_disagrees_with_the_reply_is_a_violation() -> None:
    def change(frames: list[dict[str, Any]]) -> None:
        find(frames, "mood", 0)["delta"] = 3

    assert any("moved happiness by 5" in v for v in mutated(change))


def test_a_stage_event_from_the_wrong_stage_is_a_violation() -> None:
    def change(frames: list[dict[str, Any]]) -> None:
        find(frames, "stage", 1)["from"] = "GREETING"

    assert any("but the stage was INQUIRY" in v for v in mutated(change))


def test_a_reply_to_a_transcript_we_never_sent_is_a_violation() -> None:
    s = Stream()
    s.turn_(55, Stage.INQUIRY, reply_to="zzz")
    c = SessionChecker()
    c.sent_transcript("t1")
    for frame in s.frames:
        c.feed(frame)
    assert any("no transcript we sent" in v for v in c.violations)


def test_a_snapshot_without_resume_is_a_violation() -> None:
    s = Stream()
    snapshot = {"type": "snapshot", "session_id": SID, "seq": 0, "state": s.state()}
    assert any("without a resume" in v for v in check([*s.frames, snapshot]).violations)


def test_another_sessions_frame_is_a_violation() -> None:
    frames = happy_path().frames
    stray = copy.deepcopy(frames[1])
    stray["session_id"] = "other"
    assert any("is not" in v for v in check([frames[0], stray]).violations)


def test_a_clients_own_finding_is_a_violation_of_the_session() -> None:
    c = check(happy_path().frames, max_violations=1)
    assert c.ok
    c.client_violation("runner: repeat seq 9 is not the last reply")
    c.client_violation("runner: a second finding")
    assert not c.ok and c.count == 2
    assert c.violations == [f"[{SID[:8]}] runner: repeat seq 9 is not the last reply"]  # kept: the first


# ---------------------------------------------------------------------------- property


@st.composite
def sessions(draw: st.DrawFn) -> Stream:
    """A random legal session: bounded mood steps, legal stage moves, maybe closing replies."""
    s = Stream(happiness=draw(st.integers(0, 100)))
    for _ in range(draw(st.integers(0, 25))):
        if s.ended:
            s.turn_(s.happiness, s.stage)
            continue
        happiness = max(0, min(100, s.happiness + draw(st.integers(-15, 15))))
        options = sorted(TRANSITIONS[s.stage] | {s.stage}, key=lambda x: x.value)
        forced = draw(st.booleans()) and draw(st.booleans())
        stage = Stage.CLOSURE if forced else draw(st.sampled_from(options))
        s.turn_(happiness, stage, forced=forced and s.stage is not Stage.CLOSURE)
    return s


@settings(max_examples=200, deadline=None)
@given(sessions())
def test_every_legal_session_passes(s: Stream) -> None:
    assert check(s.frames).violations == []


@settings(max_examples=200, deadline=None)
@given(sessions(), st.data())
def test_dropping_or_repeating_any_event_is_caught(s: Stream, data: st.DataObject) -> None:
    events = s.frames[1:]
    if not events:
        return
    i = data.draw(st.integers(0, len(events) - 1))
    if data.draw(st.booleans()):
        frames = [s.frames[0], *events[:i], *events[i + 1:]]
        if i == len(events) - 1:
            # Dropping the very last event leaves no later seq to notice the gap; only a turn
            # whose promised mood/stage/end events are missing can be caught, and a closing
            # reply cannot.
            return
    else:
        frames = [s.frames[0], *events[: i + 1], events[i], *events[i + 1:]]
    assert check(frames).violations


@settings(max_examples=100, deadline=None)
@given(sessions(), st.data())
def test_a_replay_from_any_point_passes_while_resuming(s: Stream, data: st.DataObject) -> None:
    events = s.frames[1:]
    cut = data.draw(st.integers(0, len(events)))
    restart = data.draw(st.integers(0, cut))
    c = SessionChecker()
    c.feed(s.frames[0])
    for frame in events[:cut]:
        c.feed(frame)
    c.sent_resume("r")
    for frame in events[restart:]:
        c.feed(frame)
    c.feed({"type": "ack", "session_id": SID, "id": "r"})
    c.finish()
    assert c.violations == [] and c.last_seq == s.seq
