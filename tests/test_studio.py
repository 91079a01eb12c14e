"""The teacher studio's packs (issue #35, docs/studio.md): drafts, publishing, versions and rollback
over the admin routes; refusals that name every invalid field and change nothing; a published
version serving the next session while a live one keeps its own, and the report naming it. On disk
(no Neo4j) here; tests/test_studio_neo4j.py does the same against Neo4j and two nodes."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.scenario import pack_problems
from tests.servers import Served, create, player, running_server, state

ADMIN = "studio-admin-key-" + "s" * 24
AUTH = {"authorization": f"Bearer {ADMIN}"}
BAZAAR = "jaipur-bazaar"


def shipped(name: str = BAZAAR) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("schemas").joinpath("data", name, "manifest.json")
                                      .read_text("utf-8"))
    return data


def dearer_tomatoes(manifest: dict[str, Any], top: int) -> dict[str, Any]:
    """The manifest with the tomato's opening quote at `top` (what a teacher edits most)."""
    changed = copy.deepcopy(manifest)
    tomato = next(i for i in changed["items"] if i["name"] == "Tomato")
    tomato["tourist_quote"] = [tomato["tourist_quote"][0], top]
    return changed


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as s:
        yield s


async def call(served: Served, method: str, path: str, body: Any = None, *,
               raw: bytes | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        return await http.request(method, path, headers=AUTH if headers is None else headers,
                                  json=body if raw is None else None, content=raw)


async def quote_heard(served: Served, created: dict[str, Any]) -> int:
    """Ask the vendor for the tomato's price; the quote he gives (the session's standing quote)."""
    async with await player(served, created) as c:
        await c.until("welcome")
        await c.send({"type": "scene", "id": "hold", "object_grabbed": "Tomato"})
        await c.until("ack", id="hold")
        await c.turn("ask", "Namaste bhaiya, how much are the tomatoes?")
    quote = (await state(served, created["session_id"], created["player_token"]))["vendor_quote"]
    assert isinstance(quote, int)
    return quote


# ---------------------------------------------------------------------- validation, pure


def test_a_refusal_lists_every_invalid_field_at_once() -> None:
    manifest = shipped()
    manifest["items"][2]["floor"] = 10_000  # above the opening quote
    manifest["lines"]["en-IN"].pop("deal")
    manifest["rules"]["insult_cost"] = 1
    manifest["vendor"]["age"] = 7
    pack, problems = pack_problems(manifest)
    assert pack is None
    fields = {p.field for p in problems}
    assert {"items[2].floor", "rules.insult_cost", "vendor.age"} <= fields, problems
    # The pack-wide rules run once every field is valid: fix those, and the missing pool is named.
    manifest["items"][2]["floor"], manifest["rules"]["insult_cost"], manifest["vendor"]["age"] = 35, 12, 40
    pack, problems = pack_problems(manifest)
    assert pack is None and [(p.field, p.message) for p in problems] == [("lines.en-IN", "missing deal")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=400), st.integers(min_value=1, max_value=400))
def test_an_item_price_band_is_accepted_exactly_when_it_is_ordered(floor: int, top: int) -> None:
    manifest = shipped()
    item = manifest["items"][0]
    item["floor"], item["tourist_quote"] = floor, [min(top, item["tourist_quote"][0]), top]
    pack, problems = pack_problems(manifest)
    ordered = item["wholesale"][0] <= floor <= top and floor <= item["fair"][1] <= top
    assert (pack is not None) == ordered
    if not ordered:
        assert {p.field for p in problems} <= {"items[0].floor", "items[0].fair"} and problems


def test_every_shipped_pack_is_version_one_of_itself() -> None:
    for name in ("jaipur-bazaar", "kyoto-antiques", "marrakech-souk"):
        pack, problems = pack_problems(shipped(name))
        assert pack is not None and pack.version == 1 and not problems


# ---------------------------------------------------------------------- the routes, on disk


@pytest.mark.anyio
async def test_publish_serves_new_sessions_while_a_live_one_keeps_its_version(served: Served) -> None:
    before = await create(served)  # plays version 1, the shipped pack
    assert await quote_heard(served, before) == 150
    edited = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", dearer_tomatoes(shipped(), 190))
    assert edited.status_code == 200, edited.text
    # A draft serves nobody.
    assert await quote_heard(served, await create(served)) == 150
    published = await call(served, "POST", f"/api/scenarios/{BAZAAR}/publish")
    assert published.status_code == 201 and published.json()["version"] == 2, published.text
    after = await create(served)
    assert await quote_heard(served, after) == 190
    # The session started before keeps version 1 for its whole life: a new item quoted at v1 prices.
    async with await player(served, before) as c:
        await c.until("welcome")
        frames = await c.turn("more", "I can pay 60 rupees bhaiya")
        assert frames and frames[0]["type"] == "reply"
    assert (await state(served, before["session_id"], before["player_token"]))["first_quote"] == 150
    listed = (await call(served, "GET", "/api/scenarios", headers={})).json()["scenarios"]
    assert next(p for p in listed if p["id"] == BAZAAR)["version"] == 2
    versions = (await call(served, "GET", f"/api/scenarios/{BAZAAR}/versions")).json()
    assert [(v["version"], v["source"]) for v in versions["versions"]] == [(1, "shipped"), (2, "studio")]
    assert versions["current"] == 2 and versions["draft"] is False


@pytest.mark.anyio
async def test_the_report_names_the_version_the_session_played(served: Served) -> None:
    edited = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", dearer_tomatoes(shipped(), 170))
    assert edited.status_code == 200
    assert (await call(served, "POST", f"/api/scenarios/{BAZAAR}/publish")).status_code == 201
    created = await create(served)
    async with await player(served, created) as c:
        await c.until("welcome")
        await c.send({"type": "scene", "id": "hold", "object_grabbed": "Tomato"})
        await c.until("ack", id="hold")
        await c.turn("ask", "Namaste bhaiya, how much are the tomatoes?")
        await c.send({"type": "command", "id": "stop", "name": "stop"})
        report = await c.until("session.report", wait=10)
    assert report["report"]["scenario"] == BAZAAR and report["report"]["scenario_version"] == 2
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        got = await http.get(f"/api/sessions/{created['session_id']}/report",
                             headers={"authorization": f"Bearer {created['player_token']}"})
    assert got.status_code == 200 and got.json()["scenario_version"] == 2


@pytest.mark.anyio
async def test_rollback_publishes_a_copy_of_an_older_version_as_the_next(served: Served) -> None:
    for top in (170, 190):
        edited = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", dearer_tomatoes(shipped(), top))
        assert edited.status_code == 200
        assert (await call(served, "POST", f"/api/scenarios/{BAZAAR}/publish")).status_code == 201
    assert await quote_heard(served, await create(served)) == 190  # version 3
    back = await call(served, "POST", f"/api/scenarios/{BAZAAR}/rollback", {"version": 2})
    assert back.status_code == 201 and back.json() == {**back.json(), "version": 4, "from_version": 2}
    assert await quote_heard(served, await create(served)) == 170
    to_shipped = await call(served, "POST", f"/api/scenarios/{BAZAAR}/rollback", {"version": 1})
    assert to_shipped.status_code == 201 and to_shipped.json()["version"] == 5
    assert await quote_heard(served, await create(served)) == 150
    old = await call(served, "GET", f"/api/scenarios/{BAZAAR}?version=3")
    assert old.status_code == 200
    assert next(i for i in old.json()["manifest"]["items"] if i["name"] == "Tomato")["tourist_quote"][1] == 190
    missing = await call(served, "POST", f"/api/scenarios/{BAZAAR}/rollback", {"version": 9})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_version"
    versions = (await call(served, "GET", f"/api/scenarios/{BAZAAR}/versions")).json()["versions"]
    assert [v["version"] for v in versions] == [1, 2, 3, 4, 5]


@pytest.mark.anyio
async def test_a_new_scenario_is_drafted_published_and_played(served: Served) -> None:
    manifest = {**shipped(), "scenario": "jaipur-night-market", "title": "Jaipur night market"}
    made = await call(served, "POST", "/api/scenarios", manifest)
    assert made.status_code == 201, made.text
    again = await call(served, "POST", "/api/scenarios", manifest)
    assert again.status_code == 409 and again.json()["error"]["code"] == "scenario_exists"
    # Not playable while it is a draft, nor listed.
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        refused = await http.post("/api/sessions", json={"scenario": "jaipur-night-market"})
        assert refused.status_code == 422
        listed = (await http.get("/api/scenarios")).json()["scenarios"]
        assert "jaipur-night-market" not in {p["id"] for p in listed}
    published = await call(served, "POST", "/api/scenarios/jaipur-night-market/publish")
    assert published.status_code == 201 and published.json()["version"] == 1
    created = await create(served, scenario="jaipur-night-market")
    assert await quote_heard(served, created) == 150
    shipped_again = await call(served, "POST", "/api/scenarios", shipped())
    assert shipped_again.status_code == 409


@pytest.mark.anyio
async def test_bad_input_is_refused_with_its_code_and_changes_nothing(served: Served) -> None:
    broken = dearer_tomatoes(shipped(), 190)
    broken["items"][2]["floor"] = 10_000
    broken["rules"]["lowball_cost"] = 99
    refused = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", broken)
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "invalid_pack"
    # The floor above the opening quote breaks two rules of the item: both are named.
    assert {p["field"] for p in error["problems"]} == {"items[2].floor", "items[2].fair", "rules.lowball_cost"}, error
    other = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", {**shipped(), "scenario": "kyoto-antiques"})
    assert other.status_code == 422 and other.json()["error"]["problems"][0]["field"] == "scenario"
    not_json = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", raw=b"{nope")
    assert not_json.status_code == 422 and not_json.json()["error"]["code"] == "invalid_pack"
    unknown = await call(served, "PUT", "/api/scenarios/atlantis", shipped())
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_scenario"
    no_draft = await call(served, "POST", f"/api/scenarios/{BAZAAR}/publish")
    assert no_draft.status_code == 409 and no_draft.json()["error"]["code"] == "no_draft"
    bad_rollback = await call(served, "POST", f"/api/scenarios/{BAZAAR}/rollback", {"version": "2"})
    assert bad_rollback.status_code == 422
    too_large = await call(served, "POST", "/api/scenarios", raw=b" " * (256 * 1024 + 1),
                           headers={**AUTH, "content-type": "application/json"})
    assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "too_large"
    without_key = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", shipped(), headers={})
    assert without_key.status_code == 401
    # Nothing changed: no draft, no version, sessions play the shipped pack.
    read = (await call(served, "GET", f"/api/scenarios/{BAZAAR}")).json()
    assert read["draft"] is None and read["current"] == 1 and read["version"] == 1
    versions = (await call(served, "GET", f"/api/scenarios/{BAZAAR}/versions")).json()["versions"]
    assert [v["version"] for v in versions] == [1]
    assert await quote_heard(served, await create(served)) == 150


@pytest.mark.anyio
async def test_without_an_admin_key_the_studio_is_closed(tmp_path: Path) -> None:
    async with running_server(KNOWLEDGE_DIR=str(tmp_path)) as served:
        answer = await call(served, "PUT", f"/api/scenarios/{BAZAAR}", shipped(), headers={})
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "admin_key_unset"
    assert not (tmp_path / "studio").exists()


def test_versions_live_under_knowledge_dir(tmp_path: Path) -> None:
    async def main() -> None:
        async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served:
            await call(served, "PUT", f"/api/scenarios/{BAZAAR}", dearer_tomatoes(shipped(), 190))
            await call(served, "POST", f"/api/scenarios/{BAZAAR}/publish")
        # A restarted server (same folder) serves version 2 at once.
        async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served:
            assert await quote_heard(served, await create(served)) == 190

    anyio.run(main)
    assert sorted(p.name for p in (tmp_path / "studio" / BAZAAR).iterdir()) == ["v0002.json"]


# ---------------------------------------------------------------------- the disk store's numbering


@settings(max_examples=40, deadline=None)
@given(st.booleans(), st.lists(st.one_of(st.just(("publish", 0)), st.tuples(st.just("rollback"),
                                                                          st.integers(min_value=0, max_value=12))),
                               max_size=12))
def test_the_disk_store_numbers_every_version_once_and_a_rollback_copies_its_source(
        shipped_pack: bool, steps: list[tuple[str, int]]) -> None:
    """Against a plain list as the model: numbers rise by one from above the floor, each version's
    manifest is what was published or the rollback's source, and a refused step changes nothing."""
    import tempfile

    from server.studio.store import DiskPackStore, PackNotFound

    floor = 1 if shipped_pack else 0

    async def run(root: str) -> None:
        store = DiskPackStore(root)
        model: dict[int, str] = {}
        for n, (kind, source) in enumerate(steps):
            if kind == "publish":
                await store.save_draft("s", f"m{n}", float(n), create=False)
                stored = await store.publish("s", float(n), floor=floor)
                expected = f"m{n}"
            elif source in model:
                stored = await store.republish("s", source, float(n), floor=floor)
                expected = model[source]
            else:
                with pytest.raises(PackNotFound):
                    await store.republish("s", source, float(n), floor=floor)
                continue
            assert stored.version == max(model, default=floor) + 1 and stored.manifest == expected
            model[stored.version] = expected
        assert {v.version: v.manifest for v in await store.versions("s")} == model
        assert await DiskPackStore(root).latest("s") == max(model, default=0)

    with tempfile.TemporaryDirectory() as root:
        anyio.run(run, root)


@pytest.mark.anyio
async def test_a_scenario_that_no_pack_could_be_is_unknown_not_a_server_error(served: Served) -> None:
    """Schemathesis found it: a NUL or a lone surrogate in `scenario` reached the disk store's folder
    name (a 500); `..` would have reached outside it. No pack id has them: the scenario is unknown."""
    for name in ("\udcf8a\x00b", "../../etc", "jaipur-bazaar\n", "Jaipur-Bazaar"):
        body = json.dumps({"scenario": name}).encode()  # a lone surrogate as JSON writes it: \udcf8
        created = await call(served, "POST", "/api/sessions", raw=body,
                             headers={**AUTH, "content-type": "application/json"})
        assert created.status_code == 422, (name, created.text)
        assert created.json()["error"]["code"] == "invalid"
    for path in ("..%2F..%2Fetc", "a%00b", "Jaipur-Bazaar"):
        versions = await call(served, "GET", f"/api/scenarios/{path}/versions")
        assert versions.status_code == 404, (path, versions.text)  # unknown (or, with a slash, no route)
