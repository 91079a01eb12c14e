"""`Turn`: what one `OpenAIBrain.propose` call has done so far.

One `Turn` is made per `propose` call and shared by the brain (`brain.llm`) and the model calls
it makes (`brain.transport`). It holds the turn's deadline on the anyio clock, the counters and
timings that become its `Ledger`, and the text pushed to the session's `DeltaSink` that has not
been withdrawn, so that whichever step finds the streamed text will not stand can withdraw it.

Deltas are grouped (issue #14). The first piece of text goes to the sink at once: it is what the
learner waits for. After it, pieces are held and sent together when the held text ends a word
(a space or a punctuation mark) and `interval_s` (AI_DELTA_INTERVAL_MS, 40 ms) has passed since
the last delta, or when three intervals have passed whatever it ends with; `flush` sends what is
held when the reply's text is complete. A model writes a token every 20 ms or so, so a turn sends
a handful of deltas instead of one per token, each encoded and written to every connection of
the session; the joined deltas are the same text.
"""

from __future__ import annotations

import math
import re
import time
from typing import Protocol

import anyio

from brain.prompt import PROMPT_VERSION
from schemas.brain import DeltaSink, Ledger

DELTA_INTERVAL_MS = 40
_WORD_END = frozenset(" \n\t.,!?;:।")
# A piece that ends a clause or a sentence goes out at once: the session says the words a clause at
# a time once each is whole (session/spoken.py), and the server speaks each sentence as soon as it
# is whole (docs/voice.md); holding its end for the interval would delay the vendor's voice.
_CLAUSE_END = re.compile(r"[.!?\u0964\u2026,;:\u2013\u2014][\"')\]\u201d\u2019*_`~]*\s")
# The voice speaks a reply's first clause once it holds this many words, or its first sentence
# (voice/speaker.py's FIRST_CLAUSE_WORDS; tests/test_vendor_voice.py holds them equal): the
# transport reads the model eagerly until that piece is out, and for a voice until it can be cut
# (`clause_out`).
FIRST_PIECE_WORDS = 4


def _first_piece(text: str, *, cut: bool) -> bool:
    """Whether `text` holds the voice's first piece (a sentence, or a clause of `FIRST_PIECE_WORDS`)
    and, with `cut`, the clause or sentence after it, which the voice needs to cut the piece.

    The session's gate lets a clause's mark out only with the next clause (session/spoken.py, rule
    6), and a sentence's stop is cut with the space that comes with the next one: until the unit
    after the first piece is whole the piece cannot be spoken, however long its audio has been ready.
    Resting between reads there (40 ms) made the first audio wait for what was already in the kernel.
    """
    for match in _CLAUSE_END.finditer(text):
        if text[match.start()] in ".!?\u0964\u2026" or len(text[:match.start()].split()) >= FIRST_PIECE_WORDS:
            return not cut or _CLAUSE_END.search(text, match.end()) is not None
    return False


class Asked(Protocol):
    """What a call is for, as the log needs it: a `BrainRequest`, or a `SummaryAsk` (brain/summary.py)."""

    @property
    def session_id(self) -> str: ...

    @property
    def turn(self) -> int: ...


class Turn:
    """What one `propose` call has done so far: counters, timings and the text on the wire."""

    def __init__(self, request: Asked, sink: DeltaSink | None, deadline: float,
                 interval_s: float = DELTA_INTERVAL_MS / 1000) -> None:
        self.request = request
        self.sink = sink
        self.deadline = deadline  # anyio clock
        self.started = time.perf_counter()
        self.llm_calls = 0
        self.retries = 0
        self.corrective_asks = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.first_token_ms: float | None = None
        self.first_delta_ms: float | None = None
        self.live: list[str] = []  # pushed to the sink and not withdrawn
        self.held: list[str] = []  # pushed by the transport, not sent to the sink yet
        self.tail = ""  # the last character pushed
        # The first piece went to the sink (and, for a voice, the unit after it: it can be cut).
        self.clause_out = False
        self.spoken = sink is not None and sink.spoken
        self.interval_s = interval_s
        self.sent_at = 0.0  # perf_counter of the last delta
        self.streamed = False
        self.waiting: anyio.CancelScope | None = None  # the current attempt's wait for its first token
        self.head_sent = False  # the decision's numbers and stage went to the sink

    @property
    def remaining(self) -> float:
        return self.deadline - anyio.current_time()

    def tokens_flowing(self) -> None:
        """The first token is in: the attempt's first-token limit no longer applies."""
        if self.waiting is not None:
            self.waiting.deadline = math.inf

    def log_extra(self, **more: object) -> dict[str, object]:
        return {"session_id": self.request.session_id, "turn": self.request.turn,
                "prompt_version": PROMPT_VERSION, **more}

    def add_usage(self, usage: object) -> None:
        if isinstance(usage, dict):
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)

    async def push(self, text: str) -> None:
        if self.sink is None or not text:
            return
        now = time.perf_counter()
        if self.first_delta_ms is None:
            self.first_delta_ms = round((now - self.started) * 1000, 3)
            self.tail = text[-1]
            await self._send(text, now)  # the first words never wait
            self.clause_out = _first_piece(text, cut=self.spoken)
            return
        # A clause ends at its mark and the space after it, which may come in the next piece: the
        # text up to that space goes at once, the rest of the piece waits as any piece does.
        prev, self.tail = self.tail, text[-1]
        cut = 0
        for match in _CLAUSE_END.finditer(prev + text):
            cut = match.end() - len(prev)
        if cut > 0:
            self.held.append(text[:cut])
            await self._send("".join(self.held), now)
            self.held.clear()
            self.clause_out = self.clause_out or _first_piece("".join(self.live), cut=self.spoken)
            text = text[cut:]
            if not text:
                return
        self.held.append(text)
        waited = now - self.sent_at
        if waited >= self.interval_s and (text[-1] in _WORD_END or waited >= 3 * self.interval_s):
            await self._send("".join(self.held), now)
            self.held.clear()

    async def flush(self) -> None:
        """Send what is held: the reply's text is complete (or the stream ended)."""
        if self.held and self.sink is not None:
            text = "".join(self.held)
            self.held.clear()
            await self._send(text, time.perf_counter())

    async def text_done(self) -> None:
        """The reply's text is complete: its last sentence can be spoken before the decision is."""
        if self.sink is not None and self.live:
            await self.sink.end()

    async def decided(self, head: dict[str, object]) -> None:
        """The model has written the decision's numbers and stage: the session can rule on them."""
        self.head_sent = True
        if self.sink is not None:
            await self.sink.decided(dict(head))

    async def _send(self, text: str, now: float) -> None:
        assert self.sink is not None
        self.live.append(text)
        self.streamed = True
        self.sent_at = now
        await self.sink.delta(text)

    async def withdraw(self, reason: str) -> None:
        self.held.clear()
        if self.sink is not None and (self.live or self.head_sent):
            await self.sink.withdraw(reason)  # the numbers go too: a new attempt writes its own
            self.live.clear()
        self.head_sent = False

    def ledger(self) -> Ledger:
        return Ledger(
            llm_calls=self.llm_calls, retries=self.retries, corrective_asks=self.corrective_asks,
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            first_token_ms=self.first_token_ms, first_delta_ms=self.first_delta_ms,
            brain_ms=round((time.perf_counter() - self.started) * 1000, 3),
            prompt_version=PROMPT_VERSION,
        )
