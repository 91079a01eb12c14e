"""The knowledge pipeline without a server: tokens, chunking, BM25 retrieval, tip cards, the store."""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.knowledge.cards import BODY_CHARS, MAX_CARDS, generate_cards
from brain.knowledge.chunking import (
    MAX_CHARS,
    MAX_FILE_BYTES,
    IngestError,
    chunk_text,
    extract_text,
    split_segments,
)
from brain.knowledge.index import KnowledgeIndex, confidence
from brain.knowledge.library import KnowledgeLibrary, pack_chunks
from brain.knowledge.store import DiskPlaybookStore, PlaybookConflict
from brain.knowledge.tokens import sound_key, tokenize
from schemas.knowledge import Retrieved
from tests.pdf_fixture import PAGES, pdf_bytes

NOW = "2026-11-25T09:00:00+00:00"
PLAYBOOK = """# Paying

Q: Do vendors take cards?
A: Most stalls in the old city take cash only. A few keep a UPI QR code taped to the cart.

Q: What about tipping?
A: Nobody tips a fruit seller. Rounding up to the next ten rupees is a kind gesture.

# Saying goodbye

"Phir milenge" (फिर मिलेंगे) means see you again, and leaves the door open for next time.
"""


# --------------------------------------------------------------------------- tokens


@pytest.mark.parametrize(
    ("latin", "devanagari"),
    [("kitne", "कितने"), ("dhanyavaad", "धन्यवाद"), ("bhaiya", "भैया"), ("mehenga", "महंगा"),
     ("bahut", "बहुत"), ("zyada", "ज़्यादा"), ("sadak", "सड़क"), ("namaste", "नमस्ते"), ("ek", "एक")],
)
def test_a_hinglish_word_and_its_devanagari_share_a_sound_key(latin: str, devanagari: str) -> None:
    assert sound_key(latin) == sound_key(devanagari)
    assert len(sound_key(latin)) >= 2


def test_tokens_in_english_hinglish_and_devanagari() -> None:
    assert tokenize("How much are the prices?") == ["much", "~mc", "price", "~prc"]
    assert tokenize("kitne ka hai") == ["kitne", "~ktn"]
    # vowel signs stay inside the word; the danda is punctuation; particles are dropped
    assert tokenize("कितने का है।") == ["कितने", "~ktn"]
    assert tokenize("Bargaining, bargains") == ["bargain", "~brgn", "bargain", "~brgn"]


@given(st.text(max_size=200))
def test_tokenize_is_total(text: str) -> None:
    """Any text gives tokens without raising (the same tokens in every process: tests/test_determinism.py)."""
    tokens = tokenize(text)
    assert all(t and not t.isspace() for t in tokens)


# --------------------------------------------------------------------------- chunking


def test_blank_lines_split_and_qa_pairs_stay_together() -> None:
    chunks = chunk_text(PLAYBOOK, "gold.md", NOW)
    assert [c.text_content.splitlines()[0][:22] for c in chunks] == [
        "Q: Do vendors take car", "Q: What about tipping?", '"Phir milenge" (फिर मि'
    ]
    assert chunks[0].text_content.endswith("taped to the cart.")
    assert [c.metadata.section for c in chunks] == ["Paying", "Paying", "Saying goodbye"]
    assert {c.metadata.source_file for c in chunks} == {"gold.md"}
    assert {c.metadata.ingested_at for c in chunks} == {NOW}


def test_the_same_file_gives_the_same_chunk_ids_and_repeats_get_their_own() -> None:
    first = chunk_text(PLAYBOOK, "gold.md", NOW)
    again = chunk_text(PLAYBOOK, "renamed.md", "2027-01-01T00:00:00+00:00")
    assert [c.chunk_id for c in first] == [c.chunk_id for c in again]
    twice = chunk_text("Same words.\n\nSame words.", "x.txt", NOW)
    assert len({c.chunk_id for c in twice}) == 2


def test_a_long_paragraph_is_split_on_newlines_with_overlap() -> None:
    lines = [f"Line {i}: " + "bargain " * 12 for i in range(40)]
    segments = split_segments("\n".join(line.strip() for line in lines))
    assert len(segments) > 1
    assert all(len(s) <= MAX_CHARS for s in segments)
    for before, after in itertools.pairwise(segments):
        shared = max(k for k in range(1, 101) if before.endswith(after[:k]))
        assert 50 <= shared <= 100 and after[shared] == " ", (before[-120:], after[:120])


@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=400),
                max_size=12))
def test_chunking_never_exceeds_the_limit_and_loses_no_word(paragraphs: list[str]) -> None:
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, "t.txt", NOW)
    assert all(0 < len(c.text_content) <= MAX_CHARS for c in chunks)
    kept = " ".join(c.text_content for c in chunks) + " " + " ".join(c.metadata.section for c in chunks)
    for word in re.findall(r"\S+", text):
        if not word.startswith("#"):
            assert word in kept


@pytest.mark.parametrize("text, expected", [
    ("#\x0c0", [("#\x0c0", "0")]),  # found by the property above: the heading was the whole text
    ("# Title\n\n## Prices\n\nTomatoes are 40 a kilo.", [("# Title", "Title"),
                                                         ("Tomatoes are 40 a kilo.", "Prices")]),
    ("Bargain politely.\n\n# Notes", [("Bargain politely.", ""), ("# Notes", "Notes")]),
])
def test_a_heading_with_nothing_under_it_is_kept_as_a_chunk(text: str, expected: list[tuple[str, str]]) -> None:
    chunks = chunk_text(text, "t.md", NOW)
    assert [(c.text_content, c.metadata.section) for c in chunks] == expected


def test_a_single_huge_line_is_split_at_sentences_then_words() -> None:
    line = "This sentence is about prices in the bazaar. " * 60
    segments = split_segments(line.strip())
    assert all(len(s) <= MAX_CHARS for s in segments)
    assert all(s.endswith(".") for s in segments[:-1])
    unbroken = "x" * 2500
    assert all(len(s) <= MAX_CHARS for s in split_segments(unbroken))


def test_extract_refuses_unknown_types_oversize_and_bad_text() -> None:
    with pytest.raises(IngestError) as kind:
        extract_text("notes.exe", b"MZ")
    assert kind.value.reason == "unsupported_type"
    with pytest.raises(IngestError) as size:
        extract_text("big.txt", b"a" * (MAX_FILE_BYTES + 1))
    assert size.value.reason == "too_large"
    with pytest.raises(IngestError) as bad:
        extract_text("latin1.txt", "naïve".encode("latin-1"))
    assert bad.value.reason == "unreadable"
    with pytest.raises(IngestError) as corrupt:
        extract_text("broken.docx", b"not a zip")
    assert corrupt.value.reason == "unreadable"


def test_docx_headings_paragraphs_and_tables_become_text() -> None:
    import docx

    document = docx.Document()
    document.add_heading("Paying", level=1)
    document.add_paragraph("Q: Do vendors take cards?")
    document.add_paragraph("A: Most stalls take cash only.")
    document.add_paragraph("")
    document.add_paragraph("Q: Tipping?")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "tomato", "40-60 rupees"
    buffer = io.BytesIO()
    document.save(buffer)
    chunks = chunk_text(extract_text("guide.docx", buffer.getvalue()), "guide.docx", NOW)
    assert chunks[0].text_content == "Q: Do vendors take cards?\nA: Most stalls take cash only."
    assert chunks[0].metadata.section == "Paying"
    assert any("tomato | 40-60 rupees" in c.text_content for c in chunks)


def test_pdf_text_is_extracted_page_by_page_and_chunked() -> None:
    """A PDF written byte by byte (tests/pdf_fixture.py) gives back exactly the lines drawn on its pages."""
    data = pdf_bytes(PAGES)
    text = extract_text("guide.pdf", data)
    assert text == "\n\n".join("\n".join(lines) for lines in PAGES)
    chunks = chunk_text(text, "guide.pdf", NOW)
    assert [(c.text_content, c.metadata.section) for c in chunks] == [
        ("Q: Does Ramesh give a discount for coins?\n"
         "A: Ramesh knocks five rupees off for exact change (nobody has change before noon).", ""),
        ("Q: When is the stall open?\nA: From seven in the morning until the evening aarti.", "Opening hours"),
    ]
    assert {c.metadata.source_file for c in chunks} == {"guide.pdf"}


def test_a_blank_pdf_page_gives_no_text_and_a_broken_pdf_is_unreadable() -> None:
    assert extract_text("blank.pdf", pdf_bytes([[]])).strip() == ""
    with pytest.raises(IngestError) as refused:
        extract_text("broken.pdf", b"%PDF-1.4 and then nothing")
    assert refused.value.reason == "unreadable"


# --------------------------------------------------------------------------- retrieval


@pytest.fixture(scope="module")
def jaipur() -> KnowledgeIndex:
    return KnowledgeIndex(pack_chunks("jaipur-bazaar", NOW) + chunk_text(PLAYBOOK, "gold.md", NOW))


@pytest.mark.parametrize("query", ["bhaiya, how much is it?", "kitne ka hai", "कितने का है"])
def test_the_price_question_finds_the_phrase_in_every_script(jaipur: KnowledgeIndex, query: str) -> None:
    hits = jaipur.retrieve(query, top_k=3)
    assert hits, query
    assert "kitne ka hai" in hits[0].text_content


def test_a_devanagari_note_is_found_by_a_hinglish_query() -> None:
    hindi = "मोलभाव में धीरे धीरे दाम कम करो।\n\nचाय पीना ज़रूरी है।"
    index = KnowledgeIndex(pack_chunks("jaipur-bazaar", NOW) + chunk_text(hindi, "hi.md", NOW))
    hits = index.retrieve("dheere dheere daam kam karo", top_k=1)
    assert hits and hits[0].text_content.startswith("मोलभाव")
    assert index.retrieve("chai peena zaroori", top_k=1)[0].text_content.startswith("चाय")


def test_below_the_threshold_retrieval_is_empty(jaipur: KnowledgeIndex) -> None:
    assert jaipur.retrieve("what is the weather in Tokyo", top_k=5) == []
    best = jaipur.retrieve("walking away", top_k=1)[0]
    assert jaipur.retrieve("walking away", top_k=1, min_score=best.score + 0.01) == []
    assert jaipur.retrieve("walking away", top_k=0) == []


def test_top_k_best_first_and_a_repeated_question_answered_alike(jaipur: KnowledgeIndex) -> None:
    hits = jaipur.retrieve("cash price walk away tip cards", top_k=4)
    assert 1 < len(hits) <= 4
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits == jaipur.retrieve("cash price walk away tip cards", top_k=4)  # from the recent-answers cache
    assert jaipur.retrieve("do vendors take cards", top_k=1)[0].metadata.source_file == "gold.md"


def test_an_empty_index_returns_nothing() -> None:
    assert KnowledgeIndex([]).retrieve("anything") == []


# --------------------------------------------------------------------------- cards


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_a_grounded_card_is_made_of_its_chunks_words(jaipur: KnowledgeIndex) -> None:
    hits = jaipur.retrieve("do vendors take cards or cash", top_k=6)
    cards = generate_cards("do vendors take cards or cash", hits)
    assert 1 <= len(cards) <= MAX_CARDS
    for card, hit in zip(cards, hits, strict=True):
        assert card.grounded and card.type == "coaching"
        assert card.source_chunk_ids == (hit.chunk_id,)
        assert len(card.body) <= BODY_CHARS
        for sentence in re.findall(r"[^.!?।]+[.!?।]?", card.body.removesuffix("…")):
            assert sentence.strip() in _normal(hit.text_content), sentence
        assert 0.5 <= card.confidence_score == confidence(hit.score) < 1


def test_no_chunk_means_one_generic_ungrounded_card() -> None:
    cards = generate_cards("the weather in Tokyo", [], generic=("Listen first", "Ask one question."))
    assert len(cards) == 1
    assert cards[0].grounded is False and cards[0].type == "generic"
    assert cards[0].source_chunk_ids == () and cards[0].body == "Ask one question."


def test_at_most_six_cards_one_per_chunk() -> None:
    chunks = chunk_text("\n\n".join(f"Tip {i}: haggle calmly." for i in range(10)), "t.md", NOW)
    hits = [Retrieved(chunk_id=c.chunk_id, score=2.0, text_content=c.text_content, metadata=c.metadata)
            for c in chunks]
    cards = generate_cards("haggle", hits + hits[:2])
    assert len(cards) == MAX_CARDS
    assert len({c.source_chunk_ids for c in cards}) == MAX_CARDS


def test_a_long_chunk_keeps_the_sentences_the_learner_asked_about() -> None:
    text = " ".join(f"Sentence {n} talks about apples." for n in range(12)) + " Cash earns a discount."
    chunk = chunk_text(text, "t.md", NOW)[0]
    hit = Retrieved(chunk_id=chunk.chunk_id, score=3.0, text_content=text, metadata=chunk.metadata)
    body = generate_cards("cash discount", [hit])[0].body
    assert "Cash earns a discount." in body and len(body) <= BODY_CHARS


# --------------------------------------------------------------------------- store and library


def test_one_active_playbook_replace_keeps_old_chunks(tmp_path: Path) -> None:
    library = KnowledgeLibrary(DiskPlaybookStore(tmp_path))
    first = library.ingest("jaipur-bazaar", "gold.md", PLAYBOOK.encode(), replace=False)
    assert first.version == "v1" and first.chunks
    with pytest.raises(PlaybookConflict):
        library.ingest("jaipur-bazaar", "other.md", b"Something else entirely.", replace=False)
    second = library.ingest("jaipur-bazaar", "other.md", b"Bring small notes.", replace=True)
    assert second.version == "v2"
    assert library.retrieve("jaipur-bazaar", "small notes")[0].metadata.playbook_version == "v2"
    assert library.retrieve("jaipur-bazaar", "do vendors take cards") == [] or all(
        h.metadata.source_file != "gold.md" for h in library.retrieve("jaipur-bazaar", "do vendors take cards"))
    old = first.chunks[0]
    assert library.chunk("jaipur-bazaar", old.chunk_id) == old
    # a restart: a new library over the same folder serves the active version
    reborn = KnowledgeLibrary(DiskPlaybookStore(tmp_path))
    assert reborn.store.active("jaipur-bazaar") == second
    assert reborn.retrieve("jaipur-bazaar", "small notes")[0].chunk_id == second.chunks[0].chunk_id


def test_a_refused_upload_changes_nothing(tmp_path: Path) -> None:
    library = KnowledgeLibrary(DiskPlaybookStore(tmp_path))
    with pytest.raises(IngestError):
        library.ingest("jaipur-bazaar", "x.exe", b"MZ", replace=False)
    assert library.store.active("jaipur-bazaar") is None
    assert list(tmp_path.iterdir()) == []
