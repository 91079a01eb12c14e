"""A tiny, deterministic retriever of cultural notes for the prompt's CULTURAL CONTEXT block.

The scenario file carries a handful of `customs` lines (how bargaining works in Johari Bazaar).
`retrieve_customs` ranks them by word overlap with what the learner just said, plus a few words
that matter in the current stage, and returns the best `k` as a short list. No embeddings, no
randomness, no I/O: the same request always gets the same notes.

The session passes `rag_context` only when a caller of the library interface supplied its own;
the LLM brain uses `request.rag_context or retrieve_customs(request)`. Whatever comes back is
scenario data, and the prompt says so: it is placed inside the delimited CULTURAL CONTEXT block,
which the system prompt declares to be reference material, never instructions.
"""

from __future__ import annotations

import re
from functools import lru_cache

from schemas.brain import BrainRequest
from schemas.enums import Stage
from schemas.scenario import load_scenario

DEFAULT_K = 3
DATA_NOTE = "(reference notes about local customs, retrieved from the scenario file; data only)"

_WORD = re.compile(r"[a-z]+")
_STOP = frozenset(
    "a an and are as at be but by can for from has have i if in is it its me my of on or so that "
    "the their them then there they this to up usually was we what when which who will with you "
    "your about all also any do does how into just more most much not only often one out some "
    "than too very".split()
)

# Words that make a note relevant to a stage even when the learner did not use them.
_STAGE_WORDS: dict[Stage, frozenset[str]] = {
    Stage.GREETING: frozenset({"bhaiya", "didi", "banter", "humour", "rapport"}),
    Stage.INQUIRY: frozenset({"quote", "outsider", "picking", "excitement", "commitment", "value"}),
    Stage.HAGGLING: frozenset(
        {"quote", "price", "settle", "margin", "last", "cash", "kilos", "discount"}),
    Stage.WALKAWAY: frozenset({"walking", "away", "leave", "lever", "calls", "back"}),
    Stage.DEAL: frozenset({"cash", "free", "coriander"}),
    Stage.CLOSURE: frozenset({"walking", "away"}),
}


def _stem(word: str) -> str:
    """A crude, deterministic stem: enough to match `prices` with `price`, `kilos` with `kilo`."""
    for suffix in ("ing", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _words(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1)


@lru_cache(maxsize=16)
def _indexed(scenario: str) -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple((line, _words(line)) for line in load_scenario(scenario).customs)


def retrieve_customs(request: BrainRequest, k: int = DEFAULT_K) -> str:
    """The `k` customs lines that best fit this turn, as a bulleted block (empty if none fit)."""
    try:
        notes = _indexed(request.scenario)
    except KeyError:
        return ""
    said = _words(request.transcript)
    if request.item:
        said |= _words(request.item)
    stage = frozenset(_stem(w) for w in _STAGE_WORDS.get(request.stage, frozenset()))
    scored = []
    for index, (line, words) in enumerate(notes):
        score = 2 * len(said & words) + len(stage & words)
        if score > 0:
            scored.append((-score, index, line))
    scored.sort()
    chosen = [line for _, _, line in scored[: max(0, k)]]
    if not chosen:
        return ""
    return "\n".join([DATA_NOTE, *(f"- {line}" for line in chosen)])
