"""Fluency figures (issue #36): one spoken turn's, on its `speech` event, and a session's, in its
report and its learner's progress. How they are measured: voice/fluency.py and docs/learning.md.

A `Fluency` holds sums (words, fillers, speaking and pause time, runs, turns), so a session's is
the sum of its turns' (`plus`), and the ratios are read off the sums: a two-word turn does not
weigh as much as a twenty-word one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, computed_field

__all__ = ["Fluency"]


class Fluency(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # `ignore`: a dump's computed figures read back

    turns: int = Field(default=1, ge=1)  # spoken turns summed
    words: int = Field(ge=0)  # fillers not counted
    fillers: int = Field(ge=0)
    speaking_ms: int = Field(ge=0)  # first word's start to last word's end, per turn
    pause_ms: int = Field(ge=0)  # silent pauses within that time
    runs: int = Field(ge=1)  # stretches of speech between pauses

    @computed_field  # type: ignore[prop-decorator]
    @property
    def words_per_minute(self) -> float:
        return round(self.words * 60_000 / self.speaking_ms, 1) if self.speaking_ms else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pause_ratio(self) -> float:
        return round(min(1.0, self.pause_ms / self.speaking_ms), 3) if self.speaking_ms else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_length_of_run(self) -> float:
        return round(self.words / self.runs, 2)

    def plus(self, other: Fluency) -> Fluency:
        return Fluency(turns=self.turns + other.turns, words=self.words + other.words,
                       fillers=self.fillers + other.fillers, speaking_ms=self.speaking_ms + other.speaking_ms,
                       pause_ms=self.pause_ms + other.pause_ms, runs=self.runs + other.runs)
