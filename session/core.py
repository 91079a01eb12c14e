"""One session's state, and what can be read off it: the fields `session.fold.apply` changes.

`SessionCore` is the state alone: what a session is, with the views every part reads (the quote
that stands, the summary, the snapshot a client gets). It changes only through `apply`, and
`Negotiation` (`session/negotiation.py`) is the machine around it that decides the changes. The
Neo4j mirror folds its own copy with the same function (`server/mirror/fold.py`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import cache

from schemas.brain import GraphContext, StageVisit
from schemas.enums import LanguageCode, Level, Outcome, Stage
from schemas.fluency import Fluency
from schemas.learner import LearnerRecall
from schemas.pack import LevelParams
from schemas.scenario import Scenario, load_scenario
from schemas.state import (
    LedgerTotals,
    Point,
    SessionState,
    StageChange,
    Summary,
    TranscriptLine,
)
from session.changes import (
    Change,
)
from session.coaching import Coaching
from session.context import graph_context
from session.records import PendingTurn, TurnRecord
from session.rules import Limits, mood_for
from session.summary import Memory

START_HAPPINESS = 50
REMEMBERED_IDS = 512  # accepted client ids kept for de-duplication
SNIPPET_CHARS = 150
TRANSCRIPT_LINES = 60  # conversation lines a snapshot carries for late or resumed viewers


@dataclass(slots=True)
class SessionCore:
    """A session's state. Compared field for field: a session folded from its changes equals the live one."""

    session_id: str
    scenario_name: str
    created_at: float
    scenario_version: int = 1  # the pack's version this session plays, from start to end (docs/studio.md)
    limits: Limits = field(default_factory=Limits, compare=False)  # the server's, not the session's
    learner_id: str | None = None
    input_language: LanguageCode = LanguageCode.EN_IN
    target_language: LanguageCode = LanguageCode.EN_IN
    stage: Stage = Stage.GREETING
    happiness: int = START_HAPPINESS
    turn: int = 0  # learner turns answered
    seq: int = 0  # the last event sequence number issued
    item: str | None = None
    object_grabbed: str | None = None
    quotes: dict[str, int] = field(default_factory=dict)  # standing quote per item
    first_quotes: dict[str, int] = field(default_factory=dict)  # opening quote per item
    last_offer: int | None = None
    outcome: Outcome | None = None
    updated_at: float = 0.0
    history: list[TurnRecord] = field(default_factory=list)
    stage_changes: list[StageVisit] = field(default_factory=list)
    accepted_ids: OrderedDict[str, None] = field(default_factory=OrderedDict)
    pending: PendingTurn | None = None
    insults: int = 0
    ledger: LedgerTotals = field(default_factory=LedgerTotals)  # the brain's cost, summed per session
    level: Level = Level.INTERMEDIATE
    coaching: Coaching = field(default_factory=Coaching)  # hints, undos, silences (session/coaching.py)
    memory: Memory = field(default_factory=Memory)  # the running summary (session/summary.py)
    recall: LearnerRecall | None = None  # what the vendor remembers of the learner (docs/memory.md)
    fluency: Fluency | None = None  # the spoken turns' figures, summed (voice/fluency.py); None: none spoken
    version: int = 0  # the last change applied (session/changes.py)
    # The changes made since the actor last took them (`take_changes`), for the mirror, in order.
    outbox: list[Change] = field(default_factory=list, compare=False, repr=False)
    _rule_limits: Limits | None = field(default=None, init=False, repr=False, compare=False)  # `rule_limits`, once
    _scenario: Scenario | None = field(default=None, init=False, repr=False, compare=False)  # `scenario`, once

    def __post_init__(self) -> None:
        self.updated_at = self.updated_at or self.created_at

    @property
    def scenario(self) -> Scenario:
        """The pack at this session's version (fixed from its start), looked up once."""
        scenario = self._scenario
        if scenario is None:
            scenario = self._scenario = load_scenario(self.scenario_name, self.scenario_version)
        return scenario

    @property
    def level_params(self) -> LevelParams:
        return _level(self.scenario_name, self.scenario_version, self.level)

    @property
    def rule_limits(self) -> Limits:
        """The engine's limits for this learner: the session's, with the level's gentler lowball."""
        limits = self._rule_limits
        if limits is None:
            limits = self._rule_limits = _rule_limits(self.limits, self.scenario_name, self.scenario_version,
                                                      self.level)
        return limits

    @property
    def is_terminal(self) -> bool:
        return self.stage.is_terminal

    @property
    def quote(self) -> int | None:
        return self.quotes.get(self.item) if self.item else None

    @property
    def first_quote(self) -> int | None:
        return self.first_quotes.get(self.item) if self.item else None

    def seen(self, client_id: str) -> bool:
        return client_id in self.accepted_ids

    def remember(self, client_id: str) -> None:
        """Keep an accepted client id (only `session.fold` calls this: ids come with their change)."""
        self.accepted_ids[client_id] = None
        self.accepted_ids.move_to_end(client_id)
        while len(self.accepted_ids) > REMEMBERED_IDS:
            self.accepted_ids.popitem(last=False)

    # ------------------------------------------------------------------ inputs

    # ------------------------------------------------------------------ views

    def summary(self) -> Summary | None:
        if self.outcome is None:
            return None
        final = self.quote if self.outcome is Outcome.DEAL else None
        discount = None
        if final is not None and self.first_quote:
            discount = round(100.0 * (1 - final / self.first_quote), 1)
        stages: list[Stage] = [Stage.GREETING] + [c.to_stage for c in self.stage_changes]
        return Summary(
            outcome=self.outcome, turns=self.turn, item=self.item, first_quote=self.first_quote,
            final_price=final, discount_pct=discount, final_happiness=self.happiness,
            insults=self.insults, stages=tuple(stages), ledger=self.ledger,
        )

    def graph_context(self) -> GraphContext:
        return graph_context(self.history, self.stage, self.stage_changes)

    def snapshot(self) -> SessionState:
        vendor = [h for h in self.history if h.role == "vendor"]
        return SessionState(
            session_id=self.session_id, scenario=self.scenario_name, learner_id=self.learner_id,
            input_language=self.input_language, target_language=self.target_language,
            stage=self.stage, happiness_score=self.happiness, vendor_mood=mood_for(self.happiness),
            turn=self.turn, max_turns=self.limits.max_turns, item=self.item,
            object_grabbed=self.object_grabbed, vendor_quote=self.quote, first_quote=self.first_quote,
            last_offer=self.last_offer, is_terminal=self.is_terminal, outcome=self.outcome,
            seq=self.seq, created_at=self.created_at, updated_at=self.updated_at,
            happiness_history=tuple(Point(turn=h.turn, value=h.happiness) for h in vendor),
            quotes=tuple(Point(turn=h.turn, value=h.quote) for h in vendor if h.quote is not None),
            offers=tuple(
                Point(turn=h.turn, value=h.offer) for h in self.history if h.role == "user" and h.offer is not None
            ),
            stage_changes=tuple(
                StageChange(turn=c.at_turn, from_stage=c.from_stage, to_stage=c.to_stage) for c in self.stage_changes
            ),
            summary=self.summary(),
            ledger=self.ledger,
            transcript=tuple(
                TranscriptLine(turn=h.turn, role="learner" if h.role == "user" else "vendor",
                               text=h.text)
                for h in self.history[-TRANSCRIPT_LINES:]
            ),
            level=self.level,
        )


@cache
def _level(scenario: str, version: int, level: Level) -> LevelParams:
    return load_scenario(scenario, version).levels[level]


@cache
def _rule_limits(limits: Limits, scenario: str, version: int, level: Level) -> Limits:
    cost = load_scenario(scenario, version).levels[level].lowball_cost
    if cost is None or cost >= limits.lowball_min_drop:
        return limits
    return replace(limits, lowball_min_drop=cost)
