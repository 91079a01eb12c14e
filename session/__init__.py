"""The session layer: the pure negotiation core, its rules, and the actor that owns each session.

The pure core (synchronous: no await, no sockets, no clock reads):

- `core`: `SessionCore`, one session's state, and the views read off it (the summary, the snapshot).
- `negotiation`: `Negotiation`, the machine around that state: each decision said as a change,
  committed, and the events it makes.
- `changes`: the session's changes, one frozen class per kind: what the machine decided.
- `fold`: `apply`, the one function that applies a change, to the live session and the mirror's copy.
- `admission`: the steps every client frame passes before its handler, one row per frame type.
- `rules`: the rules engine; every stage and happiness rule, the transition table, `validate`.
- `offers`: finding the learner's price offer in a transcript, and judging it against the quote.
- `records`: the history's records: a line of the conversation, a turn in flight, a turn's outcome.
- `context`: the graph context a brain is given, computed from the history.
- `summary`: the running summary's state, cadence and undo, and the summary the server writes itself.
- `spoken`: the vendor's words made speakable and true to the engine's numbers, a clause at a
  time as they stream (`ReplyGate`), or whole; `plain`: whether a line needs the gate at all.
- `wording`: the ruling on what a turn's words may say (which prices), from the negotiation's facts.
- `numbers`: every number in a line, in the pack's languages, with where it stands.
- `number_tokens`, `number_lexicon`: the number reader's tokens, and its words in every pack's
  languages (from `schemas/data/numbers/`).
- `coaching`: the learner's hints, repeats, undos, silences and unclear turns; undo's checkpoints.
- `hints`: the `hint` command's content from the state and the scenario pack.
- `ending`: ending a session outside a turn (stopped, timed out).
- `unclear`, `tips`, `report`: clarify replies, tip cards, the learner report; `level_estimate`: the
  learner's level estimated from one session (docs/learning.md).
- `practice`: the recall judgement: whether the learner's turns produced their due review items.

The session machine (pure: `handle(input, now)` returns the outputs and the changes):

- `machine`: `SessionMachine`, every decision about a session, and its dispatch tables.
- `machine_state`: what the machine decides from: the negotiation and the turn in flight.
- `outputs`: what a step returns: the `Step`, and the asks of the actor (ack, think, listen...).
- `turns`: a transcript, the brain's streamed words and numbers, its answer validated and applied.
- `commands`: `command` frames: hint, repeat, undo, stop.
- `playback`: `playback` frames: barge-in, what the learner heard.
- `silence`: the silence timer's expiry, nudges, the timed-out end and the welcome back.
- `scene`: `scene` frames, which change the context and never make the vendor speak.
- `resume`: `resume` frames, answered by replay or by a snapshot.
- `memory`: the running summary, refreshed every 10 turns, never waited for.
- `speech`: what the recogniser heard, as a sequenced `speech` event; what a transcriber may know.

The actor around it (I/O and ordering; session/README.md tells how a turn flows through these):

- `actor`: `SessionActor`, the single writer of a session: inbox, loop, admission, held frames.
- `asks`: how the actor carries out a step: changes to the mirror, events out, each ask run.
- `calls`: the brain's and the summary's calls, in child tasks that post their results back.
- `fanout`: `Fanout`: connections, fan-out of events, the replay ring, durability and acks.
- `messages`: the messages the actor's inbox carries, one dataclass per kind.
- `timers`: one heap of silence deadlines for every session, served by one task.
- `voice_stages`: a spoken turn's stages, kept until its reply's timings take them; `answer`: one
  value a caller outside the actor waits on (a transcriber's consult, a socketless turn).
- `mailbox`: the bounded single-consumer queue behind the inbox and each connection's sends.
- `registry`: the live sessions of a process: creation, lookup, recovery, eviction, the dispatcher.
- `ended`: `EndedSession`, an ended session kept for its report as a few fields and its negotiation
  as bytes (`to_bytes`, `from_bytes`), which the registry rebuilds an actor from.

What the session needs from outside:

- `protocols`: the `Brain`, `Mirror` and `Connection` it needs, declared as protocols.
- `mirror`: `MemoryMirror`, the mirror that keeps nothing (the default without a database).
"""

from schemas.brain import DeltaSink
from session.changes import Change
from session.negotiation import Negotiation
from session.offers import assess_offer, parse_offer
from session.protocols import Brain, Connection, Mirror
from session.records import PendingTurn, TurnOutcome, TurnRecord
from session.rules import TRANSITIONS, Limits, Position, Verdict, is_legal, mood_for, validate

__all__ = [
    "TRANSITIONS",
    "Brain",
    "Change",
    "Connection",
    "DeltaSink",
    "Limits",
    "Mirror",
    "Negotiation",
    "PendingTurn",
    "Position",
    "TurnOutcome",
    "TurnRecord",
    "Verdict",
    "assess_offer",
    "is_legal",
    "mood_for",
    "parse_offer",
    "validate",
]
