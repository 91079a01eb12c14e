"""Limits before reading (docs/security.md): every HTTP route refuses a body over its limit with 413
before reading it, whether it declares its length or streams it chunked, and a refused 48 MiB body
does not grow the server. Measured on a real `samvad serve` process with psutil."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import psutil
import pytest

from server.guard import DEFAULT_BODY_BYTES, body_limit
from tests.servers import Served, server_process

BIG = 48 * 1024 * 1024
PIECE = 64 * 1024
ROUTES = ("/api/sessions", "/retrieve", "/api/signin", "/api/learners/asha/token", "/api/dev/generate",
          "/api/test", "/api/scenarios/jaipur-bazaar/knowledge", "/admin/drain", "/api/signout")


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with server_process({"ADMIN_KEY": "k" * 32, "DEV_ENDPOINTS": "true"}) as s:
        yield s


def _address(served: Served) -> tuple[str, int]:
    host, port = served.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])


def _read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a refusal says Connection: close)."""
    got = b""
    with contextlib.suppress(OSError):
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            got += piece
    return got


def _send_big(served: Served, path: str, *, chunked: bool) -> tuple[int, int]:
    """POST a 48 MiB body to `path`, with the admin key, as fast as the server takes it; its status
    and the bytes it took."""
    sock = socket.create_connection(_address(served), timeout=5)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {BIG}"
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{framing}\r\n"
                 f"Authorization: Bearer {'k' * 32}\r\n\r\n".encode())
    sock.settimeout(0.5)
    sent = 0
    piece = (b"%x\r\n" % PIECE + b"[" * PIECE + b"\r\n") if chunked else b"[" * PIECE
    with contextlib.suppress(OSError):  # the server answers and closes: a reset or a full window
        while sent < BIG:
            sock.sendall(piece)
            sent += PIECE
    sock.settimeout(5)
    answer = _read_answer(sock)
    sock.close()
    return _status(answer), sent


def _rss(served: Served) -> int:
    assert served.pid is not None
    return int(psutil.Process(served.pid).memory_info().rss)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_48_mib_body_is_refused_with_413_and_does_not_grow_the_server(served: Served, chunked: bool) -> None:
    for _ in range(3):  # warm: the first requests allocate what every request shares
        _send_big(served, "/api/sessions", chunked=chunked)
    before = _rss(served)
    # A playbook upload must declare its length: chunked, it is 411 before a byte is read.
    upload = 411 if chunked else 413
    for path, refused in (("/api/sessions", 413), ("/retrieve", 413), ("/api/test", 413),
                          ("/api/scenarios/jaipur-bazaar/knowledge", upload)):
        status, sent = _send_big(served, path, chunked=chunked)
        assert status == refused, path
        assert sent < BIG, f"{path}: the server read the whole body before refusing it"
    time.sleep(0.2)
    grown = _rss(served) - before
    assert grown < 8 * 1024 * 1024, f"RSS grew by {grown / 2**20:.1f} MiB"


def test_every_route_refuses_a_declared_length_over_its_limit_before_reading(served: Served) -> None:
    for path in ROUTES:
        limit = body_limit(path, 640 * 1024)
        sock = socket.create_connection(_address(served), timeout=5)
        # Only the headers: a route that waited for the body would never answer.
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {limit + 1}\r\n\r\n".encode())
        answer = _read_answer(sock)
        sock.close()
        assert _status(answer) == 413 and b"too_large" in answer, (path, answer[:200])
    assert body_limit("/api/sessions", 640 * 1024) == DEFAULT_BODY_BYTES


def test_a_body_within_its_limit_still_reaches_the_route(served: Served) -> None:
    import httpx

    ok = httpx.post(f"{served.base_url}/api/sessions", content=b"{" + b" " * (DEFAULT_BODY_BYTES - 2) + b"}",
                    headers={"content-type": "application/json"})
    assert ok.status_code == 201

    def chunks() -> Iterator[bytes]:
        yield b'{"scenario": '
        yield b'"jaipur-bazaar"}'

    streamed = httpx.post(f"{served.base_url}/api/sessions", content=chunks())  # chunked, small
    assert streamed.status_code == 201
