"""The Neo4j mirror: a write-behind copy of every session change, and recovery from it.

The session actor hands over each change with `submit()`, which never waits and only appends the
change to its lane: sessions are spread over `MIRROR_WRITERS` lanes (a session always to the same
one), each a FIFO with its own writer task. A writer drains its lane in batches (up to
`MIRROR_BATCH_MAX` changes, started once the oldest change has waited `MIRROR_FLUSH_MS` or the batch
is full): it folds the batch's changes into their sessions' running state in order, turns them into
graph rows (one row per session, with one Session snapshot: the newest) and writes the batch in one
managed transaction, one statement, with an explicit timeout. The lanes' transactions run at once;
they touch disjoint sessions. A failed batch stays at the head of its lane, planned as it was, and is
written again after an exponential backoff (capped at `BACKOFF_CAP_S`), so while Neo4j is down the
sessions keep playing and their changes wait; nothing is dropped.

Ordering. One writer per session and a FIFO lane mean a session's changes reach Neo4j in version
order, but the Cypher does not rely on it: every row is keyed on stable keys and every write is
idempotent and order-independent (see `server.mirror.batch`). Session scalars are written as a complete
snapshot taken at the change's version and only applied if that version is newer than the stored
one, which is why the writer folds each change into a full picture of the session rather than
sending deltas.

Durability. After a batch commits, each session's durable version moves up and the subscribers
(the registry, hence the actors) are told, and only then are the frames acknowledged. When the
lanes hold `MIRROR_BUFFER_CHANGES` changes, `has_room()` turns False and the actors refuse new
frames with `unavailable`; changes already made (a vendor turn that was in flight) are still kept.

The parts, from the bottom up; each module keeps the Cypher it runs, every value passed as a parameter:

- `state`: a session's running state as the mirror folds it (`SessionFold`) and one change's rows (`Entry`).
- `coaching`: folding the coaching changes (hints, undo, silence, barge-in, welcome back).
- `fold`: a session's running state (`SessionFold`) and `plan()`, which folds a change into it and
  returns the rows that write it. Pure.
- `rebuild`: a `Negotiation` rebuilt from a session's stored graph. Pure.
- `schema`: the graph's shape, its constraints and indexes (`SCHEMA`), and statements to inspect them.
- `memory`: the running summary on the Session node (`WRITE_SUMMARIES`, run in the batch's transaction).
- `batch`: `WRITE_BATCH`, the rows a batch of entries becomes, and the transaction that writes them.
- `io`: the I/O thread where the driver lives (`Neo4jIo`): schema creation, batch writes, retried reads.
- `writer`: the lanes, their writer tasks, backoff, and the bookkeeping of durable versions.
- `reads`: loading sessions (gathered), a session's subgraph and graph context, figures across sessions.
- `health`: `statistics()` for /health: depth, lag, batch times, failures.
- `core`: `Neo4jMirror`, which inherits those parts, sets their state and runs them (`run()`).
"""

from server.mirror.core import Neo4jMirror
from server.mirror.fold import plan
from server.mirror.rebuild import rebuild
from server.mirror.state import Entry, SessionFold, turn_key

__all__ = ["Entry", "Neo4jMirror", "SessionFold", "plan", "rebuild", "turn_key"]
