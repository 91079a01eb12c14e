"""The teachers' studio in a real headless Chromium (issue #35 item 3), on two `samvad serve` nodes
sharing Neo4j: a teacher signs in with their own token, authors a new culture from an empty form
(a refused draft shows each invalid field in the form), plays it in the try-it panel with the rule
brain, and publishes it; the bots then play it on the other node, which was never restarted. A
published version is read-only on the page and is superseded, not edited: the diff between the two
versions shows the one field changed. Screenshots go to artifacts/."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.bots.runner import RunConfig, run
from schemas.scenario import pack_problems, register_version
from tests.browser_support import ARTIFACTS, WAIT_MS, new_page, sign_in
from tests.neo4j_support import ServerProcess
from tests.test_learners_api import DEAL
from tests.test_studio import shipped

pytestmark = [pytest.mark.browser, pytest.mark.neo4j, pytest.mark.anyio, pytest.mark.slow]

ADMIN = "studio-browser-admin-" + "b" * 24
AUTH = {"authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def two_nodes(neo4j_uri: str, tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    nodes = tuple(ServerProcess(tmp_path / f"node{n}.log", NEO4J_URI=neo4j_uri, ADMIN_KEY=ADMIN, BRAIN="rules",
                                KNOWLEDGE_DIR=str(tmp_path / f"k{n}"), SESSION_CREATE_PER_SECOND=1000,
                                SESSION_CREATE_BURST=1000) for n in (1, 2))
    try:
        for node in nodes:
            node.start()
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            node.stop()


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(field, value) of every input of the form, named as the page and the server name fields."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        for n, inner in enumerate(value):
            yield from leaves(inner, f"{path}[{n}]")
    else:
        yield path, value


def lists(value: Any, path: str = "") -> Iterator[tuple[str, int]]:
    """(field, length) of every list of objects, outermost first."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from lists(inner, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        yield path, len(value)
        for n, inner in enumerate(value):
            yield from lists(inner, f"{path}[{n}]")


def as_typed(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(map(str, value)) if any(isinstance(v, str) for v in value) else ", ".join(map(str, value))
    return "" if value is None else str(value)


async def fill_form(page: Any, manifest: dict[str, Any]) -> None:
    """Type the whole manifest into the form, as a teacher would: Add for each list entry, then each field."""
    for field, length in lists(manifest):
        add = page.locator(f'button.add[data-list="{field}"]')
        while await page.locator(f'[data-path^="{field}["]').evaluate_all(
                "(nodes, field) => nodes.filter(n => /^\\[\\d+\\]$/.test(n.dataset.path.slice(field.length))).length",
                field) < length:
            await add.click()
    for field, value in leaves(manifest):
        box = page.locator(f'[data-field="{field}"]')
        if isinstance(value, bool):
            await box.set_checked(value)
        else:
            await box.fill(as_typed(value))


async def test_a_teacher_authors_tries_and_publishes_a_new_culture_that_another_node_plays(
        browser: Any, two_nodes: tuple[ServerProcess, ServerProcess]) -> None:
    first, second = two_nodes
    host = first.http.removeprefix("http://")
    scenario = f"night-market-{uuid.uuid4().hex[:6]}"
    culture = copy.deepcopy(shipped())
    culture.pop("version", None)
    culture.update(scenario=scenario, title="The night market")
    culture["vendor"]["name"] = "Meena"
    async with httpx.AsyncClient(base_url=first.http, timeout=10) as http:
        token = (await http.post("/api/teachers/meera/token", headers=AUTH)).json()["teacher_token"]

    page = await new_page(browser)
    await sign_in(page, host, token, "/view/studio.html")
    await page.wait_for_function("window.samvadStudio && window.samvadStudio.loaded", timeout=WAIT_MS)
    assert await page.text_content("#who") == "teacher meera"
    await page.fill("#new-id", scenario)
    await page.select_option("#shape", "jaipur-bazaar")
    await page.click("#new-empty")
    assert await page.input_value('[data-field="vendor.name"]') == ""
    assert await page.locator('[data-path^="items["]').count() > 0

    # An empty form is refused, and every problem the server lists is shown at its field in the form.
    await page.click("#save")
    await page.wait_for_selector("#problems:not([hidden])", timeout=WAIT_MS)
    problems = await page.evaluate("window.samvadStudio.problems")
    assert problems and all(p["field"] and p["message"] for p in problems)
    shown = await page.evaluate("""(problems) => problems.map((p) => {
        const exact = document.querySelector(`#pack-form .node[data-path="${CSS.escape(p.field)}"]`);
        const at = exact || [...document.querySelectorAll('#pack-form .node.invalid')]
            .find((n) => p.field.startsWith(n.dataset.path));
        return {field: p.field, exact: !!exact, invalid: !!at && at.classList.contains('invalid'),
                note: at ? at.querySelector(':scope > .problem').textContent : ''};
    })""", problems)
    assert all(s["invalid"] and s["note"] for s in shown), [s for s in shown if not s["invalid"]]
    assert sum(s["exact"] for s in shown) >= len(shown) // 2  # most land on their very input
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "studio-refused.png"), full_page=False)

    # The teacher types the culture in; one price out of order is refused at its own field.
    wrong = copy.deepcopy(culture)
    wrong["items"][2]["floor"] = 10000
    await fill_form(page, wrong)
    await page.click("#save")
    await page.wait_for_function("window.samvadStudio.problems.length > 0", timeout=WAIT_MS)
    fields = {p["field"] for p in await page.evaluate("window.samvadStudio.problems")}
    assert "items[2].floor" in fields
    assert await page.get_attribute('.node[data-path="items[2].floor"]', "class") == "node node-number invalid"
    await page.locator('[data-field="items[2].floor"]').scroll_into_view_if_needed()
    await page.screenshot(path=str(ARTIFACTS / "studio-invalid-field.png"))
    await page.fill('[data-field="items[2].floor"]', str(culture["items"][2]["floor"]))
    await page.click("#save")
    await page.wait_for_function("document.getElementById('saved').textContent === 'draft saved'", timeout=WAIT_MS)
    assert await page.locator(".node.invalid").count() == 0

    # Try it: the draft plays as a learner would see it, with the rule brain.
    await page.click("#try")
    await page.wait_for_function("window.samvadStudio.welcomed === true", timeout=WAIT_MS)
    await page.select_option("#try-item", "Tomato")
    await page.dispatch_event("#try-item", "change")
    for n, line in enumerate(DEAL):
        await page.fill("#try-say", line)
        await page.click("#try-send")
        await page.wait_for_function(f"window.samvadStudio.replies.length >= {n + 1}", timeout=WAIT_MS)
    await page.wait_for_function("window.samvadStudio.ended !== null", timeout=WAIT_MS)
    ended = await page.evaluate("window.samvadStudio.ended")
    assert ended["outcome"] == "deal" and ended["summary"]["final_price"] == 70
    preview = await page.evaluate("window.samvadStudio.preview")
    assert preview.startswith("try-")
    await page.frame_locator("#try-report").locator("p.score").wait_for(timeout=WAIT_MS)
    assert "Meena" in (await page.text_content("#try-log") or "") or await page.locator(".try-reply").count() == 4
    await page.locator("#try-panel").screenshot(path=str(ARTIFACTS / "studio-try-it.png"))
    async with httpx.AsyncClient(base_url=first.http, timeout=10) as http:
        # Trying published nothing.
        assert (await http.get(f"/api/scenarios/{scenario}/versions", headers=AUTH)).json()["versions"] == []

    await page.click("#publish")
    await page.wait_for_function("window.samvadStudio.published === 1", timeout=WAIT_MS)
    await page.wait_for_selector('#versions tr[data-version="1"]', timeout=WAIT_MS)

    # The other node, never restarted, serves the new culture to the bots.
    register_version(pack_problems({**culture, "version": 1})[0])  # the bots' own copy of the pack they play
    summary = (await run(RunConfig(url=second.http, scenario=scenario, sessions=2, personas=("polite",),
                                   items=("Tomato",), think_ms=10, duration_s=2.0, ramp_s=0.1,
                                   admin_key=ADMIN, learner_prefix=f"{scenario}-bot-"))).summary()
    assert summary["errors"]["count"] == 0, summary["errors"]
    assert summary["outcomes"]["polite"].get("deal", 0) >= 1
    async with httpx.AsyncClient(timeout=10) as http:
        listed = (await http.get(f"{second.http}/api/scenarios")).json()["scenarios"]
    assert {"id": scenario, "version": 1, "vendor": "Meena"}.items() <= next(
        s for s in listed if s["id"] == scenario).items()

    # A published version is read-only; it is superseded by publishing an edit of it.
    await page.click('#versions tr[data-version="1"] button.view-version')
    await page.wait_for_function("window.samvadStudio.readOnly === true", timeout=WAIT_MS)
    assert await page.locator('[data-field="title"]').is_disabled()
    assert await page.locator("#publish").is_hidden()
    await page.click("#edit-version")
    await page.fill('[data-field="title"]', "The night market, by lamplight")
    await page.click("#publish")
    await page.wait_for_function("window.samvadStudio.published === 2", timeout=WAIT_MS)
    await page.select_option("#diff-a", "1")
    await page.select_option("#diff-b", "2")
    await page.click("#diff")
    await page.wait_for_selector("#diff-table:not([hidden])", timeout=WAIT_MS)
    assert await page.evaluate("window.samvadStudio.diff") == ["title"]
    await page.screenshot(path=str(ARTIFACTS / "studio-diff.png"), full_page=False)
    async with httpx.AsyncClient(base_url=first.http, timeout=10) as http:
        one = (await http.get(f"/api/scenarios/{scenario}?version=1", headers=AUTH)).json()["manifest"]
    assert one["title"] == "The night market" and json.dumps(one) != ""  # version 1 is as it was published
    assert page.js_errors == []

