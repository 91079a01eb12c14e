"""The seed's library interface runs through the same actor and rules."""

from __future__ import annotations

import httpx
import pytest

from schemas.enums import Stage
from server.app import create_app
from server.config import load_settings
from server.generate import GenerateError, generate_vendor_response
from session.mirror import MemoryMirror
from session.registry import SessionRegistry
from tests.fakes import ScriptedBrain, decision

pytestmark = pytest.mark.anyio
KEYS = {"reply_text", "happiness_score", "negotiation_state", "vendor_mood", "suggested_user_response"}


async def test_the_function_keeps_state_between_calls_and_clamps_proposals() -> None:
    import anyio

    brain = ScriptedBrain(lambda r: decision("Tomatoes, 150!", 99, Stage.INQUIRY if r.turn == 1 else Stage.DEAL,
                                             counter_price=150, suggested_user_response="Say: 60?"))
    registry = SessionRegistry(brain, MemoryMirror())
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        first = await generate_vendor_response("Bhaiya ye tomato kitne ka hai?", "", "", {"object_grabbed": "Tomato"},
                                               "lib-1", registry=registry)
        assert set(first) == KEYS
        assert first["negotiation_state"] == "INQUIRY" and first["happiness_score"] == 65
        assert first["suggested_user_response"] == "Say: 60?"
        second = await generate_vendor_response("ok", "", "", {}, "lib-1", registry=registry)
        assert second["negotiation_state"] == "INQUIRY"  # INQUIRY -> DEAL is illegal
        assert brain.requests[0].object_grabbed == "Tomato" and brain.requests[1].turn == 2
        tg.cancel_scope.cancel()


async def test_context_block_and_rag_context_reach_the_brain() -> None:
    import anyio

    brain = ScriptedBrain()
    registry = SessionRegistry(brain, MemoryMirror())
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        await generate_vendor_response("hi", "user: hello", "Say bhaiya.", None, "lib-2", registry=registry)
        assert brain.requests[0].context_block == "user: hello" and brain.requests[0].rag_context == "Say bhaiya."
        with pytest.raises(GenerateError):
            await generate_vendor_response("hi", "", "", {"negotiation_state": "NOPE"}, "lib-2", registry=registry)
        tg.cancel_scope.cancel()


async def test_the_standalone_function_uses_the_embedded_vendor() -> None:
    result = await generate_vendor_response("Namaste bhaiya", "", "", None, "standalone-1")
    assert set(result) == KEYS and result["reply_text"]
    scene = {"object_grabbed": "Tomato"}
    again = await generate_vendor_response("tamatar kitne ka hai?", "", "", scene, "standalone-1")
    assert again["negotiation_state"] in ("GREETING", "INQUIRY")


async def test_the_dev_endpoint_is_off_by_default_and_works_when_enabled() -> None:
    body = {"transcribed_text": "Namaste", "context_block": "", "rag_context": "", "scene_context": {},
            "session_id": "dev-1"}
    for enabled, status in ((False, 404), (True, 200)):
        app = create_app(load_settings(SAMVAD_SECRET="x" * 40, DEV_ENDPOINTS=enabled), brain=ScriptedBrain())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                response = await client.post("/api/dev/generate", json=body)
                assert response.status_code == status
                if enabled:
                    assert set(response.json()) == KEYS
                    bad = await client.post("/api/dev/generate", json={**body, "session_id": "bad id!"})
                    assert bad.status_code == 422
