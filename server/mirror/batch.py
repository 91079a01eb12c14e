"""One batch, one statement: `WRITE_BATCH`, the rows it takes (`batch_rows`), and the transaction that runs it.

Every write is idempotent and independent of the order in which rows arrive, so a batch that is
written twice (a retry after a lost commit reply) or two batches that overlap change nothing:

* nodes have stable keys (Turn `turn_key` = "<session_id>:<ordinal>", Item and StageTransition
  (session_id, name) and (session_id, at_turn)), all backed by uniqueness constraints; Session and Item
  are MERGEd, and a Turn or StageTransition, which never changes once written, is created with its
  relationships only if its key is not there yet;
* Session scalars are a complete snapshot of the session as of one change, applied only when that
  change's version is newer than the one stored (`row.version > s.version`);
* FOLLOWED_BY is linked from both ends: a new turn links to its predecessor and to its successor if
  either is already there, so whichever of two neighbours is written second makes the link;
* a batch is one statement in one transaction (`WRITE_BATCH`);
* the coaching changes' marks on written nodes (an undone Turn or StageTransition, what a barge-in
  heard) are SETs by key, idempotent, applied after the batch's own turns are created.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, LiteralString

import anyio
from neo4j import AsyncDriver, AsyncManagedTransaction, unit_of_work

from server.mirror.memory import WRITE_SUMMARIES, summary_rows
from server.mirror.state import Entry

# One statement writes a whole batch: `$rows` holds one row per session of the batch, with the newest
# Session snapshot of that session in the batch, the items its turns are about, its turns (their
# properties; the statement adds `session_id`, `turn_key` and, when absent, `text_snippet` = the text, and
# derives the neighbours' keys) and its stage transitions. Per session it looks the Session up
# once and the items once; per turn it creates the node and looks up at most three turns by unique index.
#
# * The snapshot is applied only if its version is newer than the stored one.
# * Turns and transitions never change once written, so one that exists is skipped whole (with its
#   relationships, which the transaction that created it made), and a new one is CREATEd with its
#   relationships. The caller sends each turn key once per batch.
# * `stored`, the Session's version before this statement, bounds what can exist: every batch writes its
#   session's snapshot version (the batch's newest) in the same transaction as its turns, so a turn or
#   transition whose change is newer than `stored` cannot be there yet, and neither can its successor.
#   Only for an older change (a replay, a write out of order) are they looked up; in order, a turn costs
#   one lookup, its predecessor's.
# * FOLLOWED_BY: a new turn links to its successor if the successor existed before this statement, and
#   to its predecessor if that exists after this session's turns are created. Whichever of two neighbours
#   is created later makes the link, and two created together make it once (from the successor's side).
#   `after` is matched before the CREATE clause and `before` after it: Cypher applies each clause to every
#   row of the subquery before the next clause reads.
WRITE_BATCH: LiteralString = """
UNWIND $rows AS g
MERGE (s:Session {session_id: g.session_id})
WITH s, g, coalesce(s.version, 0) AS stored
SET s += CASE WHEN g.version > stored THEN g.props ELSE {} END,
    s.version = CASE WHEN g.version > stored THEN g.version ELSE stored END
WITH s, g, stored
CALL (s, g) {
  UNWIND g.items AS name
  MERGE (i:Item {session_id: g.session_id, name: name})
  MERGE (s)-[:INVOLVES_ITEM]->(i)
  RETURN collect(i) AS items
}
CALL (s, g, stored, items) {
  UNWIND g.turns AS props
  WITH props, g.session_id + ':' AS prefix,
       coalesce(props.version <= stored, true) AS seen  // no version: look everything up
  WITH props, seen, prefix + toString(props.ordinal) AS key, prefix + toString(props.ordinal - 1) AS prev,
       prefix + toString(props.ordinal + 1) AS next
  OPTIONAL MATCH (old:Turn {turn_key: CASE WHEN seen THEN key END})
  WITH props, seen, key, prev, next WHERE old IS NULL
  OPTIONAL MATCH (after:Turn {turn_key: CASE WHEN seen THEN next END})
  CREATE (s)-[:HAS_TURN]->(t:Turn {turn_key: key, session_id: g.session_id,
                                   text_snippet: coalesce(props.text_snippet, props.text)})
  SET t += props
  WITH t, props, prev, after
  OPTIONAL MATCH (before:Turn {turn_key: prev})
  WITH t, after, before, [i IN items WHERE i.name = props.item] AS about
  FOREACH (i IN about | CREATE (t)-[:ABOUT_ITEM]->(i))
  FOREACH (_ IN CASE WHEN before IS NULL THEN [] ELSE [1] END | CREATE (before)-[:FOLLOWED_BY]->(t))
  FOREACH (_ IN CASE WHEN after IS NULL THEN [] ELSE [1] END | CREATE (t)-[:FOLLOWED_BY]->(after))
}
CALL (s, g, stored) {
  UNWIND g.transitions AS row
  OPTIONAL MATCH (old:StageTransition {session_id: CASE WHEN coalesce(row.version <= stored, true)
                                                     THEN g.session_id END,
                                       at_turn: row.at_turn})
  WITH row WHERE old IS NULL
  CREATE (s)-[:STAGE_CHANGED]->(x:StageTransition {session_id: g.session_id, at_turn: row.at_turn})
  SET x += row.props
}
CALL (g) {
  UNWIND g.updates AS u
  MATCH (t:Turn {turn_key: u.key})
  SET t += u.props
}
CALL (g) {
  UNWIND g.undone_at AS at_turn
  MATCH (x:StageTransition {session_id: g.session_id, at_turn: at_turn})
  SET x.undone = true
}
"""


def batch_rows(batch: Iterable[Entry]) -> list[dict[str, Any]]:
    """`WRITE_BATCH`'s rows: one per session in the batch, with its newest snapshot, the items it and its
    turns are about, its turns (each once) and its transitions."""
    groups: dict[str, dict[str, Any]] = {}
    turns: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in batch:
        sid = entry.change.session_id
        group = groups.get(sid)
        if group is None:
            group = groups[sid] = {"session_id": sid, "items": set(), "transitions": [], "updates": [],
                                   "undone_at": []}
            turns[sid] = {}
        group["version"], group["props"] = entry.change.version, entry.session
        for row in entry.turns:
            props = row["props"]
            turns[sid][row["key"]] = props
            if "item" in props:
                group["items"].add(props["item"])
        if entry.transitions:
            group["transitions"].extend(entry.transitions)
        if entry.updates:  # applied after the turns of the batch are created, in change order
            group["updates"].extend(entry.updates)
        if entry.undone_at:
            group["undone_at"].extend(entry.undone_at)
    for sid, group in groups.items():
        item = group["props"].get("item")
        if item:
            group["items"].add(item)
        group["items"] = sorted(group["items"])
        group["turns"] = list(turns[sid].values())
    return list(groups.values())


async def write_batch(driver: AsyncDriver, database: str | None, batch: list[Entry], seconds: float) -> None:
    """Write `batch` in one managed transaction of at most `seconds`; call on the I/O loop."""
    work = unit_of_work(timeout=seconds)(_tx_write)
    rows, summaries = batch_rows(batch), summary_rows(batch)
    try:
        with anyio.fail_after(seconds * 2 + 1):  # the server's own timeout should fire first
            async with driver.session(database=database) as session:
                await session.execute_write(work, rows, summaries)
    finally:
        # The driver keeps a query's parameters on objects that end up in reference cycles, so a
        # batch's rows (hundreds of lists and dicts) outlived it until the cyclic collector found
        # them: most of the server's cyclic garbage, and collector passes that stop every socket.
        # Emptied here, they are freed at once; a retry builds them again from the batch.
        rows.clear()
        summaries.clear()


async def _tx_write(tx: AsyncManagedTransaction, rows: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> None:
    result = await tx.run(WRITE_BATCH, rows=rows)
    await result.consume()
    if summaries:  # the running summaries (server/mirror/memory.py), on the Sessions written above
        await (await tx.run(WRITE_SUMMARIES, rows=summaries)).consume()
