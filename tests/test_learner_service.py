"""`Learners.profile`: a new session waits for its learner's profile only so long."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from schemas.enums import LanguageCode, Level, Outcome
from schemas.learner import LearnerProfile, SessionFigures
from server.backends import InMemoryMirror
from server.learners.service import Learners
from server.learners.store import MemoryLearnerStore

pytestmark = pytest.mark.anyio



class _HangingStore:
    """A store that never answers (a Neo4j that accepted the connection and went quiet)."""

    name = "hanging"
    durable = True
    immediate = False

    async def get(self, learner_id: str) -> LearnerProfile | None:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def _learners(store: Any, timeout_s: float) -> Learners:
    return Learners(store, SimpleNamespace(listeners=[]), InMemoryMirror(), timeout_s=timeout_s)  # type: ignore[arg-type]


async def test_a_store_that_does_not_answer_in_time_gives_no_profile() -> None:
    learners = _learners(_HangingStore(), timeout_s=0.05)
    with anyio.fail_after(2):
        assert await learners.profile("asha") is None


async def test_the_memory_store_answers_at_once() -> None:
    store = MemoryLearnerStore()
    profile = await store.record(SessionFigures(
        session_id="s1", learner_id="asha", scenario="jaipur-bazaar", level=Level.BEGINNER,
        input_language=LanguageCode.EN, target_language=LanguageCode.EN, outcome=Outcome.DEAL, item="Tomato",
        turns=4, first_quote=150, paid=70, discount_pct=53.3, score=60, hints=(1, 0, 0), slips=(),
        created_at=1000.0, ended_at=1060.0))
    learners = _learners(store, timeout_s=0.05)
    assert await learners.profile("asha") == profile
    assert await learners.profile("ravi") is None
