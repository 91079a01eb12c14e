"""What the vendor says: the brain's `reply_text` made speakable and true to the engine's numbers.

The AI proposes, the engine disposes, and that holds for the words as well as the numbers. Every
vendor line from a brain passes `ReplyGate` before anyone reads or hears it, streamed or not:

1. **Units.** The text is cut into clauses at a clause mark (`,` `;` `:` a dash) or a sentence end
   (`.` `!` `?` `।` `…`) followed by a space. A unit is only judged once it is complete, so a
   streamed reply and the same reply judged whole give the same words (`spoken`).
2. **Markup.** List marks, headings, quote marks, emphasis, code ticks and strike marks are taken
   out; a Markdown link keeps its words (flag `markdown`).
3. **Links.** A clause with a web address, a bare domain or an e-mail address cannot be spoken.
   The sentence it is in ends before it, with the sentence's own closing mark; if it is the
   sentence's first clause the whole sentence goes (flag `link`). Never "See for my list".
4. **Numbers wait for the decision.** A clause that names a number is held until the engine has
   validated the decision's numbers (`decide`), and every clause after it waits behind it, so no
   price the engine rejects reaches a client in any frame. A price the line names is kept when
   the engine allows it (`PriceRule.allowed`: the validated quote, the learner's offer, the
   standing and first quotes, other items' prices) and is not the rejected proposal; otherwise
   it is rewritten to the validated quote (flag `text_price_rewritten`). With no validated quote to
   say, the clause goes as a link does (flag `text_price_dropped`).
5. **Length.** At most `max_sentences` sentences are said (flag `too_long`). When none before the
   last of them has said the validated quote, the last one waits to see whether a later sentence
   says it, and that one is said in its place, so a line cut short still says the new price (a
   later sentence says it only in words it can say: before any link in it).
   Whether a cut sentence named a price is kept (`price_cut`): when the line as said never names
   the quote, the negotiation keeps the standing one, since a price the learner never hears must
   not bind them (flag `quote_unsaid`).
6. **Release.** A clause goes out as soon as it is judged; its trailing clause mark goes with the
   next clause, so that a sentence cut after it still ends with a full stop.

Nothing else changes the words, and nothing here reads a clock: the same text and rule always give
the same line. An empty result is the caller's to replace with a pack line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Protocol

from session.plain import suspect

__all__ = [
    "MAX_SENTENCES",
    "PLAUSIBLE",
    "Mention",
    "PriceRule",
    "ReplyGate",
    "Rewrite",
    "Spoken",
    "speakable",
    "spoken",
]

MAX_SENTENCES = 2
PLAUSIBLE = (10, 100_000)  # the bare numbers that read as prices when no item is known

# A unit ends at a clause mark or a sentence end followed by a space. A number's own separators
# ("1,500", "3.5") have no space after them, so they never end a unit.
_BOUNDARY = re.compile(r"(?:([,;:\u2013\u2014])|([.!?\u0964\u2026]+)[\"'\u201d\u2019)\]*_`~]*)(?=\s)")
# Abbreviations whose full stop ends no sentence ("Rs. 50").
_ABBREVIATIONS = frozenset({"rs", "mr", "mrs", "dr", "st", "no", "vs", "approx", "sh", "smt"})
_ABBREVIATION_BEFORE = re.compile(r"(\w+)\.$")
_LIST_NUMBER = re.compile(r"(?:^|\n)[ \t]*\d{1,3}\.$")
_MAX_OPEN_UNIT = 400  # past this an unclosed bracket no longer holds a unit together

_MD_LINK = re.compile(r"\[([^\]\n]{0,200})\]\([^)\s]{0,500}\)")
_LINE_MARK = re.compile(r"(^|\n)[ \t]*(?:#{1,6}[ \t]+|[-*+\u2022][ \t]+|\d{1,3}[.)][ \t]+|>[ \t]*)")
_EMPHASIS = re.compile(r"\*+|`+|~~|(?<!\w)_+|_+(?!\w)|#{2,}")
_LINK = re.compile(
    r"(?:https?://|www\.)\S*"  # an address
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # an e-mail address
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|in|org|net|io|co|info|biz|shop|store|app|jp|ma|fr|uk|de|me)\b(?:/\S*)?",
    re.IGNORECASE,
)
_FLAG_ORDER = ("markdown", "link", "text_price_rewritten", "text_price_dropped", "too_long")
_DASHES = frozenset("\u2013\u2014")
_SPACE = re.compile(r"\s+")
_SPACE_BEFORE_MARK = re.compile(r"\s+([,.!?;:\u0964])")
_DEVANAGARI = re.compile(r"[\u0900-\u097f]")
_TO_DEVANAGARI = str.maketrans("0123456789", "०१२३४५६७८९")


class Mention(Protocol):
    """A number found in a line (`session.numbers.NumberMention` has this shape)."""

    @property
    def value(self) -> float: ...

    @property
    def currency(self) -> bool: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


Finder = Callable[[str], Sequence[Mention]]


@dataclass(frozen=True, slots=True)
class PriceRule:
    """The prices a line may name, from the engine's verdict on the decision's numbers."""

    quote: int | None  # the validated quote: what a wrong price is rewritten to
    allowed: frozenset[int] = frozenset()  # prices that may be named as they are
    rejected: frozenset[int] = frozenset()  # the proposal's prices that the engine overruled
    # A bare number (no currency beside it) is a price when it lies in this range, or is rejected:
    # "for you, 150" is one, "turn 1" and "since 1985" are not.
    plausible: tuple[int, int] = PLAUSIBLE

    def keeps(self, value: int) -> bool:
        return value not in self.rejected and (value == self.quote or value in self.allowed)

    def names(self, mention: Mention) -> bool:
        """Whether `mention` states a price."""
        value = round(mention.value)
        low, high = self.plausible
        return mention.currency or value in self.rejected or low <= value <= high


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One change of the brain's words for a reason of the engine's, for the log."""

    reason: str  # the flag: text_price_rewritten, text_price_dropped, link
    proposed: str
    applied: str


@dataclass(frozen=True, slots=True)
class Spoken:
    text: str
    flags: tuple[str, ...]
    rewrites: tuple[Rewrite, ...]
    price_cut: bool  # a sentence cut by the length limit named a price
    says_quote: bool  # the line as said names the validated quote


@dataclass(slots=True)
class _Unit:
    body: str  # the clause, cleaned, with its sentence end if it has one
    mark: str  # the clause mark that follows it (held until the next clause is said), or ""
    end: str  # the sentence end it closes with, or "" (a clause, or text that stops without one)
    closes: bool  # the unit ends a sentence (or the text)
    link: bool
    numbers: bool
    raw: str


@dataclass(slots=True)
class ReplyGate:
    """One reply's words on their way out: `feed` raw text, `decide` once the engine has ruled,
    `finish` when the text is complete; each returns the text that may go out now."""

    numbers: Finder  # every number a line names (a number held back waits for the ruling)
    prices: Finder  # those of them that are prices
    max_sentences: int = MAX_SENTENCES
    rule: PriceRule | None = None
    _raw: str = ""
    _fed: list[str] = field(default_factory=list)
    _line_start: bool = True  # the next unit is the first (Markdown marks only count at a line start)
    _held: list[_Unit] = field(default_factory=list)
    _out: list[str] = field(default_factory=list)
    _mark: str = ""  # the clause mark of the last clause said, held for the next one
    _open: bool = False  # the current sentence has words out
    _dropping: bool = False  # the rest of the current sentence is not said
    _said: int = 0  # sentences said
    _finished: bool = False
    _flags: list[str] = field(default_factory=list)
    _rewrites: list[Rewrite] = field(default_factory=list)
    _cut: list[str] = field(default_factory=list)  # cut clauses that may name a number
    _last: list[_Unit] | None = None  # the last sentence to be said, held while a later one may name a price
    _later: list[_Unit] = field(default_factory=list)  # a sentence after it, still coming
    _looking: bool = False  # the last sentence is whole: later ones are looked at
    says_quote: bool = False

    # ------------------------------------------------------------------ input

    def feed(self, text: str) -> str:
        """Take the next piece of the raw reply text; return what may go out now."""
        assert not self._finished, "the reply text is already complete"
        self._fed.append(text)
        self._raw += text
        units = []
        while (unit := self._next_unit()) is not None:
            units.append(unit)
        return self._admit(units)

    def decide(self, rule: PriceRule) -> str:
        """The engine has ruled on the decision's numbers; return what was waiting for it."""
        self.rule = rule
        held, self._held = self._held, []
        out = self._admit(held)
        if self._finished:
            out += self._close()
        return out

    def finish(self) -> str:
        """The raw text is complete: the last unit is judged (once the ruling is in)."""
        if self._finished:
            return ""
        self._finished = True
        rest = self._raw
        self._raw = ""
        units = [self._unit(rest, "", "", closes=True)] if rest.strip() else []
        out = self._admit(units)
        if not self._held:
            out += self._close()
        return out

    # ------------------------------------------------------------------ results

    @property
    def done(self) -> bool:
        """Everything is judged: the text is complete and nothing waits for the ruling."""
        return self._finished and not self._held

    @property
    def waiting(self) -> bool:
        """Something is held for the engine's ruling."""
        return bool(self._held)

    @property
    def text(self) -> str:
        """What has gone out so far."""
        return "".join(self._out)

    @property
    def source(self) -> str:
        """The raw text fed so far."""
        return "".join(self._fed)

    def result(self) -> Spoken:
        assert self.done, "the gate has text it has not judged"
        flags = tuple(sorted(self._flags, key=_FLAG_ORDER.index))  # whenever each was found
        rule = self.rule or PriceRule(None)
        price_cut = any(rule.names(m) for body in self._cut for m in self.prices(body))
        return Spoken(self.text, flags, tuple(self._rewrites), price_cut, self.says_quote)

    # ------------------------------------------------------------------ units

    def _next_unit(self) -> _Unit | None:
        raw = self._raw
        search_from = 0
        while (match := _BOUNDARY.search(raw, search_from)) is not None:
            stop = match.end()
            search_from = stop
            if match.group(2) == ".":
                word = _ABBREVIATION_BEFORE.search(raw, 0, match.start(2) + 1)
                if word is not None and word.group(1).lower() in _ABBREVIATIONS:
                    continue
                if _LIST_NUMBER.search(raw, 0, match.start(2) + 1):
                    continue  # "1. " opening a list item ends no sentence
            head = raw[:stop]
            unclosed = head.count("[") > head.count("]") or head.count("(") > head.count(")")
            if unclosed and len(head) < _MAX_OPEN_UNIT:
                continue
            self._raw = raw[stop:]
            mark = match.group(1) or ""
            body = raw[: match.start()] if mark else head
            return self._unit(body, mark, match.group(2) or "", closes=not mark)
        return None

    def _unit(self, raw: str, mark: str, end: str, *, closes: bool) -> _Unit:
        # The whitespace before a unit is its own (a unit ends at its mark), so whether it starts
        # a line is known from the unit alone, however the text was cut into pieces.
        line_start = self._line_start or "\n" in raw[: len(raw) - len(raw.lstrip())]
        self._line_start = False
        text = raw
        if line_start:
            text = "\n" + text.lstrip()
        cleaned = _MD_LINK.sub(r"\1", text)
        cleaned = _LINE_MARK.sub(r"\1", cleaned)
        cleaned = _EMPHASIS.sub("", cleaned)
        if cleaned != text and "markdown" not in self._flags:
            self._flags.append("markdown")
        body = _SPACE_BEFORE_MARK.sub(r"\1", _SPACE.sub(" ", cleaned)).strip()
        if closes and not end:
            tail = re.search(r"[.!?\u0964\u2026]+[\"'\u201d\u2019)\]]*$", body)
            end = tail.group(0) if tail else ""
        link = _LINK.search(body) is not None
        # Before the ruling, only a unit that names a number waits for it; after it, every unit
        # has its prices checked (`prices` finds none where `numbers` finds none).
        numbers = bool(body) and (self.rule is not None or bool(self.numbers(body)))
        return _Unit(body, mark, end, closes, link, numbers, raw)

    # ------------------------------------------------------------------ judging

    def _admit(self, units: list[_Unit]) -> str:
        out: list[str] = []
        for unit in units:
            if self._held or (unit.numbers and self.rule is None and not self._settled(unit)):
                self._held.append(unit)
                continue
            out.append(self._take(unit))
        said = "".join(out)
        self._out.append(said)
        return said

    def _changes(self, unit: _Unit) -> bool:
        """Whether the unit names the validated quote, or a price the ruling changes or drops."""
        if not unit.numbers:
            return False
        rule = self.rule
        assert rule is not None  # a unit that names a number waits for the ruling
        return any(rule.names(m) and (round(m.value) == rule.quote or not rule.keeps(round(m.value)))
                   for m in self.prices(unit.body))

    def _says_quote(self, unit: _Unit) -> bool:
        """Whether the unit, once its prices are made true, says the validated quote."""
        return self.rule is not None and self.rule.quote is not None and self._changes(unit)

    def _take(self, unit: _Unit) -> str:
        """Rule 5's choice: the last sentence a learner hears is the first that names a price when
        the ones before it named none, so a line cut short still says the price (issue #12)."""
        if self._last is None:
            last_one = self._said == self.max_sentences - 1 and not (self._open or self._dropping)
            if not last_one or self.says_quote or unit.link or self._changes(unit):
                return self._say(unit)
            self._last, self._later, self._looking = [unit], [], unit.closes
            return ""
        if not self._looking:  # the last sentence, still coming: said as it is once it names a
            self._last.append(unit)  # price, or cannot be said (then the next one is the last)
            if unit.link or self._changes(unit):
                return self._say_last(self._last)
            self._looking = unit.closes
            return ""
        self._later.append(unit)  # a sentence past the last: said instead of it if it says the quote
        if unit.closes:  # the text's last unit closes too
            sentence, self._later = self._later, []
            # Only what would be said counts: a link ends the sentence before it (rule 3). A link
            # is judged without the ruling, so this holds whenever the ruling comes.
            if any(self._says_quote(u) for u in takewhile(lambda u: not u.link, sentence)):
                self._flag("too_long")
                return self._say_last(sentence)
            if any(u.body for u in sentence):
                self._flag("too_long")
        return ""

    def _say_last(self, units: list[_Unit]) -> str:
        self._last = None
        return "".join(self._say(u) for u in units)

    def _settled(self, unit: _Unit) -> bool:
        """A unit that will not be said whatever the ruling need not wait for it."""
        return self._said >= self.max_sentences or self._dropping or unit.link

    def _say(self, unit: _Unit) -> str:
        if self._said >= self.max_sentences:
            if unit.body:
                self._flag("too_long")
                if unit.numbers:
                    self._cut.append(unit.body)
            return ""
        if self._dropping:
            return self._end_dropped(unit)
        body = unit.body
        if unit.link:
            self._flag("link")
            self._rewrites.append(Rewrite("link", unit.raw.strip(), ""))
            return self._drop(unit)
        if unit.numbers:
            checked = self._priced(body)
            if checked is None:
                return self._drop(unit)
            body = checked
        if not body.strip(" .,!?;:\u0964\u2026\"'"):
            return self._close_sentence(unit) if unit.closes else ""
        out = ""
        if self._open:
            out = f" {self._mark} " if self._mark in _DASHES else f"{self._mark} "
        elif self._said:
            out = " "
        out += body
        self._open = True
        self._mark = unit.mark
        if unit.closes:
            self._open = False
            self._mark = ""
            self._said += 1
        return out

    def _priced(self, body: str) -> str | None:
        """The clause with its prices made true to the ruling, or None when it cannot be said."""
        rule = self.rule
        assert rule is not None
        mentions = sorted((m for m in self.prices(body) if rule.names(m)), key=lambda m: m.start, reverse=True)
        changed = body
        for mention in mentions:
            value = round(mention.value)
            if rule.keeps(value):
                self.says_quote = self.says_quote or value == rule.quote
                continue
            if rule.quote is None:
                self._flag("text_price_dropped")
                self._rewrites.append(Rewrite("text_price_dropped", body, ""))
                return None
            said = changed[mention.start:mention.end]
            changed = changed[: mention.start] + _digits_like(rule.quote, said) + changed[mention.end:]
            self.says_quote = True
        if changed != body:
            self._flag("text_price_rewritten")
            self._rewrites.append(Rewrite("text_price_rewritten", body, changed))
        return changed

    def _drop(self, unit: _Unit) -> str:
        """This unit cannot be said: neither can the rest of its sentence."""
        if unit.closes:
            return self._close_sentence(unit)
        self._dropping = True
        return ""

    def _end_dropped(self, unit: _Unit) -> str:
        if unit.body and unit.numbers:
            self._cut.append(unit.body)
        return self._close_sentence(unit) if unit.closes else ""

    def _close_sentence(self, unit: _Unit) -> str:
        """End the current sentence where it stands, with the closing mark it was written with."""
        self._dropping = False
        if not self._open:
            return ""
        self._open = False
        self._mark = ""
        self._said += 1
        return unit.end or "."

    def _close(self) -> str:
        """The text has ended: a held last sentence is said after all, and a sentence cut short
        still gets its full stop."""
        if self._last is not None:
            said = self._say_last(self._last)
            if self._later and any(u.body for u in self._later):
                self._flag("too_long")
            self._later = []
            self._out.append(said)
            return said + self._close()
        if self._open and self._dropping:
            self._open = self._dropping = False
            self._said += 1
            self._out.append(".")
            return "."
        self._open = self._dropping = False
        return ""

    def _flag(self, flag: str) -> None:
        if flag not in self._flags:
            self._flags.append(flag)


def _digits_like(value: int, said: str) -> str:
    """`value` written as the words it replaces were: Devanagari digits for Devanagari, grouped
    for a grouped number, plain digits otherwise."""
    text = f"{value:,}" if "," in said else str(value)
    return text.translate(_TO_DEVANAGARI) if _DEVANAGARI.search(said) else text


_SENTENCE_ENDS = re.compile(r"[.!?\u0964\u2026]+[\"'\u201d\u2019)\]]*\s")


def spoken(text: str, rule: PriceRule | None, numbers: Finder, prices: Finder,
           max_sentences: int = MAX_SENTENCES) -> Spoken:
    """The whole reply judged at once: what a streamed reply's released pieces join up to."""
    rule = rule if rule is not None else PriceRule(None)
    if text and not suspect(text) and len(_SENTENCE_ENDS.findall(text)) < max_sentences:
        named = [round(m.value) for m in prices(text) if rule.names(m)]
        if all(rule.keeps(value) for value in named):
            return Spoken(text, (), (), False, rule.quote in named)
    gate = ReplyGate(numbers, prices, max_sentences, rule)
    gate.feed(text)
    gate.finish()
    return gate.result()


def _no_numbers(text: str) -> Sequence[Mention]:
    return ()


def speakable(text: str, max_sentences: int = MAX_SENTENCES) -> tuple[str, tuple[str, ...]]:
    """A line as it may be spoken, its numbers as written (a pack's line, whose prices the engine
    filled in itself), and what was changed."""
    said = spoken(text, None, _no_numbers, _no_numbers, max_sentences)
    return said.text, said.flags
