"""The authorization matrix (issue 31): every route of the app, every kind of credential, the status
expected in development and in production, checked against a running server.

The expected statuses are the route table's (`server/routes_table.py`, `development` and
`production` of each `Operation`), the same table that makes `GET /openapi.json`. A route the app
serves with no row there fails `test_every_route_of_the_app_has_a_row`; a row whose statuses the
server does not give fails the matrix, which prints every cell that differs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.routing import Mount, Route, WebSocketRoute
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from server.app import create_app
from server.config import load_settings
from server.routes_table import CREDENTIALS, OPERATIONS
from tests.servers import TEST_SETTINGS, Served, running_server
from tests.test_learners_api import DEAL, play

ADMIN = "matrix-admin-key-" + "m" * 24
MODES: dict[str, dict[str, Any]] = {
    "development": {"DEV_ENDPOINTS": True},  # no ADMIN_KEY: the embedded default, open and warned
    "production": {"SAMVAD_ENV": "production", "ADMIN_KEY": ADMIN},
}


def app_route_keys() -> set[tuple[str, str]]:
    """(method, path) of every route the app serves; HEAD rides along with GET."""
    app = create_app(load_settings(**TEST_SETTINGS))
    keys: set[tuple[str, str]] = set()
    for route in app.routes:
        if isinstance(route, WebSocketRoute):
            keys.add(("WS", route.path))
        elif isinstance(route, Route):
            keys |= {(method, route.path) for method in (route.methods or ()) if method != "HEAD"}
        elif isinstance(route, Mount):
            keys.add(("GET", f"{route.path}/{{path:path}}"))
        else:
            raise AssertionError(f"a route of an unknown kind: {route!r}")
    return keys


def test_every_route_of_the_app_has_a_row() -> None:
    table = [op.key for op in OPERATIONS]
    assert len(table) == len(set(table)), "a route has two rows"
    assert app_route_keys() == set(table)
    for op in OPERATIONS:
        for mode in (op.development, op.production):
            assert len(mode.split()) == len(CREDENTIALS), op.key


@contextlib.asynccontextmanager
async def world(mode: str) -> AsyncIterator[tuple[Served, dict[str, str | None], dict[tuple[str, str], Any]]]:
    """A server in `mode`, Asha's ended session with every kind of credential, and the request of each row."""
    admin = ADMIN if mode == "production" else "no-key-in-development-" + "d" * 16
    async with running_server(**MODES[mode]) as served, httpx.AsyncClient(base_url=served.base_url) as http:
        backend = {"authorization": f"Bearer {admin}"}
        asha = (await http.post("/api/sessions", json={"learner_id": "asha"}, headers=backend)).json()
        await play(served, asha, DEAL)
        with anyio.fail_after(5):
            while True:
                profile = await http.get("/api/learners/asha", headers=backend)
                if profile.status_code == 200 and profile.json()["progress"]:
                    break
                await anyio.sleep(0.05)
        report = profile.json()["progress"][0]["report_url"].split("token=")[1]
        kyoto = (await http.post("/api/sessions", json={"scenario": "kyoto-antiques"})).json()
        # A class of another teacher's, with Asha in it: the matrix's teacher may not read it.
        klass = (await http.post("/api/classes", json={"name": "7B", "teacher_id": "other-teacher"},
                                 headers=backend)).json()
        cid = klass["class_id"]
        teacher = (await http.post("/api/teachers/matrix-teacher/token", headers=backend)).json()["teacher_token"]
        credentials = {"none": None, "player": asha["player_token"], "spectator": asha["spectator_token"],
                       "learner": asha["learner_token"], "report": report, "admin": admin,
                       "wrong": kyoto["player_token"], "teacher": teacher}
        sid = asha["session_id"]
        calls: dict[tuple[str, str], Any] = {
            ("GET", "/health"): "/health",
            ("GET", "/livez"): "/livez",
            ("GET", "/readyz"): "/readyz",
            ("GET", "/openapi.json"): "/openapi.json",
            ("GET", "/asyncapi.json"): "/asyncapi.json",
            ("POST", "/api/sessions"): ("/api/sessions", {"learner_id": "asha"}),
            ("GET", "/api/sessions/{session_id}"): f"/api/sessions/{sid}",
            ("GET", "/api/sessions/{session_id}/graph"): f"/api/sessions/{sid}/graph",
            ("GET", "/api/sessions/{session_id}/report"): f"/api/sessions/{sid}/report",
            ("GET", "/api/sessions/{session_id}/spectator-link"): f"/api/sessions/{sid}/spectator-link",
            ("GET", "/api/stats"): "/api/stats",
            ("POST", "/api/dev/generate"): ("/api/dev/generate", {"transcribed_text": "hi", "session_id": "matrix"}),
            ("POST", "/admin/drain"): ("/admin/drain", None),
            ("GET", "/metrics"): "/metrics",
            ("GET", "/api/scenarios"): "/api/scenarios",
            ("POST", "/api/scenarios/{scenario}/knowledge"): ("/api/scenarios/jaipur-bazaar/knowledge", None),
            ("POST", "/api/scenarios"): ("/api/scenarios", {}),
            ("GET", "/api/scenarios/{scenario}"): "/api/scenarios/jaipur-bazaar",
            ("PUT", "/api/scenarios/{scenario}"): ("/api/scenarios/jaipur-bazaar", {}),
            ("POST", "/api/scenarios/{scenario}/publish"): ("/api/scenarios/jaipur-bazaar/publish", None),
            ("GET", "/api/scenarios/{scenario}/versions"): "/api/scenarios/jaipur-bazaar/versions",
            ("POST", "/api/scenarios/{scenario}/try"): ("/api/scenarios/jaipur-bazaar/try", None),
            ("POST", "/api/scenarios/{scenario}/rollback"): ("/api/scenarios/jaipur-bazaar/rollback", {"version": 99}),
            ("POST", "/retrieve"): ("/retrieve", {"query": "how to bargain", "scenario": "jaipur-bazaar"}),
            ("GET", "/api/learners"): "/api/learners",
            ("POST", "/api/learners/{learner_id:path}/token"): ("/api/learners/asha/token", None),
            ("GET", "/api/learners/{learner_id:path}"): "/api/learners/asha",
            ("DELETE", "/api/learners/{learner_id:path}"): "/api/learners/nobody",
            ("POST", "/api/test"): ("/api/test", {"audioData": 5}),
            ("POST", "/api/signin"): ("/api/signin", None),
            ("GET", "/api/signin"): "/api/signin",
            ("POST", "/api/signout"): ("/api/signout", None),
            ("POST", "/api/teachers/{teacher_id}/token"): ("/api/teachers/t1/token", None),
            ("POST", "/api/classes"): ("/api/classes", {"name": "7C", "teacher_id": "matrix-teacher"}),
            ("GET", "/api/classes"): "/api/classes",
            ("GET", "/api/classes/{class_id}"): f"/api/classes/{cid}",
            ("POST", "/api/classes/{class_id}/learners"): (f"/api/classes/{cid}/learners", {"learner_ids": ["asha"]}),
            ("POST", "/api/classes/{class_id}/assignments"): (f"/api/classes/{cid}/assignments", {
                "scenario": "jaipur-bazaar", "level": "beginner", "due_at": 4102444800.0,
                "criteria": {"within_fair_pct": 15, "no_insult": True, "max_hints": 2}}),
            ("GET", "/api/classes/{class_id}/progress"): f"/api/classes/{cid}/progress",
            ("GET", "/view/"): "/view/",
            ("GET", "/view/lobby.html"): "/view/lobby.html",
            ("GET", "/view/{path:path}"): "/view/watch.html",
            ("GET", "/api/lobby"): "/api/lobby",
            ("WS", "/ws/sessions/{session_id}"): f"/ws/sessions/{sid}",
            ("WS", "/ws/lobby"): "/ws/lobby",
        }
        yield served, credentials, calls


async def status_of(served: Served, method: str, call: Any, kind: str, credential: str | None) -> int:
    """One request as a client with that credential makes it: a report link's token in `?token=`,
    every other credential as a bearer (a socket's session tokens in `?token=`, as browsers must)."""
    path, body = call if isinstance(call, tuple) else (call, None)
    in_query = kind == "report" or (method == "WS" and kind not in ("admin", "none"))
    params = {"token": credential} if credential and in_query else {}
    headers = {"authorization": f"Bearer {credential}"} if credential and not in_query else {}
    if method == "WS":
        query = f"?token={credential}" if params else ""
        url = f"{served.ws_base}{path}{query}"
        try:
            async with connect(url, additional_headers=headers, open_timeout=5, close_timeout=1) as ws:
                with anyio.fail_after(5):
                    await ws.recv()
                return 101
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else 1006
    # A fresh client for each request: a sign-in's cookie must not carry over to the next row.
    async with httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        answer = await http.request(method, path, params=params, headers=headers,
                                    json=body if body is not None else None)
    return answer.status_code


@pytest.mark.anyio
@pytest.mark.parametrize("mode", list(MODES))
async def test_the_authorization_matrix_holds_against_the_running_server(mode: str) -> None:
    wrong_cells: list[str] = []
    async with world(mode) as (served, credentials, calls):
        assert set(calls) == {op.key for op in OPERATIONS}, "a row without a request in this test"
        for op in OPERATIONS:
            expected = [int(s) for s in getattr(op, mode).split()]
            for kind, want in zip(CREDENTIALS, expected, strict=True):
                got = await status_of(served, op.method, calls[op.key], kind, credentials[kind])
                if got != want:
                    wrong_cells.append(f"{op.method} {op.path} as {kind}: {got}, the table says {want}")
    assert not wrong_cells, f"{mode}:\n" + "\n".join(wrong_cells)
