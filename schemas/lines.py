"""How a vendor line is picked and filled from a scenario pack: by the rule-based vendor for his
turns, and by the session for the lines that are not turns (clarify, nudge, welcome back).

The lines themselves are data: each pack's manifest has a pool of lines per language for every
moment of a haggle (`schemas.pack.LINE_KEYS`), replaced per learner level where the pack says so,
and the pack's tests check that each is one or two short sentences a speech engine can read aloud.
Which line is said depends only on the index the caller passes (a turn number, a seq), so the same
moment always gets the same words.
"""

from __future__ import annotations

from schemas.enums import LanguageCode, Level
from schemas.scenario import Item, Scenario


def spoken_items(item: Item | None, scenario: Scenario) -> str:
    if item is None:
        return scenario.goods
    return item.spoken or f"{item.name.lower()}s"


def spoken_unit(item: Item | None) -> str:
    if item is None:
        return "kilo"
    return item.unit_word or item.unit


def spoken_quality(item: Item | None, scenario: Scenario) -> str:
    if item is None or not item.quality:
        return scenario.default_quality
    return item.quality


def say(scenario: Scenario, language: LanguageCode | None, key: str, index: int, item: Item | None,
        level: Level = Level.INTERMEDIATE, **fields: object) -> str:
    """The line of pool `key` picked by `index`, in `language` if the pack has it, at `level`, filled in."""
    pool = scenario.lines_for(language, level)[key]
    template = pool[index % len(pool)]
    return template.format(
        items=spoken_items(item, scenario),
        unit=spoken_unit(item),
        quality=spoken_quality(item, scenario),
        **fields,
    )
