"""Scenario packs: the vendor, the items and prices, the culture's rules and the vendor's lines,
loaded from the package's folders `schemas/data/<scenario>/manifest.json` (docs/scenarios.md).

A pack that does not validate stops the server at start-up (`check_scenarios`) with an error
that names the file and the field, never at the first learner who opens it.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from schemas.enums import LanguageCode, Level
from schemas.pack import (
    HINT_KEYS,
    LINE_FIELDS,
    LINE_KEYS,
    SAFETY_CATEGORIES,
    Cues,
    GenericTip,
    HintHelp,
    LevelParams,
    Objection,
    Persona,
    ResponsePolicy,
    Returning,
    RuleParams,
    SafetyRule,
    check_turn_words,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "GenericTip",
    "Item",
    "Objection",
    "SafetyRule",
    "Scenario",
    "ScenarioError",
    "available_scenarios",
    "check_scenarios",
    "load_scenario",
]

DEFAULT_SCENARIO = "jaipur-bazaar"
MANIFEST = "manifest.json"
_FIELD = re.compile(r"{(\w+)}")


class ScenarioError(ValueError):
    """A pack that cannot be used; the message names the file and the field."""


class Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str
    local: str = Field(validation_alias=AliasChoices("local", "hindi"))
    """The item's name in the place's language, as learners say it (tamatar, kyusu, tajine)."""
    unit: str
    wholesale: tuple[int, int]
    fair: tuple[int, int]
    tourist_quote: tuple[int, int]
    floor: int
    in_scene: bool = False
    estimate: bool = False
    quality: str = ""
    note: str = ""
    spoken: str = ""
    """How the vendor says the item in a sentence ("tomatoes", "tea bowls"); "<name>s" if empty."""
    unit_word: str = ""
    """How the vendor says the unit ("kilo" for kg); the unit itself if empty."""

    @property
    def opening_quote(self) -> int:
        """The first price an outsider hears: the top of the tourist range."""
        return self.tourist_quote[1]

    @model_validator(mode="after")
    def _prices(self) -> Item:
        if not self.wholesale[0] <= self.floor <= self.tourist_quote[1]:
            raise ValueError(f"{self.name}: the floor {self.floor} must lie between the wholesale "
                             f"price and the opening quote")
        if not self.floor <= self.fair[1] <= self.tourist_quote[1]:
            raise ValueError(f"{self.name}: the fair range must end between the floor and the opening quote")
        return self


class Phrase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    meaning: str
    use: str


class Scenario(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    title: str
    vendor: Persona
    currency: str
    currency_word: str = Field(min_length=1)
    """How the vendor says the currency in a sentence: rupees, yen, dirhams."""
    goods: str = Field(min_length=1)
    """What the vendor calls his wares when no item is chosen: vegetables, antiques, lamps."""
    default_quality: str = Field(min_length=1)
    """What he says of an item's quality when the catalog has no words for it."""
    items: tuple[Item, ...] = Field(min_length=1)
    haggling: dict[str, tuple[float, float]] = Field(default_factory=dict)
    phrases: tuple[Phrase, ...] = Field(default_factory=tuple)
    customs: tuple[str, ...] = Field(default_factory=tuple)
    rules: RuleParams = Field(default_factory=RuleParams)
    cues: Cues = Field(default_factory=Cues)
    lines: dict[LanguageCode, dict[str, tuple[str, ...]]]
    """The rule-based vendor's lines, per language and pool (`schemas.pack.LINE_KEYS`)."""
    hints: dict[str, str]
    """What the learner could say next, by situation (`schemas.pack.HINT_KEYS`), in the phrases the
    culture expects."""
    policy: ResponsePolicy
    coaching: dict[str, HintHelp]
    """What the `hint` command says, by situation (`schemas.pack.HINT_KEYS`)."""
    levels: dict[Level, LevelParams]
    """What each learner level changes (every level must be given)."""
    returning: Returning = Field(default_factory=Returning)
    """How a known learner's last session here sets the vendor's starting mood (docs/memory.md)."""
    fillers: dict[LanguageCode, tuple[str, ...]]
    """What a learner says while finding the next word ("umm", "matlab", "eto"), per language the
    vendor speaks: a turn that stops on one is waited for longer (voice/turn_end.py)."""
    backchannels: dict[LanguageCode, tuple[str, ...]]
    """What a listener says to show he follows ("haan", "accha", "hmm", "ji"), per language the
    vendor speaks: said while the vendor talks, it does not stop him (voice/barge_in.py)."""

    @model_validator(mode="after")
    def _complete(self) -> Scenario:
        if self.vendor.languages[0] not in self.lines:
            raise ValueError(f"lines: no lines in the vendor's first language {self.vendor.languages[0].value}")
        for language, pools in self.lines.items():
            missing = [key for key in LINE_KEYS if not pools.get(key)]
            if missing:
                raise ValueError(f"lines.{language.value}: missing {', '.join(missing)}")
            _check_pools(f"lines.{language.value}", pools)
        for level, params in self.levels.items():
            for language, pools in params.lines.items():
                if language not in self.lines:
                    raise ValueError(f"levels.{level.value}.lines.{language.value}: the vendor has no lines "
                                     f"in this language to replace")
                _check_pools(f"levels.{level.value}.lines.{language.value}", pools)
        absent_levels = [level.value for level in Level if level not in self.levels]
        if absent_levels:
            raise ValueError(f"levels: missing {', '.join(absent_levels)}")
        missing_hints = [key for key in HINT_KEYS if not self.hints.get(key)]
        if missing_hints:
            raise ValueError(f"hints: missing {', '.join(missing_hints)}")
        missing_help = [key for key in HINT_KEYS if key not in self.coaching]
        if missing_help:
            raise ValueError(f"coaching: missing {', '.join(missing_help)}")
        unknown_help = sorted(set(self.coaching) - set(HINT_KEYS))
        if unknown_help:
            raise ValueError(f"coaching: unknown situations {', '.join(unknown_help)}")
        check_turn_words("fillers", self.fillers, self.vendor.languages)
        check_turn_words("backchannels", self.backchannels, self.vendor.languages)
        absent = [c for c in SAFETY_CATEGORIES if c not in self.policy.safety]
        if absent:
            raise ValueError(f"policy.safety: missing {', '.join(absent)} (every pack answers every category)")
        return self

    def item(self, name: str | None) -> Item | None:
        """Look an item up by its English or local name, case-insensitively."""
        if not name:
            return None
        return _index(self.scenario).get(name.strip().lower())

    def lines_for(self, language: LanguageCode | None, level: Level = Level.INTERMEDIATE) -> dict[str, tuple[str, ...]]:
        """The vendor's lines in `language` (his first language when he has none in it), with the
        pools that `level` replaces."""
        return _lines(self.scenario, language if language in self.lines else self.vendor.languages[0], level)


def _check_pools(where: str, pools: dict[str, tuple[str, ...]]) -> None:
    unknown = sorted(set(pools) - set(LINE_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown pools {', '.join(unknown)}")
    for key, pool in pools.items():
        if not pool:
            raise ValueError(f"{where}.{key}: a pool needs at least one line")
        for line in pool:
            extra = set(_FIELD.findall(line)) - LINE_FIELDS[key]
            if extra:
                raise ValueError(f"{where}.{key}: {line!r} uses "
                                 f"{', '.join(sorted(extra))}, which this pool does not fill")


@cache
def _lines(scenario: str, language: LanguageCode, level: Level) -> dict[str, tuple[str, ...]]:
    pack = load_scenario(scenario)
    replaced = pack.levels[level].lines.get(language)
    return {**pack.lines[language], **replaced} if replaced else pack.lines[language]


@cache
def _index(scenario: str) -> dict[str, Item]:
    found: dict[str, Item] = {}
    for item in load_scenario(scenario).items:
        found[item.name.lower()] = item
        found[item.local.lower()] = item
    return found


@cache
def available_scenarios() -> tuple[str, ...]:
    """The packs shipped in the package: folders with a manifest (read once: package data does not change)."""
    folders = resources.files("schemas").joinpath("data").iterdir()
    return tuple(sorted(f.name for f in folders if f.is_dir() and f.joinpath(MANIFEST).is_file()))


def parse_manifest(text: str, where: str) -> Scenario:
    """Validate a manifest's text; a `ScenarioError` names `where` and the field that is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{where}: not JSON: {exc}") from None
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(top level)'}: {error['msg']}"
            for error in exc.errors(include_url=False)[:5]
        )
        raise ScenarioError(f"{where}: {problems}") from None


@cache
def load_scenario(name: str = DEFAULT_SCENARIO) -> Scenario:
    if name not in available_scenarios():
        raise KeyError(name)
    where = f"schemas/data/{name}/{MANIFEST}"
    scenario = parse_manifest(resources.files("schemas").joinpath("data", name, MANIFEST).read_text("utf-8"), where)
    if scenario.scenario != name:
        raise ScenarioError(f"{where}: scenario: {scenario.scenario!r} is not the folder's name {name!r}")
    return scenario


def check_scenarios() -> tuple[Scenario, ...]:
    """Load every pack now; the first broken one raises `ScenarioError` naming its file and field."""
    return tuple(load_scenario(name) for name in available_scenarios())
