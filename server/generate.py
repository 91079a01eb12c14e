"""The seed's library interface: `generate_vendor_response()`, run through the same actor and rules.

Callers that import the function without running the server get a process-wide engine: each call
runs the session's actor for the duration of the call, and the session's state stays in memory
between calls.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.enums import LanguageCode, Stage
from schemas.frames import SceneFrame, TranscriptFrame
from session.actor import SessionBusy, SessionStopped
from session.registry import SessionRegistry

TURN_TIMEOUT_S = 60.0


class GenerateError(ValueError):
    """The call's arguments are invalid (the seed raises BrainServiceError for these)."""


class SceneContext(BaseModel):
    """What Unity reports. The server's state is authoritative: the score and stage are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    object_grabbed: str | None = Field(default=None, max_length=64)
    happiness_score: int = Field(default=50, ge=0, le=100)
    negotiation_state: Stage = Stage.GREETING
    input_language: LanguageCode = LanguageCode.EN_IN
    target_language: LanguageCode = LanguageCode.EN_IN


async def generate_with(
    registry: SessionRegistry,
    transcribed_text: str,
    context_block: str,
    rag_context: str,
    scene_context: dict[str, Any] | SceneContext | None,
    session_id: str,
) -> dict[str, Any]:
    try:
        scene = SceneContext.model_validate(scene_context or {})
    except ValidationError as exc:
        raise GenerateError(f"invalid scene_context: {exc}") from None
    if not transcribed_text or not transcribed_text.strip():
        raise GenerateError("transcribed_text is empty")
    actor = await registry.get(session_id)
    if actor is None:
        actor = registry.create(session_id=session_id, input_language=scene.input_language,
                                target_language=scene.target_language)
    if scene.object_grabbed != actor.negotiation.object_grabbed and not actor.negotiation.is_terminal:
        actor.submit(None, SceneFrame(type="scene", id=f"lib-scene-{uuid.uuid4().hex[:16]}",
                                      object_grabbed=scene.object_grabbed,
                                      input_language=scene.input_language,
                                      target_language=scene.target_language))
    frame = TranscriptFrame(type="transcript", id=f"lib-{uuid.uuid4().hex[:20]}", text=transcribed_text)
    try:
        reply = await actor.reply_to(frame, within=TURN_TIMEOUT_S, rag_context=rag_context or "",
                                     context_block=context_block or "")
    except SessionBusy as exc:
        raise GenerateError(str(exc)) from None
    except SessionStopped as exc:
        raise RuntimeError(str(exc)) from None
    return {
        "reply_text": reply.text,
        "happiness_score": reply.happiness_score,
        "negotiation_state": reply.negotiation_state.value,
        "vendor_mood": reply.vendor_mood.value,
        "suggested_user_response": reply.suggested_user_response,
    }


_engine: SessionRegistry | None = None


def _library_registry() -> SessionRegistry:
    global _engine
    if _engine is None:
        from brain.policy import with_policy
        from server.config import load_settings
        from server.wiring import build_brain
        from session.mirror import MemoryMirror
        from session.rules import Limits

        settings = load_settings()
        _engine = SessionRegistry(
            with_policy(build_brain(settings)), MemoryMirror(),
            limits=Limits(max_mood_delta=settings.MAX_MOOD_DELTA, max_turns=settings.MAX_TURNS,
                          wrap_up_after=settings.WRAP_UP_AFTER_TURN),
        )
    return _engine


async def generate_vendor_response(
    transcribed_text: str,
    context_block: str,
    rag_context: str,
    scene_context: dict[str, Any] | SceneContext | None,
    session_id: str,
    *,
    registry: SessionRegistry | None = None,
) -> dict[str, Any]:
    """Answer one learner utterance as Ramesh; returns the seed's keys plus suggested_user_response."""
    if registry is not None:
        return await generate_with(registry, transcribed_text, context_block, rag_context,
                                   scene_context, session_id)
    engine = _library_registry()
    async with anyio.create_task_group() as tg:
        await tg.start(functools.partial(engine.run, keep_actors=True))
        try:
            result = await generate_with(engine, transcribed_text, context_block, rag_context,
                                         scene_context, session_id)
        finally:
            tg.cancel_scope.cancel()
    return result
