"""A learner bot that follows docs/protocol.md §5 to the letter, so nothing it says is lost.

The load bots (`runner.py`) measure; this one survives a server crash: the crash test
(tests/test_neo4j_failures.py) kills the server under a load of these and checks their records.

It keeps every transcript and scene frame until its `ack`; after any reconnect it sends `resume` with
the last seq it applied and then re-sends every unacknowledged frame, in order, with the same id. It
applies stream events only in seq order (a snapshot replaces its state) and records everything the
tests check afterwards: what was sent, acked (and whether as a duplicate), applied, and refused.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from clients.bots.personas import LearnerView, Persona
from clients.bots.transport import BotError, create_session

FATAL_CLOSES = {4401, 4403, 4404, 4409}
TERMINAL = {"DEAL", "CLOSURE"}


@dataclass
class Sent:
    frame: dict[str, Any]
    first_sent: float
    sends: int = 1
    acked: bool = False
    duplicate: bool | None = None
    acked_epoch: int | None = None  # which connection (1 = the first) delivered the ack
    refused: str | None = None  # an error code that settles the frame for good (session_ended)
    ack_ms: float | None = None  # from the first send to the ack


@dataclass
class ResumingClient:
    http_base: str
    ws_base: str
    persona: Persona
    tag: str
    think: float = 0.0  # seconds between a reply and the next line
    item: str | None = "Tomato"
    max_lines: int = 30
    credential: str = ""  # vouches for the learner `tag` (docs/security.md): the admin key, or a learner token
    session_id: str = ""
    token: str = ""
    sent: OrderedDict[str, Sent] = field(default_factory=OrderedDict)
    applied: list[tuple[str, int]] = field(default_factory=list)  # ("event", seq) or ("snapshot", seq)
    replies: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    closes: list[int | None] = field(default_factory=list)
    epoch: int = 0
    last_seq: int = 0
    view: LearnerView = field(default_factory=LearnerView)
    gaps: int = 0  # events that arrived ahead of last_seq + 1 with no resume outstanding
    dropped: int = 0  # events at or below last_seq (already applied)
    lines: int = 0
    resume_id: str | None = None
    ready_at: float = 0.0
    welcome_at: list[float] = field(default_factory=list)
    refused_until: float = 0.0

    # ------------------------------------------------------------------ facts

    @property
    def transcripts(self) -> list[str]:
        return [fid for fid, s in self.sent.items() if s.frame["type"] == "transcript"]

    def unacked(self) -> list[str]:
        return [fid for fid, s in self.sent.items() if not s.acked and s.refused is None]

    @property
    def finished(self) -> bool:
        return self.view.stage in TERMINAL and not self.unacked() and self.resume_id is None

    # ------------------------------------------------------------------ driving

    async def create(self, retry_unavailable_s: float = 0.0) -> None:
        """Create the session. A draining node refuses new sessions (503) until the load balancer
        sees its /health fail: with `retry_unavailable_s`, try again every 0.2 s for that long."""
        deadline = time.monotonic() + retry_unavailable_s
        while True:
            try:
                body = await create_session(self.http_base, learner_id=self.tag, credential=self.credential)
            except BotError as exc:
                if exc.kind != "http_503" or time.monotonic() >= deadline:
                    raise
                await anyio.sleep(0.2)
                continue
            self.session_id, self.token = body["session_id"], body["player_token"]
            return

    async def run(self, limit: float = 120.0) -> None:
        """Play until the negotiation is over and every frame is acknowledged, reconnecting as needed."""
        deadline = time.monotonic() + limit
        backoff = 0.1
        while not self.finished:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.tag}: not finished after {limit} s (unacked {self.unacked()}, "
                                     f"view {self.view}, closes {self.closes})")
            try:
                async with connect(f"{self.ws_base}/ws/sessions/{self.session_id}?token={self.token}",
                                   subprotocols=["samvad.v1.json"],  # type: ignore[list-item]
                                   open_timeout=5, close_timeout=1, max_queue=None) as ws:
                    backoff = 0.1
                    await self._connection(ws)
                    return
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                self.closes.append(code)
                if code in FATAL_CLOSES:
                    raise AssertionError(f"{self.tag}: closed with {code} ({exc.rcvd})") from exc
            except InvalidStatus as exc:
                raise AssertionError(f"{self.tag}: handshake refused: {exc}") from exc
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                self.closes.append(None)
                del exc
            await anyio.sleep(backoff)
            backoff = min(1.0, backoff * 2)

    async def _send(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        await ws.send(orjson.dumps(frame).decode())

    async def _connection(self, ws: ClientConnection) -> None:
        self.epoch += 1
        welcome = orjson.loads(await ws.recv())
        assert welcome["type"] == "welcome", welcome
        self.welcome_at.append(time.monotonic())
        if self.epoch == 1:
            self.last_seq = int(welcome["seq"])
            self._take_state(welcome["state"])
            if self.item:
                await self._say(ws, {"type": "scene", "id": f"{self.tag}-scene", "object_grabbed": self.item})
        else:
            self.resume_id = f"{self.tag}-resume-{self.epoch}"
            await self._send(ws, {"type": "resume", "last_seq": self.last_seq, "id": self.resume_id})
            for fid in self.unacked():
                entry = self.sent[fid]
                entry.sends += 1
                await self._send(ws, entry.frame)
        while not self.finished:
            if self._may_speak():
                await self._say(ws, {"type": "transcript", "id": f"{self.tag}-t{self.lines + 1}",
                                     "text": self.persona.next_line(self.view)})
                self.lines += 1
            wait = 0.5
            if self.ready_at > time.monotonic():
                wait = self.ready_at - time.monotonic()
            raw = None
            with anyio.move_on_after(wait):
                raw = await ws.recv()
            if raw is not None:
                await self._handle(ws, orjson.loads(raw))
        await ws.close()

    def _may_speak(self) -> bool:
        return (self.view.stage not in TERMINAL and self.resume_id is None and self.lines < self.max_lines
                and self.view.turn >= len(self.transcripts) and time.monotonic() >= self.ready_at
                and time.monotonic() >= self.refused_until)

    async def _say(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        self.sent[frame["id"]] = Sent(frame, time.monotonic())
        await self._send(ws, frame)

    # ------------------------------------------------------------------ events

    def _take_state(self, state: dict[str, Any]) -> None:
        self.view = LearnerView(stage=state["stage"], happiness=state["happiness_score"],
                                counter_price=state.get("vendor_quote"), item=state.get("item"),
                                turn=state["turn"])

    async def _handle(self, ws: ClientConnection, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "ack":
            fid = event["id"]
            if fid == self.resume_id:
                self.resume_id = None
                return
            entry = self.sent.get(fid)
            if entry is not None and not entry.acked:
                entry.acked, entry.duplicate, entry.acked_epoch = True, bool(event["duplicate"]), self.epoch
                entry.ack_ms = (time.monotonic() - entry.first_sent) * 1000
            return
        if kind == "error":
            self.errors.append(event)
            if event.get("code") == "session_ended" and event.get("id") in self.sent:
                self.sent[event["id"]].refused = "session_ended"
                return
            if event.get("code") in ("unavailable", "rate_limited") and event.get("id") in self.sent:
                # Not applied: send it again later with the same id.
                self.refused_until = time.monotonic() + 0.5
                entry = self.sent[event["id"]]
                await anyio.sleep(0.2)
                entry.sends += 1
                await self._send(ws, entry.frame)
            return
        if kind == "snapshot":
            self.last_seq = int(event["seq"])
            self._take_state(event["state"])
            self.applied.append(("snapshot", self.last_seq))
            self.ready_at = time.monotonic() + self.think
            return
        seq = event.get("seq")
        if seq is None or kind == "welcome":
            return  # deltas, pongs
        if seq <= self.last_seq:
            self.dropped += 1
            return
        if seq > self.last_seq + 1:
            if self.resume_id is None:
                self.gaps += 1
                self.resume_id = f"{self.tag}-gap-{seq}"
                await self._send(ws, {"type": "resume", "last_seq": self.last_seq, "id": self.resume_id})
            return
        self.last_seq = seq
        self.applied.append(("event", seq))
        if kind == "reply":
            self.replies.append(event)
            self.view = LearnerView.from_reply(event)
            self.ready_at = time.monotonic() + self.think

    # ------------------------------------------------------------------ checks

    def contiguous(self) -> bool:
        """Every applied event followed the previous one (or the snapshot that reset the count)."""
        last = None
        for kind, seq in self.applied:
            if kind == "event" and last is not None and seq != last + 1:
                return False
            last = seq
        return True
