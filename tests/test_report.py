"""The learner report: its event after the end, GET /api/sessions/{id}/report (JSON and the printable
page), its score and suggestions, and the cards earned."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets

from clients.bots.personas import PERSONAS, LearnerView
from schemas.report import Etiquette, Price
from session.report import score
from tests.servers import running_server

pytestmark = pytest.mark.anyio


async def play(base: str, ws_base: str, persona_name: str, item: str = "Tomato",
               scenario: str = "jaipur-bazaar") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A bot persona plays one session to its end; returns the session and every frame seen."""
    async with httpx.AsyncClient(base_url=base) as client:
        created = (await client.post("/api/sessions", json={"scenario": scenario, "learner_id": "asha"})).json()
    persona = PERSONAS[persona_name](item, scenario)
    frames: list[dict[str, Any]] = []
    url = f"{ws_base}/ws/sessions/{created['session_id']}?token={created['player_token']}"
    async with websockets.connect(url, subprotocols=["samvad.v1.json"]) as ws:  # type: ignore[list-item]
        frames.append(json.loads(await ws.recv()))
        await ws.send(json.dumps({"type": "scene", "id": "s1", "object_grabbed": item}))
        view = LearnerView()
        for n in range(40):
            await ws.send(json.dumps({"type": "transcript", "id": f"t{n}", "text": persona.next_line(view)}))
            while True:
                frame = json.loads(await ws.recv())
                frames.append(frame)
                if frame["type"] == "reply":
                    view = LearnerView.from_reply(frame)
                done_with_turn = frame["type"] == "tips" and not view.is_over
                if done_with_turn or frame["type"] == "session.report":
                    break
            if frame["type"] == "session.report":
                break
    return created, frames


async def test_a_deal_ends_with_a_report_that_the_api_serves_too() -> None:
    async with running_server() as served:
        created, frames = await play(served.base_url, served.ws_base, "polite")
        sid, token = created["session_id"], created["player_token"]
        async with httpx.AsyncClient(base_url=served.base_url) as client:
            got = await client.get(f"/api/sessions/{sid}/report", headers={"authorization": f"Bearer {token}"})
            page = await client.get(f"/api/sessions/{sid}/report?token={created['spectator_token']}",
                                    headers={"accept": "text/html"})
            anonymous = await client.get(f"/api/sessions/{sid}/report")
    kinds = [f["type"] for f in frames]
    assert kinds.index("session.ended") < kinds.index("session.report") == len(kinds) - 1
    event = frames[-1]["report"]
    assert got.status_code == 200 and got.json() == event  # the same report by both routes
    report = event
    assert report["outcome"] == "deal" and report["item"] == "Tomato"
    price = report["price"]
    assert price["paid"] is not None and price["first_quote"] > price["paid"] >= price["floor"]
    assert price["fair"] == [40, 60] and price["versus_fair"] in ("below", "within", "above")
    assert [p["turn"] for p in report["curve"]] == list(range(1, report["turns"] + 1))
    assert any(p["offer"] is not None for p in report["curve"])
    assert all(p["offer_read_from"] for p in report["curve"] if p["offer"] is not None)
    assert sum(s["turns"] for s in report["stages"]) == report["turns"]
    assert report["stages"][0]["stage"] == "GREETING" and report["stages"][-1]["stage"] == "DEAL"
    assert report["etiquette"]["respectful_turns"] >= 1 and "bhaiya" in report["etiquette"]["respectful_words"]
    assert report["score"] == sum(report["score_parts"].values()) and 0 <= report["score"] <= 100
    assert len(report["suggestions"]) == 3 and all(report["suggestions"])
    assert report["cards_earned"] and all(c["source_chunk_ids"] for c in report["cards_earned"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert html.count("<svg") == 2 and "Concession curve" in html and f'data-score="{report["score"]}"' in html
    assert report["suggestions"][0].replace('"', "&quot;") in html
    assert anonymous.status_code == 401


async def test_a_live_session_has_no_report_yet_and_walking_out_still_gets_one() -> None:
    async with running_server() as served, httpx.AsyncClient(base_url=served.base_url) as client:
        created = (await client.post("/api/sessions", json={})).json()
        live = await client.get(f"/api/sessions/{created['session_id']}/report",
                                headers={"authorization": f"Bearer {created['player_token']}"})
        assert (live.status_code, live.json()["error"]["code"]) == (409, "not_ended")
        _, frames = await play(served.base_url, served.ws_base, "rude", "Apple")
    report = frames[-1]["report"]
    assert report["outcome"] != "deal" and report["price"]["paid"] is None
    assert report["etiquette"]["insults"] >= 1 or report["score_parts"]["manners"] < 15
    assert report["etiquette"]["taboo"] >= 1  # the rude persona calls the goods rotten
    assert any("insult" in s or "polite" in s or "respect" in s for s in report["suggestions"])


def test_the_score_follows_its_documented_formula() -> None:
    etiquette = Etiquette(respectful_turns=2, respectful_words=("bhaiya",), insults=1, taboo=0, lowballs=1,
                          walked_away=False, came_back=False)
    at_floor = Price(paid=40, first_quote=120, fair=(40, 60), floor=35, discount_pct=66.7, versus_fair="within")
    assert score(at_floor, etiquette, 4, 70) == {"price": 40, "respect": 12, "goodwill": 14, "manners": 8}
    top_of_fair = at_floor.model_copy(update={"paid": 60})
    assert score(top_of_fair, etiquette, 4, 70)["price"] == 30
    halfway_up = at_floor.model_copy(update={"paid": 90})
    assert score(halfway_up, etiquette, 4, 70)["price"] == 15
    no_deal = at_floor.model_copy(update={"paid": None})
    assert score(no_deal, etiquette, 0, 0) == {"price": 0, "respect": 0, "goodwill": 0, "manners": 8}


def test_an_ended_sessions_figures_are_kept_only_while_it_is_unchanged() -> None:
    from schemas.enums import Outcome
    from session import report
    from session.negotiation import Negotiation

    def fresh(n: Negotiation) -> tuple[Any, ...]:
        report._kept = None
        return report.report_figures(n)

    n = Negotiation(session_id="memo-1", scenario_name="jaipur-bazaar", created_at=0.0)
    n.outcome, n.happiness = Outcome.DEAL, 40
    first = report.report_figures(n)
    again = report.report_figures(n)
    assert again == first
    again[2]["rapport"] = -999  # each caller gets its own parts
    assert report.report_figures(n)[2] == first[2]
    n.happiness = 95  # a change the key sees: worked out again
    assert report.report_figures(n) == fresh(n) != first
    other = Negotiation(session_id="memo-2", scenario_name="jaipur-bazaar", created_at=0.0)
    other.outcome, other.happiness = Outcome.WALKED_AWAY, 40
    assert report.report_figures(other) == fresh(other)


def test_an_ended_sessions_estimate_is_kept_only_while_what_it_reads_is_unchanged() -> None:
    from schemas.enums import Outcome
    from session.level_estimate import estimate
    from session.negotiation import Negotiation
    from session.report import ended_estimate

    n = Negotiation(session_id="memo-3", scenario_name="jaipur-bazaar", created_at=0.0)
    n.begin_turn("Namaste bhaiya, tamatar kitne ka hai?", None, 1.0)
    n.outcome = Outcome.DEAL
    first = ended_estimate(n)
    assert first is not None and first == estimate(n)
    assert ended_estimate(n) is first  # asked again unchanged: the same answer, not worked out again
    n.coaching.hints = (2, 1, 0)  # a counter the key sees (the report's own key does not)
    again = ended_estimate(n)
    assert again == estimate(n) != first
    n.outcome = None  # a live session is never kept
    assert ended_estimate(n) is not ended_estimate(n)
