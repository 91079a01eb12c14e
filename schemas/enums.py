"""Closed vocabularies shared by every layer: stages, moods, offer labels, languages, roles."""

from __future__ import annotations

from enum import Enum


class Stage(str, Enum):
    GREETING = "GREETING"
    INQUIRY = "INQUIRY"
    HAGGLING = "HAGGLING"
    DEAL = "DEAL"
    WALKAWAY = "WALKAWAY"
    CLOSURE = "CLOSURE"

    @property
    def is_terminal(self) -> bool:
        return self in (Stage.DEAL, Stage.CLOSURE)


class Mood(str, Enum):
    ANGRY = "angry"
    ANNOYED = "annoyed"
    NEUTRAL = "neutral"
    FRIENDLY = "friendly"
    ENTHUSIASTIC = "enthusiastic"


class OfferAssessment(str, Enum):
    INSULT = "insult"
    LOWBALL = "lowball"
    FAIR = "fair"
    GOOD = "good"
    EXCELLENT = "excellent"
    NONE = "none"


class LanguageCode(str, Enum):
    HI_IN = "hi-IN"
    KN_IN = "kn-IN"
    TA_IN = "ta-IN"
    EN_IN = "en-IN"
    HI_EN = "hi-EN"
    EN = "en"  # English, no region: the language of the non-Indian scenario packs' vendor lines
    JA_JP = "ja-JP"
    AR_MA = "ar-MA"
    FR_MA = "fr-MA"


class Role(str, Enum):
    PLAYER = "player"
    SPECTATOR = "spectator"


class Outcome(str, Enum):
    """How a negotiation ended; `None` on a snapshot means it has not."""

    DEAL = "deal"
    WALKED_AWAY = "walked_away"
    NO_DEAL = "no_deal"
    TURN_LIMIT = "turn_limit"
    STOPPED = "stopped"  # the learner sent the `stop` command
    TIMED_OUT = "timed_out"  # MAX_CONSECUTIVE_TIMEOUTS silences in a row (docs/coaching.md)


class Level(str, Enum):
    """The learner's level, chosen at session creation; its effects are scenario data (`levels`)."""

    BEGINNER = "beginner"
    INTERMEDIATE = "intermediate"
    ADVANCED = "advanced"
