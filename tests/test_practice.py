"""The recall judgement (session/practice.py, docs/learning.md): property tests across scripts,
spacing, case, diacritics and typos within the bound, and a different phrase never recalled; then the
ratings the rules give."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.enums import OfferAssessment, Outcome, Stage
from schemas.learner import LearnerRecall
from schemas.review import Evidence, PracticeTarget
from session.practice import (
    MIN_TURNS,
    LearnerLine,
    cue_words,
    invitations,
    judge,
    matches,
    open_targets,
    produced,
    typo_bound,
    words,
)
from session.records import TurnRecord

# Hinglish words and the same word in Devanagari, as learners type them.
SCRIPTS = {
    "kitne": "कितने", "namaste": "नमस्ते", "dhanyavaad": "धन्यवाद", "bhaiya": "भैया", "mehenga": "महंगा",
    "theek": "ठीक", "bahut": "बहुत", "paisa": "पैसा", "kam": "कम", "karo": "करो", "pakka": "पक्का",
    "chahiye": "चाहिए", "sabzi": "सब्ज़ी", "rupaye": "रुपये",
}
# Two vocabularies with no word of one matching any word of the other (checked below).
ASKING = ("kitne", "namaste", "bhaiya", "paisa", "rupaye")
THANKING = ("dhanyavaad", "theek", "pakka", "bahut", "chahiye")
FILLER = ("ye", "ka", "hai", "to", "na", "bhi")  # particles: never cue words

cue_sets = st.lists(st.sampled_from(ASKING), min_size=1, max_size=4, unique=True).map(tuple)
separators = st.sampled_from([" ", "  ", ", ", "! ", "? ", " ... ", "\t", " - "])


def _variant(word: str, draw: st.DrawFn) -> str:
    """The word as a learner might type it: either script, any case, with or without accents."""
    if draw(st.booleans()) and word in SCRIPTS:
        return SCRIPTS[word]
    case = draw(st.sampled_from([str.lower, str.upper, str.title]))
    word = case(word)
    if draw(st.booleans()):  # an acute or a macron over the first vowel, as a phone keyboard may
        vowel = next((i for i, ch in enumerate(word) if ch.lower() in "aeiou"), None)
        if vowel is not None:
            mark = draw(st.sampled_from(["\u0301", "\u0304", "\u0300"]))
            word = unicodedata.normalize("NFC", word[: vowel + 1] + mark + word[vowel + 1:])
    return word


@st.composite
def spoken(draw: st.DrawFn, cues: tuple[str, ...]) -> str:
    """A learner line that says every cue word, in any order, mixed with particles."""
    said = [_variant(cue, draw) for cue in cues] + draw(st.lists(st.sampled_from(FILLER), max_size=3))
    said = draw(st.permutations(said))
    sep = draw(separators)
    return sep.join(said) + draw(st.sampled_from(["", "?", "!", "।"]))


@st.composite
def typo(draw: st.DrawFn, word: str) -> str:
    """One edit (replace, insert or delete a letter) inside a word of four letters or more."""
    at = draw(st.integers(1, len(word) - 1))
    letter = draw(st.sampled_from("abcdefghijklmnopqrstuvwxyz"))
    edit = draw(st.sampled_from(["replace", "insert", "delete"]))
    if edit == "replace":
        return word[:at] + letter + word[at + 1:]
    if edit == "insert":
        return word[:at] + letter + word[at:]
    return word[:at] + word[at + 1:]


def test_the_two_vocabularies_share_no_matching_word() -> None:
    for a in ASKING:
        for b in THANKING:
            assert not matches(a, b) and not matches(b, a)
            assert not matches(a, SCRIPTS[b]) and not matches(SCRIPTS[a], b)


def test_kitne_and_its_devanagari_are_one_word() -> None:
    assert matches("kitne", "कितने") and matches("कितने", "kitne")
    assert produced(("kitne",), "ये कितने का है?") and produced(("कितने",), "Ye KITNE ka hai")


@settings(max_examples=300, deadline=None)
@given(data=st.data(), cues=cue_sets)
def test_a_phrase_said_in_any_script_spacing_case_or_accent_is_recalled(data: st.DataObject,
                                                                        cues: tuple[str, ...]) -> None:
    line = data.draw(spoken(cues))
    assert produced(cues, line), line
    # and with the target written in Devanagari instead
    assert produced(tuple(SCRIPTS[c] for c in cues), line), line


@settings(max_examples=300, deadline=None)
@given(data=st.data(), cues=cue_sets)
def test_a_typo_within_the_bound_is_still_recalled(data: st.DataObject, cues: tuple[str, ...]) -> None:
    long = [c for c in cues if len(c) >= 4]
    if not long:
        return
    target = data.draw(st.sampled_from(long))
    mistyped = data.draw(typo(target))
    assert typo_bound(target) >= 1
    line = " ".join(mistyped if c == target else c for c in cues)
    assert produced(cues, line), line


@settings(max_examples=300, deadline=None)
@given(data=st.data(), cues=cue_sets,
       other=st.lists(st.sampled_from(THANKING), min_size=1, max_size=5, unique=True).map(tuple))
def test_a_different_phrase_is_not_recalled(data: st.DataObject, cues: tuple[str, ...],
                                            other: tuple[str, ...]) -> None:
    line = data.draw(spoken(other))
    assert not produced(cues, line), line
    target = PracticeTarget(item_id="i", kind="phrase", key="ask", phrase=" ".join(cues), cues=cues)
    lines = [LearnerLine(n, line) for n in range(1, MIN_TURNS + 1)]
    assert judge([target], lines)[0].rating == "again"


def test_two_thirds_of_a_longer_phrase_is_enough_and_one_third_is_not() -> None:
    cues = ("bahut", "mehenga", "kam", "karo")  # needs 3 of 4
    assert produced(cues, "bahut mehenga, kam karo")
    assert produced(cues, "बहुत महंगा, कम")
    assert not produced(cues, "bahut mehenga")


def test_short_words_need_their_sound_not_a_typo() -> None:
    assert typo_bound("kam") == 0 and not matches("kam", "kab")
    assert matches("dhanyavaad", "dhanyawad")  # w and v, a and aa: one sound
    assert not matches("kitne", "kitab")


def test_cue_words_drop_particles_numbers_names_and_repeats_of_a_sound() -> None:
    assert cue_words("Bhaiya, ye tamatar 60 mein de do? Kitne ka hai, kitna?", drop=["tamatar", "bhaiya"]) == (
        "de", "kitne")  # "mein" is a particle, "do" sounds as "de", "kitna" as "kitne"
    assert words("Kitné  KA hai!") == ("kitne", "ka", "hai")
    assert words("कितने का है।") == ("कितने", "का", "है")


def _phrase(cues: tuple[str, ...]) -> PracticeTarget:
    return PracticeTarget(item_id="p", kind="phrase", key="ask", phrase=" ".join(cues), cues=cues)


def test_the_ratings_follow_the_rules() -> None:
    target = _phrase(("namaste", "kitne"))
    said = [LearnerLine(1, "hello"), LearnerLine(2, "namaste, kitne ka hai?"), LearnerLine(3, "ok")]
    [good] = judge([target], said)
    assert (good.recalled, good.turn, good.rating) == (True, 2, "good")
    shown = Evidence(source="hint", key="greet", turn=2, text="Namaste bhaiya, ye tamatar kitne ka hai?")
    [hard] = judge([target], said, [shown])
    assert (hard.recalled, hard.rating) == (True, "hard")  # a hint revealed it in this very session
    [missed] = judge([target], [LearnerLine(n, "hello") for n in range(1, MIN_TURNS + 1)])
    assert (missed.recalled, missed.rating) == (False, "again")
    [short] = judge([target], [LearnerLine(1, "hello")])
    assert (short.recalled, short.rating) == (False, None)  # no fair chance: no review


def test_respect_needs_one_word_and_slips_are_judged_by_their_absence() -> None:
    respect = PracticeTarget(item_id="r", kind="respect", key="respect", cues=("bhaiya", "didi", "ji"))
    lowball = PracticeTarget(item_id="l", kind="avoid", key="lowball")
    taboo = PracticeTarget(item_id="t", kind="avoid", key="taboo", cues=("sada hua", "fraud"))
    fair = [LearnerLine(1, "hello"), LearnerLine(2, "how much?"), LearnerLine(3, "70 rupees", OfferAssessment.FAIR)]
    by_id = {p.item_id: p for p in judge([respect, lowball, taboo], fair)}
    assert (by_id["r"].rating, by_id["l"].rating, by_id["t"].rating) == ("again", "good", "good")
    rude = [LearnerLine(1, "भैया, ye sada hua hai"), LearnerLine(2, "20", OfferAssessment.LOWBALL),
            LearnerLine(3, "90", OfferAssessment.FAIR)]
    by_id = {p.item_id: p for p in judge([respect, lowball, taboo], rude)}
    assert (by_id["r"].recalled, by_id["r"].turn) == (True, 1)
    assert (by_id["l"].rating, by_id["l"].turn) == ("again", 2)
    assert (by_id["t"].rating, by_id["t"].turn) == ("again", 1)
    no_offer = {p.item_id: p for p in judge([lowball], fair[:2])}
    assert no_offer["l"].rating is None  # no offer at all: no chance to keep it


def _record(turn: int, text: str) -> TurnRecord:
    return TurnRecord(turn=turn, role="user", text=text, stage=Stage.GREETING, happiness=50, at=0.0)


def test_open_targets_drop_what_was_said_and_never_invite_a_taboo() -> None:
    ask = _phrase(("kitne",))
    taboo = PracticeTarget(item_id="t", kind="avoid", key="taboo", cues=("fraud",))
    assert open_targets([ask, taboo], []) == (ask,)
    assert open_targets([ask, taboo], [LearnerLine(1, "कितने का?")]) == ()
    recall = LearnerRecall(sessions=1, last_outcome=Outcome.DEAL, practice=(ask,))
    assert invitations(recall, [_record(1, "hello")]) == (ask,)
    assert invitations(recall.model_copy(update={"invite": False}), [_record(1, "hello")]) == ()  # REVIEWS_INVITE
    assert invitations(None, []) == ()


def test_a_card_is_recalled_when_the_learners_words_earn_it_again() -> None:
    card = PracticeTarget(item_id="c", kind="card", key="card:k1", phrase="Building rapport", cues=("k1",))
    lines = [LearnerLine(n, f"line {n}") for n in range(1, MIN_TURNS + 1)]
    [earned] = judge([card], lines, earned={"k1": 2})
    assert (earned.recalled, earned.turn, earned.said, earned.rating) == (True, 2, "line 2", "good")
    [missed] = judge([card], lines, earned={"k2": 1})
    assert (missed.recalled, missed.rating) == (False, "again")
