"""Where learner profiles live: the `LearnerStore` protocol, and the in-memory store.

Two stores meet the protocol: `MemoryLearnerStore` here, the embedded default, which keeps the
profiles for the life of the process and loses them on a restart, and `Neo4jLearnerStore`
(`server/learners/graph.py`), which keeps them in the graph beside the sessions. Both fold with
`server.learners.profile.fold`, so they hold the same profile for the same sessions, and both
answer the progress series with the report's definitions of score and discount.

Errors: a store that cannot be reached raises `LearnerStoreUnavailable`; everything else is a bug.

The in-memory store keeps each profile, progress point and review item as packed JSON, and makes the
model again on read, as the registry keeps an ended session (session/ended.py; issue #33). Kept as
models, a learner's profile, the figures of each of their sessions and each review item with its
history were hundreds of objects that CPython's collector tracks and that the planned full pass
walks, and some 30 KiB per new learner of five turns (docs/performance.md); bytes in dicts of
strings and tuples of bytes are not tracked at all, about 6.5 KB of JSON for that learner, 1.3 KB
once deflated against a dictionary of one value of each kind (server/learners/packing.py). JSON through
pydantic's own serializer, not pickle: two to four times faster both ways for these models (a
profile of one session 4.5 us out and 7 us back, against 14 and 19; of 180 sessions 111 and 200
us against 385 and 351), and a third smaller. A record reads and writes the learner's profile and
the items the session touched, but not the items' review histories (up to `HISTORY_KEPT` reviews
each, most of an item's JSON once a learner has played a few sessions): those are kept apart as
fixed records (`packing.pack_history`) that a session's end appends to without reading, and only a
caller that asks for whole items (`items`, `due_items`) gets them as models (issue #33,
docs/performance.md, "Rule turn at churn", fourth sitting). The items without their histories are
deflated a few together (`BLOCK`), not each alone: deflating a value of 1 KB cost about as much
as deflating several, and a session's end deflates again only the blocks of the items it changed
(fifth sitting). Only the progress point of a session is kept: it is all that `progress` reads of it.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Mapping
from typing import Protocol, cast

from schemas.learner import LearnerProfile, LearnerRow, ProgressPoint, SessionFigures
from schemas.review import ReviewItem
from server.learners.packing import (
    keep_last,
    pack,
    pack_block,
    pack_history,
    reviewed_in,
    unpack,
    unpack_block,
    unpack_history,
)
from server.learners.profile import fold, progress_point, trend
from server.learners.reviews import HISTORY_KEPT, items_after

__all__ = ["LearnerStore", "LearnerStoreUnavailable", "MemoryLearnerStore"]

class LearnerStoreUnavailable(Exception):
    """The store could not be reached (Neo4j down or slow); the caller carries on without it."""


class LearnerStore(Protocol):
    name: str
    durable: bool  # False: the profiles go with the process
    immediate: bool  # True: answers without waiting on I/O, so callers keep no time limit on it

    async def get(self, learner_id: str) -> LearnerProfile | None:
        """The learner's profile, or None for a learner never seen."""
        ...

    async def record(self, figures: SessionFigures) -> LearnerProfile:
        """Fold one ended session into its learner's profile and link the session to the learner.
        Idempotent: recording a session again changes nothing."""
        ...

    async def progress(self, learner_id: str) -> list[ProgressPoint]:
        """The learner's sessions as a progress series, oldest first."""
        ...

    async def items(self, learner_id: str) -> list[ReviewItem]:
        """The learner's review items with their FSRS state and history (docs/learning.md)."""
        ...

    async def due_items(self, learner_id: str, scenario: str, at: float) -> list[ReviewItem]:
        """The learner's items of `scenario` due by `at`, in any order: the few a new session
        practises (`reviews.due` orders and caps them), without reading the rest."""
        ...

    async def learners(self) -> list[LearnerRow]:
        """Every learner with their latest session and trend, the most recently active first."""
        ...

    async def erase(self, learner_id: str) -> bool:
        """Forget the learner and delete their sessions (docs/memory.md, privacy); False if unknown."""
        ...

    def statistics(self) -> dict[str, object]:
        """The store's own figures for /health (`store` and `durable` at least)."""
        ...

    async def aclose(self) -> None:
        """Let go of what the store holds open (its own driver, if it made one)."""
        ...


ID_BYTES = 10  # an item id is 20 hex digits (`reviews.item_id`), kept as the 10 bytes they spell
# Item heads deflated together, in the order the items were made (`packing.pack_block`): a bot
# learner's seven items in one stream took 40% of the CPU of seven streams and 56% of the bytes; a
# session's end deflates again only the blocks of the items it changed, so a learner of many
# items does not pay for all of them at each session's end.
BLOCK = 8
# `MemoryLearnerStore._items`: ids, due times, the histories (where each ends, then all of them),
# scenarios, then the heads' blocks
_Row = tuple[bytes | str, ...]
_END = "I"  # the array type of where each history ends in the row's run of them
_NO_HISTORY = {"history"}  # what an item's packed head leaves out: its history is a column of its own


def _count(row: _Row) -> int:
    """How many items `row` holds: its ids' bytes, ten for each."""
    return len(row[0]) // ID_BYTES if row else 0


def _histories(row: _Row) -> list[bytes]:
    """Each item's packed history, cut from the row's one run of them (after where each ends)."""
    data = cast(bytes, row[2])
    ends = array(_END)
    ends.frombytes(data[:_count(row) * ends.itemsize])
    run = data[len(ends) * ends.itemsize:]
    return [run[start:end] for start, end in zip((0, *ends), ends, strict=False)]


def _raw_id(item_id: str) -> bytes:
    raw = bytes.fromhex(item_id)
    if len(raw) != ID_BYTES or raw.hex() != item_id:
        raise ValueError(f"not an item id: {item_id!r}")
    return raw


def _whole(head: bytes, history: bytes) -> ReviewItem:
    """An item as the store's callers see it: its head (its JSON) with its history."""
    item = ReviewItem.model_validate_json(head)
    return item.model_copy(update={"history": unpack_history(history)}) if history else item


class _Columns:
    """One learner's review items as the columns of their row (`MemoryLearnerStore._items`), for a
    session's record to read and change, and to write back as a row."""

    __slots__ = ("blocks", "changed", "dues", "histories", "ids", "index", "read", "scenarios")

    def __init__(self, row: _Row) -> None:
        n = _count(row)
        raw = cast(bytes, row[0]) if row else b""
        self.ids = [raw[i:i + ID_BYTES].hex() for i in range(0, n * ID_BYTES, ID_BYTES)]
        self.dues = array("d", cast(bytes, row[1]) if row else b"")
        self.histories = _histories(row) if row else []
        self.scenarios = cast(list[str], list(row[3:3 + n]))
        self.blocks = cast(list[bytes], list(row[3 + n:]))
        self.read: dict[int, list[bytes]] = {}  # the blocks inflated, each its heads' JSON
        self.changed: set[int] = set()  # the blocks to deflate again
        self.index = {item_id: i for i, item_id in enumerate(self.ids)}

    def _block(self, block: int) -> list[bytes]:
        heads = self.read.get(block)
        if heads is None:
            heads = self.read[block] = unpack_block(self.blocks[block]) if block < len(self.blocks) else []
        return heads

    def head(self, at: int) -> bytes:
        """The JSON of item `at` without its history."""
        return self._block(at // BLOCK)[at % BLOCK]

    def reviewed_in(self, item_id: str, session_id: str) -> bool:
        """Whether the item has a review of that session in its history (False for an item not kept)."""
        at = self.index.get(item_id)
        return at is not None and reviewed_in(self.histories[at], session_id)

    def put(self, item: ReviewItem) -> None:
        """Keep `item`, a session's change to one kept or new (`reviews.items_after` given the heads,
        without their histories): its history holds only that session's reviews, which are added
        to the history kept."""
        at = self.index.get(item.item_id)
        if at is None:
            _raw_id(item.item_id)
            at = self.index[item.item_id] = len(self.ids)
            self.ids.append(item.item_id)
            self.dues.append(0.0)
            self.scenarios.append("")
            self.histories.append(b"")
            self._block(at // BLOCK).append(b"")
        self.dues[at] = item.due
        self.scenarios[at] = sys.intern(item.scenario)
        self._block(at // BLOCK)[at % BLOCK] = item.model_dump_json(exclude=_NO_HISTORY).encode()
        self.changed.add(at // BLOCK)
        self.histories[at] = keep_last(self.histories[at] + pack_history(item.history), HISTORY_KEPT)

    def row(self) -> _Row:
        ends, at = array(_END), 0
        for history in self.histories:
            at += len(history)
            ends.append(at)
        for block in sorted(self.changed):
            packed = pack_block(self.read[block])
            if block < len(self.blocks):
                self.blocks[block] = packed
            else:
                self.blocks.append(packed)  # a new block: the one after the last (`put` adds in order)
        self.changed.clear()
        return (b"".join(map(bytes.fromhex, self.ids)), self.dues.tobytes(), ends.tobytes() + b"".join(self.histories),
                *self.scenarios, *self.blocks)


def _due(row: _Row, scenario: str, at: float) -> list[ReviewItem]:
    """`row`'s items of `scenario` due by `at`, found from the columns alone; only their blocks are inflated."""
    if not row:
        return []
    n = _count(row)
    dues = array("d", cast(bytes, row[1]))
    due = [i for i in range(n) if row[3 + i] == scenario and dues[i] <= at]
    if not due:
        return []
    histories, blocks = _histories(row), row[3 + n:]
    read: dict[int, list[bytes]] = {}
    items = []
    for i in due:
        block = i // BLOCK
        if block not in read:
            read[block] = unpack_block(cast(bytes, blocks[block]))
        items.append(_whole(read[block][i % BLOCK], histories[i]))
    return items


class _Heads(Mapping[str, ReviewItem]):
    """A learner's review items without their histories (which a session's end adds to, not reads),
    each made a model when first read and kept for this view's life (`items_after` reads only the
    items a session touched, some of them several times)."""

    def __init__(self, columns: _Columns) -> None:
        self._columns = columns
        self._read: dict[str, ReviewItem] = {}

    def __getitem__(self, item_id: str) -> ReviewItem:
        item = self._read.get(item_id)
        if item is None:
            columns = self._columns
            item = self._read[item_id] = ReviewItem.model_validate_json(columns.head(columns.index[item_id]))
        return item

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._columns.index

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns.ids)

    def __len__(self) -> int:
        return len(self._columns.ids)


class MemoryLearnerStore:
    """Profiles in this process's memory, packed (see the module). Nothing survives a restart;
    /health says so."""

    name = "memory"
    durable = False
    immediate = True  # dict lookups

    def __init__(self) -> None:
        self._profiles: dict[str, bytes] = {}
        # Per learner, each session's progress point packed, in the order the sessions ended: a
        # tuple of bytes (of tuples, the collector stops tracking the outer one a pass later).
        self._sessions: dict[str, tuple[bytes, ...]] = {}
        # Per learner, their review items as one row of columns (issue #33): every id's 10 bytes in
        # one `bytes`, every due time's 8 in another, every item's history (`packing.pack_history`)
        # in a third after where each ends, then each item's scenario (interned), then the items
        # without their histories, `BLOCK` to a deflated block (`packing.pack_block`), in the order
        # the items were made. A session's end adds its reviews to the histories without reading
        # them. A new session's practice reads the scenarios and due times and inflates only the
        # blocks of the items due (reading them all was most of the store's cost at each session's
        # start). A flat tuple of atoms, which the collector stops tracking at its first pass; a
        # dict of items keyed by their 20-digit ids, beside a schedule of ids, scenarios and float
        # objects, was some 950 bytes more for a new learner's seven.
        self._items: dict[str, _Row] = {}

    async def get(self, learner_id: str) -> LearnerProfile | None:
        packed = self._profiles.get(learner_id)
        return None if packed is None else unpack(packed, LearnerProfile)

    async def record(self, figures: SessionFigures) -> LearnerProfile:
        before = await self.get(figures.learner_id)
        profile = fold(before, figures)
        if profile is not before:
            learner = figures.learner_id
            self._profiles[learner] = pack(profile)
            self._sessions[learner] = (*self._sessions.get(learner, ()), pack(progress_point(figures)))
            columns = _Columns(self._items.get(learner, ()))
            changed = items_after(_Heads(columns), figures)
            # `items_after` finds a session folded in before by its reviews in the histories, which
            # it was not given: the same check, on the histories kept, of every kept item it changed.
            if changed and not any(columns.reviewed_in(item.item_id, figures.session_id) for item in changed):
                for item in changed:
                    columns.put(item)
                self._items[learner] = columns.row()
        return profile

    async def due_items(self, learner_id: str, scenario: str, at: float) -> list[ReviewItem]:
        return _due(self._items.get(learner_id, ()), scenario, at)

    async def items(self, learner_id: str) -> list[ReviewItem]:
        columns = _Columns(self._items.get(learner_id, ()))
        return [_whole(columns.head(i), columns.histories[i]) for _, i in sorted(columns.index.items())]

    async def progress(self, learner_id: str) -> list[ProgressPoint]:
        points = [unpack(point, ProgressPoint) for point in self._sessions.get(learner_id, ())]
        return sorted(points, key=lambda p: (p.at, p.session_id))  # by when the sessions started

    async def learners(self) -> list[LearnerRow]:
        rows, last = [], {}
        for learner_id, packed in self._profiles.items():
            profile = unpack(packed, LearnerProfile)
            series = await self.progress(learner_id)
            direction, delta = trend([p.score for p in series])
            rows.append(LearnerRow(learner_id=learner_id, level=profile.level, sessions=profile.sessions,
                                   latest=series[-1] if series else None, trend=direction, trend_delta=delta))
            last[learner_id] = profile.last_at
        # As the Neo4j store orders them: the latest session to end first.
        return sorted(rows, key=lambda r: (-last[r.learner_id], r.learner_id))

    async def erase(self, learner_id: str) -> bool:
        self._sessions.pop(learner_id, None)
        self._items.pop(learner_id, None)
        return self._profiles.pop(learner_id, None) is not None

    def statistics(self) -> dict[str, object]:
        return {"store": self.name, "durable": self.durable, "learners": len(self._profiles)}

    async def aclose(self) -> None:
        """Nothing to close."""
