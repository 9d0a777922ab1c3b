"""Free query text as words: Unicode normalisation, contractions, and typo repair of cue words.

:func:`words` turns any string into lower-case word tokens: NFKC, punctuation as one ``,`` token
(it ends a noun phrase), other non-word characters as spaces, contractions expanded (``wasn't`` →
``was not``), other clitics and possessives dropped. An unknown word within a small edit distance of
exactly one *repair target* (cue words and function words) is replaced by it (``moevd`` → ``moved``).
Nouns are never repair targets, so an unknown object name (``guitar``) is left as written.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

_NOT_WORD = re.compile(r"[^\w',]+|_")
_PUNCTUATION = re.compile(r"[.,;:!?()\[\]{}\"]|\s[-\u2013\u2014]+\s")
PUNCTUATION = ","
"""The token every punctuation mark becomes (it ends noun phrases; cues never match across it)."""
_NEGATED = {  # contraction (with or without its apostrophe) -> its words
    "can't": ("can", "not"),
    "cant": ("can", "not"),
    "won't": ("will", "not"),
    "wont": ("will", "not"),
    "ain't": ("is", "not"),
    "aint": ("is", "not"),
}
_NOT_BASES = ("is", "was", "are", "were", "do", "does", "did", "has", "have", "had", "could", "would", "should")
for _base in _NOT_BASES:
    _NEGATED[_base + "n't"] = (_base, "not")
    _NEGATED[_base + "nt"] = (_base, "not")
_CLITICS = ("'s", "'re", "'ve", "'d", "'ll", "'m")

_FUNCTION_WORDS_TEXT = """a an the to of in on at by for from with into onto over under near next up down off out away
    it its it's me my you your i we us our they them their he him his she her one ones this that these
    those there here where when what which who whom whose why how is are was were be been being am has
    have had do does did done will would could should can may might must shall please go find take
    navigate show bring lead head drive get got see look and or but so because since while until as if
    then than now just still only also very really exactly all any some no not never nobody someone
    somebody anyone anybody everyone nothing something anything else somewhere anywhere everywhere
    time today morning yesterday earlier later before after again ago first last once whole through
    across along toward towards behind beside between among within throughout via upon onto against
    during except too yet ,"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())
"""Words queries are built of, besides cues and nouns (also repair targets)."""


def optimal_string_alignment(a: str, b: str, limit: int) -> int:
    """The optimal string alignment distance of ``a`` and ``b`` (insertions, deletions,
    substitutions and adjacent transpositions, each 1), or ``limit + 1`` once it exceeds ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]


def allowed_edits(word: str) -> int:
    """How many edits may repair ``word``: 0 below 3 letters, 1 up to 6, 2 from 7."""
    return 0 if len(word) < 3 else 1 if len(word) <= 6 else 2


class Speller:
    """Repairs unknown words to the one repair target within :func:`allowed_edits`, by optimal
    string alignment distance (a transposition counts 1). A repair keeps the first letter; of several
    targets as near, one longer than the word wins (``wher`` → ``where``: a dropped letter is the
    commonest typo), then one as long; otherwise the word is left alone. ``known``: words left as
    they are; ``targets``: the words a typo may be repaired to."""

    def __init__(self, known: Iterable[str], targets: Iterable[str]) -> None:
        self.targets = tuple(sorted(set(targets)))
        self.known = frozenset(known) | frozenset(self.targets)
        self._repair = functools.lru_cache(maxsize=4096)(self._nearest)

    def _nearest(self, word: str) -> str:
        limit = allowed_edits(word)
        if limit == 0 or word.isdigit():
            return word
        best: list[tuple[int, str]] = []
        for target in self.targets:
            if len(target) < 3 or target[0] != word[0]:  # typos rarely change the first letter
                continue
            d = optimal_string_alignment(word, target, limit)
            if d <= limit:
                best.append((d, target))
        if not best:
            return word
        nearest = min(d for d, _ in best)
        # Among the nearest, a target longer than the word first (a dropped letter is the commonest
        # typo), then one as long (a wrong letter); two left as near: no guess.
        found = sorted({t for d, t in best if d == nearest}, key=lambda t: (-min(len(t) - len(word), 1), t))
        rank = [min(len(t) - len(word), 1) for t in found]
        return found[0] if len(found) == 1 or rank[0] > rank[1] else word

    def repair(self, word: str) -> str:
        return word if word in self.known else self._repair(word)


def raw_words(text: str) -> list[str]:
    """Lower-case words of ``text`` with contractions expanded and clitics dropped (no repair)."""
    normal = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("`", "'").lower()
    normal = _PUNCTUATION.sub(" , ", normal)
    out: list[str] = []
    for token in _NOT_WORD.sub(" ", normal).split():
        if token == PUNCTUATION:
            if out and out[-1] != PUNCTUATION:
                out.append(PUNCTUATION)
            continue
        token = token.strip("'")
        if not token:
            continue
        if token in _NEGATED:
            out.extend(_NEGATED[token])
            continue
        if token.endswith("n't"):
            out.extend([token[:-3], "not"])
            continue
        for clitic in _CLITICS:
            if token.endswith(clitic) and len(token) > len(clitic):
                token = token[: -len(clitic)]
                break
        out.extend(part for part in token.split("'") if part)
    return out


def words(text: str, speller: Speller | None = None) -> list[str]:
    """:func:`raw_words`, each unknown word repaired by ``speller`` when given."""
    found = raw_words(text)
    return found if speller is None else [speller.repair(w) for w in found]
