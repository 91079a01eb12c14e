"""The studio's try-it panel shows the engine's flags as a learner would see them (issue #35 item 3):
a scripted brain proposes moves the rules change (a mood jump, a price that rises), and the panel
shows each reply's flags in the plain words of schemas/flags.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schemas.brain import BrainRequest
from schemas.decision import AIDecision
from schemas.enums import Stage
from schemas.flags import FLAG_WORDS
from tests.browser_support import WAIT_MS, new_page, sign_in
from tests.fakes import ScriptedBrain, decision
from tests.servers import running_server

pytestmark = [pytest.mark.browser, pytest.mark.anyio]

ADMIN = "studio-flags-admin-" + "f" * 24


def pushy(request: BrainRequest) -> AIDecision:
    """120 at a mood of 95 (a jump the rules cap), then 160 (a rise the rules refuse)."""
    if request.turn == 1:
        return decision("Namaste ji! 120 rupees a kilo.", 95, Stage.INQUIRY, counter_price=120)
    return decision("Arre, for you 160.", 60, Stage.HAGGLING, counter_price=160)


async def test_the_try_it_panel_shows_each_replys_flags_in_plain_words(browser: Any, tmp_path: Path) -> None:
    async with running_server(brain=ScriptedBrain(pushy), ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served:
        host = served.base_url.removeprefix("http://")
        page = await new_page(browser)
        await sign_in(page, host, ADMIN, "/view/studio.html")
        await page.wait_for_function("window.samvadStudio && window.samvadStudio.loaded", timeout=WAIT_MS)
        await page.select_option("#existing", "jaipur-bazaar")
        await page.click("#open")
        await page.wait_for_selector("#editor:not([hidden])", timeout=WAIT_MS)
        await page.click("#try")
        await page.wait_for_function("window.samvadStudio.welcomed === true", timeout=WAIT_MS)
        for n, line in enumerate(("Namaste, how much are the tomatoes?", "Too much, 60?")):
            await page.fill("#try-say", line)
            await page.click("#try-send")
            await page.wait_for_function(f"window.samvadStudio.replies.length >= {n + 1}", timeout=WAIT_MS)
        replies = await page.evaluate("window.samvadStudio.replies.map((r) => r.flags)")
        shown = await page.evaluate("""() => [...document.querySelectorAll('#try-log li.try-reply')].map(
            (li) => [...li.querySelectorAll('ul.flags li')].map((f) => [f.title, f.textContent]))""")
        assert sum(map(len, replies)) >= 2, replies  # the rules changed something in both turns
        assert "quote_rise" in replies[1]
        assert shown == [[[flag, FLAG_WORDS[flag]] for flag in flags] for flags in replies]
        assert page.js_errors == []
