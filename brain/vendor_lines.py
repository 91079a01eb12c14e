"""How the rule-based vendor picks and fills a line from his scenario pack.

The lines themselves are data: each pack's manifest has a pool of lines per language for every
moment of a haggle (`schemas.pack.LINE_KEYS`), and the pack's tests check that each is one or two
short sentences a speech engine can read aloud. Which line is said depends only on the turn
number, so the same turn always gets the same words.
"""

from __future__ import annotations

from schemas.enums import LanguageCode
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
        **fields: object) -> str:
    """The line of pool `key` picked by `index`, in `language` if the pack has it, filled in."""
    pool = scenario.lines_for(language)[key]
    template = pool[index % len(pool)]
    return template.format(
        items=spoken_items(item, scenario),
        unit=spoken_unit(item),
        quality=spoken_quality(item, scenario),
        **fields,
    )
