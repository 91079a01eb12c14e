"""The lobby socket's coalescing and bounds, over a real socket (no browser needed)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from server.app import create_app
from server.config import load_settings
from server.spectate import COALESCE_SECONDS
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


async def messages_for(ws: ClientConnection, seconds: float) -> list[dict[str, Any]]:
    received: list[dict[str, Any]] = []
    with anyio.move_on_after(seconds):
        while True:
            received.append(json.loads(await ws.recv()))
    return received


async def test_a_busy_session_costs_the_lobby_one_row_per_quarter_second() -> None:
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
                for n, item in enumerate(items):  # 25 changes in a few milliseconds
                    await player.send(json.dumps({"type": "scene", "id": f"s{n}",
                                                  "object_grabbed": item}))
                updates = await messages_for(lobby, 6 * COALESCE_SECONDS)
        assert 1 <= len(updates) <= 4
        assert all(u["type"] == "lobby.update" and len(u["sessions"]) == 1 for u in updates)
        assert updates[-1]["sessions"][0]["item"] == "Mango"


async def test_too_many_changed_sessions_collapse_into_one_full_list() -> None:
    async with serve(app_with(OUTBOUND_QUEUE=8)) as host, \
            httpx.AsyncClient(base_url=f"http://{host}") as client:
        async with connect(f"ws://{host}/ws/lobby") as lobby:
            assert json.loads(await lobby.recv())["sessions"] == []
            await client.post("/api/sessions", json={"learner_id": "first"})
            update = json.loads(await lobby.recv())
            assert update["type"] == "lobby.update" and len(update["sessions"]) == 1
            # While the socket waits out its quarter second, eleven more sessions start.
            for n in range(11):
                await client.post("/api/sessions", json={"learner_id": f"learner-{n}"})
            [full] = await messages_for(lobby, 3 * COALESCE_SECONDS)
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
