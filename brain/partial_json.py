"""Pull one top-level string field out of a JSON object while the object is still arriving.

A streaming model writes its decision as JSON a few characters at a time. `FieldExtractor` is fed
those pieces in order and returns, after each one, the next decoded piece of the chosen field's
value (by default `reply_text`), so the vendor's words can be spoken before the object is whole.

It follows just enough of JSON to be exact about that one value:

* only a key of the top-level object counts; the same key inside a nested object or array, or a
  string value that happens to read "reply_text", is skipped;
* the field may come anywhere in the object; everything before it is skipped, strings (with their
  escapes), numbers, literals and nested containers alike;
* escapes are decoded as `json.loads` decodes them: \\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX,
  including a surrogate pair written as two escapes, even when a chunk boundary falls inside an
  escape or between the two halves of a pair;
* it stops at the value's closing quote and ignores everything after it.

It can also read, in the same pass, the values of a few other top-level keys (`capture`): the
decision's numbers and stage, which the session rules on while the words still stream (docs/llm.md).
A captured string is decoded as the field is; a number or literal is read with `json.loads`; a
nested value is recorded as `None`, which no valid decision has there. Once the field has ended,
the scan goes on only until every captured key has been read.

Two deliberate differences from `json.loads`, both only for input that no valid decision has: an
unpaired surrogate escape comes out as U+FFFD (a lone surrogate cannot be sent as UTF-8), and an
unknown escape `\\q` comes out as `q`. The brain validates the whole object afterwards and
withdraws what it streamed if the final `reply_text` differs.
"""

from __future__ import annotations

import json

_SIMPLE_ESCAPES = {
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}
_WHITESPACE = frozenset(" \t\r\n")
_REPLACEMENT = "\ufffd"

# Where the scanner is in the top-level object.
_BEFORE = 0  # before the opening brace
_KEY = 1  # expecting a key (or the closing brace)
_COLON = 2  # after a key, expecting ':'
_VALUE = 3  # after ':', expecting a value
_AFTER = 4  # after a value, expecting ',' or '}'
_FINISHED = 5  # the top-level object closed, or the field's value was read to its end


class _StringDecoder:
    """Decodes the inside of one JSON string, one character at a time, across chunk boundaries."""

    __slots__ = ("_escape", "_hex", "_high")

    def __init__(self) -> None:
        self._escape = False  # the previous character was a backslash
        self._hex: str | None = None  # hex digits of a \u escape read so far
        self._high: int | None = None  # a high surrogate waiting for its low half

    def feed(self, char: str, out: list[str]) -> bool:
        """Decode `char`, appending output to `out`. Returns True at the closing quote."""
        if self._hex is not None:
            self._hex += char
            if len(self._hex) == 4:
                digits, self._hex = self._hex, None
                try:
                    code = int(digits, 16)
                except ValueError:
                    self._flush_high(out)
                    out.append(digits)  # invalid JSON; keep the characters
                    return False
                self._code_point(code, out)
            return False
        if self._escape:
            self._escape = False
            if char == "u":
                self._hex = ""
                return False
            self._flush_high(out)
            out.append(_SIMPLE_ESCAPES.get(char, char))
            return False
        if char == "\\":
            self._escape = True
            return False
        self._flush_high(out)
        if char == '"':
            return True
        out.append(char)
        return False

    def _code_point(self, code: int, out: list[str]) -> None:
        if 0xD800 <= code <= 0xDBFF:
            self._flush_high(out)
            self._high = code
        elif 0xDC00 <= code <= 0xDFFF:
            if self._high is None:
                out.append(_REPLACEMENT)
            else:
                out.append(chr(0x10000 + ((self._high - 0xD800) << 10) + (code - 0xDC00)))
                self._high = None
        else:
            self._flush_high(out)
            out.append(chr(code))

    def _flush_high(self, out: list[str]) -> None:
        if self._high is not None:
            out.append(_REPLACEMENT)
            self._high = None


class FieldExtractor:
    """Incrementally extract the string value of top-level key `field` from streamed JSON text."""

    __slots__ = (
        "_capture_key",
        "_capture_out",
        "_capturing",
        "_decoder",
        "_depth",
        "_in_string",
        "_key",
        "_last_key",
        "_scalar",
        "_skip_escape",
        "_state",
        "_target",
        "capture",
        "done",
        "field",
        "found",
        "head_done",
        "values",
    )

    def __init__(self, field: str = "reply_text", capture: tuple[str, ...] = ()) -> None:
        self.field = field
        self.capture = frozenset(capture)
        self.values: dict[str, object] = {}  # the captured keys read so far, in the JSON's order
        self.head_done = not capture  # every captured key has been read (or the object closed)
        self._capture_key: str | None = None  # the captured key whose value comes next
        self._capturing: _StringDecoder | None = None  # decoding a captured string value
        self._capture_out: list[str] = []
        self._scalar: list[str] | None = None  # the characters of a captured number or literal
        self._state = _BEFORE
        self._depth = 0  # nesting depth below the top-level object while skipping a value
        self._in_string = False  # inside a string that is skipped (not decoded)
        self._skip_escape = False
        self._key: _StringDecoder | None = None  # decoding a top-level key
        self._last_key: list[str] = []
        self._decoder: _StringDecoder | None = None  # decoding the field's value
        self._target = False  # the next value belongs to `field`
        self.found = False  # the field's value has started
        self.done = False  # the field's value has ended (or the object closed without it)

    def feed(self, chunk: str) -> str:
        """Consume the next piece of the JSON text; return the next piece of the field's value."""
        if self.done and self.head_done:
            return ""
        out: list[str] = []
        for char in chunk:
            if self._step(char, out):
                self.done = self.head_done = True
                break
        return "".join(out)

    def _got(self, key: str, value: object) -> bool:
        """A captured value is read; True when nothing more is to be read."""
        self.values.setdefault(key, value)  # the first of duplicate keys, as it was reported
        self._capture_key = None
        if not self.head_done and self.capture.issubset(self.values):
            self.head_done = True
        return self.done and self.head_done

    def _step(self, char: str, out: list[str]) -> bool:
        """Advance by one character; True when there is nothing more to extract."""
        if self._decoder is not None:
            if self._decoder.feed(char, out):
                self._decoder = None
                self.done = True
                self._state = _AFTER
                return self.head_done
            return False
        if self._capturing is not None:
            if self._capturing.feed(char, self._capture_out):
                self._capturing = None
                assert self._capture_key is not None
                return self._got(self._capture_key, "".join(self._capture_out))
            return False
        if self._scalar is not None:
            if char not in _WHITESPACE and char not in ",}]":
                self._scalar.append(char)
                return False
            text, self._scalar = "".join(self._scalar), None
            try:
                value: object = json.loads(text)
            except ValueError:
                value = text  # not JSON: the session's validation refuses it
            assert self._capture_key is not None
            if self._got(self._capture_key, value):
                return True
        if self._key is not None:
            if self._key.feed(char, self._last_key):
                self._key = None
                self._state = _COLON
            return False
        if self._depth or (self._state == _AFTER and self._in_string):
            return self._skip(char)
        if char in _WHITESPACE:
            return False
        state = self._state
        if state == _BEFORE:
            if char == "{":
                self._state = _KEY
            return False  # anything before the brace (a stray prefix) is ignored
        if state == _KEY:
            if char == '"':
                self._key = _StringDecoder()
                self._last_key = []
            elif char == "}":
                self._state = _FINISHED
                return True
            return False
        if state == _COLON:
            if char == ":":
                self._state = _VALUE
                key = "".join(self._last_key)
                self._target = key == self.field and not self.done
                self._capture_key = key if key in self.capture and key not in self.values else None
            return False
        if state == _VALUE:
            self._state = _AFTER
            if char == '"':
                if self._target:
                    self.found = True
                    self._decoder = _StringDecoder()
                elif self._capture_key is not None:
                    self._capturing = _StringDecoder()
                    self._capture_out = []
                else:
                    self._in_string = True
            elif char in "{[":
                self._depth = 1
                if self._capture_key is not None:
                    return self._got(self._capture_key, None)
            elif self._capture_key is not None:
                self._scalar = [char]
            return False  # a number or literal: its characters are skipped below
        # _AFTER: the rest of a scalar, then ',' or '}'
        if char == ",":
            self._state = _KEY
        elif char == "}":
            self._state = _FINISHED
            return True
        return False

    def _skip(self, char: str) -> bool:
        """Skip a string or a nested container that is not the field's value."""
        if self._in_string:
            if self._skip_escape:
                self._skip_escape = False
            elif char == "\\":
                self._skip_escape = True
            elif char == '"':
                self._in_string = False
            return False
        if char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
        return False
