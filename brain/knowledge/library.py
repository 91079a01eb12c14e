"""`KnowledgeLibrary`: each scenario's searchable knowledge, and the way new playbooks get in.

A scenario's knowledge is its pack's own knowledge files (`schemas/data/<scenario>/knowledge/`,
written by the scenario's author and shipped with the code) plus the scenario's active uploaded
playbook, if a teacher has uploaded one (stored by a `PlaybookStore`: on disk, or in Neo4j when
the mirror is on). One BM25 index per scenario covers both, built on first use and rebuilt when
a playbook is ingested.

Thread safety: `ingest()` and the first `index()` of a scenario do file or database I/O and build
an index, so the server calls them in a worker thread. The index itself is immutable and swapped
in with one assignment, so a retrieval running on the event loop sees the old index or the new
one, never a half-built one.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from importlib import resources

import anyio

from brain.knowledge.cards import GENERIC, generate_cards
from brain.knowledge.chunking import chunk_text, extract_text
from brain.knowledge.index import DEFAULT_MIN_SCORE, DEFAULT_TOP_K, KnowledgeIndex
from brain.knowledge.store import PlaybookStore
from schemas.knowledge import Chunk, Playbook, Retrieved, TipCard
from schemas.scenario import load_scenario

__all__ = ["CARD_CACHE", "KnowledgeLibrary", "index_ready", "pack_chunks"]

log = logging.getLogger("samvad.knowledge")
CARD_CACHE = 4096
_PLAYBOOK_NAMESPACE = uuid.UUID("2d4f6a81-9c3b-5e07-a1d2-8f5b3c6e9a40")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def pack_chunks(scenario: str, ingested_at: str) -> tuple[Chunk, ...]:
    """The chunks of a scenario pack's own knowledge files, in file-name order."""
    folder = resources.files("schemas").joinpath("data", scenario, "knowledge")
    if not folder.is_dir():
        return ()
    chunks: list[Chunk] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_file():
            continue
        text = extract_text(entry.name, entry.read_bytes())
        chunks.extend(chunk_text(text, f"{scenario}/{entry.name}", ingested_at))
    return tuple(chunks)


def _pack_generic(scenario: str) -> tuple[str, str]:
    """The scenario pack's generic card (`policy.generic_tip`), or the built-in one."""
    try:
        tip = load_scenario(scenario).policy.generic_tip
    except KeyError:
        return GENERIC
    return tip.title, tip.body


async def index_ready(library: KnowledgeLibrary, scenario: str) -> None:
    """Make sure the scenario's index is built, building it in a worker thread if it is not."""
    if library.cached(scenario) is None:
        await anyio.to_thread.run_sync(library.index, scenario)


class KnowledgeLibrary:
    def __init__(
        self,
        store: PlaybookStore,
        *,
        top_k: int = DEFAULT_TOP_K,
        min_score: float = DEFAULT_MIN_SCORE,
        generic: Callable[[str], tuple[str, str]] | None = None,
    ) -> None:
        self.store = store
        self.top_k = top_k
        self.min_score = min_score
        self._generic = generic or _pack_generic
        self._loaded_at = _now()
        self._indexes: dict[str, KnowledgeIndex] = {}
        self._lock = threading.Lock()
        self._stale: set[str] = set()  # scenarios indexed without their playbook: the store failed
        self._packs: dict[str, tuple[Chunk, ...]] = {}
        # Cards are a pure function of (index, words): learners and bots repeat themselves, so the
        # last CARD_CACHE answers are kept, and dropped with the index they came from.
        self._cards: OrderedDict[tuple[str, str], tuple[TipCard, ...]] = OrderedDict()

    def index(self, scenario: str) -> KnowledgeIndex:
        """The scenario's index, built on first use (blocking: call it from a worker thread)."""
        index = self._indexes.get(scenario)
        if index is None:
            with self._lock:
                index = self._indexes.get(scenario)
                if index is None:
                    index = self._indexes[scenario] = self._build(scenario)
        return index

    def warm(self, scenarios: Iterable[str]) -> None:
        """Build the indexes of `scenarios` now (blocking), so no learner turn waits for one."""
        for scenario in scenarios:
            self.index(scenario)

    def cached(self, scenario: str) -> KnowledgeIndex | None:
        """The scenario's index if it is already built; never blocks."""
        return self._indexes.get(scenario)

    def _build(self, scenario: str) -> KnowledgeIndex:
        try:
            playbook = self.store.active(scenario)
        except Exception as exc:  # the store is down (Neo4j): serve the pack's notes meanwhile
            log.warning("playbook store unavailable; %s uses its pack's notes until it answers: %s",
                        scenario, exc)
            self._stale.add(scenario)
            playbook = None
        else:
            self._stale.discard(scenario)
        chunks = self._pack(scenario) + (playbook.chunks if playbook else ())
        return KnowledgeIndex(chunks)

    def _pack(self, scenario: str) -> tuple[Chunk, ...]:
        """The pack's own chunks, read from its files once (they ship with the code)."""
        found = self._packs.get(scenario)
        if found is None:
            found = self._packs[scenario] = pack_chunks(scenario, self._loaded_at)
        return found

    def refresh_stale(self) -> list[str]:
        """Rebuild the indexes built while the store was down (blocking); returns those now fresh."""
        fresh = []
        for scenario in sorted(self._stale):
            index = self._build(scenario)
            if scenario not in self._stale:
                with self._lock:
                    self._indexes[scenario] = index
                    self._cards.clear()
                fresh.append(scenario)
        return fresh

    def retrieve(
        self, scenario: str, query: str, top_k: int | None = None, min_score: float | None = None
    ) -> list[Retrieved]:
        return self.index(scenario).retrieve(
            query,
            self.top_k if top_k is None else top_k,
            self.min_score if min_score is None else min_score,
        )

    def cards(self, scenario: str, transcript_window: str) -> tuple[TipCard, ...]:
        """Tip cards for what the learner just said: grounded in the scenario's knowledge or generic.

        The `session.protocols.TipSource` the actors call once per learner turn, on their loop."""
        key = (scenario, transcript_window)
        found = self._cards.get(key)
        if found is not None:
            self._cards.move_to_end(key)
            return found
        hits = self.retrieve(scenario, transcript_window)
        cards = tuple(generate_cards(
            transcript_window, hits, generic=self._generic(scenario), min_score=self.min_score
        ))
        self._cards[key] = cards
        if len(self._cards) > CARD_CACHE:
            self._cards.popitem(last=False)
        return cards

    def ingest(self, scenario: str, filename: str, data: bytes, *, replace: bool) -> Playbook:
        """Extract, chunk, store and index an uploaded playbook; the new version is active at once.

        Raises `IngestError` for a file that cannot be used and `PlaybookConflict` when the
        scenario has a playbook and `replace` is false; in both cases nothing changes.
        """
        text = extract_text(filename, data)
        with self._lock:
            version = self.store.next_version(scenario)
            ingested_at = _now()
            chunks = chunk_text(text, filename, ingested_at, playbook_version=version)
            digest = hashlib.sha256(data).hexdigest()
            playbook = Playbook(
                scenario=scenario,
                version=version,
                playbook_id=str(uuid.uuid5(_PLAYBOOK_NAMESPACE, f"{scenario}\x00{version}\x00{digest}")),
                source_file=filename,
                sha256=digest,
                ingested_at=ingested_at,
                chunks=chunks,
            )
            self.store.add(playbook, replace=replace)
            self._indexes[scenario] = KnowledgeIndex(self._pack(scenario) + chunks)
            self._cards.clear()
        return playbook

    def chunk(self, scenario: str, chunk_id: str) -> Chunk | None:
        """A chunk by id, from the pack or any playbook version, for reports that cite it."""
        index = self.index(scenario)
        for chunk in index.chunks:
            if chunk.chunk_id == chunk_id:
                return chunk
        return self.store.chunk(scenario, chunk_id)
