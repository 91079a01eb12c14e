"""What a learner may say in a scene, as weighted word sequences for its language model. Pure.

The pack is a closed world: its items (English, local and spoken names), its prices, the hints and
phrases a learner is taught, the culture's cue words and polite forms, the vendor's own lines
(learners echo them), and a general filler of everyday English (`filler_en.txt`) so that free
speech is still heard. `SceneContext` carries the words of the moment: the item in hand and the
standing quote, whose sentences and neighbouring prices weigh more (`scene_sentences`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from schemas.enums import LanguageCode
from schemas.scenario import Item, Scenario
from voice.continuations import ALSO_FINAL, CONTINUATIONS
from voice.numerals import price_steps, spoken_number
from voice.stt import SceneContext

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
_FIELD = re.compile(r"\{(\w+)\}")
ENGLISH = frozenset({LanguageCode.EN, LanguageCode.EN_IN})
# Weights, per sentence, of each source (a sentence's count in the n-gram model).
W_TAUGHT = 3.0  # hints and coaching: what a learner is taught to say
W_PHRASE = 2.0
W_CUE = 1.0
W_VENDOR = 0.3
W_FILLER = 1.0
W_PRICE = 0.5  # per price phrase; there are many
# Fillers and backchannels (issue #34), in the pause model only (the model of a decode at a pause
# inside a turn, `scene_sentences(hesitations=True)`): a learner stops on a filler while thinking
# ("i will give umm"), or stops where no sentence ends ("i will give"), starts with one ("umm how
# much"), or says one alone. The partial text at a thinking pause must end on the filler for the
# end-of-turn policy (voice/turn_end.py) to wait. Final transcripts do not use them: in the scene
# model they cost 1.5-2 points of English word error rate on the labelled set (docs/voice.md).
W_PAUSED = 3.0  # a sentence's prefixes with a filler (shared), or stopping where no sentence ends
W_LEADING = 0.05  # a filler or backchannel, then the sentence
W_ALONE = 1.0  # per filler or backchannel said alone
MOMENT = 4.0  # how much more the item in hand and the quote's neighbourhood weigh
# How an offer is said in English: the "<number> rupees", "I will give you <n>", "<n> final",
# and the other common ways of putting a price to a seller. Frames with {items} are said per item.
OFFER_FRAMES = ("{n}", "{n} {cur}", "i will give you {n}", "i will give you {n} {cur}", "{n} {cur} okay",
                "how about {n}", "how about {n} {cur}", "give it for {n}", "{n} {cur} deal", "make it {n}",
                "{n} {cur} for the {items}", "i can pay {n} {cur}", "{n} only", "okay {n} {cur}",
                "{n} final", "{n} {cur} final", "{n} {cur} final offer", "my best offer is {n}",
                "my best offer is {n} {cur}", "can you do {n}", "can you do {n} {cur}", "i can pay {n} {cur} no more",
                "{n} {cur} no more", "okay {n} {cur} deal", "that is too expensive i will give you {n} {cur}",
                "how about {n} {cur} for the {items}", "i will give you {n} {cur} for the {items}",
                "i will pay {n}", "{n} is my last price", "let us say {n} {cur}")
_GENERIC = tuple(f for f in OFFER_FRAMES if "{items}" not in f)
_PER_ITEM = tuple(f for f in OFFER_FRAMES if "{items}" in f)


def context_key(context: SceneContext) -> tuple[str, bool, str, int | None]:
    """What a scene model depends on: the pack, whether the learner speaks a local language, the
    item in hand and the quote rounded (so nearby quotes share a model)."""
    quote = None if context.quote is None else _round(context.quote)
    local = context.language is not None and context.language not in {c.value for c in ENGLISH}
    return context.scenario, local, (context.item or "").lower(), quote


def _round(n: int) -> int:
    step = 10 if n <= 200 else 50 if n <= 2000 else 500 if n <= 20000 else 1000
    return max(step, round(n / step) * step)


def words(text: str) -> list[str]:
    """The words of `text` as the dictionary spells them: lower case, digits spelt out."""
    text = re.sub(r"\d[\d,]*", lambda m: f" {spoken_number(int(m.group().replace(',', '')))} "
                  if int(m.group().replace(",", "") or 0) < 1_000_000 else " ", text.lower())
    return _WORD.findall(text.replace("\u2019", "'"))


def _fill(template: str, values: dict[str, str]) -> str:
    return _FIELD.sub(lambda m: values.get(m.group(1), ""), template).replace("____", values.get("items", ""))


def _band(item: Item) -> tuple[int, int]:
    return max(1, item.wholesale[0] // 2), int(item.tourist_quote[1] * 1.2)


def item_prices(item: Item) -> tuple[int, ...]:
    """Prices a learner might say for `item`: round steps over its whole band."""
    return price_steps(*_band(item))


def _item_values(scenario: Scenario, item: Item, price: int, offer: int) -> dict[str, str]:
    return {"items": item.spoken or item.name.lower(), "local": item.local, "unit": item.unit_word or item.unit,
            "quality": item.quality or scenario.default_quality, "price": spoken_number(price),
            "offer": spoken_number(offer), "heard": spoken_number(offer), "qty": "two",
            "last_items": item.spoken or item.name.lower()}


@lru_cache(maxsize=4)
def _filler() -> tuple[str, ...]:
    text = resources.files("voice").joinpath("filler_en.txt").read_text("utf-8")
    return tuple(line for line in text.splitlines() if line.strip() and not line.startswith("#"))


def _item_sentences(scenario: Scenario, item: Item, local: bool) -> Iterator[tuple[str, float]]:
    quote = item.tourist_quote[0]
    offer = max(1, _round(item.fair[0]))
    values = _item_values(scenario, item, quote, offer)
    taught = W_TAUGHT * (1.5 if local else 1.0)
    for key, template in scenario.hints.items():
        yield _fill(template, values), taught if key in ("greet", "ask", "accept", "thanks") else W_TAUGHT
    for help_ in scenario.coaching.values():
        yield _fill(help_.english, values), W_TAUGHT
        yield _fill(help_.frame_english, values), W_PHRASE
        yield _fill(help_.frame, values), W_PHRASE
    for name in {item.name.lower(), item.local.lower(), (item.spoken or item.name).lower()}:
        for frame in ("{x}", "how much is the {x}", "how much are the {x}", "i want the {x}", "this {x}"):
            yield frame.replace("{x}", name), W_PHRASE
    currency = scenario.currency_word
    for n in item_prices(item):
        for frame in OFFER_FRAMES[:4]:
            yield frame.format(n=spoken_number(n), cur=currency, items=values["items"]), W_PRICE / 4


def scene_sentences(scenario: Scenario, context: SceneContext | None = None, *,
                    hesitations: bool = False) -> list[tuple[list[str], float]]:
    """The weighted word sequences of a scene's language model, the moment's weighed up; with
    `hesitations`, also the pack's fillers and backchannels where a learner says them (the model
    of a pause inside a turn: `_hesitations`)."""
    local = context is not None and context_key(context)[1]
    held = scenario.item(context.item) if context is not None else None
    out: list[tuple[str, float]] = []
    for item in scenario.items:
        out += _item_sentences(scenario, item, local)
    for phrase in scenario.phrases:
        out += [(phrase.text, W_PHRASE * (2 if local else 1)), (phrase.meaning, W_PHRASE)]
    cues = scenario.cues
    for group in (cues.greeting, cues.polite, cues.inquiry, cues.pushback, cues.walk, cues.accept,
                  cues.compliment, cues.reengage, scenario.rules.respectful_address, scenario.rules.taboo_phrases):
        out += [(cue, W_CUE * (2 if local else 1)) for cue in group]
    for objection in scenario.policy.objections.values():
        out += [(p, W_CUE) for p in objection.phrases]
    default = scenario.items[0]
    for pools in scenario.lines.values():
        for pool in pools.values():
            out += [(_fill(line, _item_values(scenario, default, default.tourist_quote[0], default.fair[0])),
                     W_VENDOR) for line in pool]
    out += [(line, W_FILLER) for line in _filler()]
    if hesitations:
        out += _hesitations(scenario, out)
    out += _offers(scenario, scenario.items, W_PRICE)
    if held is not None:
        out += [(text, w * MOMENT) for text, w in _item_sentences(scenario, held, local)]
    if context is not None and context.quote is not None:
        near = [n for n in price_steps(int(context.quote * 0.2), int(context.quote * 1.05))]
        out += [(text, w * MOMENT) for text, w in _offers(scenario, (held or default,), W_PRICE, near)]
    return [(ws, w) for text, w in out if (ws := words(text))]


def _turn_words(table: dict[LanguageCode, tuple[str, ...]]) -> list[str]:
    """A pack's fillers or backchannels, every language's together (learners mix them), the ones
    listed in more of its languages first ("umm" is in all of them)."""
    seen: dict[str, int] = {}
    for found in table.values():
        for said in found:
            text = " ".join(words(said))
            if text:
                seen[text] = seen.get(text, 0) + 1
    return sorted(seen, key=lambda t: (-seen[t], t))


def _hesitations(scenario: Scenario, said: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Where a learner says the pack's fillers and backchannels (issue #34), over its own sentences
    (`said`, before the offers) and a few offers: each prefix followed by a filler (the partial
    text of a thinking pause), each prefix that stops where no sentence ends ("i will give", the
    partial text of a pause mid-sentence), a filler or backchannel then the sentence, and each
    alone (and after an offer's opening frames and a price's last word, once per pack). One filler
    per place, taken in turn from the pack's list (the commonest more often), so the model grows by
    a few thousand sentences, not by the fillers' count times every place."""
    fillers, backchannels = _turn_words(scenario.fillers), _turn_words(scenario.backchannels)
    if not fillers:
        return []
    turn = [f for n, f in enumerate(fillers) for _ in range(max(1, 3 - n // 4))]  # the commonest thrice
    out: list[tuple[str, float]] = [(f, W_ALONE) for f in fillers] + [(b, W_ALONE) for b in backchannels]
    leading = [*turn, *backchannels]
    sentences: dict[tuple[str, ...], float] = {}
    for text, weight in [*said, *_offer_samples(scenario)]:
        ws = tuple(words(text))
        if len(ws) > 1:
            sentences[ws] = sentences.get(ws, 0.0) + weight
    places = 0
    for n, (ws, weight) in enumerate(sorted(sentences.items())):
        share = weight * W_PAUSED / (len(ws) - 1)
        for k in range(1, len(ws)):
            filler = turn[(places := places + 1) % len(turn)]
            out.append((" ".join((*ws[:k], filler)), share))
            if ws[k - 1] in CONTINUATIONS:  # a pause where no sentence ends: "i will give ..."
                out.append((" ".join(ws[:k]), weight * W_PAUSED))
        out.append((" ".join((leading[n % len(leading)], *ws)), weight * W_LEADING))
    currency = scenario.currency_word
    numbers = sorted({words(spoken_number(n))[-1] for n in (*range(1, 20), *range(20, 100, 10), 100, 1000)})
    frames = sorted({f.split("{n}")[0].strip() for f in OFFER_FRAMES if not f.startswith("{n}")})
    for n, filler in enumerate(turn):
        out += [(f"{frame} {filler}", W_CUE / len(turn)) for frame in frames]
        out += [(f"{numbers[n % len(numbers)]} {filler}", W_CUE / len(turn)),
                (f"{numbers[n % len(numbers)]} {currency} {filler}", W_CUE / len(turn))]
    return out


def _offer_samples(scenario: Scenario) -> list[tuple[str, float]]:
    """Each way of making an offer (`OFFER_FRAMES`) with a few of the items and their prices, for
    the places a learner pauses inside one ("how about ninety rupees for the ...")."""
    out: list[tuple[str, float]] = []
    for i, frame in enumerate(OFFER_FRAMES):
        for j, item in enumerate(scenario.items[:3]):
            prices = item_prices(item)
            n = prices[(7 * i + j) % len(prices)]
            out.append((frame.format(n=spoken_number(n), cur=scenario.currency_word,
                                     items=item.spoken or item.name.lower()), W_CUE))
    return out


def _offers(scenario: Scenario, items: tuple[Item, ...], weight: float,
            prices: list[int] | None = None) -> list[tuple[str, float]]:
    """Offers over each item's band (or `prices`): `weight` per item and price, shared by the frames.
    A price is said as American speakers say it and, at half the weight, with British and Indian
    English's "and" after the hundreds (as espeak-ng's en-gb voice says it)."""
    share = weight / len(OFFER_FRAMES)
    per_price: dict[int, float] = {}
    out: list[tuple[str, float]] = []
    for item in items:
        name = item.spoken or item.name.lower()
        for n in prices if prices is not None else item_prices(item):
            per_price[n] = per_price.get(n, 0.0) + share
            for said, w in _said(n):
                out += [(frame.format(n=said, cur=scenario.currency_word, items=name), share * w)
                        for frame in _PER_ITEM]
    for n, mass in sorted(per_price.items()):  # the frames without the item: once per price, summed
        for said, w in _said(n):
            out += [(frame.format(n=said, cur=scenario.currency_word), mass * w) for frame in _GENERIC]
    return out


def _said(n: int) -> list[tuple[str, float]]:
    plain, joined = spoken_number(n), spoken_number(n, joined=True)
    return [(plain, 1.0)] if plain == joined else [(plain, 1.0), (joined, 0.5)]


@dataclass(frozen=True, slots=True)
class SentenceShapes:
    """What the end-of-turn policy reads of a pack's sentences (voice/turn_end.py rule 4)."""

    starts: frozenset[tuple[str, ...]]
    """The word sequences that only start them: a first part of one, of two words or more ("okay
    brother" of "okay brother see you tomorrow", "sahi daam" of "sahi daam lagao"), and the whole
    of none. One word is left out: many a first word is a turn of its own that the pack has no
    sentence for ("namaste", "ruko", "enough"). A backchannel, alone or with a way of addressing
    the vendor (the pack's `respectful_address`), is a whole one: "theek hai" and "theek hai
    bhaiya" start "theek hai bhaiya kal milte hain" but are turns of their own. A partial
    transcript that is one is unfinished."""
    endings: frozenset[tuple[str, ...]]
    """The last three words (two, of a two-word sentence) of each that ends on a continuation word
    that may end one (`continuations.ALSO_FINAL`): Hinglish ends on "do" ("thoda kam kar do",
    "nabbe mein de do"), and English does too ("is what i can do"). A partial transcript ending so
    ends a sentence, not mid-way (voice/turn_words.py `ends_mid_sentence`)."""


_SHAPES: dict[str, SentenceShapes] = {}  # per pack (its JSON's digest), a few kept
_SHAPES_LOCK = threading.Lock()  # a microphone's worker thread and the event loop may both ask


def sentence_shapes(scenario: Scenario) -> SentenceShapes:
    """The pack's `SentenceShapes`, computed once per pack (about 0.1 s), then kept."""
    digest = hashlib.sha256(scenario.model_dump_json().encode("utf-8")).hexdigest()
    with _SHAPES_LOCK:
        found = _SHAPES.get(digest)
    if found is None:
        said = [tuple(ws) for ws, _ in scene_sentences(scenario)]
        replies = [tuple(words(b)) for b in _turn_words(scenario.backchannels)]
        address = [tuple(words(a)) for a in scenario.rules.respectful_address]
        whole = set(said) | set(replies) | {(*b, *a) for b in replies for a in address}
        found = SentenceShapes(
            starts=frozenset(ws[:k] for ws in said for k in range(2, len(ws)) if ws[:k] not in whole),
            endings=frozenset(ws[-3:] for ws in said if len(ws) >= 2 and ws[-1] in ALSO_FINAL))
        with _SHAPES_LOCK:
            while len(_SHAPES) >= 8:
                _SHAPES.pop(next(iter(_SHAPES)))
            _SHAPES[digest] = found
    return found


def vocabulary(sentences: list[tuple[list[str], float]]) -> set[str]:
    return {w for ws, _ in sentences for w in ws}
