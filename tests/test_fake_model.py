"""The capacity benchmark's fake model marks a reply's first clause where the test fake does.

`benchmarks.capacity` measures the server's first-words overhead from the chunk that completes the
first clause of `reply_text` (the first words the session may let out, session/spoken.py), as
`benchmarks.llm_stream` does with tests/openai_server.py. The chunk is found in the encoded answer
before it is streamed, so it is checked here against the words a client reads chunk by chunk.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.lowlevel
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.fake_model import CHARS_PER_TOKEN, FakeModel, _clause_chunk, chunks_due, next_due
from tests.fake_decision import CLAUSE_END, reply_line


def streamed_words(content: str, chunks: int) -> str:
    """The reply's words a client has after `chunks` of the fake's 4-character tokens."""
    head = content[:chunks * CHARS_PER_TOKEN]
    start = head.find('"reply_text": "')
    if start < 0:
        return ""
    words, escaped = [], False
    for char in head[start + len('"reply_text": "'):]:
        if escaped:
            words.append(json.loads(f'"\\{char}"') if char != "u" else "")
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            return "".join(words) + "\0"  # the end of the text
        else:
            words.append(char)
    return "".join(words)


def complete(words: str) -> bool:
    return words.endswith("\0") or CLAUSE_END.search(words) is not None


@given(st.text(alphabet=st.sampled_from("abc ,.;!?\"'é"), min_size=1, max_size=40))
def test_the_first_clause_is_complete_in_its_chunk_and_not_before(reply: str) -> None:
    content = json.dumps({"reply_text": reply, "counter_price": None}, ensure_ascii=False)
    chunk = _clause_chunk(content, content.find('"reply_text": "'), reply)
    assert complete(streamed_words(content, chunk + 1))
    assert not complete(streamed_words(content, chunk))


def test_the_benchmark_lines_first_clause() -> None:
    reply = reply_line(0)  # "Namaste, come, come! ..."
    content = json.dumps({"reply_text": reply}, ensure_ascii=False)
    chunk = _clause_chunk(content, content.find('"reply_text": "'), reply)
    assert streamed_words(content, chunk + 1).startswith("Namaste, ")
    assert streamed_words(content, chunk) == "Namaste,"


@given(st.floats(0, 1e6), st.integers(0, 500), st.sampled_from([1.0, 7.0, 50.0, 333.0]))
def test_a_chunk_is_due_at_its_time_and_not_a_millisecond_before(start: float, k: int, rate: float) -> None:
    total = k + 1
    assert chunks_due(next_due(start, k, rate) - start, rate, total) == k + 1
    if k:
        assert chunks_due(k / rate - 0.001, rate, total) == k
    assert chunks_due(-0.001, rate, total) == 0
    assert chunks_due(1e9, rate, total) == total


class Transport:
    """Records what the fake writes, as an asyncio transport would take it."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return False


def ask(model: FakeModel, transport: Transport, marker: str) -> None:
    body = {"model": "m", "stream": True, "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": "Stage: GREETING"},
                         {"role": "user", "content": f"Namaste (ref {marker})"}]}
    model.handle(transport, "POST", "/v1/chat/completions", orjson.dumps(body))  # type: ignore[arg-type]


def events(transport: Transport) -> list[dict[str, Any]]:
    body = b"".join(transport.written[1:])  # after the response's head
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            out.append(orjson.loads(line[len(b"data: "):]))
    return out


@pytest.mark.anyio
async def test_the_ticker_writes_each_streams_chunks_when_due_each_once_in_order() -> None:
    # The clock is walked by hand: the ticker's own task starts only once this test awaits, at the
    # end, and then finds nothing left to write.
    model = FakeModel(ttft_s=0.4, tokens_per_s=50.0)
    first, second = Transport(), Transport()
    ask(model, first, "aaaaaaaaaaaaaa")
    ask(model, second, "bbbbbbbbbbbbbb")
    starts = {id(stream.transport): stream.start for _, _, stream in model.streams}
    lengths = {id(stream.transport): len(stream.chunks) for _, _, stream in model.streams}
    t0 = starts[id(first)]
    assert model.write_due(t0 - 0.001) == 0  # nothing before the first token's time
    assert len(first.written) == 1  # the response's head only
    now = t0
    while model.streams:  # walk the clock in 3 ms steps, as late wake-ups would
        model.write_due(now)
        for transport in (first, second):
            elapsed = now - starts[id(transport)]
            assert len(transport.written) - 1 <= chunks_due(elapsed, 50.0, lengths[id(transport)])
        now += 0.003
    for transport, marker in ((first, "aaaaaaaaaaaaaa"), (second, "bbbbbbbbbbbbbb")):
        content = "".join(choice["delta"].get("content", "") for event in events(transport)
                          for choice in event["choices"])
        assert json.loads(content)["reply_text"]  # the whole answer, each token once, in order
        assert transport.written[-1].endswith(b"0\r\n\r\n")
        record = next(r for r in model.records if r["marker"] == marker)
        assert record["first_reply_char_wall"] is not None
        assert record["first_clause_wall"] is not None
    await anyio.lowlevel.checkpoint()
