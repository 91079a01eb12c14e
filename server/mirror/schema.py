"""The graph's shape, its constraints and indexes, and the statements that inspect and remove them.

The graph (seed 000's schema, plus what recovery needs):

    (:Session {session_id, scenario, scenario_version, learner_id, input_language, target_language, happiness_score,
               negotiation_state, turn_count, last_seq, version, item, object_grabbed, quotes,
               first_quotes, vendor_quote, first_quote, last_offer, outcome, insults, accepted_ids,
               ledger_turns, ledger_llm_calls, ledger_retries, ledger_corrective_asks,
               ledger_prompt_tokens, ledger_completion_tokens, ledger_brain_ms,
               closing_replies, created_at, updated_at})
    (:Turn {turn_key, session_id, turn_number, ordinal, role, text, text_snippet, happiness_score,
            stage, object_grabbed, item, offer, read_from, quote, assessment, client_id, seq, flags, closing,
            timestamp, ...})
    (:Item {session_id, name})
    (:StageTransition {session_id, from_stage, to_stage, at_turn, happiness_at_transition, timestamp})

    (:Session)-[:HAS_TURN]->(:Turn)-[:FOLLOWED_BY]->(:Turn)
    (:Turn)-[:ABOUT_ITEM]->(:Item)<-[:INVOLVES_ITEM]-(:Session)
    (:Session)-[:STAGE_CHANGED]->(:StageTransition)
    (:Learner {learner_id, ...})-[:PLAYED]->(:Session)   learners across sessions (server/learners/)
    (:ScenarioVersion {key, scenario, version, manifest, ...}), (:ScenarioDraft {scenario, ...})
                                                        the studio's packs (server/studio/graph.py)

`create_schema` runs `SCHEMA` (every statement IF NOT EXISTS) before the first batch is written. The
other statements here are for operators and tests: they list the schema, drop one of its objects, or
delete whole sessions.
"""

from __future__ import annotations

import re
from typing import Literal, LiteralString

import anyio
from neo4j import AsyncDriver, Query

from server.learners.cypher import LEARNER_SCHEMA
from server.studio.graph import STUDIO_SCHEMA

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT samvad_session_id IF NOT EXISTS FOR (s:Session) REQUIRE s.session_id IS UNIQUE",
    "CREATE CONSTRAINT samvad_turn_key IF NOT EXISTS FOR (t:Turn) REQUIRE t.turn_key IS UNIQUE",
    "CREATE CONSTRAINT samvad_item_key IF NOT EXISTS FOR (i:Item) REQUIRE (i.session_id, i.name) IS UNIQUE",
    "CREATE CONSTRAINT samvad_transition_key IF NOT EXISTS "
    "FOR (x:StageTransition) REQUIRE (x.session_id, x.at_turn) IS UNIQUE",
    "CREATE INDEX samvad_session_outcome IF NOT EXISTS FOR (s:Session) ON (s.outcome)",
    "CREATE INDEX samvad_session_created IF NOT EXISTS FOR (s:Session) ON (s.created_at)",
    "CREATE INDEX samvad_turn_assessment IF NOT EXISTS FOR (t:Turn) ON (t.assessment)",
    *LEARNER_SCHEMA,  # the Learner's constraint and the Session's learner index (server/learners/cypher.py)
    *STUDIO_SCHEMA,  # the studio's scenario versions, which a rebuilt session reads (server/studio/graph.py)
)


async def create_schema(driver: AsyncDriver, database: str | None, seconds: float) -> None:
    """Create the constraints and indexes, each statement given `seconds`; call on the I/O loop."""
    with anyio.fail_after(seconds * 2 + 1):  # the server's own timeout should fire first
        for statement in SCHEMA:
            await driver.execute_query(Query(statement, timeout=seconds), database_=database)


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
