"""The grammar words after which a sentence cannot have ended (issue #34): the end-of-turn policy
reads a pause after one as a learner still speaking (voice/turn_words.py), and the scene
recogniser's pause model puts its thinking pauses after them (voice/scene_corpus.py)."""

from __future__ import annotations

__all__ = ["ALSO_FINAL", "CONTINUATIONS"]

# Words a sentence does not end on: articles, prepositions, conjunctions, subject pronouns,
# possessives, auxiliaries, and Hindi's postpositions and conjunctions. A word that often does
# end one ("this", "you", "me", "it", "hai") is left out: a wrong entry cuts nobody off, it makes
# a finished learner wait a thinking pause.
CONTINUATIONS = frozenset("""
a an the and but or so because if then than to for of from with without in on at by about into
my your his her our their its i we he she they is are was were will would can could shall should
must may might do does did have has had am be been very really some any no not give take pay how
what which who when where
aur lekin par magar toh ki ke ka ko se mein ya agar jo kyunki main hum aap mera meri mere tera
""".split())

# Continuation words that also end sentences: Hindi's imperative "do" (give, let: "thoda kam kar do",
# "chalo rehne do") is English's auxiliary, and English ends on it too ("is what I can do"). Where a
# pack's own sentence ends on one, its last words end a learner's sentence as well
# (voice/scene_corpus.py `SentenceShapes.endings`); anywhere else the word is a continuation ("can you do").
# Only these: the pack's sentence frames end on other continuation words where their blank was
# ("my name is ____"), which no learner's finished sentence does.
ALSO_FINAL = frozenset({"do"})
