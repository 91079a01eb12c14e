"""Data contracts shared by every layer. This package imports nothing else of the project's.

- `frames`: the wire frames clients send (strictly typed) and the events the server sends back.
- `state`: the session's state as clients see it (`SessionState`, the summary), carried in those events.
- `codec`: decoding and encoding those frames as JSON text or msgpack binary.
- `asyncapi`: those frames as a JSON Schema and an AsyncAPI 3.0 document (docs/asyncapi.json,
  docs/protocol.schema.json; `python -m schemas.asyncapi --write` remakes them).
- `enums`, `errors`: closed vocabularies (stage, mood, role, ...), error and close codes.
- `brain`, `decision`: what a brain is told and what it proposes for one turn.
- `summary`: what a brain that writes running summaries is given, and what it returns.
- `learner`: a learner across sessions: the profile, what a vendor remembers, progress figures.
- `review`: review items, their evidence and history, practice targets and their judgement.
- `words`: sound keys and stop words for English, Hinglish and Devanagari (retrieval, the judgement).
- `flags`: the flags a `reply` may carry, in plain words; `report`: the learner report of a session,
  with its level estimate; `fluency`: how a learner speaks, per spoken turn and summed per session.
- `knowledge`: playbook chunks, what retrieval returns, and grounded tip cards.
- `pack`: a scenario pack's manifest beyond items and prices (vendor, culture, lines, words);
  `lines`: how a vendor line is picked and filled; `numbers`: how each language says numbers.
- `policy`: the negotiation's published numbers; `scenario`: items, prices and customs, loaded
  from the JSON files in `data/`.
"""

from schemas.brain import BrainRequest, BrainResult, GraphContext, HistoryLine, Ledger, StageVisit
from schemas.codec import Envelope, FrameError, WireFormat, decode_event, decode_frame, encode_event
from schemas.decision import AIDecision
from schemas.enums import LanguageCode, Mood, OfferAssessment, Outcome, Role, Stage
from schemas.errors import CloseCode, ErrorCode
from schemas.scenario import DEFAULT_SCENARIO, Item, Scenario, load_scenario

__all__ = [
    "DEFAULT_SCENARIO",
    "AIDecision",
    "BrainRequest",
    "BrainResult",
    "CloseCode",
    "Envelope",
    "ErrorCode",
    "FrameError",
    "GraphContext",
    "HistoryLine",
    "Item",
    "LanguageCode",
    "Ledger",
    "Mood",
    "OfferAssessment",
    "Outcome",
    "Role",
    "Scenario",
    "Stage",
    "StageVisit",
    "WireFormat",
    "decode_event",
    "decode_frame",
    "encode_event",
    "load_scenario",
]
