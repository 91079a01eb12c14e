"""What the learner has heard of the vendor, as the server can tell from what it sent (issue #34).

A client plays `reply.audio` chunks back to back as they come (docs/voice.md, Speech out), so the
server can follow its loudspeaker: each chunk starts when the one before it ends, or when it is
sent if the speaker had gone quiet; the first chunk of another turn's reply starts when it is sent
(a client drops what was left of the last reply, as the Unity client's `VendorVoice` does).
`Playout` keeps that clock for one connection and answers the two questions a barge-in decided on
the server needs: is the vendor speaking now (so the learner's voice goes through the barge-in
decision, voice/barge_in.py), and how many characters of the reply's text had been heard when the
learner cut in (the `heard_chars` of the `playback` the server then makes for him, counted as
clients count them: each piece's `text` and one space after it, and the played share of the piece
playing).

Pure: fed chunks with the time they were sent (seconds of any monotonic clock), asked with `now`.
A filler (`text` "" and not part of the reply) moves the clock but adds no characters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Playout"]

# What a client's buffer adds before a chunk is heard (the browser page schedules 50 ms ahead;
# Unity's streaming clip about as much): the vendor counts as speaking this long after the clock
# runs out, so the tail of his line is not taken for silence.
LATENCY_S = 0.1


@dataclass(slots=True)
class _Piece:
    index: int
    chars: int  # its text's length, 0 for a filler
    start: float  # when its first sample plays
    seconds: float = 0.0  # of audio sent so far


@dataclass(slots=True)
class Playout:
    """The loudspeaker of one connection, as the server follows it."""

    turn: int | None = None  # the turn whose reply is playing (or last played)
    ends_at: float = 0.0  # when the last sample sent finishes playing
    open: bool = False  # a reply's chunks are still coming (its final chunk not sent)
    _pieces: list[_Piece] = field(default_factory=list)

    def sent(self, turn: int, piece: int, text_chars: int, seconds: float, at: float, *, final: bool) -> None:
        """A chunk of `seconds` of piece `piece` of the reply to `turn` left at `at` (a filler is
        piece -1, with no characters)."""
        if turn != self.turn:  # a new reply replaces what is left of the last (clients drop it)
            self.turn, self._pieces, self.ends_at = turn, [], at
        start = max(at, self.ends_at)
        if not self._pieces or self._pieces[-1].index != piece:
            self._pieces.append(_Piece(piece, text_chars, start))
        self._pieces[-1].seconds += seconds
        self.ends_at = start + seconds
        self.open = not final

    def stopped(self) -> None:
        """The vendor was cut off (a barge-in): nothing more of his plays."""
        self.open = False
        self.ends_at = 0.0

    def finished(self) -> None:
        """The client heard the reply to its end (`playback` with `interrupted` false)."""
        self.open = False
        self.ends_at = 0.0

    def in_hand(self, turn: int, now: float) -> float:
        """Seconds of the reply to `turn` sent and not yet played at `now` (0 when another reply's, or
        none, is playing): what the listener has to play while the reply's next piece is asked for."""
        return max(0.0, self.ends_at - now) if turn == self.turn and self.open else 0.0

    def speaking(self, now: float) -> bool:
        return self.open or now < self.ends_at + LATENCY_S

    def heard_chars(self, turn: int, at: float) -> int | None:
        """Characters of the reply to `turn` heard by `at` (None: none of that reply was sent)."""
        if turn != self.turn or not any(p.index >= 0 for p in self._pieces):
            return None
        chars = 0
        for piece in self._pieces:
            if piece.index < 0:
                continue
            played = min(max(at - LATENCY_S - piece.start, 0.0), piece.seconds)
            if piece.seconds and played >= piece.seconds:
                chars += piece.chars + 1
                continue
            if piece.seconds:
                chars += int(piece.chars * played / piece.seconds)
            break
        return chars
