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

_LINES = (
    "Namaste, come, come! My tomatoes are the reddest in Johari Bazaar, picked this very morning.",
    "Look at this colour, bhaiya, firm and fresh; for you I give the best price in the market.",
    "Haan ji, everything here is fresh from the farm today; tell me what you need and how much.",
)


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
    words = {"reply_text": _LINES[turn % len(_LINES)]}
    return {
        **({**numbers, **words} if NUMBERS_FIRST else {**words, **numbers}),
        "vendor_mood": "neutral",
        "offer_assessment": "none",
        "internal_reasoning": "The customer is still looking around, so I keep things friendly "
                              "and wait for a real question about price.",
        "suggested_user_response": "Bhaiya, how much for one kilo of tomatoes?",
    }
