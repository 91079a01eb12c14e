"""The checks of the coaching events (docs/coaching.md), a part of `SessionChecker`.

- `hint`: for the next turn, with a level and the kind that level has; changes nothing.
- `repeat`: the last turn's line again; changes nothing.
- `undo`: takes back the last answered turn; its state must be exactly what this connection saw
  before that turn (stage, happiness, turn), and the checker goes on from it.
- `heard`: a barge-in report for an answered turn; changes nothing but (maybe) the quote.
- a reply marked `clarify`, `nudge` or `welcome_back` is not a turn: the same turn, the same
  happiness and stage, not terminal.
"""

from __future__ import annotations

from typing import Any

from schemas.enums import Stage

STAGES = {s.value: s for s in Stage}
MAX_CARDS = 6
UNDO_DEPTH = 3
SPONTANEOUS = frozenset({"nudge", "welcome_back"})  # replies no learner frame asked for
MARKS = frozenset({"clarify", *SPONTANEOUS})
KINDS = ("contextual", "structural", "reveal")


class CoachingChecks:
    """Tips, the report and the coaching events; `SessionChecker` holds the state they read."""

    turn: int
    stage: Stage | None
    happiness: int | None
    ended: bool
    outcome: str | None
    reported: bool
    _tips_turn: int
    _expect_mood: int | None
    _expect_stage: tuple[Stage, Stage] | None
    _expect_end: bool
    _before_turn: list[tuple[int, Stage | None, int | None]]  # (turn, stage, happiness) before each

    def _violate(self, message: str) -> None:
        raise NotImplementedError

    def _close_turn(self, why: str) -> None:
        raise NotImplementedError

    def _load_state(self, state: Any, seq: Any, kind: str) -> None:
        raise NotImplementedError

    def _tips(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if frame.get("turn") != self.turn or self.turn == 0:
            self._violate(f"tips seq {seq}: turn {frame.get('turn')} is not the answered turn {self.turn}")
        if self._tips_turn == self.turn:
            self._violate(f"tips seq {seq}: a second tips event for turn {self.turn}")
        self._tips_turn = self.turn
        if self._expect_mood is not None or self._expect_stage is not None or self._expect_end:
            self._violate(f"tips seq {seq} came before the turn's mood, stage or end event")
        cards = frame.get("cards")
        if not isinstance(cards, list) or not 1 <= len(cards) <= MAX_CARDS:
            self._violate(f"tips seq {seq}: {len(cards) if isinstance(cards, list) else cards!r} cards, "
                          f"not 1..{MAX_CARDS}")
            return
        for card in cards:
            grounded, sources = card.get("grounded"), card.get("source_chunk_ids")
            if not card.get("body") or not card.get("title"):
                self._violate(f"tips seq {seq}: a card without a title or body")
            if grounded is True and (card.get("type") != "coaching" or not sources):
                self._violate(f"tips seq {seq}: grounded card {card.get('card_id')} without its sources")
            if grounded is False and (card.get("type") != "generic" or sources or len(cards) != 1):
                self._violate(f"tips seq {seq}: an ungrounded card that is not the one generic card")


    def _report(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if not self.ended:
            self._violate(f"session.report seq {seq} before session.ended")
        if self.reported:
            self._violate(f"session.report seq {seq}: a second report")
        self.reported = True
        report = frame.get("report")
        if not isinstance(report, dict):
            self._violate(f"session.report seq {seq} without a report")
            return
        if report.get("outcome") != self.outcome or report.get("turns") != self.turn:
            self._violate(f"session.report seq {seq}: outcome {report.get('outcome')!r}, turns "
                          f"{report.get('turns')} for a session that ended {self.outcome!r} at turn {self.turn}")
        score = report.get("score")
        if not isinstance(score, int) or not 0 <= score <= 100 or len(report.get("suggestions") or ()) != 3:
            self._violate(f"session.report seq {seq}: score {score!r} or suggestions out of shape")


    def _repeat(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if self.ended:
            self._violate(f"repeat seq {seq} after session.ended")
        if not isinstance(frame.get("text"), str) or not frame.get("text"):
            self._violate(f"repeat seq {seq} without the line")
        if frame.get("turn") != self.turn:
            self._violate(f"repeat seq {seq}: turn {frame.get('turn')} is not the last turn {self.turn}")

    def _marked_reply(self, frame: dict[str, Any], turn: Any, score: int | None, stage: Stage | None) -> None:
        seq, mark = frame.get("seq"), frame.get("mark")
        if mark not in MARKS:
            self._violate(f"reply seq {seq}: unknown mark {mark!r}")
        if self.ended:
            self._violate(f"{mark} reply seq {seq} after session.ended")
        if turn != self.turn or frame.get("is_terminal") is not False:
            self._violate(f"{mark} reply seq {seq}: turn {turn} (last {self.turn}) or terminal")
        if (score is not None and self.happiness is not None and score != self.happiness) or (
                stage is not None and self.stage is not None and stage is not self.stage):
            self._violate(f"{mark} reply seq {seq} changed the happiness or the stage")

    def _hint(self, frame: dict[str, Any]) -> None:
        seq, level = frame.get("seq"), frame.get("level")
        if self.ended:
            self._violate(f"hint seq {seq} after session.ended")
        if frame.get("turn") != self.turn + 1:
            self._violate(f"hint seq {seq}: for turn {frame.get('turn')}, not the next turn {self.turn + 1}")
        if not isinstance(level, int) or level < 0 or frame.get("kind") != KINDS[min(level, 2)]:
            self._violate(f"hint seq {seq}: level {level!r} with kind {frame.get('kind')!r}")
        if not frame.get("text") or (isinstance(level, int) and level >= 1 and not frame.get("english")):
            self._violate(f"hint seq {seq}: level {level} without its text or English")

    def _undo(self, frame: dict[str, Any]) -> None:
        seq, turn = frame.get("seq"), frame.get("turn")
        self._close_turn(f"undo seq {seq}")
        if self.ended:
            self._violate(f"undo seq {seq} after session.ended")
        if turn != self.turn:
            self._violate(f"undo seq {seq}: takes back turn {turn}, but the last answered turn is {self.turn}")
        state = frame.get("state")
        before = next((b for b in reversed(self._before_turn) if b[0] == turn), None)
        if isinstance(state, dict) and before is not None:
            _, stage, happiness = before
            if state.get("turn") != before[0] - 1 or (stage is not None and state.get("stage") != stage.value) or (
                    happiness is not None and state.get("happiness_score") != happiness):
                self._violate(f"undo seq {seq}: state (turn {state.get('turn')}, {state.get('stage')}, "
                              f"{state.get('happiness_score')}) is not what it was before turn {turn} "
                              f"({before[0] - 1}, {stage.value if stage else None}, {happiness})")
        self._before_turn = [b for b in self._before_turn if b[0] < (turn if isinstance(turn, int) else 0)]
        tips_turn = self._tips_turn
        self._load_state(state, seq, "undo")
        self._tips_turn = min(tips_turn, self.turn)  # the next turn's tips are due again

    def _heard(self, frame: dict[str, Any]) -> None:
        seq, turn = frame.get("seq"), frame.get("turn")
        if not isinstance(turn, int) or not 1 <= turn <= self.turn:
            self._violate(f"heard seq {seq}: turn {turn!r} is not an answered turn (last {self.turn})")
        heard, text = frame.get("heard_chars"), frame.get("heard_text")
        if not isinstance(heard, int) or not isinstance(text, str) or len(text) != heard:
            self._violate(f"heard seq {seq}: heard_chars {heard!r} does not match its heard_text")
