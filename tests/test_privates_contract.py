"""The contract of privates/: the installed libraries are the versions its internals were written for,
pyproject.toml pins the same ranges, and every private still finds, on the real library objects,
what it reaches for. Each failure names the private an upgrade broke, so that it is mended or
dropped instead of the speed-up quietly going away.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import inspect
import pathlib
import re
import tomllib
from collections.abc import Iterator
from typing import Any

import aiohttp
import anyio
import httpx2
import openai
import pytest
import uvicorn
import websockets
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from starlette.types import Message
from starlette.websockets import WebSocket
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

import privates
from brain.transport import sdk_client
from tests.llm_support import decision
from tests.openai_server import FakeOpenAI, reply
from tests.servers import bare_uvicorn

ROOT = pathlib.Path(__file__).resolve().parent.parent


def broken_by(dist: str) -> str:
    return ", ".join(name for name, dists in privates.PRIVATES.items() if dist in dists)


def test_every_private_names_libraries_of_the_version_table() -> None:
    assert set(privates.PRIVATES) <= set(privates.__all__)
    assert {d for dists in privates.PRIVATES.values() for d in dists} == set(privates.WRITTEN_FOR)


@pytest.mark.parametrize("dist", sorted(privates.WRITTEN_FOR))
def test_the_installed_library_is_a_version_the_privates_were_written_for(dist: str) -> None:
    installed = Version(importlib.metadata.version(dist))
    wanted = SpecifierSet(privates.WRITTEN_FOR[dist])
    assert installed in wanted, (
        f"{dist} {installed} is not {wanted}, the versions that {broken_by(dist)} (privates/) was written for: "
        f"run tests/test_privates_contract.py against it, mend what fails, then widen WRITTEN_FOR and pyproject.toml")


def test_pyproject_pins_the_ranges_of_the_version_table() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    pins = {}
    for requirement in project["dependencies"]:
        name, specifier = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?(.*)", requirement.replace(" ", "")).groups()
        pins[name.lower()] = SpecifierSet(specifier)
    for dist, wanted in privates.WRITTEN_FOR.items():
        assert pins.get(dist) == SpecifierSet(wanted), f"pyproject.toml pins {dist} {pins.get(dist)}, not {wanted}"


# ---------------------------------------------------------------------------- uvicorn and websockets


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("never called")


@pytest.fixture
def protocols() -> Iterator[tuple[WebSocketsSansIOProtocol, privates.LeanWebSocketsSansIOProtocol]]:
    config = uvicorn.Config(_app, ws="websockets-sansio", lifespan="off", log_config=None)  # leaves logging be
    config.load()
    loop = asyncio.new_event_loop()
    try:
        yield (WebSocketsSansIOProtocol(config, ServerState(), {}, _loop=loop),
               privates.LeanWebSocketsSansIOProtocol(config, ServerState(), {}, _loop=loop))
    finally:
        loop.close()


class _Transport(asyncio.Transport):
    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def is_closing(self) -> bool:
        return False


def test_uvicorn_has_every_method_the_lean_protocol_overrides_or_calls() -> None:
    missing = [name for name in privates.UVICORN_METHODS if not callable(getattr(WebSocketsSansIOProtocol, name, None))]
    assert missing == [], f"LeanWebSocketsSansIOProtocol: uvicorn's protocol has no {missing}"
    assert privates.protocol_class("auto") is privates.LeanWebSocketsSansIOProtocol


def test_uvicorns_protocol_keeps_the_state_the_lean_protocol_replaces_and_reads(
        protocols: tuple[WebSocketsSansIOProtocol, privates.LeanWebSocketsSansIOProtocol]) -> None:
    stock, lean = protocols
    assert isinstance(stock.queue, asyncio.Queue), "LeanWebSocketsSansIOProtocol: uvicorn's `queue` is no Queue"
    assert isinstance(stock.writable, asyncio.Event), "LeanWebSocketsSansIOProtocol: uvicorn's `writable` is no Event"
    assert isinstance(lean.queue, privates.ReceiveQueue) and isinstance(lean.writable, privates.WritableFlag)
    for name in ("handshake_complete", "close_sent", "read_paused", "close_timer", "close_timeout", "conn"):
        assert hasattr(stock, name), f"LeanWebSocketsSansIOProtocol: uvicorn's protocol has no `{name}`"
    parser = getattr(stock.conn, "parser", None)
    assert parser is not None and callable(getattr(parser, "close", None)), (
        "LeanWebSocketsSansIOProtocol: websockets' protocol has no `parser` generator to close")
    assert callable(stock.conn.data_to_send) and hasattr(stock.conn, "close_sent")
    lean.connection_made(_Transport())
    assert isinstance(lean.transport, privates.CorkedTransport), "LeanWebSocketsSansIOProtocol: the transport"


def test_the_direct_frame_write_finds_the_state_it_checks(
        protocols: tuple[WebSocketsSansIOProtocol, privates.LeanWebSocketsSansIOProtocol]) -> None:
    stock, lean = protocols
    for name in ("writable", "disconnected", "handshake_complete", "close_sent", "initial_response", "transport"):
        assert hasattr(stock, name), f"frame_writer: uvicorn's protocol has no `{name}`"
    for name in ("state", "extensions", "expect_continuation_frame", "debug", "writes"):
        assert hasattr(stock.conn, name), f"frame_writer: websockets' protocol has no `{name}`"
    assert isinstance(stock.conn.writes, list) and stock.conn.side is websockets.protocol.SERVER
    assert privates.frame_writer(lean.send) == lean.write_data_nowait
    assert privates.frame_writer(stock.send) is None  # uvicorn's own protocol: every frame through `send`


def test_uvicorn_has_every_method_the_lean_http_protocol_overrides_or_calls() -> None:
    missing = [name for name in privates.HTTPTOOLS_METHODS if not callable(getattr(HttpToolsProtocol, name, None))]
    assert missing == [], f"LeanHttpToolsProtocol: uvicorn's httptools protocol has no {missing}"
    assert privates.http_protocol_class("auto") is privates.LeanHttpToolsProtocol
    assert privates.http_protocol_class("h11") == "h11"


async def _http_protocols_left_after_a_websocket(http: Any) -> int:
    """Open and close one WebSocket against uvicorn with `http`, the cyclic collector off; count
    the HTTP protocols still in memory then (reference counting freed the others)."""
    try:
        async with bare_uvicorn(http=http, ws=privates.protocol_class("auto"), ws_ping_interval=None) as port:
            return await _count_after_one_socket(port)
    finally:
        gc.collect()


async def _count_after_one_socket(port: int) -> int:
    gc.collect()
    gc.disable()
    try:
        async with websockets.connect(f"ws://127.0.0.1:{port}/"):
            pass
        for _ in range(20):  # the server side sees the close a few loop passes later
            await asyncio.sleep(0.01)
        return sum(issubclass(type(o), HttpToolsProtocol) for o in gc.get_objects())  # proxies too
    finally:
        gc.enable()


@pytest.mark.anyio
async def test_an_upgraded_connections_http_protocol_is_freed_without_the_collector() -> None:
    # The control: uvicorn's own protocol stays in a cycle with its parser after the upgrade.
    assert await _http_protocols_left_after_a_websocket("httptools") == 1, (
        "LeanHttpToolsProtocol: uvicorn's httptools protocol no longer outlives an upgrade; drop the private")
    assert await _http_protocols_left_after_a_websocket(privates.http_protocol_class("auto")) == 0


def test_uvicorns_server_loop_is_the_one_calm_server_replaces() -> None:
    for name in ("main_loop", "on_tick", "handle_exit"):
        assert callable(getattr(uvicorn.Server, name, None)), f"CalmServer: uvicorn.Server has no {name}()"
    assert list(inspect.signature(uvicorn.Server.on_tick).parameters) == ["self", "counter"], (
        "CalmServer: uvicorn.Server.on_tick(counter) changed")
    server = privates.CalmServer(uvicorn.Config(_app, log_config=None))
    assert server.started is False, "CalmServer: uvicorn.Server has no `started`"


# ---------------------------------------------------------------------------- starlette


def test_raw_receive_is_the_asgi_receive_under_starlettes_websocket() -> None:
    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        pass

    socket = WebSocket({"type": "websocket", "path": "/", "headers": [], "query_string": b""}, receive, send)
    assert privates.raw_receive(socket) is receive, "raw_receive: WebSocket._receive is not the ASGI receive"


# ---------------------------------------------------------------------------- the openai SDK and aiohttp


@pytest.mark.anyio
async def test_the_sdks_streamed_response_holds_aiohttps_reader_and_transport(openai_fake: FakeOpenAI) -> None:
    # Streamed slowly: aiohttp holds the connection (and its transport) until the body is complete.
    openai_fake.script(reply(decision("Namaste ji, " * 20), ttft_ms=0, tokens_per_s=100))
    client = sdk_client(api_key="test", base_url=openai_fake.base_url, timeout_s=5)
    try:
        async with client.chat.completions.with_streaming_response.create(
                model="gpt-4o", messages=[{"role": "user", "content": "Namaste"}], stream=True) as response:
            http = response.http_response
            found = privates.aiohttp_response(http)
            assert isinstance(found, aiohttp.ClientResponse), (
                "aiohttp_response: the SDK's response no longer holds aiohttp's at .stream._stream._aiohttp_response")
            content = privates.plain_content(http, found)
            assert isinstance(content, aiohttp.StreamReader), "plain_content: ClientResponse.content is no StreamReader"
            transport = found.connection.transport if found.connection is not None else None
            assert transport is not None and transport.is_reading(), "rest_reading: no connection.transport"
            await privates.rest_reading(found, 0.01)
            assert transport.is_reading(), "rest_reading: reading did not resume"
            resting = privates.ReadingRest(found)
            resting.rest(0.01)
            assert not transport.is_reading(), "ReadingRest: connection.transport did not pause"
            await anyio.sleep(0.05)
            assert transport.is_reading(), "ReadingRest: the loop's timer did not resume reading"
            assert b"data:" in await content.readany()
    finally:
        await client.close()


def test_the_sdk_client_keeps_what_a_prepared_request_reads() -> None:
    client = sdk_client(api_key="test", base_url="http://127.0.0.1:9/v1", timeout_s=1)
    assert privates.fixed_headers(client), (
        "fixed_headers: AsyncOpenAI no longer keeps _api_key_provider, _provider_runtime, workload_identity, "
        "custom_auth, _idempotency_header, _client or _make_status_error_from_response as it did")
    assert isinstance(privates.http_client(client), httpx2.AsyncClient), "http_client: AsyncOpenAI._client"
    response = httpx2.Response(418, json={"error": {"message": "teapot"}},
                               request=httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    error = privates.status_error(client, response)
    assert isinstance(error, openai.APIStatusError) and error.status_code == 418 and "teapot" in error.message, (
        "status_error: AsyncOpenAI._make_status_error_from_response")
