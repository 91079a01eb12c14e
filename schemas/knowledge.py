"""Cultural knowledge as data: playbook chunks, what retrieval returns, and grounded tip cards.

The shapes follow seed 004 (WS4-2.1 retrieval, WS4-2.3 cards). Every text field here is data a
teacher wrote, carried verbatim: nothing in this module or its users generates facts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Chunk", "ChunkMeta", "Playbook", "Retrieved", "TipCard"]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ChunkMeta(_Data):
    source_file: str
    ingested_at: str
    """When the file was processed: ISO 8601, UTC."""
    section: str = ""
    """The nearest Markdown heading above the chunk, if the file had one."""
    playbook_version: str = ""
    """`v1`, `v2`, ... for an uploaded playbook; empty for a scenario pack's own knowledge files."""


class Chunk(_Data):
    chunk_id: str
    """A UUID derived from the chunk's text: the same file ingested twice gives the same ids."""
    text_content: str
    metadata: ChunkMeta


class Retrieved(_Data):
    """One retrieval hit, in seed 004's schema. `score` is BM25: higher is more relevant."""

    chunk_id: str
    score: float
    text_content: str
    metadata: ChunkMeta


class Playbook(_Data):
    """One uploaded playbook version of a scenario, with the chunks its file gave."""

    scenario: str
    version: str
    playbook_id: str
    source_file: str
    sha256: str
    ingested_at: str
    chunks: tuple[Chunk, ...]


class TipCard(_Data):
    """A coaching card. A grounded card's `title` and `body` are its chunk's own words."""

    card_id: str
    title: str
    body: str
    type: Literal["coaching", "generic"]
    grounded: bool
    confidence_score: float = Field(ge=0.0, le=1.0)
    source_chunk_ids: tuple[str, ...] = ()
