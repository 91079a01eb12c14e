"""Grounded tip cards (seed 004 §2.5): retrieved chunks formatted, never written.

`generate_cards(transcript_window, retrieved)` is a pass-through. Each card comes from one chunk:

- `title` is the chunk's section heading, or else its first sentence, cut at a word if long;
- `body` is made of the chunk's own sentences, whitespace-normalised and nothing else: the
  sentences sharing most words with what the learner just said, kept in the chunk's order, up to
  `BODY_CHARS`. A chunk of one long sentence is cut at a word and ends with "…", the only
  character a card ever adds;
- `card_id` is a UUID derived from the chunk id, `confidence_score` is `index.confidence(score)`.

At most `MAX_CARDS` (6), one per chunk, in retrieval order. With nothing retrieved there is exactly
one generic card, `grounded: false`, with no sources; its words are the scenario's (or, failing
that, this module's fixed default). The same inputs give the same cards, byte for byte.

A chunk's sentences, title and card id do not depend on what the learner said, so they are worked
out once per chunk (`_prepare`, kept for the last `CHUNK_CACHE` chunks), not once per card.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from brain.knowledge.index import DEFAULT_MIN_SCORE, confidence
from brain.knowledge.tokens import tokenize
from schemas.knowledge import Retrieved, TipCard

__all__ = ["BODY_CHARS", "GENERIC", "MAX_CARDS", "TITLE_CHARS", "generate_cards"]

MAX_CARDS = 6
BODY_CHARS = 280
TITLE_CHARS = 60
GENERIC = ("Keep the conversation going", "Listen, answer what was asked, and ask one question back.")
# Chunks whose sentences, title and card id are kept (a few KiB each): every scenario's pack and
# its playbook's few hundred chunks, with room to spare.
CHUNK_CACHE = 2048

_CARD_NAMESPACE = uuid.UUID("0b9e4a8c-71d2-5f36-8e0a-4c5d9b2e7f61")
_SENTENCE = re.compile(r"[^.!?।]+(?:[.!?।]+|$)")
_SPACE = re.compile(r"\s+")
_MARKUP = re.compile(r"^(?:[#>*\-•]+\s*|\d+[.)]\s+)")


def _sentences(text: str) -> list[str]:
    lines = [_MARKUP.sub("", line.strip()) for line in text.splitlines()]
    flat = _SPACE.sub(" ", " ".join(line for line in lines if line)).strip()
    return [s.strip() for s in _SENTENCE.findall(flat) if s.strip()]


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:") + "…"


class _Prepared(NamedTuple):
    """What a card takes from its chunk whatever the learner said: computed once per chunk."""

    card_id: str
    title: str
    sentences: tuple[str, ...]
    whole: str
    """The sentences joined: the body when it fits in `BODY_CHARS`."""
    words: tuple[frozenset[str], ...]
    """Each sentence's tokens, to rank the sentences of a chunk too long for one body."""


@lru_cache(maxsize=CHUNK_CACHE)
def _card_id(name: str) -> str:
    return str(uuid.uuid5(_CARD_NAMESPACE, name))


@lru_cache(maxsize=CHUNK_CACHE)
def _prepare(chunk_id: str, section: str, text: str) -> _Prepared:
    sentences = tuple(_sentences(text))
    if section:
        title = _cut(section, TITLE_CHARS)
    else:
        title = _cut(sentences[0].rstrip(".!?।"), TITLE_CHARS) if sentences else ""
    whole = " ".join(sentences)
    words = () if len(whole) <= BODY_CHARS else tuple(frozenset(tokenize(s)) for s in sentences)
    return _Prepared(_card_id(chunk_id), title, sentences, whole, words)


def _body(chunk: _Prepared, said: frozenset[str]) -> str:
    if len(chunk.whole) <= BODY_CHARS:
        return chunk.whole
    # Rank by words shared with the learner, earlier first on ties; then restore the chunk's order.
    sentences = chunk.sentences
    ranked = sorted(range(len(sentences)), key=lambda i: (-len(said & chunk.words[i]), i))
    chosen: list[int] = []
    used = 0
    for index in ranked:
        length = len(sentences[index]) + (1 if chosen else 0)
        if used + length <= BODY_CHARS:
            chosen.append(index)
            used += length
    if not chosen:
        return _cut(sentences[ranked[0]], BODY_CHARS)
    return " ".join(sentences[i] for i in sorted(chosen))


def generate_cards(
    transcript_window: str,
    retrieved: Sequence[Retrieved],
    *,
    generic: tuple[str, str] = GENERIC,
    min_score: float = DEFAULT_MIN_SCORE,
) -> list[TipCard]:
    """One card per retrieved chunk (at most `MAX_CARDS`), or one generic card when none."""
    said = frozenset(tokenize(transcript_window))
    cards: list[TipCard] = []
    seen: set[str] = set()
    for hit in retrieved:
        if hit.chunk_id in seen or len(cards) == MAX_CARDS:
            continue
        seen.add(hit.chunk_id)
        chunk = _prepare(hit.chunk_id, hit.metadata.section, hit.text_content)
        body = _body(chunk, said)
        if not body:
            continue
        cards.append(
            TipCard(
                card_id=chunk.card_id,
                title=chunk.title,
                body=body,
                type="coaching",
                grounded=True,
                confidence_score=confidence(hit.score, min_score),
                source_chunk_ids=(hit.chunk_id,),
            )
        )
    if cards:
        return cards
    title, body = generic
    return [
        TipCard(
            card_id=_card_id(f"generic\x00{title}\x00{body}"),
            title=title,
            body=body,
            type="generic",
            grounded=False,
            confidence_score=0.0,
        )
    ]
