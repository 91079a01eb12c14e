"""The figures `samvad eval` reports (issue #36; docs/learning.md, The evaluation): what each
session showed from the learner's side of the socket (`SessionLog`), and what the learners API says
of their review items, summed per condition and level, and the Markdown table of the two
conditions side by side.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from schemas.enums import Level

__all__ = ["LEVELS", "SessionLog", "figures", "recall_figures", "table"]

LEVELS = (Level.BEGINNER, Level.INTERMEDIATE, Level.ADVANCED)


@dataclass(slots=True)
class SessionLog:
    """What one session showed, from the learner's side of the socket."""

    learner_id: str
    pack: str
    level: str
    number: int  # 1 for the learner's first session
    outcome: str | None = None
    discount_pct: float | None = None
    revealed: int = 0  # lines a hint revealed
    taken_up: int = 0  # of them, the next line used
    clear_lines: int = 0
    false_clarify: int = 0
    mumbled: int = 0
    clarify_after_mumble: int = 0
    cards: int = 0
    generic_cards: int = 0
    grounded_cards: int = 0
    grounded_in_text: int = 0
    spoken_wpm: list[float] = field(default_factory=list)
    recalled_lines: int = 0  # lines the learner said from memory
    invited: int = 0  # replies that invited a remembered line


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def recall_figures(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """Review items recalled in a session after the one that made them, from each learner's answer of
    the learners API (`items`, each with its review `history`; `progress`, their sessions in order).
    An item made in a learner's last session had no later one and is not counted."""
    eligible = judged = recalled = reviews = reviews_recalled = 0
    by_kind: dict[str, list[int]] = {}
    for answer in answers:
        sessions = [p["session_id"] for p in answer.get("progress") or ()]
        last = sessions[-1] if sessions else None
        for item in answer.get("items") or ():
            history = item.get("history") or ()
            if not history or history[0].get("session_id") == last:
                continue
            later = [h for h in history[1:] if h.get("recalled") is not None]
            got = any(h["recalled"] for h in later)
            reviews += len(later)
            reviews_recalled += sum(1 for h in later if h["recalled"])
            eligible += 1
            judged += bool(later)
            recalled += got
            tally = by_kind.setdefault(item.get("kind", "?"), [0, 0])
            tally[0] += 1
            tally[1] += got
    return {"items_with_a_later_session": eligible, "judged_later": judged, "recalled_later": recalled,
            "recall_rate": _share(recalled, eligible),
            "later_reviews": reviews, "later_reviews_recalled": reviews_recalled,
            "review_recall_rate": _share(reviews_recalled, reviews),
            "by_kind": {kind: {"items": n, "recalled": r} for kind, (n, r) in sorted(by_kind.items())}}


def figures(logs: list[SessionLog], answers: list[dict[str, Any]], sessions: int) -> dict[str, Any]:
    by_level: dict[str, Any] = {}
    for level in LEVELS:
        mine = [g for g in logs if g.level == level.value]
        deals = [g for g in mine if g.outcome == "deal"]
        discounts = [g.discount_pct for g in deals if g.discount_pct is not None]
        wpm = {n: [w for g in mine if g.number == n for w in g.spoken_wpm] for n in range(1, sessions + 1)}
        by_level[level.value] = {
            "sessions": len(mine), "deals": len(deals), "deal_rate": _share(len(deals), len(mine)),
            "mean_discount_pct": round(statistics.fmean(discounts), 1) if discounts else None,
            "words_per_minute_by_session": {str(n): round(statistics.median(v), 1) if v else None
                                            for n, v in wpm.items()},
        }
    total = {name: sum(getattr(g, name) for g in logs) for name in (
        "revealed", "taken_up", "clear_lines", "false_clarify", "mumbled", "clarify_after_mumble", "cards",
        "generic_cards", "grounded_cards", "grounded_in_text", "recalled_lines", "invited")}
    return {
        "sessions": len(logs),
        "hint_uptake": _share(total["taken_up"], total["revealed"]),
        "false_clarify_rate": _share(total["false_clarify"], total["clear_lines"]),
        "mumbles_clarified": _share(total["clarify_after_mumble"], total["mumbled"]),
        "tip_grounding_rate": _share(total["grounded_in_text"], total["grounded_cards"]),
        "generic_card_share": _share(total["generic_cards"], total["cards"]),
        "recall": recall_figures(answers),
        "lines_from_memory": total["recalled_lines"], "invitations": total["invited"],
        "levels": by_level, "counts": total,
    }


def table(result: dict[str, Any]) -> str:
    on, off = result["conditions"]["invite"], result["conditions"]["no_invite"]
    rows = [("sessions", on["sessions"], off["sessions"]),
            ("items recalled in a later session", on["recall"]["recall_rate"], off["recall"]["recall_rate"]),
            ("lines said from memory", on["lines_from_memory"], off["lines_from_memory"]),
            ("hint uptake", on["hint_uptake"], off["hint_uptake"]),
            ("false clarify rate", on["false_clarify_rate"], off["false_clarify_rate"]),
            ("tip grounding rate", on["tip_grounding_rate"], off["tip_grounding_rate"])]
    for level in LEVELS:
        a, b = on["levels"][level.value], off["levels"][level.value]
        rows.append((f"{level.value}: deal rate, mean discount %", f"{a['deal_rate']}, {a['mean_discount_pct']}",
                     f"{b['deal_rate']}, {b['mean_discount_pct']}"))
        rows.append((f"{level.value}: words a minute by session", json.dumps(a["words_per_minute_by_session"]),
                     json.dumps(b["words_per_minute_by_session"])))
    lines = ["| figure | re-elicited | not re-elicited |", "| --- | --- | --- |"]
    lines += [f"| {name} | {a} | {b} |" for name, a, b in rows]
    return "\n".join(lines)
