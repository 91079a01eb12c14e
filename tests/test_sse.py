"""`brain.sse.EventReader`: the events of a `text/event-stream` body, however the body is split."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from brain.sse import EventReader

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=40)


def read(body: bytes, cuts: list[int]) -> list[tuple[str | None, bytes]]:
    """Feed `body` to a reader in pieces cut at `cuts`; every event it returns."""
    reader = EventReader()
    events: list[tuple[str | None, bytes]] = []
    start = 0
    for cut in [*sorted(set(cuts)), len(body)]:
        events += reader.feed(body[start:cut])
        start = cut
    return events


def test_a_chat_completions_stream() -> None:
    chunks = [{"choices": [{"index": 0, "delta": {"content": "Namaste"}}]},
              {"choices": [{"index": 0, "delta": {"content": " ji"}}]}]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    events = read(body, [])
    assert [json.loads(data) for _, data in events[:2]] == chunks
    assert events[2] == (None, b"[DONE]")


def test_fields_comments_and_line_endings() -> None:
    body = (b": a comment\r\nid: 7\r\nretry: 10\r\nevent: error\r\ndata: one\r\ndata:two\r\n\r\n"
            b"data\n\n"  # a field with no colon: data, empty
            b"event: ping\n\n"  # no data: no event
            b"data: three\r\r")
    assert read(body, []) == [("error", b"one\ntwo"), (None, b""), (None, b"three")]


def test_an_event_is_not_returned_before_its_blank_line() -> None:
    reader = EventReader()
    assert reader.feed(b"data: {\"a\": 1}\n") == []
    assert reader.feed(b"\n") == [(None, b'{"a": 1}')]


@given(st.lists(st.tuples(st.one_of(st.none(), _TEXT.filter(lambda t: t.strip() == t and t)),
                          st.lists(_TEXT, min_size=1, max_size=3)), max_size=6),
       st.sampled_from([b"\n", b"\r\n", b"\r"]),
       st.lists(st.integers(min_value=0, max_value=2000), max_size=30))
def test_any_split_and_any_line_ending_give_the_same_events(
        events: list[tuple[str | None, list[str]]], newline: bytes, cuts: list[int]) -> None:
    body = b""
    for name, lines in events:
        if name is not None:
            body += b"event: " + name.encode() + newline
        body += b"".join(b"data: " + line.encode() + newline for line in lines) + newline
    expected = [(name, "\n".join(lines).encode()) for name, lines in events]
    assert read(body, [c % (len(body) + 1) for c in cuts]) == expected
