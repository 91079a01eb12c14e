"""Every Cypher statement the server runs, in one place. All values travel as parameters.

The graph (seed 000's schema, plus what recovery needs):

    (:Session {session_id, scenario, learner_id, input_language, target_language, happiness_score,
               negotiation_state, turn_count, last_seq, version, item, object_grabbed, quotes,
               first_quotes, vendor_quote, first_quote, last_offer, outcome, insults, accepted_ids,
               ledger_turns, ledger_llm_calls, ledger_retries, ledger_corrective_asks,
               ledger_prompt_tokens, ledger_completion_tokens, ledger_brain_ms,
               closing_replies, created_at, updated_at})
    (:Turn {turn_key, session_id, turn_number, ordinal, role, text, text_snippet, happiness_score,
            stage, object_grabbed, item, offer, quote, assessment, client_id, seq, flags, closing,
            timestamp, ...})
    (:Item {session_id, name})
    (:StageTransition {session_id, from_stage, to_stage, at_turn, happiness_at_transition, timestamp})

    (:Session)-[:HAS_TURN]->(:Turn)-[:FOLLOWED_BY]->(:Turn)
    (:Turn)-[:ABOUT_ITEM]->(:Item)<-[:INVOLVES_ITEM]-(:Session)
    (:Session)-[:STAGE_CHANGED]->(:StageTransition)

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
* a batch is one statement in one transaction (`WRITE_BATCH`).
"""

from __future__ import annotations

import re
from typing import Literal, LiteralString

# --------------------------------------------------------------------------- schema

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT samvad_session_id IF NOT EXISTS FOR (s:Session) REQUIRE s.session_id IS UNIQUE",
    "CREATE CONSTRAINT samvad_turn_key IF NOT EXISTS FOR (t:Turn) REQUIRE t.turn_key IS UNIQUE",
    "CREATE CONSTRAINT samvad_item_key IF NOT EXISTS FOR (i:Item) REQUIRE (i.session_id, i.name) IS UNIQUE",
    "CREATE CONSTRAINT samvad_transition_key IF NOT EXISTS "
    "FOR (x:StageTransition) REQUIRE (x.session_id, x.at_turn) IS UNIQUE",
    "CREATE INDEX samvad_session_outcome IF NOT EXISTS FOR (s:Session) ON (s.outcome)",
    "CREATE INDEX samvad_session_created IF NOT EXISTS FOR (s:Session) ON (s.created_at)",
    "CREATE INDEX samvad_turn_assessment IF NOT EXISTS FOR (t:Turn) ON (t.assessment)",
)

# --------------------------------------------------------------------------- batched writes

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
"""

# --------------------------------------------------------------------------- recovery

LOAD_SESSIONS: LiteralString = """
UNWIND $session_ids AS session_id
MATCH (s:Session {session_id: session_id})
RETURN s {.*} AS session,
       COLLECT { MATCH (s)-[:HAS_TURN]->(t:Turn) RETURN t {.*} ORDER BY t.ordinal } AS turns,
       COLLECT { MATCH (s)-[:STAGE_CHANGED]->(x:StageTransition) RETURN x {.*} ORDER BY x.at_turn } AS transitions
"""

# --------------------------------------------------------------------------- graph context

# The figures `Negotiation.graph_context()` computes from memory, computed from the graph.
GRAPH_CONTEXT: LiteralString = """
MATCH (s:Session {session_id: $session_id})
CALL (s) {
  OPTIONAL MATCH (s)-[:HAS_TURN]->(v:Turn {role: 'vendor', closing: false})
  WITH v ORDER BY v.ordinal
  RETURN collect(v {.stage, .happiness_score}) AS vendor
}
CALL (s) {
  OPTIONAL MATCH (s)-[:HAS_TURN]->(u:Turn {role: 'user', closing: false})-[:ABOUT_ITEM]->(i:Item)
  WITH i.name AS item, count(u) AS mentions
  WHERE item IS NOT NULL
  RETURN collect({item: item, mentions: mentions}) AS items
}
CALL (s) {
  OPTIONAL MATCH (s)-[:STAGE_CHANGED]->(x:StageTransition)
  WITH x ORDER BY x.at_turn
  RETURN collect(x {.from_stage, .to_stage, .at_turn, .happiness_at_transition}) AS transitions
}
WITH s, vendor, items, transitions, [v IN vendor | v.happiness_score][-5..] AS trend
CALL (vendor) {
  UNWIND vendor AS v
  WITH v.stage AS stage, count(*) AS turns
  RETURN collect({stage: stage, turns: turns}) AS per_stage
}
RETURN s.negotiation_state AS stage,
       per_stage,
       trend,
       CASE
         WHEN size(trend) >= 2 AND trend[-1] - trend[0] >= 3 THEN 'rising'
         WHEN size(trend) >= 2 AND trend[0] - trend[-1] >= 3 THEN 'falling'
         ELSE 'steady'
       END AS direction,
       items,
       transitions,
       reduce(run = {turns: 0, open: true}, v IN reverse(vendor) |
         CASE WHEN run.open AND v.stage = s.negotiation_state
              THEN {turns: run.turns + 1, open: true}
              ELSE {turns: run.turns, open: false} END).turns AS turns_in_current_stage
"""

# --------------------------------------------------------------------------- GET /api/sessions/{id}/graph

GRAPH_SESSION: LiteralString = """
MATCH (s:Session {session_id: $session_id})
RETURN s {.*} AS session,
       COLLECT { MATCH (s)-[:INVOLVES_ITEM]->(i:Item)
                 RETURN i {.name,
                           mentions: COUNT { (:Turn {role: 'user', session_id: $session_id})-[:ABOUT_ITEM]->(i) },
                           turns: COUNT { (:Turn)-[:ABOUT_ITEM]->(i) }}
                 ORDER BY i.name } AS items,
       COLLECT { MATCH (s)-[:STAGE_CHANGED]->(x:StageTransition) RETURN x {.*} ORDER BY x.at_turn } AS transitions,
       COUNT { (s)-[:HAS_TURN]->() } AS turn_count
"""

# Each chain of FOLLOWED_BY from a turn with no predecessor to one with no successor; a well-formed
# session has exactly one, holding every turn in ordinal order.
GRAPH_CHAINS: LiteralString = """
MATCH (s:Session {session_id: $session_id})-[:HAS_TURN]->(head:Turn)
WHERE NOT EXISTS { (:Turn)-[:FOLLOWED_BY]->(head) }
MATCH path = (head)-[:FOLLOWED_BY*0..]->(tail:Turn)
WHERE NOT EXISTS { (tail)-[:FOLLOWED_BY]->(:Turn) }
WITH head, [n IN nodes(path) | n {.*, items: [(n)-[:ABOUT_ITEM]->(i:Item) | i.name]}] AS turns
RETURN turns ORDER BY head.ordinal
"""

# --------------------------------------------------------------------------- GET /api/stats
# `$since` filters on Session.created_at (0 for every session); `$scenario` may be null.

STATS_OUTCOMES: LiteralString = """
MATCH (s:Session)
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario)
RETURN coalesce(s.outcome, 'in_progress') AS outcome, count(*) AS sessions
ORDER BY outcome
"""

STATS_TURNS_TO_DEAL: LiteralString = """
MATCH (s:Session {outcome: 'deal'})
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario)
RETURN count(s) AS deals, avg(s.turn_count) AS avg, min(s.turn_count) AS min, max(s.turn_count) AS max,
       percentileDisc(s.turn_count, 0.5) AS p50, percentileDisc(s.turn_count, 0.9) AS p90,
       percentileDisc(s.turn_count, 0.99) AS p99
"""

# Discount from the first quote for the item to the price the deal was struck at.
STATS_DISCOUNTS: LiteralString = """
MATCH (s:Session {outcome: 'deal'})
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario)
  AND s.first_quote > 0 AND s.vendor_quote IS NOT NULL
WITH s.item AS item, 100.0 * (1.0 - toFloat(s.vendor_quote) / s.first_quote) AS discount
RETURN item, count(*) AS deals, avg(discount) AS avg_discount_pct,
       min(discount) AS min_discount_pct, max(discount) AS max_discount_pct
ORDER BY item
"""

STATS_DISCOUNT_OVERALL: LiteralString = """
MATCH (s:Session {outcome: 'deal'})
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario)
  AND s.first_quote > 0 AND s.vendor_quote IS NOT NULL
RETURN count(s) AS deals, avg(100.0 * (1.0 - toFloat(s.vendor_quote) / s.first_quote)) AS avg_discount_pct
"""

# A vendor turn judged an insult, with the learner's offer and the standing quote it answered.
STATS_INSULTS: LiteralString = """
MATCH (s:Session)-[:HAS_TURN]->(v:Turn {assessment: 'insult', role: 'vendor', closing: false})
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario)
MATCH (u:Turn {role: 'user'})-[:FOLLOWED_BY]->(v)
WITH u.item AS item, u.offer AS offer, u.quote AS quote,
     CASE WHEN u.quote > 0 AND u.offer IS NOT NULL THEN round(toFloat(u.offer) / u.quote, 2) END AS ratio
RETURN item, offer, quote, ratio, count(*) AS insults
ORDER BY insults DESC, item, offer, quote
LIMIT $limit
"""

STATS_INSULTS_BY_ITEM: LiteralString = """
MATCH (s:Session)-[:HAS_TURN]->(v:Turn {assessment: 'insult', role: 'vendor', closing: false})
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario)
MATCH (u:Turn {role: 'user'})-[:FOLLOWED_BY]->(v)
WITH u.item AS item, count(*) AS insults, count(DISTINCT s) AS sessions,
     avg(CASE WHEN u.quote > 0 AND u.offer IS NOT NULL THEN toFloat(u.offer) / u.quote END) AS avg_ratio
RETURN item, insults, sessions, avg_ratio
ORDER BY insults DESC, item
"""

# --------------------------------------------------------------------------- tests and benchmarks

COUNT_TURNS_BY_CLIENT_ID: LiteralString = """
MATCH (s:Session {session_id: $session_id})
UNWIND $ids AS id
RETURN id, COUNT { (s)-[:HAS_TURN]->(:Turn {client_id: id, role: 'user'}) } AS turns
"""

# Nodes and relationships of one session, counted: a replayed batch must leave every figure unchanged.
COUNT_SESSION_GRAPH: LiteralString = """
MATCH (s:Session {session_id: $session_id})
RETURN COUNT { (x:Session {session_id: $session_id}) } AS sessions,
       COUNT { (t:Turn {session_id: $session_id}) } AS turns,
       COUNT { (i:Item {session_id: $session_id}) } AS items,
       COUNT { (x:StageTransition {session_id: $session_id}) } AS transitions,
       COUNT { (s)-[:HAS_TURN]->() } AS has_turn,
       COUNT { (s)-[:HAS_TURN]->(:Turn)-[:FOLLOWED_BY]->() } AS followed_by,
       COUNT { (s)-[:HAS_TURN]->(:Turn)-[:ABOUT_ITEM]->() } AS about_item,
       COUNT { (s)-[:INVOLVES_ITEM]->() } AS involves_item,
       COUNT { (s)-[:STAGE_CHANGED]->() } AS stage_changed
"""

SHOW_CONSTRAINTS: LiteralString = "SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties"
SHOW_INDEXES: LiteralString = "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, state"

def drop_schema(kind: Literal["CONSTRAINT", "INDEX"], name: str) -> LiteralString:
    """`DROP CONSTRAINT|INDEX name` for one of this module's own names (Cypher takes no parameter there)."""
    if kind not in ("CONSTRAINT", "INDEX") or not re.fullmatch(r"samvad_[a-z_]+", name):
        raise ValueError(f"not a Samvad schema object: {kind} {name!r}")
    return f"DROP {kind} {name} IF EXISTS"  # name checked above: one of ours, never user input


DELETE_SESSIONS: LiteralString = """
MATCH (s:Session) WHERE s.session_id IN $session_ids
OPTIONAL MATCH (s)-[:HAS_TURN|INVOLVES_ITEM|STAGE_CHANGED]->(n)
DETACH DELETE s, n
"""

# --------------------------------------------------------------------------- scripts/neo4j_smoke.py

SMOKE_WRITE: LiteralString = "CREATE (n:SamvadSmoke {token: $token}) RETURN n.token AS token"
SMOKE_DELETE: LiteralString = "MATCH (n:SamvadSmoke {token: $token}) DELETE n"
