"""The trust rules end to end (docs/security.md), against a real server in production mode: who may
name a learner, what a report link opens, credentials never in URLs or logs, and what production
closes that development leaves open. The authorization matrix is tests/test_authz_matrix.py."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import pytest

from tests.servers import Served, player, running_server, server_process
from tests.test_learners_api import DEAL, play

pytestmark = pytest.mark.anyio

ADMIN = "school-backend-admin-key-" + "s" * 16
ASSERTION_KEY = "school-login-server-key-" + "l" * 16
PRODUCTION: dict[str, Any] = {"SAMVAD_ENV": "production", "ADMIN_KEY": ADMIN, "LEARNER_ASSERTION_KEY": ASSERTION_KEY}


def bearer(credential: str) -> dict[str, str]:
    return {"authorization": f"Bearer {credential}"}


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async with running_server(**PRODUCTION) as s:
        yield s


async def post_session(served: Served, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        return await http.post("/api/sessions", json=body, headers=headers or {})


async def profile(served: Served, learner: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=served.base_url, headers=bearer(ADMIN)) as http:
        answer = await http.get(f"/api/learners/{learner}")
    assert answer.status_code in (200, 404), answer.text
    return dict(answer.json())


async def sessions_of(served: Served, learner: str, at_least: int) -> dict[str, Any]:
    with anyio.fail_after(5):
        while True:
            got = await profile(served, learner)
            if "profile" in got and got["profile"]["sessions"] >= at_least:
                return got
            await anyio.sleep(0.05)


async def test_a_stranger_cannot_claim_a_learner_and_proof_binds_the_session(served: Served) -> None:
    stranger = await post_session(served, {"learner_id": "alice"})
    assert stranger.status_code == 401 and stranger.json()["error"]["code"] == "unauthorized"
    anonymous = await post_session(served, {})
    assert anonymous.status_code == 201 and "learner_token" not in anonymous.json()

    # The school's backend vouches with the admin key; Alice's own learner token names only her.
    backend = await post_session(served, {"learner_id": "alice"}, bearer(ADMIN))
    assert backend.status_code == 201 and backend.json()["learner_id"] == "alice"
    alice_token = backend.json()["learner_token"]
    own = await post_session(served, {}, bearer(alice_token))
    assert own.status_code == 201 and own.json()["learner_id"] == "alice"
    assert (await post_session(served, {"learner_id": "alice"}, bearer(alice_token))).status_code == 201
    other = await post_session(served, {"learner_id": "bob"}, bearer(alice_token))
    assert other.status_code == 403 and other.json()["error"]["code"] == "forbidden"
    # A session token is no proof of a learner.
    sessions_token = anonymous.json()["player_token"]
    assert (await post_session(served, {"learner_id": "alice"}, bearer(sessions_token))).status_code == 401
    forged = jwt.encode({"iss": "samvad", "lid": "alice", "role": "learner", "iat": int(time.time()),
                         "exp": int(time.time()) + 600}, "not-the-secret-" + "x" * 30, algorithm="HS256")
    assert (await post_session(served, {"learner_id": "alice"}, bearer(forged))).status_code == 401

    # A school's login server signs an assertion with the key the operator shares with it.
    now = int(time.time())
    assertion = jwt.encode({"sub": "carol", "aud": "samvad", "iat": now, "exp": now + 300}, ASSERTION_KEY,
                           algorithm="HS256")
    carol = await post_session(served, {"learner_id": "carol"}, bearer(assertion))
    assert carol.status_code == 201 and carol.json()["learner_id"] == "carol"
    assert (await post_session(served, {"learner_id": "alice"}, bearer(assertion))).status_code == 403


async def test_nothing_a_stranger_does_reads_or_changes_a_learners_record(served: Served) -> None:
    alice = (await post_session(served, {"learner_id": "alice", "level": "beginner"}, bearer(ADMIN))).json()
    await play(served, alice, DEAL)
    before = await sessions_of(served, "alice", 1)
    # A stranger: anonymous sessions played to the end, every learner route, a forged claim.
    stranger = (await post_session(served, {})).json()
    await play(served, stranger, DEAL)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        for credential in (None, stranger["player_token"], stranger["spectator_token"]):
            headers = bearer(credential) if credential else {}
            assert (await http.get("/api/learners/alice", headers=headers)).status_code == 401
            assert (await http.get("/api/learners", headers=headers)).status_code == 401
            assert (await http.delete("/api/learners/alice", headers=headers)).status_code == 401
            assert (await http.post("/api/learners/alice/token", headers=headers)).status_code == 401
    await anyio.sleep(0.3)  # what the stranger's session would have recorded, had it been Alice's
    after = await profile(served, "alice")
    assert after["profile"] == before["profile"] and len(after["progress"]) == 1


async def test_a_report_link_opens_that_report_only(served: Served) -> None:
    first = (await post_session(served, {"learner_id": "alice"}, bearer(ADMIN))).json()
    second = (await post_session(served, {"learner_id": "alice"}, bearer(ADMIN))).json()
    await play(served, first, DEAL)
    await play(served, second, DEAL)
    progress = (await sessions_of(served, "alice", 2))["progress"]
    link, other = progress[0]["report_url"], progress[1]["report_url"]
    token = link.split("token=")[1]
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        page = await http.get(link)
        assert page.status_code == 200 and "Your haggle with" in page.text
        sid = progress[0]["session_id"]
        # Not another report, not the session, not its graph, not the learner, not the socket.
        assert (await http.get(other.split("token=")[0] + f"token={token}")).status_code == 403
        assert (await http.get(f"/api/sessions/{sid}", headers=bearer(token))).status_code == 401
        assert (await http.get(f"/api/sessions/{sid}/graph", headers=bearer(token))).status_code == 401
        assert (await http.get("/api/learners/alice", headers=bearer(token))).status_code == 401
        # A player token is never read from a URL, even for a report.
        assert (await http.get(f"/api/sessions/{sid}/report?token={first['player_token']}")).status_code == 401
    from tests.servers import client, close_code

    async with client(served.ws_url(sid, token)) as ws:
        assert await close_code(ws) == 4401
    assert served.services is not None
    assert served.services.tokens.verify_report(token) == sid
    import jwt as pyjwt

    claims = pyjwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == served.services.settings.LINK_TTL_SECONDS  # short-lived


async def test_the_admin_key_is_refused_in_any_url(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        for path in ("/api/learners", "/api/lobby", "/view/lobby.html", "/api/stats", "/health"):
            refused = await http.get(path, params={"admin": ADMIN})
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "credential_in_url", path
        assert (await http.post("/api/sessions", params={"admin": ADMIN}, json={"learner_id": "a"})).status_code == 400
        assert (await http.get("/api/learners", headers=bearer(ADMIN))).status_code == 200


async def test_production_closes_retrieve_the_dev_route_and_foreign_origins() -> None:
    async with running_server(**PRODUCTION, LOG_LEVEL="DEBUG") as served, \
            httpx.AsyncClient(base_url=served.base_url) as http:
        query = {"query": "how do I bargain politely", "scenario": "jaipur-bazaar"}
        assert (await http.post("/retrieve", json=query)).status_code == 401
        jaipur = (await http.post("/api/sessions", json={"scenario": "jaipur-bazaar"})).json()
        kyoto = (await http.post("/api/sessions", json={"scenario": "kyoto-antiques"})).json()
        assert (await http.post("/retrieve", json=query, headers=bearer(jaipur["player_token"]))).status_code == 200
        assert (await http.post("/retrieve", json=query, headers=bearer(kyoto["spectator_token"]))).status_code == 403
        assert (await http.post("/retrieve", json=query, headers=bearer(ADMIN))).status_code == 200
        # LOG_LEVEL=DEBUG does not switch the dev route on in production.
        injected = await http.post("/api/dev/generate",
                                   json={"transcribed_text": "hi", "session_id": jaipur["session_id"]})
        assert injected.status_code == 404
        preflight = await http.options("/api/sessions", headers={"origin": "https://evil.example",
                                                                 "access-control-request-method": "POST"})
        assert "access-control-allow-origin" not in preflight.headers
        simple = await http.get("/health", headers={"origin": "https://evil.example"})
        assert "access-control-allow-origin" not in simple.headers
        assert (await http.post("/api/sessions", json={})).json()["durable"] is False  # the in-memory mirror
    async with running_server(**PRODUCTION, CORS_ORIGINS="https://school.example") as served, \
            httpx.AsyncClient(base_url=served.base_url) as http:
        listed = await http.get("/health", headers={"origin": "https://school.example"})
        assert listed.headers["access-control-allow-origin"] == "https://school.example"
        assert "access-control-allow-origin" not in (await http.get(
            "/health", headers={"origin": "https://evil.example"})).headers


async def test_development_is_open_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="samvad.server"):
        async with running_server(LOG_LEVEL="WARNING") as served, httpx.AsyncClient(base_url=served.base_url) as http:
            named = await http.post("/api/sessions", json={"learner_id": "dev-learner"})
            assert named.status_code == 201  # no ADMIN_KEY in development: convenient, and warned
            assert (await http.post("/retrieve", json={"query": "bargain"})).status_code == 200
    warnings = [r.getMessage() for r in caplog.records if "development mode" in r.getMessage()]
    assert len(warnings) == 1 and "ADMIN_KEY is not set" in warnings[0] and "CORS" in warnings[0]


async def test_tokens_and_keys_are_never_logged(tmp_path: Path) -> None:
    """A debug-level development server with a key, driven with every kind of credential, right and
    wrong: its whole log holds none of them."""
    from tests.servers import client

    log_path = tmp_path / "server.log"
    secrets_seen: list[str] = [ADMIN]
    env = {"ADMIN_KEY": ADMIN, "LOG_LEVEL": "DEBUG"}
    wrong = "wrong-" + ADMIN
    with server_process(env, log_path=log_path) as served:
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            created = (await http.post("/api/sessions", json={"learner_id": "alice"}, headers=bearer(ADMIN))).json()
            secrets_seen += [created["player_token"], created["spectator_token"], created["learner_token"], wrong]
            await http.get(f"/api/sessions/{created['session_id']}", headers=bearer(created["player_token"]))
            await http.get("/api/learners/alice", headers=bearer(created["learner_token"]))
            await http.get("/api/lobby", params={"admin": ADMIN})
            await http.get("/api/lobby", headers=bearer(wrong))
            await http.post("/api/sessions", json={"learner_id": "bob"}, headers=bearer(created["learner_token"]))
            await http.post("/api/signin", headers=bearer(ADMIN))
        async with await player(served, created) as c:
            await c.until("welcome")
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya"})
            await c.until("reply")
        async with client(served.ws_url(created["session_id"], wrong)) as c:
            with pytest.raises(Exception):  # noqa: B017 - refused: closed with 4401
                await c.recv()
    logged = log_path.read_text(errors="replace")
    assert created["session_id"] in logged  # the log is not empty: there was something to leak
    for secret in secrets_seen:
        assert secret not in logged


def test_the_procfile_runs_production_and_refuses_to_start_without_its_keys(tmp_path: Path) -> None:
    """The Procfile binds 0.0.0.0, so it never runs development mode; without SAMVAD_SECRET and
    ADMIN_KEY it stops at once, naming them, before it listens."""
    import os
    import subprocess
    import sys

    from tests.servers import ROOT, free_port

    line = (ROOT / "Procfile").read_text().strip()
    assert line.startswith("web: SAMVAD_ENV=production ")
    command = line.removeprefix("web: ").replace("samvad serve", f"{sys.executable} -m server.cli serve")
    env = {k: v for k, v in os.environ.items() if k not in ("SAMVAD_SECRET", "ADMIN_KEY", "SAMVAD_ENV")}
    env.update({"PORT": str(free_port()), "PYTHONPATH": str(ROOT), "USE_MOCKS": "true"})
    for missing, extra in (("SAMVAD_SECRET", {}), ("ADMIN_KEY", {"SAMVAD_SECRET": "s" * 40})):
        done = subprocess.run(["bash", "-c", command], env={**env, **extra}, cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and missing in done.stderr, done.stderr
