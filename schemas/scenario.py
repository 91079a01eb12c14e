"""Scenario data: the vendor's items, prices and customs, loaded from the package's JSON files."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_SCENARIO = "jaipur-bazaar"


class Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    hindi: str
    unit: str
    wholesale: tuple[int, int]
    fair: tuple[int, int]
    tourist_quote: tuple[int, int]
    floor: int
    in_scene: bool = False
    estimate: bool = False
    quality: str = ""
    note: str = ""

    @property
    def opening_quote(self) -> int:
        """The first price an outsider hears: the top of the tourist range."""
        return self.tourist_quote[1]


class Phrase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    meaning: str
    use: str


class Scenario(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    title: str
    vendor: dict[str, str | int]
    currency: str
    items: tuple[Item, ...]
    haggling: dict[str, tuple[float, float]]
    phrases: tuple[Phrase, ...] = Field(default_factory=tuple)
    customs: tuple[str, ...] = Field(default_factory=tuple)

    def item(self, name: str | None) -> Item | None:
        """Look an item up by English or Hindi name, case-insensitively."""
        if not name:
            return None
        return _index(self.scenario).get(name.strip().lower())


@cache
def _index(scenario: str) -> dict[str, Item]:
    found: dict[str, Item] = {}
    for item in load_scenario(scenario).items:
        found[item.name.lower()] = item
        found[item.hindi.lower()] = item
    return found


@cache
def available_scenarios() -> tuple[str, ...]:
    """The scenarios shipped in the package (read once: package data does not change)."""
    files = resources.files("schemas").joinpath("data").iterdir()
    return tuple(sorted(f.name.removesuffix(".json") for f in files if f.name.endswith(".json")))


@cache
def load_scenario(name: str = DEFAULT_SCENARIO) -> Scenario:
    if name not in available_scenarios():
        raise KeyError(name)
    text = resources.files("schemas").joinpath("data", f"{name}.json").read_text("utf-8")
    return Scenario.model_validate(json.loads(text))
