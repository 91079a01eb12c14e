"""How the in-memory learner store packs a model (server/learners/packing.py, issue #33): JSON
deflated against a dictionary of one value of each kind, and back to the same model."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from schemas.learner import LearnerProfile, ProgressPoint
from schemas.review import Evidence, ReviewEntry, ReviewItem
from server.learners.packing import (
    DICTIONARY,
    LEVEL,
    MEM_LEVEL,
    SAMPLES,
    WBITS,
    history_sessions,
    keep_last,
    pack,
    pack_block,
    pack_history,
    reviewed_in,
    unpack,
    unpack_block,
    unpack_history,
)
from server.learners.store import MemoryLearnerStore
from tests.test_reviews import HINT, T0, figures

KINDS: dict[str, type[BaseModel]] = {"ProgressPoint": ProgressPoint, "LearnerProfile": LearnerProfile,
                                     "ReviewItem": ReviewItem}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_sample_is_what_pydantic_writes_for_its_model(name: str) -> None:
    """A renamed or new field would leave the dictionary a poorer guess: this says so."""
    kind = KINDS[name.split(" ")[0]]
    assert kind.model_validate_json(SAMPLES[name]).model_dump_json().encode() == SAMPLES[name]


@given(st.text(max_size=80), st.text(max_size=80), st.floats(0, 4e9), st.integers(0, 10_000),
       st.lists(st.text(max_size=20), max_size=5))
def test_a_packed_item_comes_back_equal(phrase: str, english: str, at: float, reps: int, cues: list[str]) -> None:
    item = ReviewItem(item_id="i", learner_id="l", scenario="jaipur-bazaar", language="hi-EN", kind="phrase",
                      key="k", source="hint", phrase=phrase, english=english, cues=tuple(cues),
                      evidence=(("s", Evidence(source="hint", key="k", turn=1, text=phrase)),),
                      created_at=at, due=at, reps=reps)
    assert unpack(pack(item), ReviewItem) == item


_ENTRIES = st.builds(
    ReviewEntry, at=st.floats(allow_nan=False), stability=st.floats(allow_nan=False),
    difficulty=st.floats(allow_nan=False), due=st.floats(allow_nan=False),
    session_id=st.one_of(st.text(max_size=40), st.text("0123456789abcdef", min_size=32, max_size=32)),
    rating=st.sampled_from(["again", "hard", "good", "easy"]), recalled=st.sampled_from([None, False, True]))


@given(st.lists(_ENTRIES, max_size=8), st.lists(_ENTRIES, max_size=8), st.integers(0, 12))
def test_a_packed_history_comes_back_equal_and_appends_by_concatenation(
        first: list[ReviewEntry], then: list[ReviewEntry], keep: int) -> None:
    """An item's history kept apart from the rest of it (issue #33): every entry exact, a hex session
    id or any other; a session's reviews added by joining bytes, and the latest `keep` cut off."""
    joined = pack_history(first) + pack_history(then)
    assert unpack_history(joined) == (*first, *then)
    assert history_sessions(joined) == [e.session_id for e in (*first, *then)]
    assert unpack_history(keep_last(joined, keep)) == ((*first, *then)[-keep:] if keep else ())


def test_a_hex_session_id_is_kept_as_its_bytes_and_a_session_id_too_long_is_refused() -> None:
    entry = ReviewEntry(at=1.0, session_id="0123456789abcdef" * 2, rating="good", stability=1.0, difficulty=5.0,
                        due=2.0)
    assert len(pack_history([entry])) == len(pack_history([entry.model_copy(update={"session_id": "s"})])) + 15
    with pytest.raises(ValueError):
        pack_history([entry.model_copy(update={"session_id": "x" * 0x8000})])


@pytest.mark.anyio
async def test_a_new_learner_keeps_a_fraction_of_their_json() -> None:
    """What a new learner leaves in the store: a profile, a progress point and an item for each
    piece of evidence, each far smaller packed than its JSON (about a fifth here)."""
    store = MemoryLearnerStore()
    slip = Evidence(source="slip", key="lowball", turn=1)
    await store.record(figures("0123456789abcdef0123456789abcdef", T0, evidence=(HINT, slip)))
    profile, items = await store.get("asha"), await store.items("asha")
    assert profile is not None and len(items) == 2
    models: list[BaseModel] = [profile, *(await store.progress("asha")), *items]
    as_json = sum(len(m.model_dump_json()) for m in models)
    row = store._items["asha"]  # three runs of bytes (ids, due times, histories with their ends), the
    # scenarios (shared) and the packed items without their histories
    kept = (len(store._profiles["asha"]) + sum(map(len, store._sessions["asha"]))
            + sum(len(part) for part in row if isinstance(part, bytes)))
    assert kept * 3 < as_json
    assert len(DICTIONARY) <= 4096


def test_a_value_packs_to_the_same_bytes_as_from_a_state_made_afresh() -> None:
    """`pack` copies one primed deflate state: what it writes is what a new state would write."""
    profile = LearnerProfile.model_validate_json(SAMPLES["LearnerProfile"])
    fresh = zlib.compressobj(LEVEL, zlib.DEFLATED, -WBITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
    assert pack(profile) == pack(profile) == fresh.compress(profile.model_dump_json().encode()) + fresh.flush()


@given(st.lists(_ENTRIES, max_size=6), _ENTRIES)
def test_a_session_is_found_in_a_history_exactly_when_it_has_an_entry(entries: list[ReviewEntry],
                                                                     other: ReviewEntry) -> None:
    data = pack_history(entries)
    for entry in (*entries, other):
        assert reviewed_in(data, entry.session_id) == (entry.session_id in [e.session_id for e in entries])


@given(st.lists(st.binary(max_size=300) | st.text(max_size=100).map(str.encode), max_size=12))
def test_values_deflated_together_come_back_each_as_it_was(values: list[bytes]) -> None:
    """A block of item heads (issue #33): one stream, cut back into the values it was given."""
    assert unpack_block(pack_block(values)) == values
