"""Scenario packs: the vendor, the items and prices, the culture's rules and the vendor's lines,
loaded from the package's folders `schemas/data/<scenario>/manifest.json` (docs/scenarios.md).

A pack that does not validate stops the server at start-up (`check_scenarios`) with an error
that names the file and the field, never at the first learner who opens it.

Versions (docs/studio.md): a shipped pack is version 1 of its scenario. The studio publishes later
versions (server/studio/), validated by the same `pack_problems`, and registers each one a session
uses with `register_version`; `load_scenario(name, version)` then serves it to every part that reads
the pack by name. A version never changes once published, so every cache here keys on both.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from schemas.enums import LanguageCode, Level
from schemas.pack import (
    HINT_KEYS,
    INVITE_FIELDS,
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
    check_thinking_sounds,
    check_turn_words,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "SCENARIO_ID",
    "GenericTip",
    "Item",
    "Objection",
    "Problem",
    "SafetyRule",
    "Scenario",
    "ScenarioError",
    "available_scenarios",
    "check_scenarios",
    "load_scenario",
    "newest_known",
    "pack_problems",
    "register_version",
    "scenario_versions",
]

DEFAULT_SCENARIO = "jaipur-bazaar"
SCENARIO_ID = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")  # a pack's id (`Scenario.scenario`), and its folder's name
MANIFEST = "manifest.json"
_FIELD = re.compile(r"{(\w+)}")
# A sentence's end, as the reply gate counts them (session/spoken.py): an invitation must be one
# sentence, since a beginner's level may say no more, and a cut invitation invites nothing.
_SENTENCE_END = re.compile(r"[.!?\u0964\u2026]+[\"'\u201d\u2019)\]]*(?:\s|$)")


class ScenarioError(ValueError):
    """A pack that cannot be used; the message names the file and the field."""


class Problem(NamedTuple):
    """One thing wrong with a pack: the field (`items[2].floor`, `lines.en-IN`) and what is wrong."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _refuse(problems: list[Problem]) -> None:
    """Raise every problem found at once, so that `pack_problems` can list each with its field."""
    if problems:
        raise PydanticCustomError("pack", "{summary}", {"summary": "; ".join(map(str, problems)),
                                                       "problems": tuple(problems)})


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
        problems = []
        if not self.wholesale[0] <= self.floor <= self.tourist_quote[1]:
            problems.append(Problem("floor", f"{self.name}: the floor {self.floor} must lie between the wholesale "
                                    f"price {self.wholesale[0]} and the opening quote {self.tourist_quote[1]}"))
        if not self.floor <= self.fair[1] <= self.tourist_quote[1]:
            problems.append(Problem("fair", f"{self.name}: the fair range must end between the floor "
                                    f"{self.floor} and the opening quote {self.tourist_quote[1]}"))
        _refuse(problems)
        return self


class Phrase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    meaning: str
    use: str


class Scenario(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str = Field(pattern=SCENARIO_ID.pattern)
    version: int = Field(1, ge=1)
    """Which version of the scenario this is: 1 for a shipped pack; the studio sets it on publishing
    (an author's manifest need not give it)."""
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
    thinking_sounds: dict[LanguageCode, tuple[str, ...]] = Field(default_factory=dict)
    """What the vendor says while he thinks ("Hmm...", "Accha..."), per language he speaks: with a
    voice, one is played when his reply is late (docs/voice.md, Thinking sounds). Optional: a pack
    without them plays none."""

    @model_validator(mode="after")
    def _complete(self) -> Scenario:
        problems: list[Problem] = []
        if self.vendor.languages[0] not in self.lines:
            problems.append(Problem("lines", f"no lines in the vendor's first language "
                                    f"{self.vendor.languages[0].value}"))
        for language, pools in self.lines.items():
            missing = [key for key in LINE_KEYS if not pools.get(key)]
            if missing:
                problems.append(Problem(f"lines.{language.value}", f"missing {', '.join(missing)}"))
            problems += _check_pools(f"lines.{language.value}", pools)
        for level, params in self.levels.items():
            for language, pools in params.lines.items():
                where = f"levels.{level.value}.lines.{language.value}"
                if language not in self.lines:
                    problems.append(Problem(where, "the vendor has no lines in this language to replace"))
                problems += _check_pools(where, pools)
        absent_levels = [level.value for level in Level if level not in self.levels]
        if absent_levels:
            problems.append(Problem("levels", f"missing {', '.join(absent_levels)}"))
        missing_hints = [key for key in HINT_KEYS if not self.hints.get(key)]
        if missing_hints:
            problems.append(Problem("hints", f"missing {', '.join(missing_hints)}"))
        missing_help = [key for key in HINT_KEYS if key not in self.coaching]
        if missing_help:
            problems.append(Problem("coaching", f"missing {', '.join(missing_help)}"))
        unknown_help = sorted(set(self.coaching) - set(HINT_KEYS))
        if unknown_help:
            problems.append(Problem("coaching", f"unknown situations {', '.join(unknown_help)}"))
        for where, table in (("fillers", self.fillers), ("backchannels", self.backchannels)):
            problems += [Problem(field, message) for field, message in
                         check_turn_words(where, table, self.vendor.languages)]
        problems += [Problem(field, message) for field, message in
                     check_thinking_sounds(self.thinking_sounds, self.vendor.languages)]
        absent = [c for c in SAFETY_CATEGORIES if c not in self.policy.safety]
        if absent:
            problems.append(Problem("policy.safety", f"missing {', '.join(absent)} (every pack answers every "
                                    f"category)"))
        _refuse(problems)
        return self

    def item(self, name: str | None) -> Item | None:
        """Look an item up by its English or local name, case-insensitively."""
        if not name:
            return None
        return _index(self.scenario, self.version).get(name.strip().lower())

    def lines_for(self, language: LanguageCode | None, level: Level = Level.INTERMEDIATE) -> dict[str, tuple[str, ...]]:
        """The vendor's lines in `language` (his first language when he has none in it), with the
        pools that `level` replaces."""
        return _lines(self.scenario, self.version, language if language in self.lines else self.vendor.languages[0],
                      level)


def _check_pools(where: str, pools: dict[str, tuple[str, ...]]) -> list[Problem]:
    problems: list[Problem] = []
    unknown = sorted(set(pools) - set(LINE_FIELDS))
    if unknown:
        problems.append(Problem(where, f"unknown pools {', '.join(unknown)}"))
    for key, pool in pools.items():
        if not pool:
            problems.append(Problem(f"{where}.{key}", "a pool needs at least one line"))
        for line in pool:
            extra = set(_FIELD.findall(line)) - LINE_FIELDS.get(key, frozenset())
            if extra and key in LINE_FIELDS:
                problems.append(Problem(f"{where}.{key}", f"{line!r} uses {', '.join(sorted(extra))}, which "
                                        f"this pool does not fill"))
            if key in INVITE_FIELDS and len(_SENTENCE_END.findall(line.strip())) > 1:
                problems.append(Problem(f"{where}.{key}", f"{line!r} is more than one sentence (an invitation "
                                        f"must be one, or a beginner hears it cut short)"))
    return problems


@cache
def _lines(scenario: str, version: int, language: LanguageCode, level: Level) -> dict[str, tuple[str, ...]]:
    pack = load_scenario(scenario, version)
    replaced = pack.levels[level].lines.get(language)
    return {**pack.lines[language], **replaced} if replaced else pack.lines[language]


@cache
def _index(scenario: str, version: int) -> dict[str, Item]:
    found: dict[str, Item] = {}
    for item in load_scenario(scenario, version).items:
        found[item.name.lower()] = item
        found[item.local.lower()] = item
    return found


@cache
def available_scenarios() -> tuple[str, ...]:
    """The packs shipped in the package: folders with a manifest (read once: package data does not change)."""
    folders = resources.files("schemas").joinpath("data").iterdir()
    return tuple(sorted(f.name for f in folders if f.is_dir() and f.joinpath(MANIFEST).is_file()))


def _field(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as an author reads it: `items[2].floor`, `lines.en-IN.hold`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def pack_problems(data: Any, *, version: int = 1) -> tuple[Scenario | None, tuple[Problem, ...]]:
    """Validate a manifest's data as `version` of its scenario: the pack, or every problem found,
    each naming its field. The shipped packs and every studio version go through here."""
    if not isinstance(data, dict):
        return None, (Problem("(top level)", "a manifest is a JSON object"),)
    try:
        return Scenario.model_validate({**data, "version": version}), ()
    except ValidationError as exc:
        problems: list[Problem] = []
        for error in exc.errors(include_url=False):
            where = _field(error["loc"])
            found = (error.get("ctx") or {}).get("problems") if error["type"] == "pack" else None
            if found:
                for problem in found:
                    field = problem.field if where == "(top level)" else f"{where}.{problem.field}"
                    problems.append(Problem(field, problem.message))
            else:
                problems.append(Problem(where, str(error["msg"]).removeprefix("Value error, ")))
        return None, tuple(problems)


def parse_manifest(text: str, where: str, *, version: int = 1) -> Scenario:
    """Validate a manifest's text; a `ScenarioError` names `where` and the field that is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{where}: not JSON: {exc}") from None
    scenario, problems = pack_problems(data, version=version)
    if scenario is None:
        raise ScenarioError(f"{where}: {'; '.join(map(str, problems[:5]))}")
    return scenario


# The versions the studio published that this process has met (server/studio/): a version is
# immutable, so one registered is never replaced; shipped packs are not here (they are version 1).
_published: dict[tuple[str, int], Scenario] = {}


def register_version(scenario: Scenario) -> Scenario:
    """Make `scenario` (a published version) what `load_scenario(its name, its version)` returns."""
    return _published.setdefault((scenario.scenario, scenario.version), scenario)


def scenario_versions() -> dict[tuple[str, int], Scenario]:
    """The registered published versions, by (scenario, version) (a copy)."""
    return dict(_published)


def newest_known(name: str) -> Scenario:
    """The newest version of `name` this process has registered, else the shipped pack (KeyError for
    neither): for the few readers that are not told a session's version (the number words of the
    vendor's languages, the scene recogniser's sentences), which every version of a scenario shares
    in practice."""
    versions = [v for (n, v) in _published if n == name]
    return _published[(name, max(versions))] if versions else _shipped(name)


def load_scenario(name: str = DEFAULT_SCENARIO, version: int = 1) -> Scenario:
    """Version `version` of scenario `name`: a registered published one, else the shipped pack (version
    1). KeyError when neither is known here."""
    found = _published.get((name, version))
    if found is not None:
        return found
    if version != 1:
        raise KeyError(f"{name} version {version}")
    return _shipped(name)


@cache
def _shipped(name: str) -> Scenario:
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
