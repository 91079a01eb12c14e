"""The runner's own checks (clients/bots/play.py) against a scripted fake server: a correct stream
passes, and each coaching event the fake gets wrong is caught, though the invariant checker alone
would let it pass. The coaching personas' moves, without a server."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from typing import Any

import orjson
import pytest

from clients.bots.checker import SessionChecker
from clients.bots.coach_personas import Barger, Hinter, Mumbler, Undoer, price_spans
from clients.bots.personas import LearnerView, Move, Persona
from clients.bots.play import SessionPlay, price_heard
from clients.bots.transport import Wire
from session.rules import mood_for

pytestmark = pytest.mark.anyio
SID = "f" * 32
HAPPY = 50


class FakeServer:
    """Answers a bot's frames as the real server would, for a session that never changes stage or
    happiness: turn n quotes 200 - 10n, in a line where the price comes after a few words.
    `faults` names what it gets wrong."""

    def __init__(self, *faults: str) -> None:
        self.faults = set(faults)
        self.inbox: asyncio.Queue[str] = asyncio.Queue()
        self.subprotocol = "samvad.v1.json"
        self.seq = self.turn = 0
        self.quote: int | None = None
        self.lines: list[dict[str, Any]] = []  # the transcript
        self.checkpoints: list[tuple[int | None, list[dict[str, Any]]]] = []
        self.hint_level = 0
        self.counts: Counter[str] = Counter()
        self.emit({"type": "welcome", "role": "player", "seq": 0, "state": self.state()})

    def state(self) -> dict[str, Any]:
        return {"stage": "GREETING", "happiness_score": HAPPY, "vendor_mood": mood_for(HAPPY).value,
                "turn": self.turn, "seq": self.seq, "is_terminal": False, "outcome": None, "item": "Tomato",
                "vendor_quote": self.quote, "transcript": list(self.lines)}

    def emit(self, frame: dict[str, Any], *, sequenced: bool = False) -> None:
        if sequenced:
            self.seq += 1
            frame["seq"] = self.seq
        self.inbox.put_nowait(orjson.dumps({"session_id": SID, **frame}).decode())

    def reply(self, text: str, in_reply_to: str | None, mark: str | None = None) -> None:
        self.emit({"type": "reply", "turn": self.turn, "text": text, "happiness_score": HAPPY,
                   "negotiation_state": "GREETING", "vendor_mood": mood_for(HAPPY).value,
                   "counter_price": self.quote, "is_terminal": False, "in_reply_to": in_reply_to,
                   "item": "Tomato", "mark": mark}, sequenced=True)

    async def recv(self) -> str:
        return await self.inbox.get()

    async def send(self, data: str | bytes, text: bool = False) -> None:
        frame = orjson.loads(data)
        fid = frame.get("id")
        self.emit({"type": "ack", "id": fid, "duplicate": False})
        getattr(self, "on_" + frame.get("name", frame["type"]))(frame)

    def on_scene(self, frame: dict[str, Any]) -> None:
        pass

    def on_transcript(self, frame: dict[str, Any]) -> None:
        if frame.get("confidence") is not None:
            self.counts["unclear"] += 1
            if "clarify_moves_quote" in self.faults:
                self.quote = (self.quote or 0) + 5
            self.reply("Kya? Phir se boliye.", frame["id"], "clarify")
            return
        self.checkpoints.append((self.quote, list(self.lines)))
        self.turn += 1
        self.quote = 200 - 10 * self.turn
        text = f"Acha ji, for you {self.quote} rupees."
        self.lines += [{"turn": self.turn, "role": "learner", "text": frame["text"]},
                       {"turn": self.turn, "role": "vendor", "text": text}]
        self.hint_level = 0
        self.reply(text, frame["id"])
        self.emit({"type": "tips", "turn": self.turn, "cards": [
            {"card_id": "g", "title": "Tip", "body": "Smile.", "type": "generic", "grounded": False,
             "source_chunk_ids": []}]}, sequenced=True)

    def on_hint(self, frame: dict[str, Any]) -> None:
        level = self.hint_level + (1 if "hint_skips_a_level" in self.faults else 0)
        self.counts[f"hint_{min(level, 2)}"] += 1
        self.hint_level += 1
        self.emit({"type": "hint", "turn": self.turn + 1, "level": level,
                   "kind": ("contextual", "structural", "reveal")[min(level, 2)], "text": "Bolo: 90 mein de do?",
                   "english": "Say: give it for 90?", "in_reply_to": frame["id"]}, sequenced=True)

    def on_repeat(self, frame: dict[str, Any]) -> None:
        self.counts["repeats"] += 1
        text = self.lines[-1]["text"] + ("!" if "repeat_changes_a_word" in self.faults else "")
        self.emit({"type": "repeat", "turn": self.turn, "text": text, "in_reply_to": frame["id"]}, sequenced=True)

    def on_undo(self, frame: dict[str, Any]) -> None:
        self.counts["undos"] += 1
        undone = self.turn
        self.quote, self.lines = self.checkpoints.pop()
        self.turn -= 1
        if "undo_keeps_the_quote" in self.faults:
            self.quote = 200 - 10 * undone
        self.hint_level = 0
        self.emit({"type": "undo", "turn": undone, "state": {**self.state(), "seq": self.seq + 1},
                   "in_reply_to": frame["id"]}, sequenced=True)

    def on_playback(self, frame: dict[str, Any]) -> None:
        text, heard = self.lines[-1]["text"], frame["heard_chars"]
        before = self.checkpoints[-1][0]
        unbound = frame["interrupted"] and self.quote is not None and not price_heard(text, self.quote, heard)
        if "heard_never_unbinds" in self.faults:
            unbound = False
        if unbound:
            self.quote = before
        self.emit({"type": "heard", "turn": frame["turn"], "heard_chars": heard, "interrupted": frame["interrupted"],
                   "heard_text": text[:heard], "quote_unbound": unbound, "vendor_quote": self.quote,
                   "in_reply_to": frame["id"]}, sequenced=True)

    def on_silence(self, frame: dict[str, Any]) -> None:
        self.counts["timeouts"] += 1
        self.reply("Bolo bhaiya?", None, "nudge")

    def on_stop(self, frame: dict[str, Any]) -> None:
        self.emit({"type": "stage", "turn": self.turn, "from": "GREETING", "to": "CLOSURE", "forced": True},
                  sequenced=True)
        summary = {"outcome": "stopped", "turns": self.turn}
        self.emit({"type": "session.ended", "outcome": "stopped", "summary": summary}, sequenced=True)
        c = self.counts
        coaching = {"hints": [c["hint_0"], c["hint_1"], c["hint_2"]], "hints_offered": 0, "repeats": c["repeats"],
                    "undos": c["undos"], "timeouts": c["timeouts"], "unclear": c["unclear"]}
        if "report_miscounts" in self.faults:
            coaching["repeats"] += 1
        self.emit({"type": "session.report", "report": {"outcome": "stopped", "turns": self.turn, "score": 40,
                                                        "suggestions": ["a", "b", "c"], "coaching": coaching}},
                  sequenced=True)


class Script(Persona):
    """Plays the moves it is given, then stops the session."""

    name = "script"

    def __init__(self, moves: list[Move]) -> None:
        super().__init__()
        self.moves = list(moves)

    def next_move(self, view: LearnerView) -> Move:
        return self.moves.pop(0) if self.moves else Move("stop")


SAY = Move(text="Namaste bhaiya, tamatar kitne ka hai?")


async def play(moves: list[Move], *faults: str, persona: Persona | None = None) -> tuple[SessionPlay, FakeServer]:
    server = FakeServer(*faults)
    checker = SessionChecker(session_id=SID)
    game = SessionPlay(ws=server, wire=Wire(False), checker=checker, persona=persona or Script(moves),  # type: ignore[arg-type]
                       view=LearnerView(), ids=itertools.count(1), base_url="http://127.0.0.1:9",
                       created={"session_id": SID, "player_token": "x"}, reply_timeout_s=2.0, state_checks=False)
    welcome = await game.wait(lambda f: f["type"] == "welcome", "welcome")
    game.view = LearnerView.from_state(welcome["state"])
    assert await game.run() is True
    checker.finish()
    return game, server


EVERYTHING = [SAY, Move("hint"), Move("hint"), Move("hint"), Move("repeat"), SAY, Move("undo"), Move("repeat"),
              SAY, Move("playback", heard_chars=3), SAY, Move("playback", heard_chars=20),
              Move(text="hmm", confidence=0.3), Move("silence")]


async def test_a_correct_server_passes_every_check_and_the_moves_are_counted() -> None:
    game, _ = await play(EVERYTHING)
    assert game.checker.violations == []
    assert game.counts == Counter({"hint_0": 1, "hint_1": 1, "hint_2": 1, "repeat": 2, "undo": 1, "heard": 2,
                                   "quote_unbound": 1, "clarify": 1, "nudge": 1, "stop": 1})


@pytest.mark.parametrize(("fault", "caught"), [
    ("hint_skips_a_level", "runner: hint seq"),
    ("repeat_changes_a_word", "runner: repeat seq"),
    ("undo_keeps_the_quote", "runner: undo seq"),
    ("heard_never_unbinds", "runner: heard seq"),
    ("clarify_moves_quote", "runner: clarify reply"),
    ("report_miscounts", "runner: report coaching"),
])
async def test_each_coaching_fault_is_caught_by_the_runner(fault: str, caught: str) -> None:
    game, _ = await play(EVERYTHING, fault)
    violations = game.checker.violations
    assert violations and caught in violations[0], violations
    assert all("runner: " in v for v in violations), violations  # the invariant checker saw nothing wrong


async def test_a_clarify_for_a_clear_line_is_a_violation() -> None:
    server = FakeServer()
    server.on_transcript = lambda frame: FakeServer.on_transcript(server, {**frame, "confidence": 0.9})  # type: ignore[method-assign]
    checker = SessionChecker(session_id=SID)
    game = SessionPlay(ws=server, wire=Wire(False), checker=checker, persona=Script([SAY]),  # type: ignore[arg-type]
                       view=LearnerView(), ids=itertools.count(1), base_url="http://127.0.0.1:9",
                       created={"session_id": SID, "player_token": "x"}, reply_timeout_s=1.0, state_checks=False)
    await game.wait(lambda f: f["type"] == "welcome", "welcome")
    await game.say(SAY)
    assert any("a 'clarify' reply to a line said with confidence None" in v for v in checker.violations)


def test_price_heard_follows_the_protocol() -> None:
    text = "For you, 1,200 yen, and 120 for the small one."
    assert not price_heard(text, 1200, text.index("1,200") + 4) and price_heard(text, 1200, text.index(" yen"))
    assert not price_heard(text, 120, text.index("120") + 2) and price_heard(text, 120, text.index(" for the"))
    assert not price_heard("Dedh sau, ji.", 150, 12) and price_heard("Dedh sau, ji.", 150, 13)
    assert price_spans("20 or 120 or 1,120", 20) == [(0, 2)]


def test_the_hinter_asks_more_hints_as_it_goes_and_says_the_reveal() -> None:
    hinter = Hinter()
    view = LearnerView(stage="HAGGLING", counter_price=150, turn=2, last_reply="150 rupees")
    said = []
    for _ in range(3):
        hints = 0
        while (move := hinter.next_move(view)).kind == "hint":
            hinter.observe({"type": "hint", "level": hints, "text": f"line at level {hints}"})
            hints += 1
        said.append((hints, move.text))
    assert [hints for hints, _ in said] == [1, 2, 3]
    assert said[2][1] == "line at level 2" and "level" not in said[0][1] + said[1][1]


def test_the_undoer_lowballs_undoes_repeats_and_offers_better() -> None:
    undoer = Undoer()
    quoted = LearnerView(stage="INQUIRY", counter_price=200, turn=2, last_reply="200 rupees")
    assert undoer.next_move(LearnerView()).kind == "say" and undoer.next_move(LearnerView(turn=1)).kind == "say"
    assert undoer.next_move(quoted).kind == "repeat"
    lowball = undoer.next_move(quoted)
    assert lowball.kind == "say" and " 30 " in lowball.text  # 15 % of 200: an insult
    after = LearnerView(stage="HAGGLING", counter_price=190, turn=3, last_reply="190")
    assert undoer.next_move(after).kind == "undo"
    undoer.observe({"type": "undo"})
    assert undoer.next_move(quoted).kind == "repeat"  # what did he say before that?
    better = undoer.next_move(quoted)
    assert better.kind == "say" and undoer.offer == 60 and "60" in better.text


def test_the_mumbler_says_it_again_only_when_asked_and_the_barger_cuts_before_the_digits() -> None:
    mumbler = Mumbler()
    mumbler.next_move(LearnerView())
    mumbled = mumbler.next_move(LearnerView(turn=1))
    assert mumbled.confidence == 0.3
    mumbler.observe({"type": "reply", "mark": "clarify"})
    again = mumbler.next_move(LearnerView(turn=1))
    assert again.text == mumbled.text and again.confidence is None
    barger = Barger()
    odd = LearnerView(turn=1, counter_price=150, last_reply="For you, 150 rupees a kilo.")
    move = barger.next_move(odd)
    assert (move.kind, move.heard_chars, move.interrupted) == ("playback", 9, True)
    assert barger.next_move(odd).kind == "say"  # once per reply
    even = LearnerView(turn=2, counter_price=120, last_reply="Acha, 120 then.")
    assert barger.next_move(even).heard_chars == len("Acha, 120")
