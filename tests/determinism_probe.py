"""What must come out the same in every process: run as `python -m tests.determinism_probe`.

It prints, as JSON, everything the suite calls deterministic: tokens, chunk ids, BM25 rankings, tip
cards, the prompt's cultural notes, and every persona's whole negotiation with the rule vendor (the
learner's lines, Ramesh's lines, stages and prices). tests/test_determinism.py runs it under two
different PYTHONHASHSEED values: a choice that leans on the salted `hash()` of a string, or on the
order of a set of strings, gives the same answer twice in one process and a different one in the next.
"""

from __future__ import annotations

import json

import anyio

from brain.knowledge.cards import generate_cards
from brain.knowledge.chunking import chunk_text
from brain.knowledge.index import KnowledgeIndex
from brain.knowledge.library import pack_chunks
from brain.knowledge.retriever import knowledge_retriever
from brain.knowledge.tokens import sound_key, tokenize
from clients.bots.personas import PERSONAS, SCENE_ITEMS
from schemas.brain import BrainRequest
from schemas.enums import Mood, Stage
from tests.test_knowledge import NOW, PLAYBOOK
from tests.test_rules_vendor import play

TEXTS = ("How much are the prices?", "kitne ka hai bhaiya", "कितने का है।", "bahut mehenga, thoda kam karo",
         "Bargaining, bargains, cash or cards?", "dhanyavaad, phir milenge")
QUERIES = ("cash price walk away tip cards", "bahut mehenga, thoda kam karo bhaiya", "do vendors take cards",
           "walking away", "कितने का है")


async def _notes() -> list[str]:
    retrieve = knowledge_retriever()
    out = []
    for transcript in ("That is too expensive, I am leaving, walking away now", "namaste bhaiya, kitne ka hai?"):
        request = BrainRequest.model_validate({
            "session_id": "s1", "scenario": "jaipur-bazaar", "turn": 3, "max_turns": 30, "transcript": transcript,
            "stage": Stage.HAGGLING, "happiness_score": 55, "vendor_mood": Mood.NEUTRAL})
        out.append(await retrieve(request))
    return out


def probe() -> dict[str, object]:
    chunks = pack_chunks("jaipur-bazaar", NOW) + chunk_text(PLAYBOOK, "gold.md", NOW)
    index = KnowledgeIndex(chunks)
    hits = {q: [(h.chunk_id, h.score) for h in index.retrieve(q, top_k=6)] for q in QUERIES}
    cards = {q: [c.model_dump(mode="json") for c in generate_cards(q, index.retrieve(q, top_k=6))] for q in QUERIES}
    games = {}
    for name in sorted(PERSONAS):
        for item in SCENE_ITEMS:
            run = anyio.run(play, PERSONAS[name](item=item).next_line)
            games[f"{name}/{item}"] = [(line, r.text, r.negotiation_state.value, r.counter_price, r.happiness_score)
                                       for line, r in zip(run.lines, run.replies, strict=True)]
    return {
        "tokens": {t: tokenize(t) for t in TEXTS},
        "sound_keys": {w: sound_key(w) for t in TEXTS for w in t.split()},
        "chunk_ids": [c.chunk_id for c in chunks],
        "hits": hits,
        "cards": cards,
        "notes": anyio.run(_notes),
        "games": games,
    }


if __name__ == "__main__":
    print(json.dumps(probe(), ensure_ascii=False, sort_keys=True))
