"""A lean fake OpenAI chat-completions server for capacity benchmarks: hundreds of streams at once.

`tests/openai_server.py` is the protocol-faithful fake the tests script; it runs on uvicorn and
starlette, and sleeps once per token per stream, so at a thousand learners it would spend more CPU
than the server it stands in for. This one answers the same requests with the same bytes on the
wire (server-sent `chat.completion.chunk` events in a chunked HTTP/1.1 body, `[DONE]`, the usage
chunk when asked; a `chat.completion` object when not streaming), paced the same way (time to first
token, then tokens per second), but it is written for many streams: an asyncio protocol per
connection, every chunk encoded when the request arrives, and one ticker for all streams that
writes whatever each stream has due, in one write per stream per tick.

The reply is `tests.fake_decision.mirror_decision` (the stage and happiness the prompt states,
so the session changes nothing); a request without `response_format` (the running summary) gets a
line of plain text. Every request is recorded with its marker (the text after "(ref " in the last
user message), when it arrived, when the chunk holding the first character of `reply_text` was
written, and when the chunk completing its first clause was (a clause mark and a space, or the end
of the text: the first words the session may let out, session/spoken.py), at `GET /_fake/requests`;
`POST /_fake/reset` forgets them.

    python -m benchmarks.fake_model --port 0 --ttft-ms 400 --tokens-per-s 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
import uuid
from typing import Any, cast

import orjson

from tests.fake_decision import CLAUSE_END, mirror_decision

TICK_S = 0.005  # the ticker's period; a token is written at most this late
CHARS_PER_TOKEN = 4
SUMMARY = "The learner greeted the vendor and is looking at the produce; no price was agreed yet."


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(payload: dict[str, Any]) -> bytes:
    return _chunked(b"data: " + orjson.dumps(payload) + b"\n\n")


def _clause_chunk(content: str, marker: int, reply: str) -> int:
    """The chunk that completes `reply`'s first clause in `content`: the one holding the space
    after its first clause mark, or the closing quote of a reply without one (as
    tests/openai_server.py marks `first_clause_wall`)."""
    start = marker + len('"reply_text": "')
    found = CLAUSE_END.search(reply)
    said = reply[:found.end()] if found else reply
    # The JSON text of the words up to there, without its quotes; its end is one past the space,
    # or the closing quote itself for a reply without a clause mark.
    end = start + len(json.dumps(said, ensure_ascii=False)) - 2
    return (end - 1 if found else end) // CHARS_PER_TOKEN


class Stream:
    """One streamed answer: its chunks, encoded in advance, and how many have been written."""

    __slots__ = ("chunks", "first_clause_chunk", "first_reply_chunk", "record", "sent", "start", "transport")

    def __init__(self, transport: asyncio.Transport, chunks: list[bytes], first_reply_chunk: int,
                 first_clause_chunk: int, start: float, record: dict[str, Any]) -> None:
        self.transport = transport
        self.chunks = chunks
        self.first_reply_chunk = first_reply_chunk
        self.first_clause_chunk = first_clause_chunk
        self.start = start
        self.sent = 0
        self.record = record


class FakeModel:
    def __init__(self, ttft_s: float, tokens_per_s: float) -> None:
        self.ttft_s = ttft_s
        self.rate = tokens_per_s
        self.streams: list[Stream] = []
        self.records: list[dict[str, Any]] = []
        self._ticker: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ requests

    def handle(self, transport: asyncio.Transport, method: str, path: str, body: bytes) -> None:
        if method == "GET" and path == "/_fake/requests":
            self._respond(transport, 200, orjson.dumps(self.records))
        elif method == "POST" and path == "/_fake/reset":
            self.records.clear()
            self._respond(transport, 200, b'{"ok": true}')
        elif method == "GET" and path == "/_fake/cpu":
            usage = resource.getrusage(resource.RUSAGE_SELF)
            self._respond(transport, 200, orjson.dumps({"cpu_s": usage.ru_utime + usage.ru_stime}))
        elif method == "POST" and path.endswith("/chat/completions"):
            self._completion(transport, orjson.loads(body))
        else:
            self._respond(transport, 404, b'{"error": {"message": "not found"}}')

    def _answer(self, transport: asyncio.Transport, answer: bytes, record: dict[str, Any]) -> None:
        """A whole (non-streamed) completion, written when its last token would have been."""
        record["answered_wall"] = time.time()
        self._respond(transport, 200, answer)

    def _respond(self, transport: asyncio.Transport, status: int, body: bytes) -> None:
        reason = b"OK" if status == 200 else b"Not Found"
        transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                        % (status, reason, len(body), body))

    def _completion(self, transport: asyncio.Transport, body: dict[str, Any]) -> None:
        now, wall = time.monotonic(), time.time()
        messages = body.get("messages") or []
        last_user = next((str(m.get("content", "")) for m in reversed(messages)
                          if m.get("role") == "user"), "")
        at = last_user.rfind("(ref ")
        record: dict[str, Any] = {"marker": last_user[at + 5: at + 19] if at >= 0 else None,
                                  "received_wall": wall, "first_reply_char_wall": None,
                                  "answered_wall": None, "stream": bool(body.get("stream"))}
        self.records.append(record)
        reply = ""
        if body.get("response_format"):
            decision = mirror_decision(body)
            content = json.dumps(decision, ensure_ascii=False)
            reply = str(decision.get("reply_text") or "")
        else:
            content = SUMMARY
        tokens = [content[i:i + CHARS_PER_TOKEN] for i in range(0, len(content), CHARS_PER_TOKEN)]
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        model = body.get("model", "fake")
        usage = {"prompt_tokens": sum(len(str(m.get("content", ""))) for m in messages) // 4,
                 "completion_tokens": len(tokens)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not body.get("stream"):
            answer = orjson.dumps({
                "id": cid, "object": "chat.completion", "created": int(wall), "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": content}}],
                "usage": usage})
            delay = self.ttft_s + (len(tokens) - 1) / self.rate
            asyncio.get_running_loop().call_later(delay, self._answer, transport, answer, record)
            return
        created = int(wall)

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _event({"id": cid, "object": "chat.completion.chunk", "created": created,
                           "model": model, "choices": [{"index": 0, "delta": delta,
                                                        "finish_reason": finish, "logprobs": None}]})

        chunks = [chunk({"role": "assistant", "content": tokens[0]})]
        chunks += [chunk({"content": token}) for token in tokens[1:]]
        tail = chunk({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            tail += _event({"id": cid, "object": "chat.completion.chunk", "created": created,
                            "model": model, "choices": [], "usage": usage})
        chunks[-1] += tail + _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        marker = content.find('"reply_text": "')
        first_reply_chunk = (marker + len('"reply_text": "')) // CHARS_PER_TOKEN if marker >= 0 else 0
        first_clause_chunk = _clause_chunk(content, marker, reply) if marker >= 0 else 0
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                        b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
        self.streams.append(Stream(transport, chunks, first_reply_chunk, first_clause_chunk,
                                   now + self.ttft_s, record))
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())

    # ------------------------------------------------------------------ pacing

    async def _tick(self) -> None:
        """Write every stream's due tokens, one write per stream; sleep while there are none."""
        while self.streams:
            now = time.monotonic()
            keep: list[Stream] = []
            for stream in self.streams:
                if stream.transport.is_closing():
                    continue
                if now >= stream.start:
                    due = min(len(stream.chunks), int((now - stream.start) * self.rate) + 1)
                    if due > stream.sent:
                        if stream.sent <= stream.first_reply_chunk < due:
                            stream.record["first_reply_char_wall"] = time.time()
                        if stream.sent <= stream.first_clause_chunk < due:
                            stream.record["first_clause_wall"] = time.time()
                        stream.transport.write(b"".join(stream.chunks[stream.sent:due]))
                        stream.sent = due
                if stream.sent < len(stream.chunks):
                    keep.append(stream)
            self.streams = keep
            await asyncio.sleep(TICK_S)
        self._ticker = None


class Connection(asyncio.Protocol):
    """HTTP/1.1 with keep-alive: requests with a Content-Length body, one after another."""

    def __init__(self, model: FakeModel) -> None:
        self.model = model
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            method, path, _ = head[0].split(" ", 2)
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4: end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            assert self.transport is not None
            self.model.handle(self.transport, method, path, body)


async def serve(host: str, port: int, ttft_ms: float, tokens_per_s: float) -> None:
    model = FakeModel(ttft_ms / 1000, tokens_per_s)
    server = await asyncio.get_running_loop().create_server(lambda: Connection(model), host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://{host}:{bound}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fake_model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=400.0)
    parser.add_argument("--tokens-per-s", type=float, default=50.0)
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.run(serve(args.host, args.port, args.ttft_ms, args.tokens_per_s))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
