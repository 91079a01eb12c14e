"""The knowledge routes over real HTTP: scenario list, playbook upload (limits, 409, replace), /retrieve."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from brain.knowledge.chunking import MAX_FILE_BYTES
from tests.pdf_fixture import PAGES, pdf_bytes
from tests.servers import running_server

pytestmark = pytest.mark.anyio

ADMIN = "teacher-key-" + "k" * 24
GOLD = b"""# Paying at Ramesh's stall

Q: Does Ramesh give a discount for coins?
A: Ramesh knocks five rupees off for exact change in coins, because nobody in the lane has change before noon.

Q: When is the stall open?
A: From seven in the morning until the evening aarti.
"""


def auth() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN}"}


async def upload(client: httpx.AsyncClient, name: str, data: bytes, **params: Any) -> httpx.Response:
    return await client.post("/api/scenarios/jaipur-bazaar/knowledge", headers=auth(),
                             files={"file": (name, data)}, params=params)


async def test_upload_then_retrieve_cites_the_right_chunk(tmp_path: Path) -> None:
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        created = await upload(client, "gold_playbook.txt", GOLD)
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["version"] == "v1" and body["source_file"] == "gold_playbook.txt"
        coins = body["chunks"][0]["chunk_id"]

        found = await client.post("/retrieve", headers=auth(), json={"query": "discount for coins?", "top_k": 2})
        assert found.status_code == 200
        chunks = found.json()["chunks"]
        assert chunks[0]["chunk_id"] == coins
        assert set(chunks[0]) == {"chunk_id", "score", "text_content", "metadata"}
        assert chunks[0]["metadata"]["source_file"] == "gold_playbook.txt"
        assert chunks[0]["metadata"]["ingested_at"] == body["ingested_at"]

        absent = await client.post("/retrieve", headers=auth(), json={"query": "what is the weather in Tokyo"})
        assert absent.json()["chunks"] == []

        listed = (await client.get("/api/scenarios")).json()["scenarios"]
        jaipur = next(s for s in listed if s["id"] == "jaipur-bazaar")
        assert jaipur["knowledge"]["playbook"]["version"] == "v1"
        assert jaipur["knowledge"]["pack_chunks"] > 5


async def test_a_pdf_playbook_is_extracted_chunked_and_retrieved_end_to_end(tmp_path: Path) -> None:
    """The PDF of tests/pdf_fixture.py, uploaded over HTTP: its known text comes back from /retrieve."""
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        created = await upload(client, "stall_guide.pdf", pdf_bytes(PAGES))
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["source_file"] == "stall_guide.pdf"
        coins, hours = (c["chunk_id"] for c in body["chunks"])
        assert [c["chars"] for c in body["chunks"]] == [len("\n".join(PAGES[0])), len("\n".join(PAGES[2]))]

        found = (await client.post("/retrieve", headers=auth(), json={"query": "discount for coins?", "top_k": 1})
                 ).json()
        assert found["chunks"][0]["chunk_id"] == coins
        assert found["chunks"][0]["text_content"] == "\n".join(PAGES[0])
        assert found["chunks"][0]["metadata"]["source_file"] == "stall_guide.pdf"
        opening = (await client.post("/retrieve", headers=auth(), json={"query": "when is the stall open", "top_k": 1})
                   ).json()
        assert opening["chunks"][0]["chunk_id"] == hours
        assert opening["chunks"][0]["metadata"]["section"] == "Opening hours"


async def test_one_active_playbook_409_then_replace(tmp_path: Path) -> None:
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        assert (await upload(client, "gold.md", GOLD)).status_code == 201
        again = await upload(client, "second.md", b"Bring small notes.")
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "playbook_exists"
        assert again.json()["error"]["active"]["version"] == "v1"
        # the refused upload changed nothing
        hit = (await client.post("/retrieve", headers=auth(), json={"query": "coins discount"})).json()["chunks"]
        assert hit and hit[0]["metadata"]["playbook_version"] == "v1"

        by_query = await upload(client, "second.md", b"Bring small notes.", replace="true")
        assert by_query.status_code == 201 and by_query.json()["version"] == "v2"
        by_form = await client.post("/api/scenarios/jaipur-bazaar/knowledge", headers=auth(),
                                    files={"file": ("third.md", b"Smile and bargain.")},
                                    data={"replace": "true"})
        assert by_form.status_code == 201 and by_form.json()["version"] == "v3"
        assert (await client.post("/retrieve",
                                  headers=auth(), json={"query": "coins discount"})).json()["chunks"] == [] or all(
            c["metadata"]["source_file"] != "gold.md"
            for c in (await client.post("/retrieve",
                                        headers=auth(), json={"query": "coins discount"})).json()["chunks"])
    # a restart serves the active version from disk
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        hit = (await client.post("/retrieve", headers=auth(), json={"query": "smile and bargain"})).json()["chunks"]
        assert hit[0]["metadata"]["playbook_version"] == "v3"
    assert sorted(p.name for p in (tmp_path / "jaipur-bazaar").iterdir()) == ["active", "v1.json", "v2.json",
                                                                               "v3.json"]


@pytest.mark.parametrize(
    ("name", "data", "status", "code"),
    [
        ("notes.exe", b"MZ", 422, "unsupported_type"),
        ("image.png", b"\x89PNG", 422, "unsupported_type"),
        ("big.txt", b"a" * (MAX_FILE_BYTES + 1), 422, "too_large"),
        ("latin1.txt", "naïve".encode("latin-1"), 422, "unreadable"),
        ("broken.docx", b"not a zip", 422, "unreadable"),
    ],
)
async def test_bad_uploads_get_documented_errors_and_change_nothing(
        tmp_path: Path, name: str, data: bytes, status: int, code: str) -> None:
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        refused = await upload(client, name, data)
        assert (refused.status_code, refused.json()["error"]["code"]) == (status, code)
        assert os.listdir(tmp_path) == []


async def test_uploads_need_the_admin_key_and_a_known_scenario(tmp_path: Path) -> None:
    async with running_server(ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        anonymous = await client.post("/api/scenarios/jaipur-bazaar/knowledge", files={"file": ("a.txt", b"x")})
        assert anonymous.status_code == 401
        wrong = await client.post("/api/scenarios/jaipur-bazaar/knowledge", files={"file": ("a.txt", b"x")},
                                  headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        unknown = await client.post("/api/scenarios/atlantis/knowledge", headers=auth(),
                                    files={"file": ("a.txt", b"x")})
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_scenario")
        no_file = await client.post("/api/scenarios/jaipur-bazaar/knowledge", headers=auth(),
                                    files={"other": ("a.txt", b"x")})
        assert (no_file.status_code, no_file.json()["error"]["code"]) == (400, "bad_request")
        not_form = await client.post("/api/scenarios/jaipur-bazaar/knowledge", headers=auth(), content=b"x")
        assert not_form.status_code == 400
        assert os.listdir(tmp_path) == []
    async with running_server(KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        unset = await client.post("/api/scenarios/jaipur-bazaar/knowledge", files={"file": ("a.txt", b"x")})
        assert (unset.status_code, unset.json()["error"]["code"]) == (403, "admin_key_unset")


async def test_retrieve_validates_and_rate_limits(tmp_path: Path) -> None:
    async with running_server(KNOWLEDGE_DIR=str(tmp_path)) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        for bad in ({"query": ""}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": "3"}, {"q": "x"},
                    {"query": "x" * 1001}):
            refused = await client.post("/retrieve", headers=auth(), json=bad)
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, "bad_request"), bad
        unknown = await client.post("/retrieve", headers=auth(), json={"query": "x", "scenario": "atlantis"})
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_scenario")
    async with running_server(KNOWLEDGE_DIR=str(tmp_path), RETRIEVE_PER_SECOND=2.0) as served, \
            httpx.AsyncClient(base_url=served.base_url) as client:
        codes = [(await client.post("/retrieve", headers=auth(), json={"query": "cash"})).status_code for _ in range(6)]
        assert codes[:4] == [200] * 4 and 429 in codes
