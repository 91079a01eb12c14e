"""An ended session kept for its report, as a few fields and one `bytes` (issue #33).

An ended session stays in memory for `idle_seconds` for its report and a late reconnect. Its actor,
machine, fan-out and negotiation are a few hundred Python objects (12 KiB once the replay ring has
gone); the registry swaps them for an `EndedSession` at its next look once nobody has the session
open (keeping the replay ring beside it until `ended_grace_seconds` have passed; session/registry.py),
and rebuilds an actor from it when someone asks for the session again, as it does from storage
after a restart.

The negotiation is serialised by `to_bytes` and rebuilt exactly by `from_bytes`: the rebuilt one
equals the original field for field (tests/test_session_machine.py checks it after every step of
its random sessions), so the report, the snapshot and a late reconnect's welcome are the same.

Why pickle and zlib, not msgpack: msgpack would need an encoder and a decoder written out for every
record a negotiation holds (history lines, stage visits, undo checkpoints, the ledger, the running
summary, the learner's recall and fluency), kept in step with each field added to them; pickle
round-trips every field of every kind already, and the property test guards it. Pickle's one
danger, running code named in untrusted bytes, does not arise: these bytes are made by this
process and never leave it. What is the server's or a cache, not the session's, is left out (the
limits, the pack, the brain's copies of history lines) and put back or rebuilt on load.
zlib deflates what pickle writes against a preset dictionary, the pickle of a negotiation just
started (`_DICTIONARY`): the module and class names, the field values every session starts with,
which one record alone cannot find again; five turns of the life run take 1.1 KB, not the 1.6 KB
of zlib alone (2.9 KB pickled), in the same 25-30 us.

The registry holds each record packed (`EndedSession.pack`): a plain tuple of strings, numbers,
None and the bytes, the stage and outcome by their values. CPython's collector stops tracking a
tuple that holds only such atoms at the first pass that sees it, so the tens of thousands of
records a busy server keeps are never walked by a pass (issue #33; a slotted instance, like
`EndedSession` itself, is always tracked).
`EndedSession.unpack` makes the record again for a caller; `learner_of`, `stage_of` and
`last_activity_of` read one fact of a packed record without making it.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from schemas.enums import LanguageCode, Level, Outcome, Stage
from schemas.scenario import Scenario, load_scenario
from session.changes import SessionStarted
from session.negotiation import Negotiation
from session.records import TurnRecord
from session.rules import Limits

__all__ = ["EndedSession", "Packed", "from_bytes", "last_activity_of", "last_turn_at", "learner_of", "stage_of",
           "to_bytes"]

# Not the session's: the server's limits (given back on load), the changes already handed to the
# mirror (none, once the actor has taken them), and two caches rebuilt on first use.
_LEFT_OUT = frozenset({"limits", "outbox", "_rule_limits", "_scenario"})
_NEGOTIATION_FIELDS = tuple(f.name for f in fields(Negotiation) if f.name not in _LEFT_OUT)
_RECORD_FIELDS = tuple(f.name for f in fields(TurnRecord) if f.name != "_line")  # `_line`: the brain's copy
COMPRESS_LEVEL = 6  # 1 to 9 differ by under 2 % in size and time here (about 25 us)
WBITS = 12  # a 4 KiB window: the dictionary (about 0.9 KB) and the start of a record
MEM_LEVEL = 4  # a deflate state of about 16 KiB: a smaller window needs no larger


# Each reducer reads its fields with one `attrgetter` call, which makes the tuple in C: with a
# generator of `getattr`s, pickling a session of five turns took 55 us, with it 45 (most of it the
# ten or so turn records; docs/performance.md, "Rule turn at churn", fourth sitting).
_negotiation_values = attrgetter(*_NEGOTIATION_FIELDS)
_record_values = attrgetter(*_RECORD_FIELDS)


def _negotiation(*values: Any) -> Negotiation:
    return Negotiation(**dict(zip(_NEGOTIATION_FIELDS, values, strict=True)))


def _reduce_negotiation(n: Negotiation) -> tuple[Any, tuple[Any, ...]]:
    return _negotiation, _negotiation_values(n)


def _record(*values: Any) -> TurnRecord:
    return TurnRecord(*values)


def _reduce_record(r: TurnRecord) -> tuple[Any, tuple[Any, ...]]:
    return _record, _record_values(r)


_DISPATCH: dict[type, Callable[[Any], Any]] = {
    **copyreg.dispatch_table, Negotiation: _reduce_negotiation, TurnRecord: _reduce_record}


def _pickled(negotiation: Negotiation) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(negotiation)
    return buffer.getvalue()


def _started() -> Negotiation:
    """A negotiation as every session starts (made up ids and times; no clock is read)."""
    started = SessionStarted(session_id="0" * 32, version=1, at=1.8e9, scenario="jaipur-bazaar",
                             learner_id="learner", input_language=LanguageCode.EN_IN,
                             target_language=LanguageCode.EN_IN, level=Level.INTERMEDIATE, stage=Stage.GREETING,
                             happiness=50)
    return Negotiation.started(started, Limits())


# The bytes never leave the process (see the module), so the dictionary may change with the code.
_DICTIONARY = _pickled(_started())[-(1 << WBITS):]


def to_bytes(negotiation: Negotiation) -> bytes:
    """The negotiation as bytes, for `from_bytes` in this process. Its outbox must be empty (the
    actor hands every change to the mirror before anything else reads the session)."""
    if negotiation.outbox:
        raise ValueError("changes not yet handed to the mirror would be lost")
    deflate = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -WBITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY,
                               _DICTIONARY)
    return deflate.compress(_pickled(negotiation)) + deflate.flush()


def last_turn_at(negotiation: Negotiation) -> float | None:
    """When the vendor last spoke; None before the first turn."""
    for line in reversed(negotiation.history):
        if line.role == "vendor":
            return line.at
    return None


def from_bytes(data: bytes, limits: Limits) -> Negotiation:
    """The negotiation `to_bytes` was given, equal field for field, under the server's `limits`."""
    inflate = zlib.decompressobj(-WBITS, zdict=_DICTIONARY)
    negotiation = pickle.loads(inflate.decompress(data) + inflate.flush())  # bytes this process made (see above)
    if not isinstance(negotiation, Negotiation):
        raise TypeError(f"not a negotiation: {type(negotiation).__name__}")
    negotiation.limits = limits
    return negotiation


@dataclass(frozen=True, slots=True)
class EndedSession:
    """What the registry keeps of an ended session nobody has open: what its callers read without
    rebuilding it, under the negotiation's own names (the learner for an erasure, the stage for the
    metrics, the times for eviction, the facts of a lobby row: a lobby's full list rebuilt every
    negotiation, some 50 us each), and the negotiation as bytes for the report and a reconnect."""

    session_id: str
    learner_id: str | None
    stage: Stage
    created_at: float
    last_activity: float  # the actor's: when its idle time for eviction began
    state: bytes  # `to_bytes(negotiation)`
    scenario_name: str
    scenario_version: int
    happiness: int
    turn: int
    item: str | None
    quote: int | None
    last_offer: int | None
    outcome: Outcome | None
    updated_at: float
    last_turn_at: float | None  # the vendor's last line

    @classmethod
    def of(cls, negotiation: Negotiation, last_activity: float) -> EndedSession:
        n = negotiation
        if not n.is_terminal:
            raise ValueError("only an ended session is kept as a record")
        return cls(session_id=n.session_id, learner_id=n.learner_id, stage=n.stage, created_at=n.created_at,
                   last_activity=last_activity, state=to_bytes(n), scenario_name=n.scenario_name,
                   scenario_version=n.scenario_version, happiness=n.happiness, turn=n.turn, item=n.item,
                   quote=n.quote, last_offer=n.last_offer, outcome=n.outcome, updated_at=n.updated_at,
                   last_turn_at=last_turn_at(n))

    @property
    def scenario(self) -> Scenario:
        return load_scenario(self.scenario_name, self.scenario_version)

    @property
    def is_terminal(self) -> bool:
        return True  # only an ended session is kept as a record

    def negotiation(self, limits: Limits) -> Negotiation:
        """The negotiation as it ended (a new copy each call)."""
        return from_bytes(self.state, limits)

    def pack(self) -> Packed:
        """The record as a tuple of atoms, which the collector stops tracking (see the module)."""
        values = [getattr(self, name) for name in _FIELDS]
        values[_STAGE] = self.stage.value
        values[_OUTCOME] = None if self.outcome is None else self.outcome.value
        return tuple(values)

    @classmethod
    def unpack(cls, packed: Packed) -> EndedSession:
        """The record `pack` was given."""
        values = list(packed)
        values[_STAGE] = Stage(values[_STAGE])
        values[_OUTCOME] = None if values[_OUTCOME] is None else Outcome(values[_OUTCOME])
        return cls(*values)


Packed = tuple[Any, ...]  # `EndedSession.pack()`: the fields in order, the enums by value
_FIELDS = tuple(f.name for f in fields(EndedSession))
_STAGE, _OUTCOME = _FIELDS.index("stage"), _FIELDS.index("outcome")
_LEARNER, _LAST_ACTIVITY = _FIELDS.index("learner_id"), _FIELDS.index("last_activity")


def learner_of(packed: Packed) -> str | None:
    learner: str | None = packed[_LEARNER]
    return learner


def stage_of(packed: Packed) -> Stage:
    return Stage(packed[_STAGE])


def last_activity_of(packed: Packed) -> float:
    at: float = packed[_LAST_ACTIVITY]
    return at
