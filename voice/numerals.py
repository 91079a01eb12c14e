"""Prices as English speakers say them ("one hundred twenty five"), for the scene language model and
the labelled speech set: the recogniser must know the words a price is spoken with, and the offer
reader (session/numbers.py) reads those words back. Pure.
"""

from __future__ import annotations

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _below_thousand(n: int, *, joined: bool) -> list[str]:
    words: list[str] = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [_ONES[hundreds], "hundred"]
        if rest and joined:
            words.append("and")
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(_TENS[tens])
        if ones:
            words.append(_ONES[ones])
    elif rest or not words:
        words.append(_ONES[rest])
    return words


def spoken_number(n: int, *, joined: bool = False) -> str:
    """`n` (0-999,999) in English words; `joined` puts "and" after the hundreds, as British and
    Indian English speakers do ("one hundred and twenty")."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"{n} is outside 0-999,999")
    thousands, rest = divmod(n, 1000)
    words: list[str] = []
    if thousands:
        words += [*_below_thousand(thousands, joined=joined), "thousand"]
    if rest or not words:
        words += _below_thousand(rest, joined=joined)
    return " ".join(words)


def price_steps(low: int, high: int) -> tuple[int, ...]:
    """The prices a learner plausibly says between `low` and `high`: round numbers, rounder as they
    grow (every 5 up to 500, every 50 up to 5,000, then every 500)."""
    out: set[int] = set()
    for n in range(max(1, low), high + 1):
        step = 5 if n <= 500 else 50 if n <= 5000 else 500
        if n % step == 0 or n <= 20:
            out.add(n)
    return tuple(sorted(out))
