"""The teacher's learners page in a real headless Chromium: the list of learners with their latest
session and trend, one learner's progress as four charts, the links to each session's report, and
the admin key. The sessions are real ones, played over the socket with the rule vendor; the store is
the in-memory one. Screenshots go to artifacts/."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser_support import ARTIFACTS, WAIT_MS, new_page, sign_in
from tests.servers import create, running_server
from tests.test_learners_api import ADMIN as ADMIN_KEY
from tests.test_learners_api import DEAL, WALK, api, hints_before_a_line, play, profile_after

pytestmark = [pytest.mark.browser, pytest.mark.anyio, pytest.mark.usefixtures("collect_servers")]

CHARTS = ("chart-discount", "chart-turns", "chart-score", "chart-hints", "chart-fluency")


async def rows(page: Any, table: str) -> list[dict[str, Any]]:
    return await page.evaluate("""(table) => [...document.querySelectorAll(`#${table} tbody tr`)].map((tr) => ({
        ...tr.dataset, text: tr.innerText,
        href: (tr.querySelector('a') || {getAttribute: () => null}).getAttribute('href')}))""", table)


async def test_the_learners_page_lists_learners_and_charts_one_learners_progress(browser: Any) -> None:
    async with running_server(ADMIN_KEY=ADMIN_KEY) as served:
        host = served.base_url.removeprefix("http://")
        asha = [await create(served, learner_id="asha", level="beginner") for _ in range(3)]
        for created, lines in zip(asha, (WALK, DEAL, DEAL), strict=True):
            await play(served, created, lines)
        await play(served, await create(served, learner_id="ravi"), WALK)
        await profile_after(served, "asha", 3)
        await profile_after(served, "ravi", 1)
        expected = (await api(served, "GET", "/api/learners/asha")).json()["progress"]

        # Signed out, the learners page sends the teacher to sign in, and back after.
        page = await new_page(browser)
        await page.goto(f"http://{host}/view/learners.html")
        await page.wait_for_url(f"http://{host}/view/signin.html?next=**", timeout=WAIT_MS)
        await page.fill("#key", "not-the-key")
        await page.click("#submit")
        await page.wait_for_selector("#error:not([hidden])", timeout=WAIT_MS)
        await sign_in(page, host, ADMIN_KEY, "/view/lobby.html")
        lobby = page
        link = await lobby.get_attribute("#learners-link", "href")
        assert link == "/view/learners.html"  # the lobby's way to the learners page: no key in it
        cookies = await page.context.cookies()
        [signin] = [c for c in cookies if c["name"] == "samvad_admin"]
        assert signin["httpOnly"] and signin["sameSite"] == "Strict" and ADMIN_KEY not in signin["value"]
        assert await page.evaluate("document.cookie") == ""  # no script reads the sign-in

        await page.goto(f"http://{host}{link}")
        await page.wait_for_function("window.samvadLearners && window.samvadLearners.loaded", timeout=WAIT_MS)
        listed = {r["learnerId"]: r for r in await rows(page, "learners")}
        assert set(listed) == {"asha", "ravi"}
        assert listed["asha"]["trend"] == "improving" and "improving" in listed["asha"]["text"]
        assert listed["ravi"]["trend"] == "new"
        assert "deal" in listed["asha"]["text"] and "walked away" in listed["ravi"]["text"]
        assert listed["asha"]["href"] == "#asha" and ADMIN_KEY not in (listed["asha"]["href"] or "")
        assert await page.text_content("#store") == "in memory (until restart)"
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "learners.png"), full_page=True)

        await page.click('tr[data-learner-id="asha"] a.progress-link')
        await page.wait_for_selector("#detail:not([hidden]) #chart-score .uplot canvas", timeout=WAIT_MS)
        for chart in CHARTS:
            assert await page.locator(f"#{chart} .uplot canvas").count() >= 1, chart
        points = {chart: await page.get_attribute(f"#{chart}", "data-points") for chart in CHARTS}
        # Three sessions: a walk-away, then two deals; every session has a score and a hint count.
        # Typed, not spoken: no fluency point (tests/test_fluency.py has a spoken session's figures).
        assert points == {"chart-discount": "2", "chart-turns": "2", "chart-score": "3", "chart-hints": "3",
                          "chart-fluency": "0"}
        shown = await rows(page, "progress")
        assert [r["sessionId"] for r in shown] == [p["session_id"] for p in expected] == [a["session_id"] for a in asha]
        assert [r["outcome"] for r in shown] == ["walked_away", "deal", "deal"]
        fluency = await page.evaluate("[...document.querySelectorAll('#progress td.fluency')].map((td) => td.title)")
        assert fluency == ["typed, not spoken"] * 3
        for row, point in zip(shown, expected, strict=True):
            # The server's link with a report token of that session (issued afresh for each answer).
            assert row["href"].split("&token=")[0] == point["report_url"].split("&token=")[0]
            assert ADMIN_KEY not in row["href"]
            assert row["href"].startswith(f"/api/sessions/{point['session_id']}/report?format=html&token=")
        assert "beginner" in (await page.text_content("#profile") or "")
        await page.screenshot(path=str(ARTIFACTS / "learner-progress.png"), full_page=True)

        report = await new_page(browser)
        await report.goto(f"http://{host}{shown[1]['href']}")
        score = await report.get_attribute("p.score", "data-score")
        assert score == str(expected[1]["score"])
        assert page.js_errors == []
        # The report link opens that report and nothing else: not the session, not its socket.
        token = shown[1]["href"].split("&token=")[1]
        import httpx

        async with httpx.AsyncClient(base_url=served.base_url) as http:
            sid = shown[1]["sessionId"]
            assert (await http.get(f"/api/sessions/{sid}",
                                   headers={"authorization": f"Bearer {token}"})).status_code == 401
            assert (await http.get(f"/api/sessions/{shown[0]['sessionId']}/report?token={token}")).status_code == 403


async def test_the_learners_page_needs_the_admin_key(browser: Any) -> None:
    async with running_server(ADMIN_KEY=ADMIN_KEY) as served:
        host = served.base_url.removeprefix("http://")
        page = await new_page(browser)
        await page.goto(f"http://{host}/view/learners.html")
        await page.wait_for_url(f"http://{host}/view/signin.html?next=**", timeout=WAIT_MS)
        assert await page.locator("#learners tbody tr").count() == 0
        await page.goto(f"http://{host}/view/learners.html?admin={ADMIN_KEY}")  # the old way: refused
        assert "credential_in_url" in (await page.text_content("body") or "")


async def test_the_learners_page_shows_each_review_items_retention(browser: Any) -> None:
    """A whole line revealed by hints, the session's slips and its grounded cards become review items;
    the learner's detail lists each with its reviews, its next due date and its retention (just
    reviewed: 100 %); three days later all are due and their retention has fallen."""
    async with running_server(ADMIN_KEY=ADMIN_KEY) as served:
        host = served.base_url.removeprefix("http://")
        assert served.services is not None
        created = await create(served, learner_id="mira")
        await hints_before_a_line(served, created)
        await play(served, created, WALK)  # no bhaiya in any line, and a lowball: two slips as well
        await profile_after(served, "mira", 1)
        answer = (await api(served, "GET", "/api/learners/mira")).json()
        expected = {item["item_id"]: item for item in answer["items"]}
        assert {i["key"] for i in expected.values() if i["kind"] != "card"} == {"greet", "respect", "lowball"}
        assert any(i["kind"] == "card" for i in expected.values())  # and the grounded cards the lines earned

        page = await new_page(browser)
        await sign_in(page, host, ADMIN_KEY, "/view/learners.html")
        await page.goto(f"http://{host}/view/learners.html#mira")
        await page.wait_for_selector("#detail:not([hidden]) #items tbody tr", timeout=WAIT_MS)
        shown = {r["itemId"]: r for r in await rows(page, "items")}
        assert set(shown) == set(expected)
        for item_id, row in shown.items():
            item = expected[item_id]
            assert float(row["retention"]) == item["retention"] == 1.0  # reviewed seconds ago
            assert row["due"] == "later" and "100%" in row["text"] and "again" in row["text"]
        greet = next(r for i, r in shown.items() if expected[i]["key"] == "greet")
        assert "Namaste bhaiya, ye tamatar kitne ka hai?" in greet["text"] and greet["kind"] == "phrase"
        assert await page.is_hidden("#no-items")
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "learner-items.png"), full_page=True)

        # Three days on (the server's clock), every item is due and its retention has fallen.
        now = served.services.registry.clock() + 3 * 86_400
        served.services.registry.clock = lambda: now
        await page.reload()
        await page.wait_for_selector("#detail:not([hidden]) #items tbody tr", timeout=WAIT_MS)
        later = await rows(page, "items")
        assert {r["due"] for r in later} == {"due"} and all(float(r["retention"]) < 0.9 for r in later)
        assert all("due now" in r["text"] for r in later)
        assert page.js_errors == []
