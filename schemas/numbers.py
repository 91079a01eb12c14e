"""How each language a pack speaks says numbers: the data `session/numbers.py` reads numbers with.

One file per language in `data/numbers/` (`common.json` holds the signs every language shares).
A pack lists its languages (`vendor.languages`); the number reader loads the file of each, found by
the full code (`ar-MA.json`) or else by its first part (`hi-EN` -> `hi.json`, `en-IN` -> `en.json`),
so adding a language is adding a file, not a branch in code (docs/scenarios.md, "Numbers").
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["NUMBERS_DIR", "NumberWords", "number_words", "number_words_files"]

NUMBERS_DIR = Path(__file__).parent / "data" / "numbers"


class NumberWords(BaseModel):
    """One language's words for numbers and for what stands next to them.

    Keys are matched case-insensitively after Unicode NFC normalisation; a key with spaces or
    hyphens is a phrase of several words ("per cent", "quatre-vingt-dix")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    language: str = Field(min_length=2, max_length=16)
    description: str = Field(min_length=10, max_length=400)
    order: Literal["atomic", "tens_first", "units_first"] = "atomic"
    """How a number under 100 is built: each is its own word (Hindi; Japanese builds tens with a
    multiplier), tens then units ("twenty five"), or units, a joiner, tens ("khamsa u 3ichrin")."""
    vigesimal: bool = False
    """Sixty and eighty take 10-19 after them (French "soixante-douze" = 72)."""
    colloquial_hundreds: bool = False
    """A digit word then a tens word means hundreds ("one fifty" = 150, as Indian English says it)."""
    glued: bool = False
    """Number words run together without spaces ("ichiman", "一万二千円")."""
    mixes_with: tuple[str, ...] = ()
    """Languages whose number words may join this one's in one number (code-switching)."""
    numbers: dict[str, float] = Field(default_factory=dict)
    weak: tuple[str, ...] = ()
    """Number words that are also ordinary words ("do", "one", "san"): read only beside a
    multiplier, a currency or a unit."""
    multipliers: dict[str, int] = Field(default_factory=dict)
    multipliers_not_first: tuple[str, ...] = ()
    """Multipliers that cannot begin a number on their own ("grand", "so", "man")."""
    multipliers_not_after_digits: tuple[str, ...] = ()
    suffix_multipliers: dict[str, int] = Field(default_factory=dict)
    """Written straight after digits ("1.5k")."""
    modifiers: dict[str, float] = Field(default_factory=dict)
    """Added to the next number before it is multiplied ("saadhe teen sau" = 350)."""
    one_words: tuple[str, ...] = ()
    """Stand for one before a multiplier ("a hundred")."""
    joiners: tuple[str, ...] = ()
    prefixes: dict[str, Literal["joiner", "drop"]] = Field(default_factory=dict)
    """Letters written onto a number word (Arabic و "and", ب "for")."""
    fractions: dict[str, float] = Field(default_factory=dict)
    percent: dict[str, float] = Field(default_factory=dict)
    """Percent words, each with what one of it is in percent (割 = 10 %)."""
    currency: tuple[str, ...] = ()
    currency_after_only: tuple[str, ...] = ()
    foreign_currency: dict[str, str] = Field(default_factory=dict)
    """Money the pack does not price in; a number with one is not a price here."""
    units: dict[str, str] = Field(default_factory=dict)
    """Quantity words, with the unit each normalises to."""
    count_words: tuple[str, ...] = ()
    time_after: tuple[str, ...] = ()
    time_before: tuple[str, ...] = ()
    date_words: tuple[str, ...] = ()
    year_before: tuple[str, ...] = ()
    ordinal_suffixes: tuple[str, ...] = ()
    # What makes a number an offer, and relative to what (session/offers.py).
    offer_cues: tuple[str, ...] = ()
    """Words just before a price that make it the learner's offer ("I'll give", "dunga", "pour")."""
    offer_cues_after: tuple[str, ...] = ()
    """Words just after a price that make it the offer ("mein", "で", "b")."""
    less_after: tuple[str, ...] = ()
    """After an amount or percentage: off the quote ("100 less", "100 kam", "30% off")."""
    less_before: tuple[str, ...] = ()
    """Before an amount or percentage: off the quote ("reduce by 100", "discount of 30%")."""
    rate_words: tuple[str, ...] = ()
    """Between a price and a unit, making it a price per unit ("per kilo", "ka kilo", "le kilo")."""
    each_words: tuple[str, ...] = ()
    """After a price, making it a price per piece ("each", "chacun")."""
    for_words: tuple[str, ...] = ()
    """Between a quantity and a price ("2 for 100", "do ke 100", "deux pour mille")."""
    range_words: tuple[str, ...] = ()
    """Between two prices, making a range ("to", "se", "à")."""
    either_words: tuple[str, ...] = ()
    """Between two prices, making two offers ("or", "ya", "ou")."""
    middle: tuple[str, ...] = ()
    """Phrases that ask to meet halfway between the quote and the learner's last offer."""

    @model_validator(mode="after")
    def _consistent(self) -> NumberWords:
        known = {**self.numbers, **self.multipliers}
        for field in ("weak", "multipliers_not_first", "multipliers_not_after_digits"):
            stray = [w for w in getattr(self, field) if w not in known]
            if stray:
                raise ValueError(f"{field}: not a number or multiplier here: {', '.join(stray)}")
        stray = [w for w in self.currency_after_only if w not in self.currency]
        if stray:
            raise ValueError(f"currency_after_only: not a currency here: {', '.join(stray)}")
        return self


@cache
def number_words_files() -> tuple[str, ...]:
    """The languages that have a number file (file names without `.json`)."""
    return tuple(sorted(p.stem for p in NUMBERS_DIR.glob("*.json")))


@cache
def number_words(name: str) -> NumberWords:
    """The number file `name` (`en`, `ar-MA`, `common`), validated; ValueError names the file."""
    path = NUMBERS_DIR / f"{name}.json"
    try:
        return NumberWords.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
