"""The real client address behind a proxy, and limits kept per address, credential and learner
(docs/security.md): believed from TRUSTED_PROXIES only, read from the right, in a bounded LRU. The
cluster's real HAProxy is in tests/test_cluster.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import HTTPConnection

from server.clientaddr import TrustedProxies
from server.services import Buckets
from tests.servers import running_server

ADMIN = "limits-admin-key-" + "l" * 24


def conn(peer: str, *forwarded: str) -> HTTPConnection:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return HTTPConnection({"type": "http", "client": (peer, 1234), "headers": headers, "path": "/",
                           "query_string": b""})


def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy_and_from_the_right() -> None:
    proxies = TrustedProxies(["10.0.0.0/8", "127.0.0.1"])
    assert proxies.client(conn("203.0.113.9", "198.51.100.1")) == "203.0.113.9"  # not a proxy: its own claim ignored
    assert proxies.client(conn("127.0.0.1", "198.51.100.1")) == "198.51.100.1"
    # A client's own header is left of what the proxy appended: never read.
    assert proxies.client(conn("127.0.0.1", "6.6.6.6, 198.51.100.1")) == "198.51.100.1"
    assert proxies.client(conn("127.0.0.1", "6.6.6.6", "198.51.100.1")) == "198.51.100.1"
    # Two trusted hops: the first address that is not a proxy's.
    assert proxies.client(conn("127.0.0.1", "198.51.100.1, 10.1.2.3")) == "198.51.100.1"
    assert proxies.client(conn("127.0.0.1", "junk, 198.51.100.1")) == "198.51.100.1"
    assert proxies.client(conn("127.0.0.1", "198.51.100.1, junk")) == "127.0.0.1"  # a hop we cannot read
    assert proxies.client(conn("127.0.0.1")) == "127.0.0.1"
    assert TrustedProxies([]).client(conn("127.0.0.1", "198.51.100.1")) == "127.0.0.1"


@given(st.lists(st.ip_addresses(v=4).map(str), max_size=5))
def test_whatever_a_client_writes_it_cannot_become_another_address(spoofed: list[str]) -> None:
    proxies = TrustedProxies(["127.0.0.1"])
    header = ", ".join([*spoofed, "198.51.100.7"])  # HAProxy appends the address it saw
    assert proxies.client(conn("127.0.0.1", header)) == "198.51.100.7"


def test_the_bucket_table_is_a_bounded_lru() -> None:
    buckets = Buckets(limit=3)
    assert all(buckets.take(k, rate=0.001, burst=1) for k in "abc")
    assert not buckets.take("a", rate=0.001, burst=1)  # a is spent, and now the most recent
    assert buckets.take("d", rate=0.001, burst=1)  # b, the least recently used, is forgotten
    assert len(buckets) == 3
    assert not buckets.take("a", rate=0.001, burst=1)  # the recently used a was kept, still spent
    for n in range(100):
        buckets.take(f"flood-{n}", rate=0.001, burst=1)
    assert len(buckets) == 3


@pytest.mark.anyio
async def test_one_abuser_does_not_hold_back_another_client_or_learner() -> None:
    settings: dict[str, Any] = {"ADMIN_KEY": ADMIN, "TRUSTED_PROXIES": "127.0.0.1",
                                "SESSION_CREATE_PER_SECOND": 0.001, "SESSION_CREATE_BURST": 3}
    async with running_server(**settings) as served, httpx.AsyncClient(base_url=served.base_url) as http:
        async def create(forwarded: str, body: dict[str, Any] | None = None, credential: str | None = None) -> int:
            headers = {"x-forwarded-for": forwarded}
            if credential:
                headers["authorization"] = f"Bearer {credential}"
            return (await http.post("/api/sessions", json=body or {}, headers=headers)).status_code

        assert [await create("198.51.100.1") for _ in range(4)] == [201, 201, 201, 429]
        assert await create("198.51.100.2") == 201  # another client behind the same proxy
        # A learner's credential is limited wherever it comes from.
        token = (await http.post("/api/learners/alice/token", headers={"authorization": f"Bearer {ADMIN}"})).json()
        alice = token["learner_token"]
        assert [await create(f"198.51.100.{n}", credential=alice) for n in (10, 11, 12, 13)] == [201, 201, 201, 429]
        # The trusted backend's key is not one client: only each learner's own limit applies to it.
        assert [await create("198.51.100.20", {"learner_id": "carol"}, ADMIN) for _ in range(4)] == [201, 201, 201, 429]
        assert await create("198.51.100.20", {"learner_id": "dave"}, ADMIN) == 201
    # Without TRUSTED_PROXIES the header is anyone's to write, and is not read.
    async with running_server(SESSION_CREATE_PER_SECOND=0.001, SESSION_CREATE_BURST=2) as served, \
            httpx.AsyncClient(base_url=served.base_url) as http:
        codes = [(await http.post("/api/sessions", json={}, headers={"x-forwarded-for": f"203.0.113.{n}"})).status_code
                 for n in range(3)]
        assert codes == [201, 201, 429]


def test_a_bucket_refilled_to_its_burst_is_forgotten() -> None:
    """A learner's bucket, full again once their session is over, is not kept per ended session."""
    buckets = Buckets(limit=100)
    assert buckets.take("learner:a", rate=1e12, burst=1)  # full again by the next take
    assert buckets.take("learner:b", rate=1e12, burst=1)
    assert len(buckets) == 1
    spent = Buckets(limit=100)
    assert spent.take("learner:a", rate=0.001, burst=1) and spent.take("learner:b", rate=0.001, burst=1)
    assert len(spent) == 2 and not spent.take("learner:a", rate=0.001, burst=1)  # a spent bucket stays
