"""One bot's session, move by move, and the checks the runner makes beyond the checker.

`SessionPlay.run` asks the persona for its next `Move` (personas.py) and carries it out on the
socket until the session ends or the run's time is up:

- `say`: a `transcript`; its `reply` is a turn (the view moves on, the persona thinks), or one
  marked `clarify` when the line was mumbled (not a turn: the same state, and its `ack`);
- `hint`, `repeat`, `undo`, `stop`: a `command`; `silence`; `playback` (a barge-in on the last
  turn reply). Each waits for both its `ack` (by id) and its event (`hint`, `repeat`, `undo`, a
  `reply` marked `nudge`, `heard`, or `session.ended`), in whichever order they come.

Every frame also goes through the `SessionChecker`. The runner checks, on top of it, what only the
client knows (each failure is one more violation of the session):

- a hint's `level` counts the hints asked since the last turn (0, 1, 2, ...); a `repeat` is the
  last turn reply's text exactly; after a hint or a repeat `GET /api/sessions/{id}` shows the
  stage, happiness, turn and standing quote unchanged;
- a `clarify` or `nudge` reply keeps the turn and the standing quote, and only a mumbled line
  (a `confidence`) may draw a `clarify`;
- an `undo` restores what this bot saw before the turn it takes back: stage, happiness, turn,
  standing quote and the vendor's last line; nothing of that turn is left in its transcript;
- a `heard` event echoes the playback, quotes what was heard of the line, and unbinds the quote
  exactly when the reply set a new one whose digits were not heard (docs/protocol.md, barge-in);
- the learner report's `coaching` counts match the hints (by level), repeats, undos, nudges (and
  the timed-out end) and clarify replies this bot drew.

`counts` says what the session exercised (`hint_0`, `hint_1`, `hint_2`, `hint_offered`, `repeat`,
`undo`, `clarify`, `nudge`, `welcome_back`, `heard`, `quote_unbound`, `stop`); the run adds them up
per persona.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection

from clients.bots.checker import SessionChecker
from clients.bots.coach_personas import price_spans
from clients.bots.personas import LearnerView, Move, Persona
from clients.bots.transport import BotError, Wire, http_request, read_until

Match = Callable[[dict[str, Any]], bool]
COMMAND_EVENTS = {"hint": "hint", "repeat": "repeat", "undo": "undo"}
CLARIFY_BELOW = 0.7  # the server's default CONFIDENCE_CLARIFY_THRESHOLD


def price_heard(text: str, price: int, heard_chars: int) -> bool:
    """docs/protocol.md: a price counts as heard when all its digits were (its first mention), and a
    price not written in digits only when the whole line was."""
    spans = price_spans(text, price)
    return spans[0][1] <= heard_chars if spans else heard_chars >= len(text)


class SessionPlay:
    """Plays one session on an open socket; see the module docstring."""

    def __init__(self, *, ws: ClientConnection, wire: Wire, checker: SessionChecker, persona: Persona,
                 view: LearnerView, ids: itertools.count[int], base_url: str, created: dict[str, Any],
                 reply_timeout_s: float, state_checks: bool = True,
                 think: Callable[[float], Awaitable[None]] | None = None,
                 time_left: Callable[[], bool] | None = None,
                 on_turn: Callable[[dict[str, Any], float], None] | None = None) -> None:
        self.ws, self.wire, self.checker, self.persona, self.view = ws, wire, checker, persona, view
        self.ids = ids
        self.base_url = base_url
        self.session_id = str(created["session_id"])
        self.token = str(created["player_token"])
        self.reply_timeout_s = reply_timeout_s
        self.state_checks = state_checks
        self.think = think
        self.time_left = time_left or (lambda: True)
        self.on_turn = on_turn
        self.counts: Counter[str] = Counter()
        self.acked: set[str] = set()
        self.ended: dict[str, Any] | None = None  # the session.ended event, once seen
        self.report: dict[str, Any] | None = None  # the session.report event, once seen
        self.before: dict[int, LearnerView] = {}  # what this bot saw before each turn
        self.hints_asked = 0  # since the last turn

    # ------------------------------------------------------------------ the loop

    async def run(self) -> bool:
        """Play until the session ends (True) or the run's time is up (False)."""
        while self.time_left():
            move = self.persona.next_move(self.view)
            done = await (self.say(move) if move.kind == "say" else self.coach(move))
            if done:
                return True
        return False

    async def say(self, move: Move) -> bool:
        before = self.view
        reply, latency = await self.turn(move.text, move.confidence)
        self.persona.observe(reply)
        if reply.get("mark") is not None:
            if reply["mark"] != "clarify" or move.confidence is None or move.confidence >= CLARIFY_BELOW:
                self.violate(f"a {reply['mark']!r} reply to a line said with confidence {move.confidence}")
            self.same_standing(reply, "clarify")
            await self.ack(str(reply["in_reply_to"]), "transcript ack")
            return False
        self.before[int(reply["turn"])] = before
        self.hints_asked = 0
        if self.on_turn is not None:
            self.on_turn(reply, latency)
        self.view = LearnerView.from_reply(reply)
        if reply["is_terminal"]:
            await self.finish()
            return True
        if self.think is not None:
            await self.think(latency)
        return False

    async def coach(self, move: Move) -> bool:
        """A command, a silence or a playback: send it, then wait for its ack and its event."""
        fid = f"{move.kind[0]}{next(self.ids)}"
        match: Match
        if move.kind in ("hint", "repeat", "undo", "stop"):
            frame: dict[str, Any] = {"type": "command", "id": fid, "name": move.kind}
            kind = COMMAND_EVENTS.get(move.kind, "session.ended")
            match = lambda f: f["type"] == kind and (kind == "session.ended" or f.get("in_reply_to") == fid)  # noqa: E731
        elif move.kind == "silence":
            frame = {"type": "silence", "id": fid}
            match = lambda f: f["type"] == "session.ended" or (  # noqa: E731
                f["type"] == "reply" and f.get("mark") == "nudge" and f.get("in_reply_to") in (None, fid))
        else:
            frame = {"type": "playback", "id": fid, "turn": self.view.turn, "heard_chars": move.heard_chars,
                     "interrupted": move.interrupted}
            match = lambda f: f["type"] == "heard" and f.get("in_reply_to") == fid  # noqa: E731
        await self.wire.send(self.ws, frame)
        event = await self.wait(match, move.kind)
        await self.ack(fid, f"{move.kind} ack")
        self.persona.observe(event)
        if event["type"] == "session.ended":
            self.counts["stop" if move.kind == "stop" else "timed_out"] += 1
            await self.finish()
            return True
        if move.kind == "hint":
            await self.after_hint(event)
        elif move.kind == "repeat":
            await self.after_repeat(event)
        elif move.kind == "undo":
            self.after_undo(event)
        elif move.kind == "silence":
            self.same_standing(event, "nudge")
        else:
            self.after_playback(event, move)
        return False

    async def finish(self) -> None:
        """The session ended: wait for its `session.ended` and `session.report`, and check the counts."""
        if self.ended is None:
            await self.wait(lambda f: f["type"] == "session.ended", "session.ended")
        report = self.report or await self.wait(lambda f: f["type"] == "session.report", "session.report")
        coaching = (report.get("report") or {}).get("coaching")
        c = self.counts
        expected = {"hints": [c["hint_0"], c["hint_1"], c["hint_2"]], "hints_offered": c["hint_offered"],
                    "repeats": c["repeat"], "undos": c["undo"], "unclear": c["clarify"],
                    "timeouts": c["nudge"] + (1 if self.checker.outcome == "timed_out" else 0)}
        got = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in (coaching or {}).items()}
        if {k: got.get(k) for k in expected} != expected:
            self.violate(f"report coaching {got} is not what this bot drew {expected}")

    # ------------------------------------------------------------------ frames

    async def turn(self, text: str, confidence: float | None = None) -> tuple[dict[str, Any], float]:
        frame_id = f"t{next(self.ids)}"
        self.checker.sent_transcript(frame_id)
        frame: dict[str, Any] = {"type": "transcript", "id": frame_id, "text": text}
        if confidence is not None:
            frame["confidence"] = confidence
        sent = time.perf_counter()
        await self.wire.send(self.ws, frame)
        reply = await self.wait(lambda f: f["type"] == "reply" and f.get("in_reply_to") == frame_id, "reply")
        return reply, time.perf_counter() - sent

    async def wait(self, match: Match, what: str) -> dict[str, Any]:
        """Read frames (checking and counting each) until one matches; errors and timeouts raise BotError."""
        def seen(frame: dict[str, Any]) -> None:
            self.checker.feed(frame)
            self.seen(frame)

        return await read_until(self.ws, self.wire, match, limit_s=self.reply_timeout_s, what=what, seen=seen)

    async def ack(self, frame_id: str, what: str) -> None:
        if frame_id not in self.acked:
            await self.wait(lambda f: f["type"] == "ack" and f.get("id") == frame_id, what)

    def seen(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "ack":
            self.acked.add(str(frame.get("id")))
        elif kind == "reply" and frame.get("mark") is not None:
            self.counts[str(frame["mark"])] += 1
        elif kind == "hint":
            level = frame.get("level")
            self.counts["hint_offered" if frame.get("offered") else f"hint_{min(int(level or 0), 2)}"] += 1
        elif kind in ("repeat", "undo"):
            self.counts[kind] += 1
        elif kind == "heard":
            self.counts["heard"] += 1
            self.counts["quote_unbound"] += frame.get("quote_unbound") is True
        elif kind == "session.ended":
            self.ended = frame
        elif kind == "session.report":
            self.report = frame

    # ------------------------------------------------------------------ checks

    def violate(self, message: str) -> None:
        self.checker.client_violation(f"runner: {message}")

    def same_standing(self, reply: dict[str, Any], mark: str) -> None:
        """A reply that is not a turn keeps the turn and the standing quote (the checker sees the rest)."""
        if reply.get("mark") != mark or reply.get("turn") != self.view.turn or (
                reply.get("counter_price") != self.view.counter_price):
            self.violate(f"{mark} reply seq {reply.get('seq')}: mark {reply.get('mark')!r}, turn "
                         f"{reply.get('turn')}, quote {reply.get('counter_price')} after turn {self.view.turn} "
                         f"with quote {self.view.counter_price}")

    async def unchanged(self, event: dict[str, Any]) -> None:
        """After a hint or a repeat the session's state is what this bot last saw."""
        if not self.state_checks:
            return
        status, body = await http_request(self.base_url, "GET", f"/api/sessions/{self.session_id}",
                                          headers={"Authorization": f"Bearer {self.token}"},
                                          limit_s=self.reply_timeout_s)
        if status != 200:
            raise BotError(f"http_{status}", body[:200].decode("utf-8", "replace"))
        state = orjson.loads(body)
        seen = (self.view.stage, self.view.happiness, self.view.turn, self.view.counter_price, False)
        now = (state.get("stage"), state.get("happiness_score"), state.get("turn"), state.get("vendor_quote"),
               state.get("is_terminal"))
        if now != seen or not isinstance(state.get("seq"), int) or state["seq"] < event["seq"]:
            self.violate(f"{event['type']} seq {event['seq']} changed the state: (stage, happiness, turn, "
                         f"quote, terminal) {seen} -> {now}, seq {state.get('seq')}")

    async def after_hint(self, event: dict[str, Any]) -> None:
        if event.get("level") != self.hints_asked or event.get("offered"):
            self.violate(f"hint seq {event['seq']}: level {event.get('level')} (offered "
                         f"{event.get('offered')}) for the hint number {self.hints_asked} since the last turn")
        self.hints_asked += 1
        await self.unchanged(event)

    async def after_repeat(self, event: dict[str, Any]) -> None:
        if event.get("text") != self.view.last_reply or event.get("turn") != self.view.turn:
            self.violate(f"repeat seq {event['seq']}: turn {event.get('turn')} {event.get('text')!r} is not the "
                         f"last reply, turn {self.view.turn} {self.view.last_reply!r}")
        await self.unchanged(event)

    def after_undo(self, event: dict[str, Any]) -> None:
        turn, state = event.get("turn"), event.get("state") or {}
        before = self.before.get(turn) if isinstance(turn, int) else None
        restored = LearnerView.from_state(state)
        if before is None or replace(restored, item=None) != replace(before, item=None):
            self.violate(f"undo seq {event['seq']} of turn {turn}: restored {restored}, but before it was {before}")
        late = [line for line in state.get("transcript") or () if not isinstance(turn, int) or line["turn"] >= turn]
        if late:
            self.violate(f"undo seq {event['seq']} of turn {turn} left {len(late)} lines of it in the transcript")
        self.before = {t: v for t, v in self.before.items() if not isinstance(turn, int) or t < turn}
        self.view = restored
        self.hints_asked = 0

    def after_playback(self, event: dict[str, Any], move: Move) -> None:
        view = self.view
        text = view.last_reply
        echoed = (event.get("turn"), event.get("heard_chars"), event.get("interrupted"), event.get("heard_text"))
        if echoed != (view.turn, move.heard_chars, move.interrupted, text[: move.heard_chars]):
            self.violate(f"heard seq {event['seq']}: (turn, heard_chars, interrupted, heard_text) {echoed} does not "
                         f"echo the playback of turn {view.turn}, {move.heard_chars} of {text!r}")
        before = self.before.get(view.turn)
        quote = view.counter_price
        if before is not None and before.item in (None, view.item) and view.item is not None:
            unheard = quote is not None and not price_heard(text, quote, move.heard_chars)
            unbound = move.interrupted and unheard and quote != before.counter_price
            standing = before.counter_price if unbound else quote
            if (event.get("quote_unbound"), event.get("vendor_quote")) != (unbound, standing):
                self.violate(f"heard seq {event['seq']}: quote_unbound {event.get('quote_unbound')}, vendor_quote "
                             f"{event.get('vendor_quote')}; expected {unbound}, {standing} (quote {quote} after "
                             f"{before.counter_price}, {move.heard_chars} of {text!r} heard)")
        self.view = replace(view, counter_price=event.get("vendor_quote"))
