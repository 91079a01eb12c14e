"""The figures `samvad eval` reports (issue #36; docs/learning.md, The evaluation): what each
session showed from the learner's side of the socket (`SessionLog`), and what the learners API says
of their review items, summed per condition and level, and the Markdown table of the two
conditions side by side.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from schemas.enums import Level

__all__ = ["LEVELS", "MEASURES", "SessionLog", "comparison", "figures", "learner_recall", "paired", "recall_figures",
           "table"]

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


def _later(answer: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """A learner's review items made before their last session, each with its later judged reviews."""
    sessions = [p["session_id"] for p in answer.get("progress") or ()]
    last = sessions[-1] if sessions else None
    out = []
    for item in answer.get("items") or ():
        history = item.get("history") or ()
        if history and history[0].get("session_id") != last:
            out.append((item.get("kind", "?"), [h for h in history[1:] if h.get("recalled") is not None]))
    return out


def learner_recall(answer: dict[str, Any]) -> dict[str, int]:
    """One learner's counts: items with a later session, recalled in one, recalled in one unaided
    (rated `good`: no hint revealed it that session), later reviews and the recalls among them."""
    later = _later(answer)
    return {"items": len(later), "recalled": sum(any(h["recalled"] for h in hs) for _, hs in later),
            "unaided": sum(any(h["recalled"] and h.get("rating") == "good" for h in hs) for _, hs in later),
            "reviews": sum(len(hs) for _, hs in later),
            "reviews_recalled": sum(1 for _, hs in later for h in hs if h["recalled"])}


# The per-learner shares the paired comparison reads: (numerator, denominator) of `learner_recall`.
MEASURES = {"item_recall": ("recalled", "items"), "unaided_item_recall": ("unaided", "items"),
            "review_recall": ("reviews_recalled", "reviews")}
BOOTSTRAP = 2000  # resamples of learners for the percentile interval
Z95 = 1.959964


def paired(on: dict[str, dict[str, int]], off: dict[str, dict[str, int]], measure: str,
           seed: int = 0) -> dict[str, Any]:
    """The re-elicited minus the not re-elicited share of `measure`, learner by learner (the same
    learners, the same seeds, so each is their own control; a learner's reviews are correlated, so
    the learner is the unit, not the review): the mean difference, its standard error, a normal 95 %
    interval, z and its two-sided p, and a bootstrap percentile interval over learners (seeded)."""
    top, bottom = MEASURES[measure]
    diffs = [on[k][top] / on[k][bottom] - off[k][top] / off[k][bottom]
             for k in sorted(on.keys() & off.keys()) if on[k][bottom] and off[k][bottom]]
    n = len(diffs)
    if n < 2:
        return {"learners": n, "mean_difference": None}
    mean = statistics.fmean(diffs)
    se = statistics.stdev(diffs) / math.sqrt(n)
    z = mean / se if se else math.inf if mean else 0.0
    rng = random.Random(seed)
    boot = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(BOOTSTRAP))
    return {"learners": n, "mean_difference": round(mean, 4), "standard_error": round(se, 4),
            "ci95": [round(mean - Z95 * se, 4), round(mean + Z95 * se, 4)],
            "z": round(z, 2), "p_two_sided": float(f"{math.erfc(abs(z) / math.sqrt(2)):.2g}"),
            "bootstrap_ci95": [round(boot[int(0.025 * BOOTSTRAP)], 4), round(boot[int(0.975 * BOOTSTRAP) - 1], 4)],
            "better": sum(d > 0 for d in diffs), "worse": sum(d < 0 for d in diffs)}


def comparison(on: list[dict[str, Any]], off: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """`paired` for every measure, from each condition's learners API answers."""
    per_on = {a["learner_id"]: learner_recall(a) for a in on}
    per_off = {a["learner_id"]: learner_recall(a) for a in off}
    return {measure: paired(per_on, per_off, measure, seed) for measure in MEASURES}


def recall_figures(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """Review items recalled in a session after the one that made them, from each learner's answer of
    the learners API (`items`, each with its review `history`; `progress`, their sessions in order).
    An item made in a learner's last session had no later one and is not counted."""
    eligible = judged = recalled = unaided = reviews = reviews_recalled = 0
    by_kind: dict[str, list[int]] = {}
    for answer in answers:
        for kind, later in _later(answer):
            got = any(h["recalled"] for h in later)
            reviews += len(later)
            reviews_recalled += sum(1 for h in later if h["recalled"])
            eligible += 1
            judged += bool(later)
            recalled += got
            unaided += any(h["recalled"] and h.get("rating") == "good" for h in later)
            tally = by_kind.setdefault(kind, [0, 0])
            tally[0] += 1
            tally[1] += got
    return {"items_with_a_later_session": eligible, "judged_later": judged, "recalled_later": recalled,
            "recall_rate": _share(recalled, eligible), "recalled_unaided": unaided,
            "unaided_recall_rate": _share(unaided, eligible),
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
            ("of them unaided (no hint that session)", on["recall"]["unaided_recall_rate"],
             off["recall"]["unaided_recall_rate"]),
            ("later reviews that were recalls", on["recall"]["review_recall_rate"],
             off["recall"]["review_recall_rate"]),
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
    lines += ["", "| paired, learner by learner (re-elicited minus not) | mean | 95 % CI | bootstrap 95 % | z | p |",
              "| --- | --- | --- | --- | --- | --- |"]
    for measure, got in result.get("paired", {}).items():
        if got.get("mean_difference") is None:
            continue
        lines.append(f"| {measure.replace('_', ' ')} ({got['learners']} learners) | {got['mean_difference']:+.4f} | "
                     f"{got['ci95']} | {got['bootstrap_ci95']} | {got['z']} | {got['p_two_sided']} |")
    return "\n".join(lines)
