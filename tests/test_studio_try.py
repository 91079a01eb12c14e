"""The studio's try-it route (issue #35 item 3): a draft plays on this node as a preview scenario,
with its own prices, while what learners play (the published version) does not change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.servers import Served, create, running_server
from tests.test_studio import ADMIN, call, dearer_tomatoes, quote_heard, shipped

pytestmark = pytest.mark.anyio


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as s:
        yield s


async def test_a_draft_is_tried_as_a_preview_and_learners_keep_the_published_version(served: Served) -> None:
    assert (await call(served, "POST", "/api/scenarios/jaipur-bazaar/try")).json()["error"]["code"] == "no_draft"
    assert (await call(served, "PUT", "/api/scenarios/jaipur-bazaar",
                       dearer_tomatoes(shipped(), 400))).status_code == 200
    tried = await call(served, "POST", "/api/scenarios/jaipur-bazaar/try")
    assert tried.status_code == 201
    preview = tried.json()["preview"]
    assert preview.startswith("try-") and tried.json()["scenario"] == "jaipur-bazaar"
    again = (await call(served, "POST", "/api/scenarios/jaipur-bazaar/try")).json()["preview"]
    assert again == preview  # the same draft, the same preview
    assert await quote_heard(served, await create(served, scenario=preview)) == 400  # the draft's price
    assert await quote_heard(served, await create(served)) == 150  # learners: version 1, unchanged
    listed = (await call(served, "GET", "/api/scenarios")).json()
    assert preview not in str(listed)
    versions = (await call(served, "GET", "/api/scenarios/jaipur-bazaar/versions")).json()
    assert [v["version"] for v in versions["versions"]] == [1] and versions["draft"] is True
    assert (await call(served, "POST", "/api/scenarios/jaipur-bazaar/try", headers={})).status_code == 401
    changed = await call(served, "PUT", "/api/scenarios/jaipur-bazaar", dearer_tomatoes(shipped(), 300))
    assert changed.status_code == 200
    assert (await call(served, "POST", "/api/scenarios/jaipur-bazaar/try")).json()["preview"] != preview
