"""What the server reads back from the graph: sessions to rebuild, a session's graph and context, figures.

Loads that arrive together (every client reconnecting after a restart) are gathered into one
`LOAD_SESSIONS` query per `LOAD_BATCH` sessions while the mirror runs. A load first waits until the
session's own changes are stored (read your writes). Every query goes through `Neo4jIo.read`, which
retries; the statements are in the order of the methods that run them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, LiteralString

import anyio

from schemas.brain import GraphContext, StageVisit
from schemas.enums import Stage
from server.mirror.rebuild import rebuild
from server.mirror.writer import MirrorWriter
from server.studio.catalog import register_stored
from session.context import stability_hint
from session.negotiation import Negotiation
from session.protocols import MirrorUnavailable
from session.rules import Limits

LOAD_GATHER_S = 0.002
LOAD_BATCH = 100  # sessions rebuilt per query


@dataclass(slots=True)
class _LoadSlot:
    done: anyio.Event = field(default_factory=anyio.Event)
    record: dict[str, Any] | None = None
    error: MirrorUnavailable | None = None


# --------------------------------------------------------------------------- recovery (load)

LOAD_SESSIONS: LiteralString = """
UNWIND $session_ids AS session_id
MATCH (s:Session {session_id: session_id})
RETURN s {.*} AS session,
       COLLECT { MATCH (s)-[:HAS_TURN]->(t:Turn) RETURN t {.*} ORDER BY t.ordinal } AS turns,
       COLLECT { MATCH (s)-[:STAGE_CHANGED]->(x:StageTransition) RETURN x {.*} ORDER BY x.at_turn } AS transitions,
       COLLECT { MATCH (p:ScenarioVersion {key: s.scenario + ':' + toString(coalesce(s.scenario_version, 1))})
                 RETURN p.manifest } AS pack
"""

# --------------------------------------------------------------------------- graph context

# The figures `Negotiation.graph_context()` computes from memory, computed from the graph.
GRAPH_CONTEXT: LiteralString = """
MATCH (s:Session {session_id: $session_id})
CALL (s) {
  OPTIONAL MATCH (s)-[:HAS_TURN]->(v:Turn {role: 'vendor', closing: false})
  WHERE v.undone IS NULL
  WITH v ORDER BY v.ordinal
  RETURN collect(v {.stage, .happiness_score}) AS vendor
}
CALL (s) {
  OPTIONAL MATCH (s)-[:HAS_TURN]->(u:Turn {role: 'user', closing: false})-[:ABOUT_ITEM]->(i:Item)
  WHERE u.undone IS NULL
  WITH i.name AS item, count(u) AS mentions
  WHERE item IS NOT NULL
  RETURN collect({item: item, mentions: mentions}) AS items
}
CALL (s) {
  OPTIONAL MATCH (s)-[:STAGE_CHANGED]->(x:StageTransition)
  WHERE x.undone IS NULL
  WITH x ORDER BY x.at_turn
  RETURN collect(x {.from_stage, .to_stage, .at_turn, .turn_number, .happiness_at_transition}) AS transitions
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

# A vendor turn judged an insult, with the learner's offer and the standing quote it answered (turns
# taken back with `undo` are left out, here and in every figure: the Session scalars are as restored).
STATS_INSULTS: LiteralString = """
MATCH (s:Session)-[:HAS_TURN]->(v:Turn {assessment: 'insult', role: 'vendor', closing: false})
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario) AND v.undone IS NULL
MATCH (u:Turn {role: 'user'})-[:FOLLOWED_BY]->(v)
WITH u.item AS item, u.offer AS offer, u.quote AS quote,
     CASE WHEN u.quote > 0 AND u.offer IS NOT NULL THEN round(toFloat(u.offer) / u.quote, 2) END AS ratio
RETURN item, offer, quote, ratio, count(*) AS insults
ORDER BY insults DESC, item, offer, quote
LIMIT $limit
"""

STATS_INSULTS_BY_ITEM: LiteralString = """
MATCH (s:Session)-[:HAS_TURN]->(v:Turn {assessment: 'insult', role: 'vendor', closing: false})
WHERE s.created_at >= $since AND ($scenario IS NULL OR s.scenario = $scenario) AND v.undone IS NULL
MATCH (u:Turn {role: 'user'})-[:FOLLOWED_BY]->(v)
WITH u.item AS item, count(*) AS insults, count(DISTINCT s) AS sessions,
     avg(CASE WHEN u.quote > 0 AND u.offer IS NOT NULL THEN toFloat(u.offer) / u.quote END) AS avg_ratio
RETURN item, insults, sessions, avg_ratio
ORDER BY insults DESC, item
"""


class MirrorReads(MirrorWriter):
    """Sessions loaded from the graph (gathered), a session's subgraph and graph context, and figures."""

    _load_wake: anyio.Event | None  # set while run() gathers loads
    _load_pending: list[str]
    _load_slots: dict[str, _LoadSlot]

    async def _read_your_writes(self, session_id: str) -> None:
        if not await self.flushed(session_id, max(5.0, 3 * self.timeout_s)):
            raise MirrorUnavailable(f"changes of session {session_id} are not stored yet: {self.last_error}")

    async def load(self, session_id: str, limits: Limits) -> tuple[Negotiation, int] | None:
        """Rebuild a session from the graph (after a restart or an eviction), or None if it is unknown."""
        await self._read_your_writes(session_id)
        record = await self._fetch(session_id)
        if record is None:
            return None
        session = record["session"]
        if record.get("pack"):  # a studio version (server/studio/graph.py): the session plays it again
            register_stored(session["scenario"], record["pack"][0], int(session.get("scenario_version") or 1))
        negotiation, version, fold = rebuild(record, limits)
        self._folds[session_id] = fold
        self._submitted[session_id] = max(self._submitted.get(session_id, 0), version)
        self._durable[session_id] = max(self._durable.get(session_id, 0), version)
        self._forget_when_written.discard(session_id)
        return negotiation, version

    async def _fetch(self, session_id: str) -> dict[str, Any] | None:
        """LOAD_SESSIONS' record for one session. While the writer runs, loads that arrive together (every
        client reconnecting after a restart) are gathered into one query per LOAD_BATCH sessions."""
        if self._load_wake is None:
            records = await self.read(LOAD_SESSIONS, session_ids=[session_id])
            return records[0] if records else None
        slot = self._load_slots.get(session_id)
        if slot is None:
            slot = self._load_slots[session_id] = _LoadSlot()
            self._load_pending.append(session_id)
            self._load_wake.set()
        await slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.record

    async def _load_loop(self) -> None:
        while True:
            self._load_wake = anyio.Event()
            if not self._load_pending:
                await self._load_wake.wait()
            await anyio.sleep(LOAD_GATHER_S)  # let the rest of a burst join
            ids, self._load_pending = self._load_pending[:LOAD_BATCH], self._load_pending[LOAD_BATCH:]
            error: MirrorUnavailable | None = None
            found: dict[str, dict[str, Any]] = {}
            try:
                found = {r["session"]["session_id"]: r for r in await self.read(LOAD_SESSIONS, session_ids=ids)}
            except MirrorUnavailable as exc:
                error = exc
            for sid in ids:
                slot = self._load_slots.pop(sid)
                slot.record, slot.error = found.get(sid), error
                slot.done.set()

    async def graph_context(self, session_id: str) -> GraphContext | None:
        """`Negotiation.graph_context()`, computed by Cypher from the stored graph."""
        records = await self.read(GRAPH_CONTEXT, session_id=session_id)
        if not records:
            return None
        r = records[0]
        stage = Stage(r["stage"])
        turns_here = int(r["turns_in_current_stage"])
        return GraphContext(
            turns_per_stage={Stage(p["stage"]): int(p["turns"]) for p in r["per_stage"]},
            happiness_trend=tuple(int(h) for h in r["trend"]),
            trend_direction=r["direction"],
            items_discussed={i["item"]: int(i["mentions"]) for i in r["items"]},
            transitions=tuple(
                StageVisit(from_stage=Stage(x["from_stage"]), to_stage=Stage(x["to_stage"]),
                           at_turn=int(x.get("turn_number") or x["at_turn"]),
                           happiness=int(x["happiness_at_transition"]))
                for x in r["transitions"]
            ),
            turns_in_current_stage=turns_here,
            stability_hint=stability_hint(stage, turns_here),
        )

    async def graph(self, session_id: str) -> dict[str, Any] | None:
        """The session's subgraph as plain JSON: the session, its turns in chain order, items, transitions."""
        written = await self.flushed(session_id, 2.0)
        records = await self.read(GRAPH_SESSION, session_id=session_id)
        if not records:
            if not written:
                raise MirrorUnavailable(f"session {session_id} is not stored yet: {self.last_error}")
            return None
        head = records[0]
        chains = [r["turns"] for r in await self.read(GRAPH_CHAINS, session_id=session_id)]
        context = await self.graph_context(session_id)
        turns = [turn for chain in chains for turn in chain]
        session = dict(head["session"])
        return {
            "session_id": session_id,
            "session": session,
            "turns": turns,
            "items": head["items"],
            "transitions": head["transitions"],
            "relationships": {
                "HAS_TURN": head["turn_count"],
                "FOLLOWED_BY": [[a["ordinal"], b["ordinal"]] for chain in chains for a, b in pairwise(chain)],
                "ABOUT_ITEM": [[t["ordinal"], name] for t in turns for name in t.get("items", [])],
                "INVOLVES_ITEM": [i["name"] for i in head["items"]],
                "STAGE_CHANGED": [x["at_turn"] for x in head["transitions"]],
            },
            "chains": len(chains),
            "context": context.model_dump(mode="json") if context else None,
            "pending_changes": 0 if written else self._submitted.get(session_id, 0) - self.durable_version(session_id),
        }

    async def stats(self, *, since: float = 0.0, scenario: str | None = None, limit: int = 20) -> dict[str, Any]:
        """Figures across sessions, computed in Cypher (GET /api/stats)."""
        params = {"since": since, "scenario": scenario}
        outcomes = await self.read(STATS_OUTCOMES, **params)
        turns = (await self.read(STATS_TURNS_TO_DEAL, **params))[0]
        discounts = await self.read(STATS_DISCOUNTS, **params)
        overall = (await self.read(STATS_DISCOUNT_OVERALL, **params))[0]
        insults = await self.read(STATS_INSULTS, limit=limit, **params)
        by_item = await self.read(STATS_INSULTS_BY_ITEM, **params)
        return {
            "since": since,
            "scenario": scenario,
            "sessions": sum(int(o["sessions"]) for o in outcomes),
            "outcomes": {o["outcome"]: int(o["sessions"]) for o in outcomes},
            "turns_to_deal": turns,
            "discount": {"deals": overall["deals"], "avg_discount_pct": overall["avg_discount_pct"],
                         "by_item": discounts},
            "insults": {"by_item": by_item, "by_offer": insults},
        }
