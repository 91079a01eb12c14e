"""Scenario data: the vendor's items, prices and customs, loaded from the package's JSON files."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Literal

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


SafetyCategory = Literal["abuse", "sexual", "self_harm", "legal", "medical", "financial"]
ObjectionKind = Literal["too_expensive", "cheaper_elsewhere", "come_back_later"]


class SafetyRule(BaseModel):
    """P0: what the learner may say that the vendor answers with fixed lines and no model call.

    `phrases` are matched as whole words, case-insensitively; a trailing `*` matches any ending
    (`diagnos*`). `effect` says what the turn does to the negotiation: `insult` costs happiness as
    an insult does, `none` changes nothing, `care` changes nothing and stops the haggle's tone."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    phrases: tuple[str, ...] = Field(min_length=1)
    lines: tuple[str, ...] = Field(min_length=1)
    effect: Literal["insult", "none", "care"] = "none"


class Objection(BaseModel):
    """P2: a recognised objection and the vendor's answers to it. `{price}` and `{item}` in a
    template are filled with the vendor's standing quote and the item; a template that needs a
    value the turn lacks is skipped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    phrases: tuple[str, ...] = Field(min_length=1)
    templates: tuple[str, ...] = Field(min_length=1)


class GenericTip(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = "Keep the conversation going"
    body: str = "Listen, answer what was asked, and ask one question back."


class ResponsePolicy(BaseModel):
    """The scenario's P0-P3 data (docs/knowledge.md, the response policy)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    safety: dict[SafetyCategory, SafetyRule] = Field(default_factory=dict)
    objections: dict[ObjectionKind, Objection] = Field(default_factory=dict)
    generic_tip: GenericTip = Field(default_factory=GenericTip)


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
    policy: ResponsePolicy = Field(default_factory=ResponsePolicy)

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
