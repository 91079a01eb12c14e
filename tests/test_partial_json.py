"""The incremental `reply_text` extractor, against `json.loads` on every kind of serialisation."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.partial_json import FieldExtractor


def feed_all(text: str, cuts: list[int]) -> tuple[list[str], FieldExtractor]:
    extractor = FieldExtractor("reply_text")
    bounds = sorted({c for c in cuts if 0 < c < len(text)})
    pieces, start = [], 0
    for end in [*bounds, len(text)]:
        pieces.append(extractor.feed(text[start:end]))
        start = end
    return pieces, extractor


def extract(text: str, size: int = 1) -> str:
    extractor = FieldExtractor()
    return "".join(extractor.feed(text[i:i + size]) for i in range(0, len(text), size))


# --------------------------------------------------------------------------- examples


def test_plain_object() -> None:
    text = '{"reply_text": "Namaste, ji!", "happiness_score": 55}'
    assert extract(text) == "Namaste, ji!"


def test_every_escape_decodes_like_json_loads() -> None:
    value = 'quote " backslash \\ slash / \b \f \n \r \t tab é 😀 \u0001 end'
    for ensure_ascii in (True, False):
        text = json.dumps({"reply_text": value}, ensure_ascii=ensure_ascii)
        for size in (1, 2, 3, 7):
            assert extract(text, size) == value


def test_escaped_slash_and_unicode_escape_forms() -> None:
    assert extract(r'{"reply_text": "a\/b \u0041\u00e9"}') == "a/b Aé"


def test_surrogate_pair_split_across_every_boundary() -> None:
    text = '{"reply_text": "x\\ud83d\\ude00y"}'  # x😀y written as two escapes
    for cut in range(1, len(text)):
        pieces, extractor = feed_all(text, [cut])
        assert "".join(pieces) == "x😀y"
        assert extractor.done


def test_unpaired_surrogates_become_replacement_characters() -> None:
    assert extract('{"reply_text": "a\\ud83db"}') == "a\ufffdb"
    assert extract('{"reply_text": "a\\ude00b"}') == "a\ufffdb"
    assert extract('{"reply_text": "a\\ud83d"}') == "a\ufffd"
    assert extract('{"reply_text": "a\\ud83d\\ud83d\\ude00"}') == "a\ufffd😀"


def test_field_not_first_is_found_after_skipping_everything_before_it() -> None:
    text = json.dumps({
        "happiness_score": -12.5e3,
        "flags": [True, False, None, {"reply_text": "nested, ignored"}],
        "note": 'a "reply_text": "fake" inside a string \\ with escapes',
        "obj": {"reply_text": "also ignored", "deep": [[{"x": "}"}]]},
        "reply_text": "the real one",
        "after": "not emitted",
    })
    assert extract(text) == "the real one"


def test_a_string_value_equal_to_the_key_name_does_not_count() -> None:
    assert extract('{"a": "reply_text", "b": "x", "reply_text": "yes"}') == "yes"


def test_escaped_key_is_decoded_before_matching() -> None:
    assert extract('{"reply\\u005ftext": "found"}') == "found"


def test_stops_at_the_closing_quote() -> None:
    extractor = FieldExtractor()
    assert extractor.feed('{"reply_text": "done"') == "done"
    assert extractor.done
    assert extractor.feed(', "reply_text": "again"}') == ""


def test_prefix_before_the_object_is_ignored() -> None:
    assert extract('```json\n{"reply_text": "fenced"}\n```') == "fenced"


def test_missing_field_yields_nothing_and_finishes_at_the_closing_brace() -> None:
    extractor = FieldExtractor()
    assert extractor.feed('{"happiness_score": 50, "x": {"reply_text": "no"}}') == ""
    assert extractor.done and not extractor.found


def test_non_string_value_is_skipped() -> None:
    assert extract('{"reply_text": 42, "other": "x"}') == ""


def test_pieces_arrive_as_soon_as_they_are_decodable() -> None:
    extractor = FieldExtractor()
    assert extractor.feed('{"reply_text": "Nam') == "Nam"
    assert extractor.feed("aste \\") == "aste "
    assert extractor.feed('"ji\\u00') == '"ji'
    assert extractor.feed('e9"') == "é"
    assert extractor.done


# --------------------------------------------------------------------------- properties

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)
_tricky = st.sampled_from(['"', "\\", "\\u", '\\"', "reply_text", '"reply_text":', "{", "}", "[",
                           "]", ",", ":", "\n", "\t", "😀", "é", "\u2028", "\x00", "/"])
_reply = st.lists(st.one_of(_text, _tricky), max_size=12).map("".join)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False), _reply)
_nested = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(st.just("reply_text"), _text), inner,
                                            max_size=3)),
    max_leaves=8,
)


@st.composite
def decisions(draw: st.DrawFn) -> dict[str, object]:
    fields: dict[str, object] = {
        "reply_text": draw(_reply),
        "happiness_score": draw(st.integers(0, 100)),
        "negotiation_state": draw(st.sampled_from(["GREETING", "INQUIRY", "HAGGLING", "DEAL"])),
        "vendor_mood": draw(st.sampled_from(["angry", "neutral", "friendly"])),
        "counter_price": draw(st.one_of(st.none(), st.integers(0, 10_000))),
        "offer_assessment": draw(st.sampled_from(["none", "fair", "lowball"])),
        "internal_reasoning": draw(_reply),
        "suggested_user_response": draw(_reply),
        "extra": draw(_nested),
    }
    keys = list(fields)
    if draw(st.booleans()):
        keys = draw(st.permutations(keys))
    return {k: fields[k] for k in keys}


Case = tuple[dict[str, object], str]
_cuts = st.lists(st.integers(min_value=0, max_value=4000), max_size=60)


@st.composite
def serialised(draw: st.DrawFn) -> tuple[dict[str, object], str]:
    obj = draw(decisions())
    ensure_ascii = draw(st.booleans())
    indent = draw(st.sampled_from([None, 0, 1, 2, 4, "\t", " \r\n "]))
    separators = draw(st.sampled_from([None, (",", ":"), (" , ", " :  "), (",\n", ":\t")]))
    text = json.dumps(obj, ensure_ascii=ensure_ascii, indent=indent, separators=separators)
    lead = draw(st.sampled_from(["", " ", "\n\t ", "```json\n"]))
    return obj, lead + text


@settings(max_examples=400, deadline=None)
@given(serialised(), _cuts)
def test_concatenated_pieces_equal_reply_text(case: Case, cuts: list[int]) -> None:
    obj, text = case
    pieces, extractor = feed_all(text, cuts)
    assert "".join(pieces) == obj["reply_text"]
    assert extractor.done and extractor.found


@settings(max_examples=200, deadline=None)
@given(serialised(), _cuts)
def test_every_intermediate_output_is_a_prefix(case: Case, cuts: list[int]) -> None:
    obj, text = case
    pieces, _ = feed_all(text, cuts)
    so_far = ""
    for piece in pieces:
        so_far += piece
        assert str(obj["reply_text"]).startswith(so_far)


@settings(max_examples=200, deadline=None)
@given(serialised())
def test_one_character_at_a_time(case: Case) -> None:
    obj, text = case
    assert extract(text, 1) == obj["reply_text"]
