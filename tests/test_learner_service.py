"""`Learners.profile`: a new session waits for its learner's profile only so long."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from schemas.enums import LanguageCode, Level
from schemas.learner import LearnerProfile
from server.backends import InMemoryMirror
from server.learners.service import Learners
from server.learners.store import MemoryLearnerStore

pytestmark = pytest.mark.anyio

PROFILE = LearnerProfile(learner_id="asha", level=Level.BEGINNER, input_language=LanguageCode.EN,
                         target_language=LanguageCode.EN)


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
    store._profiles["asha"] = PROFILE
    learners = _learners(store, timeout_s=0.05)
    assert await learners.profile("asha") == PROFILE
    assert await learners.profile("ravi") is None
