"""The Neo4j mirror: a write-behind copy of every session change, and recovery from it.

The session actor hands over each change with `submit()`, which never waits and only appends the
change to its lane: sessions are spread over `MIRROR_WRITERS` lanes (a session always to the same
one), each a FIFO with its own writer task. A writer drains its lane in batches (up to
`MIRROR_BATCH_MAX` changes, started once the oldest change has waited `MIRROR_FLUSH_MS` or the batch
is full): it folds the batch's changes into their sessions' running state in order, turns them into
graph rows (one row per session, with one Session snapshot: the newest) and writes the batch in one
managed transaction, one statement, with an explicit timeout. The lanes' transactions run at once;
they touch disjoint sessions. A failed batch stays at the head of its lane, planned as it was, and is
written again after an exponential backoff (capped at `BACKOFF_CAP_S`), so while Neo4j is down the
sessions keep playing and their changes wait; nothing is dropped.

Ordering. One writer per session and a FIFO lane mean a session's changes reach Neo4j in version
order, but the Cypher does not rely on it: every row is keyed on stable keys and every write is
idempotent and order-independent (see `server.cypher`). Session scalars are written as a complete
snapshot taken at the change's version and only applied if that version is newer than the stored
one, which is why the writer folds each change into a full picture of the session rather than
sending deltas.

Durability. After a batch commits, each session's durable version moves up and the subscribers
(the registry, hence the actors) are told, and only then are the frames acknowledged. When the
lanes hold `MIRROR_BUFFER_CHANGES` changes, `has_room()` turns False and the actors refuse new
frames with `unavailable`; changes already made (a vendor turn that was in flight) are still kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, LiteralString, TypeVar

import anyio
from anyio.abc import TaskStatus
from neo4j import (
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    NotificationMinimumSeverity,
    Query,
    unit_of_work,
)
from neo4j.exceptions import ConstraintError, DriverError, Neo4jError

from schemas.brain import GraphContext, Ledger, StageVisit
from schemas.enums import LanguageCode, OfferAssessment, Outcome, Stage
from schemas.frames import LedgerTotals
from server import cypher
from session.negotiation import (
    REMEMBERED_IDS,
    SNIPPET_CHARS,
    Negotiation,
    PendingTurn,
    TurnRecord,
    _stability_hint,
)
from session.protocols import Change, MirrorUnavailable
from session.rules import Limits

if TYPE_CHECKING:
    from server.config import Settings

log = logging.getLogger("samvad.mirror")

BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 2.0
LAG_WINDOW_S = 60.0  # the p99 of submit -> durable is over the changes made durable this recently
LAG_SAMPLES = 50_000
FINAL_FLUSH_MIN_S = 5.0
MAX_TX_TIMEOUT_S = 60.0  # the most a retried transaction is given (each timeout doubles the next one's)
LOAD_GATHER_S = 0.002
LOAD_BATCH = 100  # sessions rebuilt per query
READ_PATIENCE = 8  # reads give up (MirrorUnavailable) after this many NEO4J_TIMEOUT_MS
ROOM_AGAIN_FRACTION = 0.9  # a full-buffer episode ends when the buffer is back under this share


def turn_key(session_id: str, ordinal: int) -> str:
    """Unambiguous even if the session id holds ':' (the ordinal after the last ':' is all digits)."""
    return f"{session_id}:{ordinal}"


# ---------------------------------------------------------------------------- folding changes


@dataclass(slots=True)
class SessionFold:
    """A session's Session-node scalars as of the last change submitted, kept so each change can
    carry a complete snapshot (a version-guarded write of a partial one could lose fields)."""

    scenario: str | None = None
    learner_id: str | None = None
    input_language: str | None = None
    target_language: str | None = None
    created_at: float | None = None
    updated_at: float | None = None
    stage: str = Stage.GREETING.value
    happiness: int = 50
    turn: int = 0
    seq: int = 0
    item: str | None = None
    object_grabbed: str | None = None
    quotes: dict[str, int] = field(default_factory=dict)
    first_quotes: dict[str, int] = field(default_factory=dict)
    last_offer: int | None = None
    outcome: str | None = None
    insults: int = 0
    ledger: LedgerTotals = field(default_factory=LedgerTotals)
    accepted_ids: OrderedDict[str, None] = field(default_factory=OrderedDict)
    closings: int = 0
    version: int = 0
    quotes_json: str | None = "{}"  # `quotes` and `first_quotes` as stored; None: redo at the next snapshot
    first_quotes_json: str | None = "{}"
    complete: bool = True  # False when changes arrive for a session this process never saw start

    def remember(self, client_id: object) -> None:
        if not isinstance(client_id, str):
            return
        self.accepted_ids[client_id] = None
        self.accepted_ids.move_to_end(client_id)
        while len(self.accepted_ids) > REMEMBERED_IDS:
            self.accepted_ids.popitem(last=False)

    def quoted(self, item: str, quote: int) -> None:
        self.quotes[item] = quote
        self.quotes_json = None
        if item not in self.first_quotes:
            self.first_quotes[item] = quote
            self.first_quotes_json = None

    def props(self) -> dict[str, Any]:
        item = self.item
        if self.quotes_json is None:
            self.quotes_json = json.dumps(self.quotes, sort_keys=True)
        if self.first_quotes_json is None:
            self.first_quotes_json = json.dumps(self.first_quotes, sort_keys=True)
        props: dict[str, Any] = {
            "scenario": self.scenario, "learner_id": self.learner_id, "input_language": self.input_language,
            "target_language": self.target_language, "created_at": self.created_at, "updated_at": self.updated_at,
            "negotiation_state": self.stage, "happiness_score": self.happiness, "turn_count": self.turn,
            "last_seq": self.seq, "item": item, "object_grabbed": self.object_grabbed,
            "quotes": self.quotes_json, "first_quotes": self.first_quotes_json,
            "vendor_quote": self.quotes.get(item) if item else None,
            "first_quote": self.first_quotes.get(item) if item else None,
            "last_offer": self.last_offer, "outcome": self.outcome, "insults": self.insults,
            "accepted_ids": list(self.accepted_ids), "closing_replies": self.closings,
            **{f"ledger_{name}": value for name, value in self.ledger.model_dump().items()},
        }
        if not self.complete:
            # Never overwrite what the graph knows with defaults this process made up.
            for name in ("scenario", "learner_id", "input_language", "target_language", "created_at"):
                if props[name] is None:
                    del props[name]
        return props

    @classmethod
    def from_graph(cls, s: dict[str, Any]) -> SessionFold:
        return cls(
            scenario=s.get("scenario"), learner_id=s.get("learner_id"), input_language=s.get("input_language"),
            target_language=s.get("target_language"), created_at=s.get("created_at"),
            updated_at=s.get("updated_at"), stage=s.get("negotiation_state") or Stage.GREETING.value,
            happiness=int(s.get("happiness_score", 50)), turn=int(s.get("turn_count", 0)),
            seq=int(s.get("last_seq", 0)), item=s.get("item"), object_grabbed=s.get("object_grabbed"),
            quotes=_json_dict(s.get("quotes")), first_quotes=_json_dict(s.get("first_quotes")),
            last_offer=s.get("last_offer"), outcome=s.get("outcome"), insults=int(s.get("insults", 0)),
            accepted_ids=OrderedDict.fromkeys(s.get("accepted_ids") or ()),
            closings=int(s.get("closing_replies", 0)), version=int(s.get("version", 0)),
            ledger=LedgerTotals(**{name: s[f"ledger_{name}"] for name in LedgerTotals.model_fields
                                   if s.get(f"ledger_{name}") is not None}),
            quotes_json=s.get("quotes") or "{}", first_quotes_json=s.get("first_quotes") or "{}",
        )


def _json_dict(raw: object) -> dict[str, int]:
    if not isinstance(raw, str) or not raw:
        return {}
    loaded = json.loads(raw)
    return {str(k): int(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


@dataclass(slots=True)
class Entry:
    """One buffered change with everything needed to write it."""

    change: Change
    submitted: float  # perf_counter at submit, for the lag figures
    session: dict[str, Any]  # the Session snapshot as of this change
    turns: list[dict[str, Any]]
    transitions: list[dict[str, Any]]

    @property
    def turn_count(self) -> int:
        return len(self.turns)


def _turn_row(session_id: str, ordinal: int, props: dict[str, Any]) -> dict[str, Any]:
    """A Turn node's row. A turn never changes once written, so absent values are simply left out.

    What `WRITE_BATCH` can derive is not sent: it sets `session_id` and `turn_key` from the session's
    row and the ordinal, and `text_snippet` to the text unless the row has one (a long text's start)."""
    text = str(props.get("text") or "")
    props = {k: v for k, v in props.items() if v is not None}
    props["ordinal"] = ordinal
    snippet = text[:SNIPPET_CHARS]
    if snippet != props.get("text"):
        props["text_snippet"] = snippet
    return {"key": turn_key(session_id, ordinal), "props": props}


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def plan(fold: SessionFold, change: Change, submitted: float, *, snapshot: bool = True) -> Entry:
    """Fold `change` into `fold` and return the rows that write it. Pure apart from `fold`.

    `snapshot=False` leaves the Session snapshot out (an empty dict): for a change followed by a newer
    one of the same session in the same batch, whose snapshot is the only one written (see `_rows`)."""
    sid, data = change.session_id, change.data
    stamp = data.get("at")
    at = float(stamp) if isinstance(stamp, int | float) else change.at  # when it happened
    turns: list[dict[str, Any]] = []
    transitions: list[dict[str, Any]] = []
    kind = change.kind
    if kind == "session":
        at = float(data.get("created_at") or at)  # type: ignore[arg-type]
        fold.scenario = _str(data.get("scenario"))
        fold.learner_id = _str(data.get("learner_id"))
        fold.input_language = _str(data.get("input_language"))
        fold.target_language = _str(data.get("target_language"))
        fold.created_at = at
        fold.stage = str(data.get("stage") or fold.stage)
        happiness = _int(data.get("happiness"))
        fold.happiness = fold.happiness if happiness is None else happiness
        fold.complete = True
    elif kind == "scene":
        fold.remember(data.get("id"))
        fold.object_grabbed = _str(data.get("object_grabbed"))
        fold.item = _str(data.get("item"))
        fold.input_language = _str(data.get("input_language")) or fold.input_language
        fold.target_language = _str(data.get("target_language")) or fold.target_language
    elif kind == "learner_turn":
        fold.remember(data.get("id"))
        turn = int(data["turn"])  # type: ignore[call-overload]
        offer = _int(data.get("offer"))
        if "session_item" in data:
            fold.item = _str(data.get("session_item"))
        if offer is not None:
            fold.last_offer = offer
        turns.append(_turn_row(sid, 2 * turn - 1, {
            "turn_number": turn, "role": "user", "text": data.get("text"), "stage": data.get("stage"),
            "happiness_score": data.get("happiness"), "object_grabbed": data.get("object_grabbed"),
            "item": data.get("item"), "offer": offer, "quote": _int(data.get("quote")),
            "assessment": data.get("assessment") or OfferAssessment.NONE.value, "client_id": data.get("id"),
            "closing": False, "timestamp": at, "version": change.version,
        }))
    elif kind == "vendor_turn":
        turn = int(data["turn"])  # type: ignore[call-overload]
        previous = str(data.get("previous_stage") or fold.stage)
        stage = str(data.get("stage") or fold.stage)
        happiness = int(data.get("happiness", fold.happiness))  # type: ignore[call-overload]
        item = _str(data.get("item"))
        quote = _int(data.get("quote"))
        assessment = str(data.get("assessment") or OfferAssessment.NONE.value)
        fold.stage, fold.happiness, fold.turn = stage, happiness, turn
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
        fold.outcome = _str(data.get("outcome"))
        if item and quote is not None:
            fold.quoted(item, quote)
        if assessment == OfferAssessment.INSULT.value:
            fold.insults += 1
        ledger = data.get("ledger")
        if isinstance(ledger, dict):
            fold.ledger = fold.ledger.add(Ledger(**ledger))
        reply_seq = _int(data.get("reply_seq"))
        turns.append(_turn_row(sid, 2 * turn, {
            "turn_number": turn, "role": "vendor", "text": data.get("text"), "stage": stage,
            "previous_stage": previous, "happiness_score": happiness, "object_grabbed": fold.object_grabbed,
            "item": item, "quote": quote, "assessment": assessment, "flags": [str(f) for f in data.get("flags") or ()],  # type: ignore[attr-defined]
            "forced": bool(data.get("forced")), "seq": reply_seq, "last_seq": fold.seq, "outcome": fold.outcome,
            "closing": False, "timestamp": at, "version": change.version,
        }))
        if stage != previous:
            transitions.append({"at_turn": turn, "version": change.version, "props": {
                "from_stage": previous, "to_stage": stage, "happiness_at_transition": happiness, "timestamp": at,
            }})
    elif kind == "closing_reply":
        fold.remember(data.get("id"))
        fold.closings += 1
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
        base = 2 * fold.turn + 2 * fold.closings
        common = {"turn_number": fold.turn, "stage": fold.stage, "happiness_score": fold.happiness,
                  "object_grabbed": fold.object_grabbed, "item": None, "closing": True, "timestamp": at,
                  "version": change.version}
        turns.append(_turn_row(sid, base - 1, {**common, "role": "user", "text": data.get("text"),
                                               "client_id": data.get("id"),
                                               "assessment": OfferAssessment.NONE.value}))
        turns.append(_turn_row(sid, base, {**common, "role": "vendor", "text": data.get("reply"),
                                           "seq": fold.seq, "last_seq": fold.seq, "outcome": fold.outcome,
                                           "assessment": OfferAssessment.NONE.value}))
    elif kind == "ids":
        for client_id in data.get("ids") or ():  # type: ignore[attr-defined]
            fold.remember(client_id)
    else:
        log.warning("unknown change kind %r; only its version is recorded", kind, extra={"session_id": sid})
    fold.updated_at = at
    fold.version = change.version
    return Entry(change, submitted, fold.props() if snapshot else {}, turns, transitions)


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _rows(batch: Iterable[Entry]) -> list[dict[str, Any]]:
    """`WRITE_BATCH`'s rows: one per session in the batch, with its newest snapshot, the items it and its
    turns are about, its turns (each once) and its transitions."""
    groups: dict[str, dict[str, Any]] = {}
    turns: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in batch:
        sid = entry.change.session_id
        group = groups.get(sid)
        if group is None:
            group = groups[sid] = {"session_id": sid, "items": set(), "transitions": []}
            turns[sid] = {}
        group["version"], group["props"] = entry.change.version, entry.session
        for row in entry.turns:
            props = row["props"]
            turns[sid][row["key"]] = props
            if "item" in props:
                group["items"].add(props["item"])
        if entry.transitions:
            group["transitions"].extend(entry.transitions)
    for sid, group in groups.items():
        item = group["props"].get("item")
        if item:
            group["items"].add(item)
        group["items"] = sorted(group["items"])
        group["turns"] = list(turns[sid].values())
    return list(groups.values())


# ---------------------------------------------------------------------------- rebuilding


def rebuild(record: dict[str, Any], limits: Limits) -> tuple[Negotiation, int, SessionFold]:
    """A Negotiation exactly as the actor had it at the last stored change, from LOAD_SESSIONS' record."""
    s = record["session"]
    history: list[TurnRecord] = []
    for t in record["turns"]:
        if t.get("closing"):
            continue  # answers after the end live in the graph, not in the negotiation's history
        common = {
            "turn": int(t["turn_number"]), "role": t["role"], "text": t.get("text") or "",
            "stage": Stage(t["stage"]), "happiness": int(t["happiness_score"]), "at": float(t["timestamp"]),
            "item": t.get("item"), "object_grabbed": t.get("object_grabbed"), "quote": t.get("quote"),
        }
        if t["role"] == "user":
            history.append(TurnRecord(**common, offer=t.get("offer"), client_id=t.get("client_id"),
                                      assessment=OfferAssessment(t.get("assessment") or "none")))
        else:
            history.append(TurnRecord(**common, seq=t.get("seq"), flags=tuple(t.get("flags") or ())))
    turn = int(s.get("turn_count", 0))
    pending = None
    if history and history[-1].role == "user" and history[-1].turn == turn + 1:
        last = history[-1]
        pending = PendingTurn(last.turn, last.text, last.client_id, last.item, last.offer, last.assessment, last.at)
    stage_changes = [
        StageVisit(from_stage=Stage(x["from_stage"]), to_stage=Stage(x["to_stage"]), at_turn=int(x["at_turn"]),
                   happiness=int(x["happiness_at_transition"]))
        for x in record["transitions"]
    ]
    fold = SessionFold.from_graph(s)
    negotiation = Negotiation(
        session_id=s["session_id"], scenario_name=s["scenario"], created_at=float(s["created_at"]), limits=limits,
        learner_id=s.get("learner_id"),
        input_language=LanguageCode(s.get("input_language") or LanguageCode.EN_IN.value),
        target_language=LanguageCode(s.get("target_language") or LanguageCode.EN_IN.value),
        stage=Stage(fold.stage), happiness=fold.happiness, turn=turn, seq=fold.seq, item=fold.item,
        object_grabbed=fold.object_grabbed, quotes=dict(fold.quotes), first_quotes=dict(fold.first_quotes),
        last_offer=fold.last_offer, outcome=Outcome(fold.outcome) if fold.outcome else None,
        updated_at=float(s.get("updated_at") or s["created_at"]), history=history, stage_changes=stage_changes,
        accepted_ids=OrderedDict(fold.accepted_ids), pending=pending, insults=fold.insults,
        ledger=fold.ledger,
    )
    return negotiation, fold.version, fold


# ---------------------------------------------------------------------------- the mirror


def _retryable(exc: BaseException) -> bool:
    """Worth another try: the server or the network failed, or the transaction ran out of time."""
    if isinstance(exc, DriverError | OSError | TimeoutError):
        return True
    return isinstance(exc, Neo4jError) and (exc.is_retryable() or "TransactionTimedOut" in str(exc.code))


_T = TypeVar("_T")


@dataclass(slots=True)
class _LoadSlot:
    done: anyio.Event = field(default_factory=anyio.Event)
    record: dict[str, Any] | None = None
    error: MirrorUnavailable | None = None


class _IoThread:
    """The mirror's own event loop, in its own thread, where the Neo4j driver lives.

    The server's loop is busy with sockets under load; a transaction makes several round trips, and
    on a shared loop each would wait for a whole pass over every ready socket. Here they do not: the
    server's loop only hands over a batch and is woken once, when it is stored.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="samvad-neo4j", daemon=True)
        self.thread.start()

    async def call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on the mirror's loop; cancelling the caller cancels it there too."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or (isinstance(exc, Neo4jError) and "TimedOut" in str(exc.code))


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass(slots=True, eq=False)
class _Lane:
    """One writer's share of the sessions: a FIFO of changes not yet planned, and the planned batch
    being written (kept as it is until it commits, so a retry writes exactly the same rows).

    A session always maps to the same lane, so its changes are written in order by one writer; the
    lanes' writers run their transactions concurrently (they touch disjoint sessions' nodes)."""

    index: int
    changes: deque[Change] = field(default_factory=deque)
    stamps: deque[float] = field(default_factory=deque)  # perf_counter at submit, parallel to `changes`
    batch: list[Entry] = field(default_factory=list)
    wake: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self.changes) + len(self.batch)

    def oldest(self) -> float | None:
        """When the oldest change still to be written was submitted (perf_counter)."""
        if self.batch:
            return self.batch[0].submitted
        return self.stamps[0] if self.stamps else None


class Neo4jMirror:
    name = "neo4j"

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        timeout_ms: int = 2000,
        buffer_changes: int = 50_000,
        batch_max: int = 500,
        flush_ms: float = 20.0,
        writers: int = 2,
        database: str | None = None,
    ) -> None:
        self.uri = uri
        self.auth = (user, password) if password else None
        self.timeout_s = timeout_ms / 1000
        self.buffer_limit = buffer_changes
        self.batch_max = batch_max
        self.flush_s = flush_ms / 1000
        self.database = database
        self._driver: AsyncDriver | None = None  # lives on self._io's loop
        self._io: _IoThread | None = None
        self._schema_ready = False
        self.writers = max(1, writers)
        self._lanes = [_Lane(k) for k in range(self.writers)]
        self._depth = 0  # changes submitted and not yet stored, over every lane
        self._folds: dict[str, SessionFold] = {}
        self._submitted: dict[str, int] = {}
        self._durable: dict[str, int] = {}
        self._forget_when_written: set[str] = set()
        self._callbacks: list[Callable[[str, int], None]] = []
        self._flush_waiters: dict[str, list[anyio.Event]] = {}
        self._load_wake: anyio.Event | None = None  # set while run() gathers loads
        self._load_pending: list[str] = []
        self._load_slots: dict[str, _LoadSlot] = {}
        self._running = False  # the writers are running (submit wakes them)
        self._lag_at: deque[float] = deque(maxlen=LAG_SAMPLES)  # when a change became durable (time.time)
        self._lag_ms: deque[float] = deque(maxlen=LAG_SAMPLES)  # and how long after its submit
        self._batch_ms: deque[float] = deque(maxlen=1000)  # the last batches' transaction times
        self._full_since: float | None = None
        self._down_since: float | None = None
        self.connected = False
        self.batches = 0
        self.rows = 0  # changes written
        self.turns_written = 0
        self.failures = 0
        self.retries = 0
        self.full_episodes = 0
        self.last_error: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Neo4jMirror:
        return cls(
            settings.NEO4J_URI, user=settings.NEO4J_USER, password=settings.NEO4J_PASSWORD,
            timeout_ms=settings.NEO4J_TIMEOUT_MS, buffer_changes=settings.MIRROR_BUFFER_CHANGES,
            batch_max=settings.MIRROR_BATCH_MAX, flush_ms=settings.MIRROR_FLUSH_MS,
            writers=settings.MIRROR_WRITERS,
        )

    # ------------------------------------------------------------------ the Mirror protocol

    def submit(self, change: Change) -> None:
        """Buffer `change` (never waits, never raises); its lane's writer plans and stores it.

        Only a reference and a timestamp are kept here: the change is folded into its session's state
        and turned into rows when its batch is formed, off the actor's path and once per batch."""
        sid = change.session_id
        lane = self._lanes[hash(sid) % len(self._lanes)]
        lane.changes.append(change)
        lane.stamps.append(time.perf_counter())
        self._depth += 1
        if self._submitted.get(sid, 0) < change.version:
            self._submitted[sid] = change.version
        if self._running and lane.wake is not None:
            waiting = len(lane)
            if waiting == 1 or waiting >= self.batch_max:
                lane.wake.set()
        if self._depth >= self.buffer_limit:
            self._check_room()

    def _plan(self, change: Change, submitted: float, snapshot: bool) -> Entry:
        sid = change.session_id
        try:
            fold = self._folds.get(sid)
            if fold is None:
                fold = self._folds[sid] = SessionFold(complete=change.kind == "session")
                if change.kind != "session":
                    log.warning("change for a session this mirror never saw start; its Session node keeps "
                                "what it has", extra={"session_id": sid, "version": change.version})
            return plan(fold, change, submitted, snapshot=snapshot)
        except Exception:  # a malformed change must not lose the others: keep its version at least
            log.exception("could not plan a %s change", change.kind, extra={"session_id": sid})
            return Entry(change, submitted, {}, [], [])

    def _batch(self, lane: _Lane) -> list[Entry]:
        """The lane's batch: the one that failed last time, else the next `batch_max` changes, planned in
        order. Only each session's last change in the batch carries a Session snapshot (`_rows`)."""
        if lane.batch or not lane.changes:
            return lane.batch
        count = min(self.batch_max, len(lane.changes))
        changes = [lane.changes.popleft() for _ in range(count)]
        stamps = [lane.stamps.popleft() for _ in range(count)]
        last = {change.session_id: k for k, change in enumerate(changes)}
        lane.batch = [self._plan(change, stamp, last[change.session_id] == k)
                      for k, (change, stamp) in enumerate(zip(changes, stamps, strict=True))]
        return lane.batch

    def has_room(self) -> bool:
        return self._check_room()

    def durable_version(self, session_id: str) -> int:
        return self._durable.get(session_id, 0)

    def subscribe_durable(self, callback: Callable[[str, int], None]) -> None:
        self._callbacks.append(callback)

    def forget(self, session_id: str) -> None:
        """The session left memory (evicted); drop what we keep for it once it is all written."""
        if self._pending(session_id):
            self._forget_when_written.add(session_id)
        else:
            self._drop(session_id)

    def _drop(self, session_id: str) -> None:
        self._folds.pop(session_id, None)
        self._submitted.pop(session_id, None)
        self._durable.pop(session_id, None)
        self._forget_when_written.discard(session_id)

    def _pending(self, session_id: str) -> bool:
        return self._submitted.get(session_id, 0) > self._durable.get(session_id, 0)

    def _check_room(self) -> bool:
        depth = self._depth
        if depth < self.buffer_limit:
            return True
        if self._full_since is None:
            self._full_since = time.monotonic()
            self.full_episodes += 1
            log.warning(
                "Neo4j mirror buffer is FULL: %d changes are waiting to be written (MIRROR_BUFFER_CHANGES=%d); "
                "new frames are refused with 'unavailable' and /health reports 'degraded' until Neo4j "
                "catches up. Last error: %s", depth, self.buffer_limit, self.last_error,
                extra={"queue_depth": depth, "buffer_limit": self.buffer_limit})
        return False

    # ------------------------------------------------------------------ lifecycle

    async def _on_io(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._io is None:
            self._io = _IoThread()
        return await self._io.call(coro)

    async def open(self) -> None:
        """Start the mirror's I/O thread and its driver (connections are made when first needed)."""
        await self._on_io(self._driver_here())

    async def _driver_here(self) -> AsyncDriver:
        """The driver; call only on the I/O loop."""
        if self._driver is None:
            self._driver = AsyncGraphDatabase.driver(
                self.uri, auth=self.auth,
                notifications_min_severity=NotificationMinimumSeverity.WARNING,
                connection_timeout=self.timeout_s,
                connection_acquisition_timeout=self.timeout_s * 2,
                max_transaction_retry_time=0,  # this class retries, with its own backoff and figures
            )
        return self._driver

    async def _close_driver(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def aclose(self) -> None:
        io, self._io = self._io, None
        if io is not None:
            try:
                await io.call(self._close_driver())
            finally:
                io.close()

    async def __aenter__(self) -> Neo4jMirror:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write the buffer until cancelled, then flush what is left (bounded, shielded)."""
        await self.open()
        self._running = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._load_loop)
                task_status.started()
                await self._write_loop()
        finally:
            self._load_wake = None
            with anyio.CancelScope(shield=True):
                budget = max(FINAL_FLUSH_MIN_S, 2 * self.timeout_s)
                with anyio.move_on_after(budget):
                    async with anyio.create_task_group() as tg:
                        for lane in self._lanes:
                            tg.start_soon(self._drain, lane)
                if self._depth:
                    log.error("shutting down with %d changes not written to Neo4j (their frames were never "
                              "acknowledged; clients re-send them)", self._depth,
                              extra={"queue_depth": self._depth, "last_error": self.last_error})
                self._running = False
                await self.aclose()

    async def _drain(self, lane: _Lane) -> None:
        while len(lane):
            await self._write_next(lane)

    async def _write_loop(self) -> None:
        try:
            await self.ensure_schema()
        except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
            self._failed(exc, 0)  # the first batch tries again
        async with anyio.create_task_group() as tg:
            for lane in self._lanes:
                tg.start_soon(self._lane_loop, lane)

    async def _lane_loop(self, lane: _Lane) -> None:
        """One writer: a batch once `batch_max` changes wait or the oldest has waited `flush_s`."""
        while True:
            oldest = lane.oldest()
            if oldest is None:
                lane.wake = anyio.Event()
                await lane.wake.wait()
                continue
            waited = time.perf_counter() - oldest
            if len(lane) < self.batch_max and waited < self.flush_s:
                with anyio.move_on_after(self.flush_s - waited):
                    while len(lane) < self.batch_max:
                        lane.wake = anyio.Event()
                        await lane.wake.wait()
            await self._write_next(lane)

    async def _write_next(self, lane: _Lane) -> None:
        """Write the head of the buffer, retrying with backoff until it is stored.

        A transaction that runs out of time is retried with twice the time (up to MAX_TX_TIMEOUT_S): a
        Neo4j that has just (re)started plans its queries slowly, and must not be timed out forever.
        """
        attempt = slow = 0
        while True:
            batch = self._batch(lane)
            if not batch:
                return
            started = time.perf_counter()
            try:
                await self.write(batch, time_limit=min(MAX_TX_TIMEOUT_S, self.timeout_s * 2**slow))
            except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
                self._failed(exc, attempt, after_timeout=slow > 0)
                slow += _timed_out(exc)
                delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * random.uniform(0.75, 1.0)
                attempt += 1
                self.retries += 1
                await anyio.sleep(delay)
                continue
            self._batch_ms.append((time.perf_counter() - started) * 1000)
            self._committed(lane, batch)
            return

    def _failed(self, exc: BaseException, attempt: int, *, after_timeout: bool = False) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:500]
        retryable = _retryable(exc)
        if isinstance(exc, DriverError | OSError | TimeoutError):
            self.connected = False
        if after_timeout and isinstance(exc, ConstraintError):
            # The timed-out attempt committed after all (Neo4j stalled, then woke): this one read the
            # old stored version and collided with it. The next attempt reads the new one and skips.
            log.warning("Neo4j write conflicted with a write that committed after its timeout; retrying",
                        extra={"queue_depth": self._depth, "attempt": attempt})
        elif not retryable:
            # Not expected to pass on a retry (a bug in a query, a constraint). Keep the data and keep trying.
            log.error("Neo4j refused a batch: %s", self.last_error, extra={"queue_depth": self._depth})
        elif self._down_since is None:
            self._down_since = time.monotonic()
            log.warning("Neo4j write failed; sessions keep playing and changes wait in memory "
                        "(acknowledgements pause): %s", self.last_error,
                        extra={"queue_depth": self._depth, "attempt": attempt})

    def _committed(self, lane: _Lane, batch: list[Entry]) -> None:
        now_perf, now = time.perf_counter(), time.time()
        lane.batch = []
        self._depth -= len(batch)
        self.batches += 1
        self.rows += len(batch)
        self.connected = True
        if self._down_since is not None:
            log.warning("Neo4j writes resumed after %.1f s", time.monotonic() - self._down_since,
                        extra={"queue_depth": self._depth})
            self._down_since = None
        advanced: dict[str, int] = {}
        for entry in batch:
            self._lag_at.append(now)
            self._lag_ms.append((now_perf - entry.submitted) * 1000)
            self.turns_written += entry.turn_count
            sid = entry.change.session_id
            if entry.change.version > self._durable.get(sid, 0):
                advanced[sid] = entry.change.version
        self._durable.update(advanced)
        if self._full_since is not None and self._depth < self.buffer_limit * ROOM_AGAIN_FRACTION:
            log.warning("Neo4j mirror buffer has room again after %.1f s (%d changes waiting)",
                        time.monotonic() - self._full_since, self._depth)
            self._full_since = None
        for sid, version in advanced.items():
            for callback in self._callbacks:
                try:
                    callback(sid, version)
                except Exception:
                    log.exception("durable callback failed", extra={"session_id": sid})
            if not self._pending(sid):
                for event in self._flush_waiters.pop(sid, ()):
                    event.set()
                if sid in self._forget_when_written:
                    self._drop(sid)

    # ------------------------------------------------------------------ writing

    async def ensure_schema(self, time_limit: float | None = None) -> None:
        """Create the constraints and indexes (IF NOT EXISTS: a no-op when they are there)."""
        await self._on_io(self._ensure_schema(time_limit))

    async def _ensure_schema(self, time_limit: float | None) -> None:
        driver = await self._driver_here()
        seconds = time_limit or self.timeout_s
        with anyio.fail_after(seconds * 2 + 1):  # the server's own timeout should fire first
            for statement in cypher.SCHEMA:
                await driver.execute_query(Query(statement, timeout=seconds), database_=self.database)
        self._schema_ready = True
        self.connected = True

    async def write(self, batch: list[Entry], *, time_limit: float | None = None) -> None:
        """Write `batch` in one managed transaction. Idempotent: writing it again changes nothing."""
        await self._on_io(self._write(batch, time_limit or self.timeout_s))

    async def _write(self, batch: list[Entry], seconds: float) -> None:
        timeout = seconds
        if not self._schema_ready:
            await self._ensure_schema(timeout)
        driver = await self._driver_here()
        work = unit_of_work(timeout=timeout)(self._tx_write)
        with anyio.fail_after(timeout * 2 + 1):  # the server's own timeout should fire first
            async with driver.session(database=self.database) as session:
                await session.execute_write(work, _rows(batch))

    @staticmethod
    async def _tx_write(tx: AsyncManagedTransaction, rows: list[dict[str, Any]]) -> None:
        result = await tx.run(cypher.WRITE_BATCH, rows=rows)
        await result.consume()

    # ------------------------------------------------------------------ reading

    @staticmethod
    async def _tx_read(tx: AsyncManagedTransaction, statement: LiteralString,
                       params: dict[str, Any]) -> list[dict[str, Any]]:
        result = await tx.run(statement, params)
        return [record.data() async for record in result]

    async def read(self, statement: LiteralString, **params: Any) -> list[dict[str, Any]]:
        """Run a read query, retrying failures (with more time after a timeout) for a while."""
        return await self._on_io(self._read(statement, params))

    async def _read(self, statement: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
        driver = await self._driver_here()
        deadline = time.monotonic() + READ_PATIENCE * self.timeout_s
        attempt = slow = 0
        while True:
            timeout = min(MAX_TX_TIMEOUT_S, self.timeout_s * 2**slow)
            try:
                with anyio.fail_after(timeout * 2 + 1):
                    async with driver.session(database=self.database) as session:
                        return await session.execute_read(unit_of_work(timeout=timeout)(self._tx_read),
                                                          statement, params)
            except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
                if not _retryable(exc) or time.monotonic() >= deadline:
                    raise MirrorUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}"[:500]) from exc
                slow += _timed_out(exc)
                await anyio.sleep(min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))
                attempt += 1

    async def flushed(self, session_id: str, within: float) -> bool:
        """Wait until every change submitted for `session_id` is stored; False if `within` s pass first."""
        with anyio.move_on_after(within):
            while self._pending(session_id):
                event = anyio.Event()
                self._flush_waiters.setdefault(session_id, []).append(event)
                await event.wait()
            return True
        return False

    async def _read_your_writes(self, session_id: str) -> None:
        if not await self.flushed(session_id, max(5.0, 3 * self.timeout_s)):
            raise MirrorUnavailable(f"changes of session {session_id} are not stored yet: {self.last_error}")

    async def load(self, session_id: str, limits: Limits) -> tuple[Negotiation, int] | None:
        """Rebuild a session from the graph (after a restart or an eviction), or None if it is unknown."""
        await self._read_your_writes(session_id)
        record = await self._fetch(session_id)
        if record is None:
            return None
        negotiation, version, fold = rebuild(record, limits)
        self._folds[session_id] = fold
        self._submitted[session_id] = max(self._submitted.get(session_id, 0), version)
        self._durable[session_id] = max(self._durable.get(session_id, 0), version)
        self._forget_when_written.discard(session_id)
        return negotiation, version

    async def _fetch(self, session_id: str) -> dict[str, Any] | None:
        """LOAD_SESSIONS' record for one session. While the writer runs, loads that arrive together (every
        client reconnecting after a restart) are gathered into one query per LOAD_BATCH sessions."""
        if self._load_wake is None:
            records = await self.read(cypher.LOAD_SESSIONS, session_ids=[session_id])
            return records[0] if records else None
        slot = self._load_slots.get(session_id)
        if slot is None:
            slot = self._load_slots[session_id] = _LoadSlot()
            self._load_pending.append(session_id)
            self._load_wake.set()
        await slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.record

    async def _load_loop(self) -> None:
        while True:
            self._load_wake = anyio.Event()
            if not self._load_pending:
                await self._load_wake.wait()
            await anyio.sleep(LOAD_GATHER_S)  # let the rest of a burst join
            ids, self._load_pending = self._load_pending[:LOAD_BATCH], self._load_pending[LOAD_BATCH:]
            error: MirrorUnavailable | None = None
            found: dict[str, dict[str, Any]] = {}
            try:
                found = {r["session"]["session_id"]: r for r in await self.read(cypher.LOAD_SESSIONS, session_ids=ids)}
            except MirrorUnavailable as exc:
                error = exc
            for sid in ids:
                slot = self._load_slots.pop(sid)
                slot.record, slot.error = found.get(sid), error
                slot.done.set()

    async def graph_context(self, session_id: str) -> GraphContext | None:
        """`Negotiation.graph_context()`, computed by Cypher from the stored graph."""
        records = await self.read(cypher.GRAPH_CONTEXT, session_id=session_id)
        if not records:
            return None
        r = records[0]
        stage = Stage(r["stage"])
        turns_here = int(r["turns_in_current_stage"])
        return GraphContext(
            turns_per_stage={Stage(p["stage"]): int(p["turns"]) for p in r["per_stage"]},
            happiness_trend=tuple(int(h) for h in r["trend"]),
            trend_direction=r["direction"],
            items_discussed={i["item"]: int(i["mentions"]) for i in r["items"]},
            transitions=tuple(
                StageVisit(from_stage=Stage(x["from_stage"]), to_stage=Stage(x["to_stage"]),
                           at_turn=int(x["at_turn"]), happiness=int(x["happiness_at_transition"]))
                for x in r["transitions"]
            ),
            turns_in_current_stage=turns_here,
            stability_hint=_stability_hint(stage, turns_here),
        )

    async def graph(self, session_id: str) -> dict[str, Any] | None:
        """The session's subgraph as plain JSON: the session, its turns in chain order, items, transitions."""
        written = await self.flushed(session_id, 2.0)
        records = await self.read(cypher.GRAPH_SESSION, session_id=session_id)
        if not records:
            if not written:
                raise MirrorUnavailable(f"session {session_id} is not stored yet: {self.last_error}")
            return None
        head = records[0]
        chains = [r["turns"] for r in await self.read(cypher.GRAPH_CHAINS, session_id=session_id)]
        context = await self.graph_context(session_id)
        turns = [turn for chain in chains for turn in chain]
        session = dict(head["session"])
        return {
            "session_id": session_id,
            "session": session,
            "turns": turns,
            "items": head["items"],
            "transitions": head["transitions"],
            "relationships": {
                "HAS_TURN": head["turn_count"],
                "FOLLOWED_BY": [[a["ordinal"], b["ordinal"]] for chain in chains for a, b in pairwise(chain)],
                "ABOUT_ITEM": [[t["ordinal"], name] for t in turns for name in t.get("items", [])],
                "INVOLVES_ITEM": [i["name"] for i in head["items"]],
                "STAGE_CHANGED": [x["at_turn"] for x in head["transitions"]],
            },
            "chains": len(chains),
            "context": context.model_dump(mode="json") if context else None,
            "pending_changes": 0 if written else self._submitted.get(session_id, 0) - self.durable_version(session_id),
        }

    async def stats(self, *, since: float = 0.0, scenario: str | None = None, limit: int = 20) -> dict[str, Any]:
        """Figures across sessions, computed in Cypher (GET /api/stats)."""
        params = {"since": since, "scenario": scenario}
        outcomes = await self.read(cypher.STATS_OUTCOMES, **params)
        turns = (await self.read(cypher.STATS_TURNS_TO_DEAL, **params))[0]
        discounts = await self.read(cypher.STATS_DISCOUNTS, **params)
        overall = (await self.read(cypher.STATS_DISCOUNT_OVERALL, **params))[0]
        insults = await self.read(cypher.STATS_INSULTS, limit=limit, **params)
        by_item = await self.read(cypher.STATS_INSULTS_BY_ITEM, **params)
        return {
            "since": since,
            "scenario": scenario,
            "sessions": sum(int(o["sessions"]) for o in outcomes),
            "outcomes": {o["outcome"]: int(o["sessions"]) for o in outcomes},
            "turns_to_deal": turns,
            "discount": {"deals": overall["deals"], "avg_discount_pct": overall["avg_discount_pct"],
                         "by_item": discounts},
            "insults": {"by_item": by_item, "by_offer": insults},
        }

    # ------------------------------------------------------------------ figures

    def statistics(self) -> dict[str, object]:
        now, now_perf = time.time(), time.perf_counter()
        while self._lag_at and now - self._lag_at[0] > LAG_WINDOW_S:
            self._lag_at.popleft()
            self._lag_ms.popleft()
        lags = list(self._lag_ms)
        stamps = [stamp for stamp in (lane.oldest() for lane in self._lanes) if stamp is not None]
        oldest = (now_perf - min(stamps)) * 1000 if stamps else 0.0
        p50, p99 = _percentile(lags, 0.5), _percentile(lags, 0.99)
        return {
            "kind": self.name,
            "connected": self.connected,
            "queue_depth": self._depth,
            "buffer_limit": self.buffer_limit,
            "buffer_full": self._depth >= self.buffer_limit,
            "writers": len(self._lanes),
            "lag_ms": round(oldest, 1),
            "lag_p50_ms": None if p50 is None else round(p50, 1),
            "lag_p99_ms": None if p99 is None else round(p99, 1),
            "lag_window": len(lags),
            "batch_ms_p50": _round(_percentile(list(self._batch_ms), 0.5)),
            "batch_ms_p99": _round(_percentile(list(self._batch_ms), 0.99)),
            "batches": self.batches,
            "rows": self.rows,
            "turns": self.turns_written,
            "failures": self.failures,
            "retries": self.retries,
            "full_episodes": self.full_episodes,
            "sessions_tracked": len(self._folds),
            "last_error": self.last_error,
        }
