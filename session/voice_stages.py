"""A spoken turn's stages before its transcript, kept until the turn's reply takes them (issue #34).

The transcriber posts what it heard (`Recognised`) with how long the end of the turn and the
recognition took; the turn's reply gets them in its `timings` (session/asks.py). Most sessions are
typed, so nothing is allocated until the first spoken turn, and a transcript that never made a turn
(a duplicate, one refused) is pushed out by the newer ones: at most `KEPT` wait.
"""

from __future__ import annotations

from session.messages import Recognised, VoiceStages

__all__ = ["KEPT", "VoiceStageLog"]

KEPT = 4  # spoken turns' stages waiting for their replies (a transcriber queues as many)


class VoiceStageLog:
    __slots__ = ("_stages",)

    def __init__(self) -> None:
        self._stages: dict[str, VoiceStages] | None = None

    def keep(self, heard: Recognised) -> None:
        """A final transcript's stages, by its utterance id (a partial has none of its own)."""
        if heard.partial:
            return
        stages = self._stages
        if stages is None:
            stages = self._stages = {}
        elif len(stages) >= KEPT:
            del stages[next(iter(stages))]  # the oldest: its transcript never made a turn
        stages[heard.id] = VoiceStages(heard.end_of_turn_ms, heard.stt_ms, heard.stt)

    def take(self, utterance_id: str | None) -> VoiceStages | None:
        """The stages of the utterance a reply answers, once (None for a typed turn)."""
        if not self._stages or utterance_id is None:
            return None
        return self._stages.pop(utterance_id, None)

    def __len__(self) -> int:
        return len(self._stages) if self._stages else 0
