"""The capacity benchmark's fake model marks a reply's first clause where the test fake does.

`benchmarks.capacity` measures the server's first-words overhead from the chunk that completes the
first clause of `reply_text` (the first words the session may let out, session/spoken.py), as
`benchmarks.llm_stream` does with tests/openai_server.py. The chunk is found in the encoded answer
before it is streamed, so it is checked here against the words a client reads chunk by chunk.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.fake_model import CHARS_PER_TOKEN, _clause_chunk
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
