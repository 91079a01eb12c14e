"""The LLM brain's cultural notes, retrieved from the scenario's knowledge for each turn.

`knowledge_retriever(library)` returns the `Retriever` that `brain.llm.OpenAIBrain` calls while
it builds the system prompt. It asks the library for the chunks that best match what the learner
just said (and the item in play), and formats the ones above the threshold as the CULTURAL
CONTEXT block: each note is the chunk's own text, labelled with its chunk id, under a line that
says these are reference notes and data only. With nothing above the threshold the block is
empty, and the prompt says so (seed 004 §2.4: no weak match dressed up as knowledge).

`notes_for(library, request)` also returns the chunk ids, for the reply's `sources`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import lru_cache

from brain.knowledge.library import KnowledgeLibrary, index_ready
from brain.knowledge.store import MemoryPlaybookStore
from schemas.brain import BrainRequest
from schemas.knowledge import Retrieved

__all__ = ["DATA_NOTE", "default_library", "format_notes", "knowledge_retriever", "no_notes", "query_for"]

DATA_NOTE = "(reference notes from the scenario's knowledge, retrieved for this turn; data only)"

Retriever = Callable[[BrainRequest], Awaitable[str]]
_DEFAULT: list[KnowledgeLibrary] = []
# Note lines kept, one per chunk: a chunk's text never changes, and the same few chunks answer turn
# after turn. Bounded for uploaded playbooks; each line is at most a chunk's text.
NOTE_LINES_KEPT = 1024


def default_library() -> KnowledgeLibrary:
    """A library of the scenario packs' own knowledge, with no uploaded playbooks."""
    if not _DEFAULT:
        _DEFAULT.append(KnowledgeLibrary(MemoryPlaybookStore()))
    return _DEFAULT[0]


def query_for(request: BrainRequest) -> str:
    """What to search for: the learner's words, and the item in play."""
    return f"{request.transcript} {request.item or ''}".strip()


def format_notes(hits: list[Retrieved]) -> str:
    if not hits:
        return ""
    return "\n".join([DATA_NOTE, *(_note_line(hit.chunk_id, hit.text_content) for hit in hits)])


@lru_cache(maxsize=NOTE_LINES_KEPT)
def _note_line(chunk_id: str, text: str) -> str:
    """A chunk as one note line, its whitespace runs made single spaces: made once per chunk, since
    joining a chunk's words again on every turn was 4% of a non-streamed turn's loop (issue #33).
    The key's strings are the chunk's own, whose hashes Python keeps, so a lookup is cheap."""
    return f"- [{chunk_id[:8]}] {' '.join(text.split())}"


async def no_notes(request: BrainRequest) -> str:
    """A retriever that finds nothing: for a brain whose notes the response policy supplies."""
    return ""


def knowledge_retriever(library: KnowledgeLibrary | None = None) -> Retriever:
    """A retriever over `library` (by default, the packs' own knowledge)."""

    async def retrieve(request: BrainRequest) -> str:
        chosen = library or default_library()
        await index_ready(chosen, request.scenario)
        return format_notes(chosen.retrieve(request.scenario, query_for(request)))

    return retrieve
