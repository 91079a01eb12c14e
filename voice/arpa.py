"""A trigram language model written as ARPA text, from weighted sentences. Pure.

No maintained package on PyPI builds an ARPA file from text without a native toolkit (KenLM's
`lmplz` and SRILM are C++ programs outside pip; NLTK's `lm` scores but does not write ARPA), and
the format is small, so it is written here. Smoothing is interpolated Witten-Bell (Witten and Bell
1991, as SRILM's `-wbdiscount -interpolate`): for a history h seen c(h) times followed by T(h)
distinct words,

    P(w | h) = (c(h, w) + T(h) * P(w | h')) / (c(h) + T(h))

where h' is h without its oldest word, and the unigram level backs off to a uniform distribution
over the vocabulary. Counts may be fractional, so a sentence can weigh more than once (the words
of the moment, voice/scene_corpus.py). In ARPA an n-gram that was seen stores its interpolated
probability and a history's back-off weight is T(h) / (c(h) + T(h)), the mass left for words it
never preceded, which is exactly what the interpolated formula gives them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

BOS, EOS = "<s>", "</s>"
ORDER = 3
_NEVER = -99.0  # log10 probability ARPA uses for <s>, which is never predicted


def _log(p: float) -> float:
    return round(math.log10(p), 6) if p > 0 else _NEVER


def build_arpa(sentences: Iterable[tuple[Sequence[str], float]]) -> str:
    """ARPA text of a trigram model over `sentences`, each a word sequence and its weight (> 0)."""
    counts: list[dict[tuple[str, ...], float]] = [defaultdict(float) for _ in range(ORDER)]
    for words, weight in sentences:
        if weight <= 0 or not words:
            continue
        padded = (BOS, *words, EOS)
        for n in range(1, ORDER + 1):
            for i in range(len(padded) - n + 1):
                gram = padded[i:i + n]
                if n == 1 and gram[0] == BOS:
                    continue
                counts[n - 1][gram] += weight
    vocab = sorted({g[0] for g in counts[0]} | {BOS})
    if len(vocab) < 2:
        raise ValueError("a language model needs at least one word")
    # History statistics: c(h) and T(h) for every history of length 1..ORDER-1 (and the empty one).
    seen: dict[tuple[str, ...], float] = defaultdict(float)
    types: dict[tuple[str, ...], int] = defaultdict(int)
    for n in range(1, ORDER + 1):
        for gram, c in counts[n - 1].items():
            seen[gram[:-1]] += c
            types[gram[:-1]] += 1
    prob: dict[tuple[str, ...], float] = {}
    uniform = 1.0 / (len(vocab) - 1)  # <s> is never predicted
    for n in range(1, ORDER + 1):
        for gram, c in counts[n - 1].items():
            h = gram[:-1]
            lower = uniform if n == 1 else prob[gram[1:]]
            prob[gram] = (c + types[h] * lower) / (seen[h] + types[h])
    lines = ["\\data\\"]
    grams_by_order: list[list[tuple[str, ...]]] = [[*sorted(counts[0]), (BOS,)]]
    grams_by_order += [sorted(counts[n]) for n in range(1, ORDER)]
    for n, grams in enumerate(grams_by_order, start=1):
        lines.append(f"ngram {n}={len(grams)}")
    for n, grams in enumerate(grams_by_order, start=1):
        lines += ["", f"\\{n}-grams:"]
        for gram in grams:
            p = _NEVER if gram == (BOS,) else _log(prob[gram])
            row = f"{p}\t{' '.join(gram)}"
            if n < ORDER and gram in types:
                row += f"\t{_log(types[gram] / (seen[gram] + types[gram]))}"
            lines.append(row)
    lines += ["", "\\end\\", ""]
    return "\n".join(lines)


def sentence_logprob(arpa_probs: dict[tuple[str, ...], tuple[float, float]], words: Sequence[str]) -> float:
    """log10 P(words) under a model read back with `read_arpa` (for tests: the model sums to one)."""
    padded = (BOS, *words, EOS)
    total = 0.0
    for i in range(1, len(padded)):
        total += _score(arpa_probs, padded[max(0, i - ORDER + 1):i + 1])
    return total


def _score(model: dict[tuple[str, ...], tuple[float, float]], gram: tuple[str, ...]) -> float:
    if gram in model:
        return model[gram][0]
    if len(gram) == 1:
        return _NEVER
    backoff = model.get(gram[:-1], (0.0, 0.0))[1]
    return backoff + _score(model, gram[1:])


def read_arpa(text: str) -> dict[tuple[str, ...], tuple[float, float]]:
    """Every n-gram of ARPA `text` with its log10 probability and back-off weight."""
    model: dict[tuple[str, ...], tuple[float, float]] = {}
    order = 0
    for line in text.splitlines():
        if line.startswith("\\") and line.endswith("-grams:"):
            order = int(line[1:line.index("-")])
            continue
        if not order or not line.strip() or line.startswith("\\"):
            continue
        parts = line.split("\t")
        gram = tuple(parts[1].split())
        model[gram] = (float(parts[0]), float(parts[2]) if len(parts) > 2 else 0.0)
    return model
