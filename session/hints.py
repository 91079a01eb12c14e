"""The `hint` command's content (docs/coaching.md): pure, from the session's state and its pack.

A hint never changes the negotiation. Its level rises with each hint in the same turn and goes
back to 0 with the learner's next turn:

- 0, contextual: what is going on and what this culture expects here (the pack's
  `coaching.<situation>.context`);
- 1, structural: the shape of a good next line, a sentence frame in the target language with
  `____` for the blanks, and its English (`frame`, `frame_english`);
- 2 and above, reveal: a whole line to say and its English. It is the brain's own suggestion from
  its last reply when there is one (the rule vendor's and the LLM's `suggested_user_response`;
  no extra LLM call), and otherwise the pack's line for the situation (`hints.<situation>`),
  filled in from the state.

The situation is read from the state alone, so every brain gets the same frames.
"""

from __future__ import annotations

from typing import Literal

from schemas.enums import Stage
from schemas.frames import Hint
from schemas.lines import spoken_items
from schemas.policy import suggested_offer
from session.negotiation import Negotiation

__all__ = ["build_hint", "situation"]

HintKind = Literal["contextual", "structural", "reveal"]
_KINDS: tuple[HintKind, HintKind, HintKind] = ("contextual", "structural", "reveal")
_CROSS = 30  # below this happiness the vendor is offended: an apology comes first


def situation(negotiation: Negotiation) -> str:
    """Which of the pack's situations (`schemas.pack.HINT_KEYS`) the learner is in now."""
    stage, quote = negotiation.stage, negotiation.quote
    if stage is Stage.DEAL:
        return "thanks"
    if stage is Stage.CLOSURE:
        return "goodbye_late"
    if negotiation.happiness < _CROSS and stage is not Stage.GREETING:
        return "apologise"
    if stage is Stage.GREETING:
        return "greet" if negotiation.turn == 0 else "ask"
    if quote is None:
        return "ask"
    if stage is Stage.WALKAWAY:
        last = next((h for h in reversed(negotiation.history) if h.role == "vendor"), None)
        called_back = last is not None and last.stage is Stage.WALKAWAY and last.quote is not None and (
            negotiation.first_quote is None or last.quote < negotiation.first_quote)
        return "take_callback" if called_back else "return"
    if negotiation.turn > negotiation.limits.wrap_up_after:
        return "goodbye"
    item = negotiation.scenario.item(negotiation.item)
    if stage is Stage.HAGGLING and item is not None and quote <= item.fair[1]:
        return "accept"
    return "open" if stage is Stage.INQUIRY else "counter"


def _fields(negotiation: Negotiation) -> dict[str, object]:
    scenario = negotiation.scenario
    item = scenario.item(negotiation.item)
    quote = negotiation.quote
    return {
        "local": item.local if item is not None else scenario.goods,
        "items": spoken_items(item, scenario),
        "price": quote if quote is not None else "",
        "offer": suggested_offer(quote, negotiation.last_offer) if quote is not None else "",
    }


def build_hint(negotiation: Negotiation, seq: int, level: int, *, offered: bool = False,
               in_reply_to: str | None = None) -> Hint:
    """The hint of `level` for the learner's next turn, as a `hint` event with `seq`."""
    key = situation(negotiation)
    help_ = negotiation.scenario.coaching[key]
    kind = _KINDS[min(level, 2)]
    english = ""
    if kind == "contextual":
        text = help_.context
    elif kind == "structural":
        text, english = help_.frame, help_.frame_english
    else:
        last = next((h for h in reversed(negotiation.history) if h.role == "vendor"), None)
        if last is not None and last.suggestion:
            text, english = last.suggestion, last.suggestion_english
        else:
            fields = _fields(negotiation)
            text = negotiation.scenario.hints[key].format(**fields)
            english = help_.english.format(**fields)
    return Hint(session_id=negotiation.session_id, seq=seq, turn=negotiation.turn + 1, level=level, kind=kind,
                situation=key, text=text, english=english, offered=offered, in_reply_to=in_reply_to)
