"""The response policy, P0 to P3, and speakable replies: routing, the rule brain over a real
server, and the LLM brain through the real SDK against the fake OpenAI server (which counts calls)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets

from brain.policy import INSULT_DROP, route
from session.spoken import speakable
from tests.openai_server import FakeOpenAI, reply
from tests.servers import running_server
from tests.test_llm_e2e import decision, new_session, rest, samvad, say

pytestmark = pytest.mark.anyio
COLLECT_GARBAGE_AFTER = True  # see tests/test_llm_e2e.py
ADMIN = "teacher-key-" + "p" * 24

P0_LINES = [
    ("abuse", "You are an idiot, bhaiya"),
    ("abuse", "Chor ho tum, kamina"),
    ("sexual", "you look sexy today"),
    ("self_harm", "Honestly I want to die, nothing matters"),
    ("self_harm", "main marna chahta hoon"),
    ("legal", "Can you give me legal advice about my landlord?"),
    ("medical", "What medicine should I take for my symptoms?"),
    ("financial", "Should I invest in crypto, bhaiya?"),
]


# --------------------------------------------------------------------------- routing


@pytest.mark.parametrize(("category", "text"), P0_LINES)
def test_each_safety_category_is_recognised(category: str, text: str) -> None:
    chosen = route("jaipur-bazaar", text)
    assert (chosen.policy, chosen.name) == ("P0", category)


@pytest.mark.parametrize(("kind", "text"), [
    ("too_expensive", "Bahut mehenga hai bhaiya"),
    ("too_expensive", "That's too expensive for tomatoes"),
    ("cheaper_elsewhere", "I saw it for less at the next stall"),
    ("come_back_later", "Let me think about it, I'll come back later"),
])
def test_objections_are_recognised(kind: str, text: str) -> None:
    chosen = route("jaipur-bazaar", text)
    assert (chosen.policy, chosen.name) == ("P2", kind)


def test_ordinary_words_and_near_misses_trigger_nothing() -> None:
    for text in ("Namaste bhaiya, tamatar kitne ka hai?", "The sussex tomatoes", "a doctorate in tomatoes",
                 "pursue a bargain", "Okay 60 rupees, pakka", "is that shareable?"):
        assert route("jaipur-bazaar", text).policy == "", text  # whole words only
    assert route("jaipur-bazaar", "I will investigate").name == "financial"  # `invest*` takes any ending
    assert route("nowhere", "idiot").policy == ""


def test_self_harm_comes_before_abuse() -> None:
    assert route("jaipur-bazaar", "you idiot, I want to kill myself").name == "self_harm"


# --------------------------------------------------------------------------- speakable lines


def test_every_fixed_line_of_the_pack_is_speakable_as_written() -> None:
    from schemas.scenario import load_scenario

    policy = load_scenario("jaipur-bazaar").policy
    lines = [line for rule in policy.safety.values() for line in rule.lines]
    lines += [t.format(item="tomatoes", price=60) for o in policy.objections.values() for t in o.templates]
    for line in lines:
        assert speakable(line) == (line, ()), line


# --------------------------------------------------------------------------- the rule brain


async def play(base: str, ws_base: str, lines: list[str]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=base) as client:
        created = (await client.post("/api/sessions", json={})).json()
    url = f"{ws_base}/ws/sessions/{created['session_id']}?token={created['player_token']}"
    replies = []
    async with websockets.connect(url, subprotocols=["samvad.v1.json"]) as ws:  # type: ignore[list-item]
        json.loads(await ws.recv())
        for n, line in enumerate(lines, 1):
            frames = await say(ws, f"t{n}", line)
            replies.append(frames[-1])
    return replies


async def test_rule_brain_p0_lines_and_their_effects() -> None:
    async with running_server() as served:
        for category, text in P0_LINES:
            first, answer = await play(served.base_url, served.ws_base, ["Namaste bhaiya", text])
            assert answer["policy"] == "P0", (category, answer)
            assert answer["negotiation_state"] == first["negotiation_state"]
            if category in ("abuse", "sexual"):
                assert answer["happiness_score"] == first["happiness_score"] - INSULT_DROP
                assert answer["offer_assessment"] == "insult"
            else:
                assert answer["happiness_score"] == first["happiness_score"]
            if category == "self_harm":
                assert "not alone" in answer["text"] and "rupees" not in answer["text"]


async def test_rule_brain_objections_get_the_packs_templates_and_the_rest_is_p3() -> None:
    async with running_server() as served:
        greet, quote, pushback, plain = await play(served.base_url, served.ws_base, [
            "Namaste bhaiya", "Tamatar kitne ka hai?", "Bahut mehenga hai bhaiya", "Okay, and the apples?"])
        assert greet["policy"] == quote["policy"] == plain["policy"] == "P3"
        assert pushback["policy"] == "P2" and pushback["sources"] == []
        assert any(word in pushback["text"] for word in ("Mehenga?", "Expensive, you say?", "good things cost"))
        assert pushback["flags"] == [] or "too_long" not in pushback["flags"]
        # A new price the vendor does not say does not move (issue #12: what is not heard does not bind).
        assert str(pushback["counter_price"]) in pushback["text"] or pushback["counter_price"] == quote["counter_price"]


# --------------------------------------------------------------------------- the LLM brain


async def test_llm_p0_makes_no_model_call(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("Namaste ji, come, come!", 55, "GREETING")))
    async with samvad(openai_fake) as host:
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            json.loads(await ws.recv())
            await say(ws, "t0", "Namaste bhaiya")
            calls = len(openai_fake.requests)
            for n, (category, text) in enumerate(P0_LINES, 1):
                answer = (await say(ws, f"t{n}", text))[-1]
                assert answer["policy"] == "P0" and answer["timings"]["llm_calls"] == 0, category
            assert len(openai_fake.requests) == calls == 1


async def test_llm_p1_grounded_in_an_uploaded_playbook_and_p3_for_what_is_absent(
        openai_fake: FakeOpenAI, tmp_path: Any) -> None:
    playbook = (b"Q: Does Ramesh take old coins?\nA: Ramesh gives a five rupee discount for payment "
                b"in old brass coins, a custom of his grandfather's stall.\n\n"
                b"Q: When does the cart close?\nA: At the evening aarti bell.")
    openai_fake.script(
        reply(decision("Haan ji, brass coins get five rupees off at my cart.", 55, "GREETING")),
        reply(decision("Weather? Hot as always, ji. Tomatoes?", 55, "GREETING")),
        reply(decision("**Tomatoes!** See https://ramesh.in. One. Two. Three.", 55, "INQUIRY", 120)),
    )
    async with samvad(openai_fake, ADMIN_KEY=ADMIN, KNOWLEDGE_DIR=str(tmp_path)) as host:
        async with httpx.AsyncClient(base_url=f"http://{host}") as client:
            up = await client.post("/api/scenarios/jaipur-bazaar/knowledge", files={"file": ("gold.txt", playbook)},
                                   headers={"authorization": f"Bearer {ADMIN}"})
            assert up.status_code == 201
            coins = up.json()["chunks"][0]["chunk_id"]
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            json.loads(await ws.recv())
            grounded = (await say(ws, "t1", "Do you give a discount for old brass coins?"))[-1]
            tips = (await rest(ws, "tips"))[-1]
            absent = (await say(ws, "t2", "What is the weather in Tokyo?"))[-1]
            generic = (await rest(ws, "tips"))[-1]
            messy = (await say(ws, "t3", "Tamatar kitne ka hai?"))[-1]
    assert grounded["policy"] == "P1" and grounded["sources"][0] == coins
    sent = openai_fake.requests[0].user
    assert "brass coins" in sent and "aarti" not in sent  # only the chunks retrieved for this turn
    assert tips["cards"][0]["grounded"] and tips["cards"][0]["source_chunk_ids"] == [coins]
    assert "five rupee discount" in tips["cards"][0]["body"]
    assert absent["policy"] == "P3" and absent["sources"] == []
    assert "(no notes for this turn)" in openai_fake.requests[1].user
    assert [(c["grounded"], c["type"]) for c in generic["cards"]] == [(False, "generic")]
    assert messy["text"] == "Tomatoes! One." and set(messy["flags"]) >= {"markdown", "link", "too_long"}


async def test_a_streamed_reply_cut_to_two_sentences_is_not_withdrawn(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("Namaste ji! Come, come. Everything is fresh today.", 55, "GREETING"),
                             ttft_ms=10, tokens_per_s=400))
    async with samvad(openai_fake) as host:
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            json.loads(await ws.recv())
            frames = await say(ws, "t1", "Namaste bhaiya")
    kinds = [f["type"] for f in frames]
    assert "reply.delta" in kinds and "reply.withdrawn" not in kinds
    final = frames[-1]
    assert final["text"] == "Namaste ji! Come, come." and "too_long" in final["flags"]
    assert final["withdrawn_stream"] is False


async def test_llm_p2_gets_the_objection_templates_as_guidance_when_no_knowledge_matches(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("Namaste ji!", 55, "GREETING")),
                       reply(decision("Later? The good tomatoes will be gone by then, ji.", 55, "GREETING")))
    async with samvad(openai_fake) as host:
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            json.loads(await ws.recv())
            await say(ws, "t1", "Namaste bhaiya")
            later = (await say(ws, "t2", "maybe later"))[-1]
    assert later["policy"] == "P2" and later["sources"] == []
    sent = openai_fake.requests[1].user
    assert "known objection" in sent and "{item}" not in sent and "{price}" not in sent
    assert "Later the good" in sent or "Think, think" in sent  # the pack's come_back_later templates
    assert "(no notes for this turn)" in sent


def test_the_policy_declares_the_parts_of_the_brain_it_wraps_and_answers_inline_only_for_an_inline_brain() -> None:
    from brain.policy import InstantPolicyBrain, PolicyBrain, with_policy
    from brain.rules_vendor import RuleBasedVendor
    from tests.fakes import ScriptedBrain
    from tests.llm_support import request

    rules = with_policy(RuleBasedVendor())
    assert isinstance(rules, InstantPolicyBrain) and rules.propose_inline is not None
    assert rules.write_summary is None and rules.summarize is None
    asked = request(transcript="Namaste bhaiya! Tamatar kitne ka hai?")
    assert rules.propose_inline(asked).decision == RuleBasedVendor().propose_now(asked).decision
    scripted = with_policy(ScriptedBrain())
    assert type(scripted) is PolicyBrain and scripted.propose_inline is None and scripted.write_summary is None
    assert with_policy(scripted).propose_inline is None  # a policy is a brain like any other
