"""How the in-memory learner store keeps a model: its JSON, deflated against a preset dictionary.

A new learner of five turns leaves a profile, a progress point and some seven review items, about
6.5 KB of JSON (issue #33, docs/performance.md). Most of it is what every value of a kind repeats:
the field names, the scenario, the level, the shape of an evidence or a review. Deflate cannot
find those in one value of 400-800 bytes, but it finds them in a preset dictionary that holds one
value of each kind, so the same learner keeps about 1.3-1.5 KB (`DICTIONARY` below).

The parameters were measured on the life run's learners (2026-11-27): a 4 KiB window (wbits 12)
holds the whole dictionary and a value; memory level 4 makes a deflate state small, so starting
one, which dominates the cost of a value this small, takes some 10 us rather than the 30-40 us of
zlib's defaults, for the same size. Level 1, not 6: under the rule run's load (2026-11-27, py-spy)
deflating was 8 % of the server's samples, since a returning learner's items carry up to 32
reviews each; level 1 deflates a value of 2.4 KB in 14 us against 27 (level 6), and keeps about
13 % more (656 bytes against 524 for a new learner's). A value is inflated in 2-5 us. The bytes never
leave the process, so the dictionary may change with the code: nothing packed by one build is
read by another.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar, get_args

from pydantic import BaseModel

from schemas.review import Rating, ReviewEntry

__all__ = ["DICTIONARY", "SAMPLES", "history_sessions", "keep_last", "pack", "pack_block", "pack_history",
           "reviewed_in", "unpack", "unpack_block", "unpack_history"]

_Model = TypeVar("_Model", bound=BaseModel)

WBITS = 12  # a 4 KiB window: the dictionary and one value
MEM_LEVEL = 4
LEVEL = 1

# One value of each kind the store packs, as pydantic writes them (tests/test_learner_packing.py
# holds each to its model, so a renamed field is noticed): what deflate finds again in a new value.
# Ids and times are made up; a value's own ids, times and numbers are what stays in its bytes.
SAMPLES: dict[str, bytes] = {
    "ProgressPoint": (
        b'{"session_id":"0123456789abcdef0123456789abcdef","scenario":"jaipur-bazaar","at":1795762524.9249818,'
        b'"level":"intermediate","outcome":"deal","item":"Tomato","turns":5,"turns_to_deal":4,'
        b'"discount_pct":20.0,"score":8,"hints":0,"hints_by_level":[0,0,0],"words_per_minute":null,"pause_ratio":null,'
        b'"mean_length_of_run":null,"fillers":null,"estimated_band":"B1","estimate_confidence":0.31}'),
    "LearnerProfile": (
        b'{"learner_id":"learner-1","level":"intermediate","input_language":"en-IN","target_language":"en-IN",'
        b'"languages":["en-IN"],"pending":{},"sessions":1,"latest_sessions":[[1795762524.9249818,'
        b'"0123456789abcdef0123456789abcdef"]],"counted_through":null,'
        b'"scenarios":{"jaipur-bazaar":{"played":1,"outcomes":{"stopped":1},"last_outcome":"stopped",'
        b'"last_session_id":"0123456789abcdef0123456789abcdef","last_item":"Tomato","last_paid":null,'
        b'"last_first_quote":150,"last_discount_pct":null,"last_at":1795762524.9896023}},"best_discounts":[],'
        b'"slips":{"insult":1},"recent_slips":[["insult"]],"recurring_slips":[],'
        b'"first_at":1795762524.9249818,"last_at":1795762524.9896023}'),
    "ReviewItem (a slip)": (
        b'{"item_id":"0123456789abcdef0123","learner_id":"learner-1","scenario":"jaipur-bazaar","language":"en-IN",'
        b'"kind":"avoid","key":"insult","source":"slip","phrase":"no an insulting offer: open near the fair price",'
        b'"english":"","cues":[],"evidence":[["0123456789abcdef0123456789abcdef",{"source":"slip","key":"insult",'
        b'"turn":3,"text":"","english":""}]],"created_at":1795762524.994573,"state":2,"step":null,'
        b'"stability":0.212,"difficulty":6.4133,"due":1795848924.994573,"last_review":1795762524.994573,'
        b'"reps":1,"lapses":0,"history":[{"at":1795762524.994573,"session_id":"0123456789abcdef0123456789abcdef",'
        b'"rating":"again","recalled":null,"stability":0.212,"difficulty":6.4133,"due":1795848924.994573}]}'),
    "ReviewItem (a card)": (
        b'{"item_id":"0123456789abcdef0123","learner_id":"learner-1","scenario":"jaipur-bazaar","language":"en-IN",'
        b'"kind":"card","key":"card:01234567-89ab-5def-8123-456789abcdef","source":"card",'
        b'"phrase":"Phrases for the bazaar","english":"","cues":["01234567-89ab-5def-8123-456789abcdef"],'
        b'"evidence":[["0123456789abcdef0123456789abcdef",{"source":"card","key":'
        b'"01234567-89ab-5def-8123-456789abcdef","turn":1,"text":"Phrases for the bazaar","english":""}]],'
        b'"created_at":1795762524.994573,"state":2,"step":null,"stability":0.212,"difficulty":6.4133,'
        b'"due":1795848924.994573,"last_review":1795762524.994573,"reps":1,"lapses":0,"history":[{"at":'
        b'1795762524.994573,"session_id":"0123456789abcdef0123456789abcdef","rating":"again","recalled":null,'
        b'"stability":0.212,"difficulty":6.4133,"due":1795848924.994573}]}'),
}
# The most common kind last: deflate reaches the end of a dictionary with the shortest distances.
DICTIONARY = b"".join(SAMPLES.values())
assert len(DICTIONARY) <= 1 << WBITS, "the dictionary must fit the window"


# A deflate state with the dictionary already read, copied for each value: the copy gives the same
# bytes, and costs some 3 us against 5.5 for a state made and primed afresh (a 0.8 KB value).
_PRIMED = zlib.compressobj(LEVEL, zlib.DEFLATED, -WBITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)


def pack(model: BaseModel, exclude: set[str] | None = None) -> bytes:
    """The model's JSON (less the fields `exclude` names, which must have defaults), deflated against
    the dictionary (a raw stream: no header, no checksum)."""
    return _deflated(model.model_dump_json(exclude=exclude).encode())


def unpack(data: bytes, kind: type[_Model]) -> _Model:
    """The model `pack` was given."""
    return kind.model_validate_json(inflated(data))


def inflated(data: bytes) -> bytes:
    """The JSON `pack` deflated."""
    inflate = zlib.decompressobj(-WBITS, zdict=DICTIONARY)
    return inflate.decompress(data) + inflate.flush()


def _deflated(data: bytes) -> bytes:
    deflate = _PRIMED.copy()
    return deflate.compress(data) + deflate.flush()


# ---------------------------------------------------------------------------- blocks of values
#
# Deflating a value costs about as much as deflating several together: under the rule run's load
# (2026-11-27, the heads of a bot learner's review items, 1.1 KB of JSON each) one stream of seven
# took 6 us a value against 15 us for each alone, and kept 154 bytes a value against 274, since the
# items of one learner repeat each other (their learner, scenario, evidence and shapes). The store
# keeps a learner's item heads in blocks of a few (`store.BLOCK`), each one stream.

_BLOCK_END = "I"  # the array type of where each value ends in a block's JSON


def pack_block(values: Sequence[bytes]) -> bytes:
    """JSON `values` deflated together as one stream, after how many there are and where each ends."""
    ends, at = array(_BLOCK_END), 0
    for value in values:
        at += len(value)
        ends.append(at)
    return struct.pack("<H", len(values)) + ends.tobytes() + _deflated(b"".join(values))


def unpack_block(data: bytes) -> list[bytes]:
    """The values `pack_block` was given, each its JSON."""
    (count,) = struct.unpack_from("<H", data)
    ends = array(_BLOCK_END)
    ends.frombytes(data[2:2 + count * ends.itemsize])
    inflate = zlib.decompressobj(-WBITS, zdict=DICTIONARY)
    joined = inflate.decompress(data[2 + count * ends.itemsize:]) + inflate.flush()
    return [joined[start:end] for start, end in zip((0, *ends), ends, strict=False)]


# ---------------------------------------------------------------------------- review histories
#
# A review item's history (up to `reviews.HISTORY_KEPT` entries) is most of its JSON once a learner
# has played a few sessions: reading it into models, writing it out and deflating it again at every
# session's end made a learner's record grow with their past (seven items by the 12th session: 940
# against 620 us in process; docs/performance.md, "Rule turn at churn", fourth sitting). The store keeps it
# apart, as fixed records that a session's end appends to without reading: each entry is its four
# times and figures as doubles (exact), its rating and recall, and its session id (a 32-digit hex
# id as its 16 bytes, any other as UTF-8).

_ENTRY = struct.Struct("<ddddBbH")  # at, stability, difficulty, due, rating, recalled, the id's length
_RATINGS: tuple[Rating, ...] = get_args(Rating)
_RATING_CODES = {name: code for code, name in enumerate(_RATINGS)}
_RECALLED = {None: -1, False: 0, True: 1}
_RECALLED_BACK = {-1: None, 0: False, 1: True}
_HEX = 0x8000  # set in the length: the id was 32 lowercase hex digits, kept as their 16 bytes
_HEX_DIGITS = frozenset("0123456789abcdef")


def _session_bytes(session_id: str) -> tuple[int, bytes]:
    if len(session_id) == 32 and _HEX_DIGITS.issuperset(session_id):
        return _HEX | 16, bytes.fromhex(session_id)
    raw = session_id.encode()
    if len(raw) >= _HEX:
        raise ValueError("a session id too long to keep in a review history")
    return len(raw), raw


def pack_history(entries: Iterable[ReviewEntry]) -> bytes:
    """The entries as records, oldest first; histories concatenate (`a + b` keeps a's then b's)."""
    parts = []
    for e in entries:
        length, sid = _session_bytes(e.session_id)
        parts.append(_ENTRY.pack(e.at, e.stability, e.difficulty, e.due, _RATING_CODES[e.rating],
                                 _RECALLED[e.recalled], length) + sid)
    return b"".join(parts)


def _records(data: bytes) -> Iterator[tuple[int, tuple[float, float, float, float, int, int], str]]:
    """Each record's offset, figures and session id, oldest first."""
    at, size = 0, _ENTRY.size
    while at < len(data):
        *figures, length = _ENTRY.unpack_from(data, at)
        n = length & ~_HEX
        raw = data[at + size:at + size + n]
        yield at, tuple(figures), raw.hex() if length & _HEX else raw.decode()
        at += size + n


def _starts(data: bytes) -> list[int]:
    """Where each record starts, read from the lengths alone."""
    starts, at, size = [], 0, _ENTRY.size
    while at < len(data):
        starts.append(at)
        at += size + (_ENTRY.unpack_from(data, at)[-1] & ~_HEX)
    return starts


def history_sessions(data: bytes) -> list[str]:
    """The session id of each entry, oldest first."""
    return [sid for _, _, sid in _records(data)]


def reviewed_in(data: bytes, session_id: str) -> bool:
    """Whether a session has an entry in the history: what a session's end checks before it adds
    one. The id's bytes are looked for first; only a history that holds them is read record by record."""
    return _session_bytes(session_id)[1] in data and session_id in history_sessions(data)


def keep_last(data: bytes, keep: int) -> bytes:
    """The history's latest `keep` entries."""
    if keep <= 0:
        return b""
    if len(data) < (keep + 1) * _ENTRY.size:  # every record is at least that long: no more than `keep`
        return data
    starts = _starts(data)
    return data if len(starts) <= keep else data[starts[-keep]:]


def unpack_history(data: bytes) -> tuple[ReviewEntry, ...]:
    """The entries `pack_history` was given, equal entry for entry. Each is checked by the model's
    own validator from a dict, in one loop: 60 us for 32 reviews, against 100 for `ReviewEntry(...)`
    through a generator (a whole item's JSON with them was 46 us)."""
    validate, entry, size = ReviewEntry.__pydantic_validator__.validate_python, _ENTRY, _ENTRY.size
    out, at, end = [], 0, len(data)
    while at < end:
        at_, stability, difficulty, due, rating, recalled, length = entry.unpack_from(data, at)
        n = length & ~_HEX
        raw = data[at + size:at + size + n]
        out.append(validate({"at": at_, "session_id": raw.hex() if length & _HEX else raw.decode(),
                             "rating": _RATINGS[rating], "recalled": _RECALLED_BACK[recalled],
                             "stability": stability, "difficulty": difficulty, "due": due}))
        at += size + n
    return tuple(out)
