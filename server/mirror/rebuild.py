"""Recovery: a session's `Negotiation` rebuilt from its stored graph (a `LOAD_SESSIONS` record).

Pure: `server/mirror/reads.py` fetches the records, gathering the loads that arrive together.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from typing import Any

from schemas.brain import StageVisit
from schemas.enums import LanguageCode, Level, OfferAssessment, Outcome, Stage
from schemas.learner import LearnerRecall
from schemas.review import Evidence
from schemas.scenario import load_scenario
from schemas.state import LedgerTotals
from server.mirror.memory import memory_from_graph
from server.mirror.state import SessionFold, fluency_from_props, json_dict
from session.coaching import Checkpoint, Coaching
from session.negotiation import Negotiation
from session.numbers import find_numbers, number_lexicon
from session.records import PendingTurn, TurnRecord
from session.rules import Limits


def rebuild(record: dict[str, Any], limits: Limits) -> tuple[Negotiation, int, SessionFold]:
    """A Negotiation exactly as the actor had it at the last stored change, from LOAD_SESSIONS' record."""
    s = record["session"]
    history: list[TurnRecord] = []
    befores: list[dict[str, Any]] = []  # the checkpoints stored on the learner turns, oldest first
    for t in record["turns"]:
        if t.get("closing") or t.get("undone"):
            continue  # answers after the end and turns taken back live in the graph, not in the history
        common = {
            "turn": int(t["turn_number"]), "role": t["role"], "text": t.get("text") or "",
            "stage": Stage(t["stage"]), "happiness": int(t["happiness_score"]), "at": float(t["timestamp"]),
            "item": t.get("item"), "object_grabbed": t.get("object_grabbed"), "quote": t.get("quote"),
        }
        if t["role"] == "user":
            history.append(TurnRecord(**common, offer=t.get("offer"), read_from=t.get("read_from") or "",
                                      client_id=t.get("client_id"),
                                      assessment=OfferAssessment(t.get("assessment") or "none")))
            if t.get("before"):
                befores.append(json.loads(t["before"]))
        else:
            history.append(TurnRecord(**common, seq=t.get("seq"), flags=tuple(t.get("flags") or ()),
                                      suggestion=t.get("suggestion") or "",
                                      suggestion_english=t.get("suggestion_english") or "",
                                      heard=t.get("heard_chars") if t.get("interrupted") else None))
    turn = int(s.get("turn_count", 0))
    scenario_version = int(s.get("scenario_version") or 1)  # sessions stored before versions played version 1
    pending = None
    stopped = s.get("outcome") is not None  # a session stopped mid-turn has nothing pending
    if history and history[-1].role == "user" and history[-1].turn == turn + 1 and not stopped:
        last = history[-1]
        lexicon = number_lexicon(load_scenario(str(s["scenario"]), scenario_version).vendor.languages)
        said = tuple(round(m.value) for m in find_numbers(last.text, lexicon))  # as begin_turn reads it
        pending = PendingTurn(last.turn, last.text, last.client_id, last.item, last.offer, last.assessment, last.at,
                              said=said)
    stage_changes = [
        StageVisit(from_stage=Stage(x["from_stage"]), to_stage=Stage(x["to_stage"]),
                   at_turn=int(x.get("turn_number") or x["at_turn"]), happiness=int(x["happiness_at_transition"]))
        for x in record["transitions"] if not x.get("undone")
    ]
    version = int(s.get("version", 0))
    # The actor's undo stack: the checkpoints of its last `undo_depth` answered turns.
    depth = int(s.get("undo_depth") or 0)
    checkpoints = [Checkpoint.from_json(b) for b in befores[-depth:]] if depth else []
    coaching = {key[len("coaching_"):]: int(value) for key, value in s.items()
                if key.startswith("coaching_") and value is not None}
    evidence = [Evidence.model_validate(e) for e in json.loads(s.get("review_evidence") or "[]")]
    outcome = s.get("outcome")
    negotiation = Negotiation(
        session_id=s["session_id"], scenario_name=s["scenario"], created_at=float(s["created_at"]), limits=limits,
        scenario_version=scenario_version,
        learner_id=s.get("learner_id"),
        input_language=LanguageCode(s.get("input_language") or LanguageCode.EN_IN.value),
        target_language=LanguageCode(s.get("target_language") or LanguageCode.EN_IN.value),
        stage=Stage(s.get("negotiation_state") or Stage.GREETING.value), happiness=int(s.get("happiness_score", 50)),
        turn=turn, seq=int(s.get("last_seq", 0)), item=s.get("item"), object_grabbed=s.get("object_grabbed"),
        quotes=json_dict(s.get("quotes")), first_quotes=json_dict(s.get("first_quotes")),
        last_offer=s.get("last_offer"), outcome=Outcome(outcome) if outcome else None,
        updated_at=float(s.get("updated_at") or s["created_at"]), history=history, stage_changes=stage_changes,
        accepted_ids=OrderedDict.fromkeys(s.get("accepted_ids") or ()), pending=pending,
        insults=int(s.get("insults", 0)),
        ledger=LedgerTotals(**{name: s[f"ledger_{name}"] for name in LedgerTotals.model_fields
                               if s.get(f"ledger_{name}") is not None}),
        level=Level(s.get("level") or Level.INTERMEDIATE.value),
        coaching=Coaching.from_counters(coaching, checkpoints, evidence),
        memory=memory_from_graph(s, turn),
        recall=LearnerRecall.model_validate_json(s["recall"]) if s.get("recall") else None, version=version,
        fluency=fluency_from_props(s),
    )
    # The mirror folds the session's next changes into a copy of its own (`SessionFold.state`),
    # with the graph's keys: each standing turn's line and StageTransition, and where new lines go.
    standing = [t for t in record["turns"] if not t.get("closing") and not t.get("undone")]
    fold = SessionFold(
        state=copy.deepcopy(negotiation), shift=int(s.get("undone_turns") or 0),
        closings=int(s.get("closing_replies", 0)), version=version,
        last_ordinal=max((int(t["ordinal"]) for t in record["turns"]), default=0),
        ordinals={int(t["turn_number"]): int(t["ordinal"]) for t in standing if t["role"] == "user"},
        transition_keys={int(x["turn_number"]): int(x["at_turn"]) for x in record["transitions"]
                         if not x.get("undone") and x.get("turn_number") is not None})
    return negotiation, fold.version, fold
