"""The lobby socket's coalescing and bounds, and who may see the lobby, over real sockets (no browser needed)."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from server.app import create_app
from server.config import load_settings
from server.spectate import COALESCE_SECONDS
from tests.browser_support import ADMIN_KEY, create_session, settings
from tests.fakes import ScriptedBrain
from tests.live_server import collect_stopped_servers, serve

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _collect_servers() -> Any:
    yield
    collect_stopped_servers()


def app_with(**overrides: Any) -> Any:
    settings = load_settings(**{"SAMVAD_SECRET": "s" * 40, "MIRROR": "none", "BRAIN": "rules", "ADMIN_KEY": "",
                                **overrides})
    return create_app(settings, brain=ScriptedBrain())


async def test_a_busy_session_costs_the_lobby_one_row_per_quarter_second() -> None:
    """25 changes of one session: the lobby hears of them at most once per COALESCE_SECONDS.

    The bound is counted against the time the changes actually took to arrive, so a busy machine
    that spreads them out is allowed more messages, never a message per change."""
    async with serve(app_with()) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = (await client.post("/api/sessions", json={"learner_id": "asha"})).json()
        async with connect(f"ws://{host}/ws/lobby") as lobby:
            first = json.loads(await lobby.recv())
            assert first["type"] == "lobby" and len(first["sessions"]) == 1
            # max_queue=None: the acks go unread here, and a full queue would stall the close.
            async with connect(f"ws://{host}/ws/sessions/{created['session_id']}"
                               f"?token={created['player_token']}", max_queue=None) as player:
                await player.recv()  # welcome
                items = ["Tomato", "Apple"] * 12 + ["Mango"]
                started = time.monotonic()
                for n, item in enumerate(items):  # 25 changes in a few milliseconds
                    await player.send(json.dumps({"type": "scene", "id": f"s{n}",
                                                  "object_grabbed": item}))
                updates: list[dict[str, Any]] = []
                with anyio.fail_after(10):
                    while not updates or updates[-1]["sessions"][0]["item"] != "Mango":
                        updates.append(json.loads(await lobby.recv()))
                took = time.monotonic() - started
        assert all(u["type"] == "lobby.update" and len(u["sessions"]) == 1 for u in updates)
        # one message at once, then at most one per quarter second: here 2 in 0.251 s (measured)
        assert 1 <= len(updates) <= 1 + took / COALESCE_SECONDS, (len(updates), took)


async def test_too_many_changed_sessions_collapse_into_one_full_list() -> None:
    app = app_with(OUTBOUND_QUEUE=8)
    registry = app.state.services.registry
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        async with connect(f"ws://{host}/ws/lobby") as lobby:
            assert json.loads(await lobby.recv())["sessions"] == []
            await client.post("/api/sessions", json={"learner_id": "first"})
            update = json.loads(await lobby.recv())
            assert update["type"] == "lobby.update" and len(update["sessions"]) == 1
            # While the socket waits out its quarter second, eleven more sessions start: created in
            # this event loop without a pause, so all eleven land before the socket's next message
            # however busy the machine is (over HTTP, a slow machine spread them over several).
            for n in range(11):
                registry.create(learner_id=f"learner-{n}")
            full = json.loads(await lobby.recv())
        assert full["type"] == "lobby" and len(full["sessions"]) == 12
        assert full["sessions"][0]["learner_id"] == "first"


async def test_lobby_rows_carry_working_spectator_links() -> None:
    async with serve(app_with()) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = (await client.post("/api/sessions", json={"learner_id": "ravi"})).json()
        [row] = (await client.get("/api/lobby")).json()["sessions"]
        assert row["learner_id"] == "ravi" and row["turn"] == 0 and row["last_turn_at"] is None
        token = row["watch_url"].split("token=")[1]
        state = await client.get(f"/api/sessions/{created['session_id']}",
                                 headers={"authorization": f"Bearer {token}"})
        assert state.status_code == 200 and state.json()["learner_id"] == "ravi"


@pytest.mark.parametrize("environment", ["development", "production"])
async def test_without_an_admin_key_the_admin_routes_are_open_only_in_development(environment: str) -> None:
    """Development without ADMIN_KEY opens them; production does not start without a key, and they
    are closed to a request without it."""
    production = environment == "production"
    key = "a" * 32 if production else ""
    async with serve(app_with(SAMVAD_ENV=environment, ADMIN_KEY=key)) as host, \
            httpx.AsyncClient(base_url=f"http://{host}") as client:
        backend = {"authorization": f"Bearer {key}"} if key else {}
        created = (await client.post("/api/sessions", json={"learner_id": "asha"}, headers=backend)).json()
        session = created["session_id"]
        in_url = await client.get("/api/learners/asha", params={"admin": "anything"})
        assert in_url.status_code == 400 and in_url.json()["error"]["code"] == "credential_in_url"
        answers = {
            "lobby page": await client.get("/view/lobby.html"),
            "lobby": await client.get("/api/lobby"),
            "link": await client.get(f"/api/sessions/{session}/spectator-link"),
            "learners": await client.get("/api/learners"),
            "learner": await client.get("/api/learners/asha"),
            "stats": await client.get("/api/stats"),
            "drain": await client.post("/admin/drain"),
            "erase": await client.delete("/api/learners/asha"),
        }
        closed = {name for name, answer in answers.items() if answer.status_code == 401}
        assert closed == (set(answers) if production else set()), {n: a.status_code for n, a in answers.items()}
        if production:
            # The learner's own token still opens the learner's own profile (none yet: the first
            # session has not ended), and another learner's stays closed.
            own = await client.get("/api/learners/asha",
                                   headers={"authorization": f"Bearer {created['learner_token']}"})
            assert own.status_code == 404 and own.json()["error"]["code"] == "unknown_learner"
            other = await client.get("/api/learners/ravi",
                                     headers={"authorization": f"Bearer {created['learner_token']}"})
            assert other.status_code == 403
            in_url = await client.get("/api/learners/asha", params={"token": created["learner_token"]})
            assert in_url.status_code == 401  # a learner token is never read from the URL
            async with connect(f"ws://{host}/ws/lobby") as lobby:
                with pytest.raises(ConnectionClosed) as refused:
                    await lobby.recv()
            assert refused.value.rcvd is not None and refused.value.rcvd.code == 4401
        else:
            assert answers["lobby"].json()["sessions"][0]["session_id"] == session
            assert answers["erase"].json() == {"learner_id": "asha", "erased": True}


# ------------------------------------------------------------------------------ the admin key


async def test_lobby_and_links_need_the_admin_key_when_one_is_set() -> None:
    app = create_app(settings(ADMIN_KEY=ADMIN_KEY), brain=ScriptedBrain())
    bearer = {"authorization": f"Bearer {ADMIN_KEY}"}
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "asha")
        sid = created["session_id"]

        assert (await client.get("/api/lobby")).status_code == 401
        assert (await client.get("/api/lobby", headers={"authorization": "Bearer wrong"})
                ).status_code == 401
        listed = await client.get("/api/lobby", headers=bearer)
        assert listed.status_code == 200
        [row] = listed.json()["sessions"]
        assert row["session_id"] == sid and row["learner_id"] == "asha"
        assert row["stage"] == "GREETING" and "token=" in row["watch_url"]
        assert (await client.get(f"/api/lobby?admin={ADMIN_KEY}")).status_code == 400  # never in a URL

        assert (await client.get("/view/lobby.html")).status_code == 401
        assert (await client.get("/view/")).status_code == 401
        assert (await client.get("/view/lobby.html", headers=bearer)).status_code == 200
        signed = await client.post("/api/signin", headers=bearer)
        assert signed.status_code == 204 and "httponly" in signed.headers["set-cookie"].lower()
        assert "samesite=strict" in signed.headers["set-cookie"].lower()
        assert (await client.get("/view/lobby.html")).status_code == 200  # the cookie, kept by the client
        # A page of another origin cannot use the teacher's cookie.
        assert (await client.get("/api/lobby", headers={"origin": "https://evil.example"})).status_code == 401
        await client.post("/api/signout")
        client.cookies.clear()
        assert (await client.post("/api/signin", headers={"authorization": "Bearer wrong"})).status_code == 401
        # The watch page and its assets hold no session data; the socket checks the token.
        assert (await client.get("/view/watch.html")).status_code == 200
        assert (await client.get("/view/vendor/uPlot-1.6.32.iife.min.js")).status_code == 200

        link_path = f"/api/sessions/{sid}/spectator-link"
        assert (await client.get(link_path)).status_code == 401
        link = await client.get(link_path, headers=bearer)
        assert link.status_code == 200
        body = link.json()
        assert body["url"] == f"/view/watch.html?session={sid}&token={body['spectator_token']}"
        assert (await client.get("/api/sessions/nope/spectator-link", headers=bearer)
                ).status_code == 404

        # The spectator token from the link opens a read-only session socket.
        async with connect(f"ws://{host}/ws/sessions/{sid}?token={body['spectator_token']}",
                           subprotocols=["samvad.v1.json"]) as ws:  # type: ignore[list-item]
            welcome = json.loads(await ws.recv())
            assert welcome["role"] == "spectator"

        async with connect(f"ws://{host}/ws/lobby") as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
        async with connect(f"ws://{host}/ws/lobby", additional_headers=bearer) as ws:
            first = json.loads(await ws.recv())
            assert first["type"] == "lobby" and first["sessions"][0]["session_id"] == sid


async def test_the_lobby_is_open_without_an_admin_key_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="samvad.server"):
        app = create_app(settings(), brain=ScriptedBrain())
    assert any("ADMIN_KEY is not set" in r.getMessage() for r in caplog.records)
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        assert (await client.get("/api/lobby")).json()["sessions"] == []
        assert (await client.get("/view/")).status_code == 200
