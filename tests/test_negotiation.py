"""The pure negotiation core: turns in, validated state and ordered events out, no event loop."""

from __future__ import annotations

from schemas.brain import BrainResult
from schemas.enums import LanguageCode, OfferAssessment, Outcome, Stage
from schemas.frames import MoodChanged, Reply, SessionEnded, StageChanged
from session.negotiation import Negotiation, fallback_decision, offer_reader
from session.numbers import number_lexicon, read_numbers
from session.offers import read_offer
from session.rules import Limits
from tests.fakes import decision


def new(**kw: object) -> Negotiation:
    return Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=1000.0, **kw)  # type: ignore[arg-type]


def play(n: Negotiation, text: str, d: object, now: float = 1001.0, fallback: bool = False):  # type: ignore[no-untyped-def]
    pending = n.begin_turn(text, f"id-{n.turn + 1}", now)
    return n.complete_turn(pending, BrainResult(decision=d, fallback=fallback), now)  # type: ignore[arg-type]


def test_a_turn_produces_reply_mood_and_stage_in_seq_order() -> None:
    n = new()
    out = play(n, "Namaste bhaiya, tamatar kitne ka hai?",
               decision("Namaste! Tomatoes are 150 a kilo.", 58, Stage.INQUIRY, counter_price=150))
    kinds = [type(e) for e in out.events]
    assert kinds == [Reply, MoodChanged, StageChanged]
    assert [e.seq for e in out.events] == [1, 2, 3]  # type: ignore[union-attr]
    reply = out.events[0]
    assert isinstance(reply, Reply)
    assert reply.item == "Tomato" and reply.counter_price == 150 and reply.in_reply_to == "id-1"
    assert n.stage is Stage.INQUIRY and n.first_quote == 150 and n.turn == 1


def test_the_server_judges_the_offer_not_the_brain() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 50, Stage.INQUIRY, counter_price=150))
    out = play(n, "I'll give 20 rupees", decision("Fine!", 60, Stage.HAGGLING, offer_assessment=OfferAssessment.GOOD))
    reply = out.events[0]
    assert isinstance(reply, Reply)
    assert reply.learner_offer == 20 and reply.offer_assessment is OfferAssessment.INSULT
    assert reply.happiness_score == 40  # at least 10 down from 50
    assert n.insults == 1


def test_a_fallback_keeps_stage_and_happiness() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 55, Stage.INQUIRY, counter_price=150))
    out = play(n, "hmm", fallback_decision(Stage.DEAL, 99, "One moment..."), fallback=True)
    assert n.stage is Stage.INQUIRY and n.happiness == 55
    assert len(out.events) == 1 and out.events[0].fallback  # type: ignore[union-attr]


def test_a_deal_ends_the_session_with_a_summary() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 55, Stage.INQUIRY, counter_price=150))
    play(n, "60 rupees?", decision("Make it 90.", 55, Stage.HAGGLING, counter_price=90))
    out = play(n, "Theek hai, pakka", decision("Done at 90!", 65, Stage.DEAL, counter_price=90))
    ended = out.events[-1]
    assert isinstance(ended, SessionEnded) and ended.outcome is Outcome.DEAL
    assert ended.summary.final_price == 90 and ended.summary.discount_pct == 40.0
    assert ended.summary.stages == (Stage.GREETING, Stage.INQUIRY, Stage.HAGGLING, Stage.DEAL)
    assert n.is_terminal and n.snapshot().outcome is Outcome.DEAL


def test_after_the_end_a_transcript_gets_a_closing_reply_that_changes_nothing_but_seq() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 55, Stage.INQUIRY, counter_price=150))
    play(n, "60?", decision("90.", 55, Stage.HAGGLING, counter_price=90))
    play(n, "ok", decision("Done!", 60, Stage.DEAL, counter_price=90))
    before = n.snapshot()
    reply = n.closing_reply("late", 2000.0)
    assert reply.is_terminal and reply.seq == before.seq + 1 and reply.turn == before.turn
    after = n.snapshot()
    assert (after.stage, after.happiness_score, after.turn) == (before.stage, before.happiness_score, before.turn)


def test_the_turn_limit_forces_closure() -> None:
    n = new(limits=Limits(max_turns=3))
    play(n, "hello", decision("Hi.", 50, Stage.GREETING))
    play(n, "hello", decision("Hi.", 50, Stage.GREETING))
    out = play(n, "hello", decision("Hi.", 50, Stage.GREETING))
    stage = next(e for e in out.events if isinstance(e, StageChanged))
    assert stage.forced and stage.to is Stage.CLOSURE
    assert n.outcome is Outcome.TURN_LIMIT


def test_leaving_from_walkaway_counts_as_walked_away() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 55, Stage.INQUIRY, counter_price=150))
    play(n, "chalo rehne do", decision("Wait!", 50, Stage.WALKAWAY))
    play(n, "bye", decision("Go then.", 45, Stage.CLOSURE))
    assert n.outcome is Outcome.WALKED_AWAY


def test_wrap_up_is_requested_after_turn_25() -> None:
    n = new()
    for _ in range(25):
        play(n, "hello", decision("Hi.", 50, Stage.GREETING))
    pending = n.begin_turn("hello", "x", 1002.0)
    assert n.brain_request(pending).wrap_up


def test_graph_context_counts_stages_items_and_trend() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 55, Stage.INQUIRY, counter_price=150))
    play(n, "tomato 60?", decision("120.", 60, Stage.HAGGLING, counter_price=120))
    play(n, "70?", decision("100.", 65, Stage.HAGGLING, counter_price=100))
    graph = n.graph_context()
    assert graph.turns_per_stage == {Stage.INQUIRY: 1, Stage.HAGGLING: 2}
    assert graph.happiness_trend == (55, 60, 65) and graph.trend_direction == "rising"
    assert graph.items_discussed == {"Tomato": 3}
    assert [(t.from_stage, t.to_stage) for t in graph.transitions] == [
        (Stage.GREETING, Stage.INQUIRY), (Stage.INQUIRY, Stage.HAGGLING)]
    assert graph.turns_in_current_stage == 2


def test_a_new_item_before_haggling_gets_its_own_quote() -> None:
    n = new()
    n.apply_scene(object_grabbed="Apple", input_language=None, target_language=None, now=1000.5)
    play(n, "how much?", decision("250 a kilo.", 50, Stage.INQUIRY, counter_price=250))
    assert n.item == "Apple" and n.quote == 250
    assert n.snapshot().object_grabbed == "Apple"


def test_client_ids_are_remembered_boundedly() -> None:
    n = new()
    for i in range(600):
        n.remember(f"id{i}")
    assert n.seen("id599") and not n.seen("id0")


def test_the_discount_is_measured_against_the_dealt_items_own_first_quote() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 55, Stage.INQUIRY, counter_price=150))
    play(n, "and apples?", decision("250 for apples.", 55, Stage.INQUIRY, counter_price=250))
    play(n, "apple 100?", decision("200.", 55, Stage.HAGGLING, counter_price=200))
    out = play(n, "ok apple deal", decision("Done!", 60, Stage.DEAL, counter_price=200))
    ended = out.events[-1]
    assert isinstance(ended, SessionEnded)
    assert ended.summary.item == "Apple" and ended.summary.first_quote == 250
    assert ended.summary.discount_pct == 20.0


def test_words_that_contain_an_item_name_do_not_switch_the_item() -> None:
    n = new()
    play(n, "tamatar kitne ka?", decision("150.", 55, Stage.INQUIRY, counter_price=150))
    for text in ("sahi daam lagao", "main akela hoon", "shaam ho gayi"):
        assert n.begin_turn(text, None, 1002.0).item == "Tomato"
        n.complete_turn(n.pending, BrainResult(decision=decision("Hmm.", 55, Stage.INQUIRY)), 1002.0)  # type: ignore[arg-type]


def test_the_brain_sees_the_last_lines_of_history_and_only_those_stay_cached() -> None:
    from session.negotiation import HISTORY_LINES

    n = new(limits=Limits(max_turns=40, wrap_up_after=35))
    seen = []
    for i in range(1, 31):
        pending = n.begin_turn(f"line {i}", f"id-{i}", 1000.0 + i)
        request = n.brain_request(pending)
        seen.append([(h.turn, h.role, h.text) for h in request.history])
        n.complete_turn(pending, BrainResult(decision=decision(f"answer {i}", 50, Stage.INQUIRY)), 1000.5 + i)
    last = seen[-1]
    assert len(last) == HISTORY_LINES
    assert last[-1] == (29, "vendor", "answer 29") and last[0] == (10, "user", "line 10")
    # Cached: exactly the lines of the last request (the newest record, the last answer, is not).
    cached = [i for i, h in enumerate(n.history) if h._line is not None]
    assert cached == list(range(len(n.history) - 2 - HISTORY_LINES, len(n.history) - 2))


def test_a_remembered_line_reads_as_a_fresh_reading_does_whatever_the_quote_and_last_offer() -> None:
    languages = (LanguageCode("en-IN"), LanguageCode("hi-EN"))
    lexicon = number_lexicon(languages)
    read = offer_reader(languages)
    lines = ("70 percent of your price?", "do sau pachaas", "meet me in the middle", "100 less", "theek hai",
             "half of it, 2 kilo")
    for _ in range(2):  # the second round comes from the memo
        for text in lines:
            for standing, unit, last in ((200, "kg", None), (300, "kg", 120), (None, "piece", 50)):
                fresh = read_offer(text, standing, lexicon, unit=unit, last_offer=last)
                said = tuple(round(m.value) for m in read_numbers(text, lexicon)[0])
                assert read(text, standing, unit, last) == (fresh, said)
    # The same words against another quote are another offer, not the remembered one.
    line = "70 percent of your price?"
    low, high = read(line, 200, "kg", None)[0], read(line, 300, "kg", None)[0]
    assert low is not None and high is not None and (low.price, high.price) == (140, 210)
