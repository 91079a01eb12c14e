"""What the fake model (tests/openai_server.py) answers when a test scripts nothing: a plausible
decision that changes nothing, in the key order the prompt asks for (brain/prompt.py)."""

from __future__ import annotations

import re
from typing import Any

_STAGE = re.compile(r"- Stage: ([A-Z]+)\.")
_HAPPY = re.compile(r"- Your happiness: (\d+)/100")
# Where the session may first let the vendor's words out: a clause mark or a sentence end and a
# space (session/spoken.py).
CLAUSE_END = re.compile(r"[,;:.!?\u0964\u2026\u2013\u2014][\"')\]]*\s")
NUMBERS_FIRST = False  # `--numbers-first`: the decision's numbers and stage before reply_text
# `--new-lines`: every decision's line is one not said before (for its first 100 decisions), as a
# real model's are, so nothing the server keeps per line (espeak-ng's timings for the visemes,
# voice/tts.py) spares the work; otherwise a session's turns land on the same one of `_LINES`.
NEW_LINES = False
_said = 0

_LINES = (
    "Namaste, come, come! My tomatoes are the reddest in Johari Bazaar, picked this very morning.",
    "Look at this colour, bhaiya, firm and fresh; for you I give the best price in the market.",
    "Haan ji, everything here is fresh from the farm today; tell me what you need and how much.",
)


# The new lines: both pieces the voice speaks apart (the first clause and the rest) differ per
# decision, so each is synthesized and timed afresh.
_NEW_LINES = (
    "Namaste {who}, come and see! My {good} tomatoes are the reddest in Johari Bazaar, picked this very morning.",
    "Look at this {good} colour, {who}, firm and fresh; for you I give the best price in the market.",
    "Haan ji, everything here is {good} from the farm today; tell me what you need, {who}, and how much.",
)
_GOOD = ("sweet", "ripe", "juicy", "firm", "plump", "bright", "tender", "lovely", "shiny", "tasty")
_ALSO = ("red", "fresh", "clean", "local", "organic", "heavy", "soft", "fragrant", "golden", "crisp")
_WHO = ("bhaiya", "didi", "sahib", "madam", "beta", "dost", "babuji", "chacha", "behenji", "sir")
_NAME = ("Raju", "Meena", "Arjun", "Kavita", "Sunil", "Priya", "Mohan", "Lata", "Vikram", "Asha")


def reply_line(turn: int) -> str:
    """The vendor's line for a prompt of `turn` messages: one of three, or a new one (`NEW_LINES`)."""
    global _said
    if not NEW_LINES:
        return _LINES[turn % len(_LINES)]
    i, j = _said % 10, _said // 10 % 10
    _said += 1
    return _NEW_LINES[turn % len(_NEW_LINES)].format(good=f"{_GOOD[i]} and {_ALSO[j]}", who=f"{_WHO[i]} {_NAME[j]}")


def mirror_decision(body: dict[str, Any]) -> dict[str, Any]:
    """A plausible decision that changes nothing: same stage and happiness as the prompt says."""
    system = next((str(m.get("content", "")) for m in body.get("messages", [])
                   if m.get("role") == "system"), "")
    stage = _STAGE.search(system)
    happy = _HAPPY.search(system)
    score = int(happy.group(1)) if happy else 50
    turn = len(body.get("messages", []))
    numbers = {"counter_price": None, "negotiation_state": stage.group(1) if stage else "GREETING",
               "happiness_score": score}
    words = {"reply_text": reply_line(turn)}
    return {
        **({**numbers, **words} if NUMBERS_FIRST else {**words, **numbers}),
        "vendor_mood": "neutral",
        "offer_assessment": "none",
        "internal_reasoning": "The customer is still looking around, so I keep things friendly "
                              "and wait for a real question about price.",
        "suggested_user_response": "Bhaiya, how much for one kilo of tomatoes?",
    }
