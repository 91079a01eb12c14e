"""The learners' Cypher: their schema objects and every statement the Neo4j learner store runs.

The graph gains these nodes and relationships (docs/neo4j.md, docs/learning.md):

    (:Learner {learner_id, level, input_language, target_language, languages, sessions, pending,
               profile, updated_at})-[:PLAYED {score, level, slips, ended_at}]->(:Session)
    (:Learner)-[:REVIEWS]->(:Item:ReviewItem {item_id, learner_id, scenario, language, kind, key, phrase,
                                              due, stability, difficulty, reps, lapses, last_review, record})
    (:ReviewItem)-[:REVIEWED_IN {rating, recalled, at, due}]->(:Session)

A review item is an `Item` as the issue names it, and a `ReviewItem` to tell it from the mirror's
goods (`(:Item {session_id, name})`, which no review item has); `record` is the whole `ReviewItem`
as JSON, its history included, and REVIEWED_IN is that history in the graph.

`profile` is the whole `LearnerProfile` as JSON (a property cannot hold a map); the scalars beside
it are for Cypher and for people reading the graph. The session's own figures stay on the Session
node, where the mirror writes them; PLAYED adds what only the report computes (the score) and what
the session contributed to the profile. Every value is a parameter.
"""

from __future__ import annotations

from typing import LiteralString

__all__ = [
    "DELETE_LEARNER",
    "DELETE_LEARNER_SESSIONS",
    "GET_DUE_ITEMS",
    "GET_ITEMS",
    "GET_PROFILE",
    "LEARNER_SCHEMA",
    "LIST_LEARNERS",
    "LOCK_PROFILE",
    "PROGRESS",
    "RECORD_SESSION",
    "WRITE_ITEMS",
]

# Created with the mirror's schema (server/mirror/schema.py takes these in) and again by the store
# before its first statement, both IF NOT EXISTS.
LEARNER_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT samvad_learner_id IF NOT EXISTS FOR (l:Learner) REQUIRE l.learner_id IS UNIQUE",
    # Erasure finds a learner's sessions by the property too, linked to the Learner or not yet.
    "CREATE INDEX samvad_session_learner IF NOT EXISTS FOR (s:Session) ON (s.learner_id)",
    "CREATE CONSTRAINT samvad_review_item_id IF NOT EXISTS FOR (i:ReviewItem) REQUIRE i.item_id IS UNIQUE",
)

GET_PROFILE: LiteralString = "MATCH (l:Learner {learner_id: $learner_id}) RETURN l.profile AS profile"

# The first statement of a session's write: the Learner, made if new, write-locked for the rest of the
# transaction (setting a property takes the node's lock), and its profile as it stands once locked, so
# that two writers of one learner fold one after the other and neither loses the other's session; and
# whether the session is folded in already: PLAYED is written in the transaction that folds it, so it
# is there exactly when the session is in the profile (the profile keeps only its latest ids).
LOCK_PROFILE: LiteralString = """
MERGE (l:Learner {learner_id: $learner_id})
SET l._lock = true
REMOVE l._lock
RETURN l.profile AS profile, EXISTS { (l)-[:PLAYED]->(:Session {session_id: $session_id}) } AS played
"""

# The Learner is written with the folded profile, then linked to the Session the mirror wrote. No
# row comes back while the Session is not stored yet, and the store then rolls the transaction back.
RECORD_SESSION: LiteralString = """
MERGE (l:Learner {learner_id: $learner_id})
SET l.profile = $profile, l.level = $level, l.input_language = $input_language,
    l.target_language = $target_language, l.languages = $languages, l.sessions = $sessions,
    l.pending = $pending, l.updated_at = $updated_at
WITH l
MATCH (s:Session {session_id: $session_id})
MERGE (l)-[p:PLAYED]->(s)
SET p.score = $score, p.level = $session_level, p.slips = $slips, p.ended_at = $ended_at,
    p.estimated_band = $estimated_band, p.estimate_confidence = $estimate_confidence
RETURN s.session_id AS session_id
"""

# One session as a point of the progress series, with the report's definitions: turns to a deal are
# the session's turns when it ended in a deal; the discount is off the first quote for the item, to
# one decimal, as in the `session.ended` summary; the score is the report's, kept on PLAYED; hints
# are the three levels' counters the mirror keeps on the Session.
_POINT: LiteralString = """{
  session_id: s.session_id, scenario: s.scenario, at: s.created_at, level: coalesce(p.level, s.level),
  outcome: s.outcome, item: s.item, turns: s.turn_count,
  turns_to_deal: CASE WHEN s.outcome = 'deal' THEN s.turn_count END,
  discount_pct: CASE WHEN s.outcome = 'deal' AND s.first_quote > 0 AND s.vendor_quote IS NOT NULL
                     THEN round(100.0 * (1.0 - toFloat(s.vendor_quote) / s.first_quote), 1) END,
  score: p.score,
  hints: coalesce(s.coaching_hints_0, 0) + coalesce(s.coaching_hints_1, 0) + coalesce(s.coaching_hints_2, 0),
  hints_by_level: [coalesce(s.coaching_hints_0, 0), coalesce(s.coaching_hints_1, 0), coalesce(s.coaching_hints_2, 0)],
  words_per_minute: s.fluency_words_per_minute, pause_ratio: s.fluency_pause_ratio,
  mean_length_of_run: s.fluency_mean_length_of_run, fillers: s.fluency_fillers,
  estimated_band: p.estimated_band, estimate_confidence: p.estimate_confidence
}"""

# Seeks the Learner by its unique constraint, then follows PLAYED: no label scan (tests/test_learners_neo4j.py
# checks the plan with EXPLAIN).
PROGRESS: LiteralString = """
MATCH (l:Learner {learner_id: $learner_id})-[p:PLAYED]->(s:Session)
WITH p, s ORDER BY s.created_at, s.session_id
RETURN """ + _POINT + """ AS point
"""

LIST_LEARNERS: LiteralString = """
MATCH (l:Learner)
CALL (l) {
  OPTIONAL MATCH (l)-[p:PLAYED]->(s:Session)
  WITH p, s ORDER BY s.created_at, s.session_id
  RETURN collect(CASE WHEN s IS NULL THEN NULL ELSE """ + _POINT + """ END) AS series
}
RETURN l.learner_id AS learner_id, l.level AS level, l.sessions AS sessions, series
ORDER BY l.updated_at DESC, learner_id
LIMIT $limit
"""

# Erasure (docs/memory.md, privacy): every session of the learner, linked or only naming them, with its
# turns, items and stage transitions; then the Learner node itself.
DELETE_LEARNER_SESSIONS: LiteralString = """
MATCH (s:Session {learner_id: $learner_id})
OPTIONAL MATCH (s)-[:HAS_TURN|INVOLVES_ITEM|STAGE_CHANGED]->(n)
DETACH DELETE s, n
RETURN count(DISTINCT s) AS sessions
"""

DELETE_LEARNER: LiteralString = """
MATCH (l:Learner {learner_id: $learner_id})
OPTIONAL MATCH (l)-[:REVIEWS]->(r:ReviewItem)
DETACH DELETE r
WITH DISTINCT l
OPTIONAL MATCH (l)-[:PLAYED]->(s:Session)
OPTIONAL MATCH (s)-[:HAS_TURN|INVOLVES_ITEM|STAGE_CHANGED]->(n)
DETACH DELETE l, s, n
RETURN count(DISTINCT l) AS learners, count(DISTINCT s) AS sessions
"""

# A learner's review items, by the Learner's constraint then REVIEWS.
GET_ITEMS: LiteralString = """
MATCH (:Learner {learner_id: $learner_id})-[:REVIEWS]->(i:ReviewItem)
RETURN i.record AS record ORDER BY i.item_id
"""

# The items of one scenario due by `$at`: what a new session practises (`reviews.due` orders and caps
# them), read without the rest of the learner's items.
GET_DUE_ITEMS: LiteralString = """
MATCH (:Learner {learner_id: $learner_id})-[:REVIEWS]->(i:ReviewItem)
WHERE i.scenario = $scenario AND i.due <= $at
RETURN i.record AS record ORDER BY i.item_id
"""

# The items a session made or changed, in the transaction that folds the session into the profile
# (the Learner is write-locked by then). An item is merged by its id; its review in this session
# links it to the Session, once however often the statement runs.
WRITE_ITEMS: LiteralString = """
MATCH (l:Learner {learner_id: $learner_id})
MATCH (s:Session {session_id: $session_id})
UNWIND $items AS row
MERGE (i:Item:ReviewItem {item_id: row.item_id})
SET i.learner_id = $learner_id, i.scenario = row.scenario, i.language = row.language, i.kind = row.kind,
    i.key = row.key, i.phrase = row.phrase, i.due = row.due, i.stability = row.stability,
    i.difficulty = row.difficulty, i.reps = row.reps, i.lapses = row.lapses, i.last_review = row.last_review,
    i.record = row.record
MERGE (l)-[:REVIEWS]->(i)
MERGE (i)-[r:REVIEWED_IN]->(s)
SET r.rating = row.rating, r.recalled = row.recalled, r.at = row.at, r.due = row.due
RETURN count(i) AS items
"""
