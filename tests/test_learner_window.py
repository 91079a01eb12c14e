"""A learner's profile stays bounded however many sessions they play (server/learners/profile.py's
first rule, `SESSION_WINDOW` in schemas/learner.py): each session is counted once with only the
latest ids kept, a learner of 1,000 sessions packs small, and a profile stored in the unbounded
shape before is migrated when read."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from schemas.enums import LanguageCode, Level, Outcome
from schemas.learner import SESSION_WINDOW, LearnerProfile, SessionFigures, profile_from_json
from server.learners.packing import pack
from server.learners.profile import fold
from server.learners.store import MemoryLearnerStore

# A learner of 1,000 sessions at one stall, packed as the in-memory store keeps them: 1,253 bytes
# (2026-11-27); before the bound, 53,301 at three stalls (`python -m benchmarks.learner_profile`).
THOUSAND_SESSIONS_PACKED = 2_048


def session(sid: str, start: float, end: float, learner: str = "asha", **changes: Any) -> SessionFigures:
    values: dict[str, Any] = {
        "session_id": sid, "learner_id": learner, "scenario": "jaipur-bazaar", "level": Level.BEGINNER,
        "input_language": LanguageCode.EN_IN, "target_language": LanguageCode.HI_IN, "outcome": Outcome.DEAL,
        "item": "Tomato", "turns": 4, "first_quote": 150, "paid": 70, "discount_pct": 53.3, "score": 60,
        "hints": (1, 0, 0), "created_at": start, "ended_at": end,
    }
    return SessionFigures(**{**values, **changes})


def folds_per_session(offers: list[SessionFigures], window: int) -> dict[str, int]:
    """How often each session changed the profile when `offers` were folded in, in that order."""
    profile: LearnerProfile | None = None
    changed: dict[str, int] = {}
    for f in offers:
        after = fold(profile, f, window=window)
        if after is not profile:
            changed[f.session_id] = changed.get(f.session_id, 0) + 1
        profile = after
    assert profile is not None and profile.sessions == sum(changed.values())
    assert len(profile.latest_sessions) <= window
    return changed


@st.composite
def learners_sessions(draw: st.DrawFn) -> list[SessionFigures]:
    """Up to 40 sessions of one learner, with any starts (ties too) and lengths, and ids in no order."""
    n = draw(st.integers(2, 40))
    ids = draw(st.lists(st.text("0123456789abcdef", min_size=1, max_size=6), min_size=n, max_size=n, unique=True))
    starts = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    lengths = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    return [session(sid, float(start), float(start + length))
            for sid, start, length in zip(ids, starts, lengths, strict=True)]


def with_repeats(data: st.DataObject, firsts: list[SessionFigures]) -> list[SessionFigures]:
    """`firsts` in their order, with repeats of sessions already offered anywhere after their first."""
    offers: list[SessionFigures] = []
    for f in firsts:
        if offers:
            offers += data.draw(st.lists(st.sampled_from(offers), max_size=3))
        offers.append(f)
    return offers + data.draw(st.lists(st.sampled_from(firsts), max_size=2 * len(firsts)))


@settings(max_examples=300, deadline=None)
@given(learners_sessions(), st.data())
def test_sessions_offered_as_they_end_with_any_repeats_are_each_folded_exactly_once(
        sessions: list[SessionFigures], data: st.DataObject) -> None:
    """The sessions end in the order the store folds them; each is offered again any number of times,
    in any order, after it ended; the window is smaller than the number of sessions. Every session
    is folded exactly once when no more than the window of the learner's sessions ended while it was
    open (SESSION_WINDOW = 32 sessions of one learner ending during one of theirs)."""
    window = data.draw(st.integers(1, len(sessions) - 1))
    firsts = sorted(sessions, key=lambda f: f.ended_at)  # ties: in the order drawn
    changed = folds_per_session(with_repeats(data, firsts), window)
    assert all(count == 1 for count in changed.values())
    for at, f in enumerate(firsts):
        ended_while_open = sum(1 for other in firsts[:at] if other.ended_at > f.created_at)
        if ended_while_open <= window:
            assert changed.get(f.session_id) == 1, (f.session_id, ended_while_open, window)


@settings(max_examples=200, deadline=None)
@given(learners_sessions(), st.data())
def test_in_any_order_no_session_is_ever_folded_twice(sessions: list[SessionFigures], data: st.DataObject) -> None:
    window = data.draw(st.integers(1, len(sessions) - 1))
    firsts = data.draw(st.permutations(sessions))
    assert all(count == 1 for count in folds_per_session(with_repeats(data, firsts), window).values())


def test_a_session_open_while_more_than_the_window_ended_is_taken_for_counted() -> None:
    """The bound's price, stated: with a window of 2, a session that three others started after it
    and ended before it is taken for one folded already (Neo4j folds it: it checks PLAYED)."""
    long = session("long", 0.0, 100.0)
    others = [session(f"s{n}", 10.0 + n, 20.0 + n) for n in range(3)]
    assert folds_per_session([*others, long], window=2) == {"s0": 1, "s1": 1, "s2": 1}
    assert folds_per_session([*others, long], window=3) == {"s0": 1, "s1": 1, "s2": 1, "long": 1}


def real_session(rng: random.Random, n: int, learner: str = "asha") -> SessionFigures:
    """A session as the server makes them: a 32-digit hex id, wall-clock times, some hints and slips."""
    start = 1_795_000_000.0 + 600.0 * n + rng.random()
    return session(rng.getrandbits(128).to_bytes(16, "big").hex(), start, start + 300.0 + rng.random(), learner,
                   score=rng.randrange(100), hints=(rng.randrange(3), rng.randrange(2), 0),
                   slips=("lowball",) if rng.random() < 0.2 else ())


@pytest.mark.anyio
async def test_a_learner_of_a_thousand_sessions_keeps_a_small_profile() -> None:
    rng = random.Random(15)
    store = MemoryLearnerStore()
    played = [real_session(rng, n) for n in range(1000)]
    for f in played:
        await store.record(f)
    profile = await store.get("asha")
    assert profile is not None and profile.sessions == 1000
    assert [sid for _, sid in profile.latest_sessions] == [f.session_id for f in played[-SESSION_WINDOW:]]
    assert len(pack(profile)) < THOUSAND_SESSIONS_PACKED
    for again in (played[0], played[500], played[-1]):  # long out of the window, and in it
        assert await store.record(again) == profile
    assert await store.get("asha") == profile and len(await store.progress("asha")) == 1000


def unbounded(sessions: list[SessionFigures]) -> dict[str, Any]:
    """A profile of `sessions` as the stores kept it before it was bounded: every session's id, and
    its hint point."""
    profile: LearnerProfile | None = None
    for f in sessions:
        profile = fold(profile, f)
    assert profile is not None
    data = profile.model_dump(mode="json", exclude={"latest_sessions", "counted_through"})
    data["session_ids"] = [f.session_id for f in sessions]
    data["hints_by_level"] = [{"session_id": f.session_id, "at": f.created_at, "level": f.level.value,
                               "hints": list(f.hints)} for f in sessions]
    return data


def test_a_profile_stored_unbounded_is_migrated_when_read() -> None:
    sessions = [session(f"s{n}", 1000.0 * n, 1000.0 * n + 60) for n in range(40)]
    legacy = unbounded(sessions)
    profile = profile_from_json(json.dumps(legacy))
    assert profile.sessions == 40 and profile.scenarios["jaipur-bazaar"].played == 40
    assert profile.latest_sessions == tuple((f.created_at, f.session_id) for f in sessions[-SESSION_WINDOW:])
    assert profile.counted_through == (7000.0, "s7")  # the latest of the eight that left the window
    for again in (sessions[0], sessions[7], sessions[8], sessions[-1]):
        assert fold(profile, again) is profile  # counted already, in the window or before it
    later = fold(profile, session("s40", 40_000.0, 40_060.0))
    assert later.sessions == 41 and later.latest_sessions[-1] == (40_000.0, "s40")
    assert profile_from_json(later.model_dump_json()) == later  # written back in the bounded shape


def test_a_profile_of_neither_shape_is_refused() -> None:
    for raw in ("not json", "[1, 2]", json.dumps({"learner_id": "asha"}),
                json.dumps({"learner_id": "asha", "session_ids": ["s1"]})):  # unbounded, but no level
        with pytest.raises(ValidationError):
            profile_from_json(raw)
