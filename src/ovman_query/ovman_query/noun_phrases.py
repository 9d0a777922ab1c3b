"""The object a query names: its noun phrase, read from the words left over by the cues.

Any noun phrase is accepted, not only the benchmark's categories (grounding embeds it). The noun
phrase is a **run of content words**: not function words, not part of a relation cue, not one of
:data:`NOT_OBJECTS` ("find the chair nobody touched" → ``chair``, "the red coffee mug that moved" →
``red coffee mug``). Possessives are dropped, punctuation ends a run, :data:`SETTING` words only
qualify one, likely verbs are skipped, and of several runs the first holding a category name wins.
Its category is the benchmark category whose surface name the whole phrase is, else None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ovman_query.query_text import FUNCTION_WORDS
from ovman_query.relation_cues import NEGATORS, PLACE_NOUNS, Match

_NOT_OBJECTS_TEXT = """locate check want need like know think thought saw seen seems seem tell told guess wonder
    happened happen kindly pls plz please hey yo ok okay thanks thank robot buddy mate sure quick
    quickly asap again exactly definitely currently recently right moment minute second today tonight
    morning afternoon evening night day week weekend visit visits tour toured time times while away
    anymore around about somewhere else all things thing stuff everything whole same old other another
    though although even far way party trip meeting lunch dinner breakfast one ones yourself myself
    itself themselves himself herself go went going gone come came coming look looking help let lets wish
    would could should must also lastly finally first last earlier later previous whatever which can
    cannot able stood stand stands standing sat sit sits sitting lie lies lay lying laid rest rests rested
    occupied occupy occupies belong belongs belonged ended end ends goes gets getting happens looks looked
    seemed using kept keep keeps leave left back return returning front top bottom middle empty vacant
    near close exact lot lots bunch kind sort mind remember appreciate reach tidying online lol yeah yes
    oh hmm well um uh few several many most"""
_SETTING_TEXT = """house home apartment flat kitchen hallway hall corridor bedroom bathroom living study
    office garage basement attic cellar porch garden floor wall walls ceiling door doors window windows
    stairs inside outside upstairs downstairs furniture cleaning charity"""
_PEOPLE_TEXT = """kid kids child children partner partners friend friends mom mum dad mother father parents
    wife husband sister brother roommate flatmate guest guests cleaner cleaners neighbour neighbor neighbours
    neighbors people person family boss son daughter baby grandma grandpa grandmother grandfather uncle aunt
    cousin everybody movers mover courier landlord landlady visitor visitors"""
PEOPLE = frozenset(_PEOPLE_TEXT.split())
"""Who moves things: never the object asked about on their own."""
NOT_OBJECTS = frozenset(_NOT_OBJECTS_TEXT.split()) | PLACE_NOUNS
"""Content words that never start or continue an object's noun phrase."""
SETTING = frozenset(_SETTING_TEXT.split()) | PEOPLE
"""Words that are no object on their own but may qualify one (``wall clock``, ``vacuum cleaner``,
``floor cushion``): a run made of these alone is not a noun phrase."""
_SUBJECTS_TEXT = "is are was were be been am keeps keep someone somebody they he she we i you it who that which"
SUBJECTS = frozenset(_SUBJECTS_TEXT.split())
"""Words after which a word in ``-ing`` is a verb, not part of an object's name."""


@dataclasses.dataclass(frozen=True)
class NounPhrase:
    """The object named by a query: its words, where they were (``start``, ``end``), and the
    category it names exactly (None: not a category name)."""

    text: str
    start: int
    end: int
    category: str | None


def _verb_form(words: Sequence[str], k: int, nouns: frozenset[str]) -> bool:
    """``words[k]`` is a verb by its form: a past tense or participle (``changed``, five letters
    or more, ``-ed``) or a progressive after its subject or auxiliary (``someone dragging``)."""
    word = words[k]
    if word in nouns:
        return False
    if len(word) >= 5 and word.endswith("ed"):
        return True
    return len(word) >= 5 and word.endswith("ing") and k > 0 and words[k - 1] in SUBJECTS


def _blocked(words: Sequence[str], matches: Sequence[Match], nouns: frozenset[str]) -> list[bool]:
    blocked = [
        w in FUNCTION_WORDS or w in NOT_OBJECTS or w in NEGATORS or w.isdigit() or _verb_form(words, k, nouns)
        for k, w in enumerate(words)
    ]
    for match in matches:
        for k in match.positions:
            blocked[k] = True
    return blocked


def find_noun_phrase(
    words: Sequence[str], matches: Sequence[Match], vocabulary: Mapping[str, str]
) -> NounPhrase | None:
    """The noun phrase of a query's (repaired) words given its cue matches; None when the query
    has no content word left. ``vocabulary``: surface name → category."""
    blocked = _blocked(words, matches, frozenset(w for name in vocabulary for w in name.split()))
    # A category name wins over a cue that happens to contain its words ("tv set", "watch").
    for k in range(len(words)):
        for n in (3, 2, 1):
            inside = words[k : k + n]
            named = len(inside) == n and " ".join(inside) in vocabulary and (n > 1 or inside[0] not in FUNCTION_WORDS)
            if named and any(blocked[k : k + n]):
                for j in range(k, k + n):
                    blocked[j] = False
    runs: list[tuple[int, int]] = []
    k = 0
    while k < len(words):
        if blocked[k]:
            k += 1
            continue
        end = k
        while end < len(words) and not blocked[end]:
            end += 1
        runs.append((k, end))
        k = end
    if not runs:
        return None
    runs = [(a, b) for a, b in runs if not SETTING.issuperset(words[a:b])]
    if not runs:
        return None
    # The first run that holds a category name, else the first run.
    start, end = next((r for r in runs if _names_category(words[r[0] : r[1]], vocabulary)), runs[0])
    text = " ".join(words[start:end])
    return NounPhrase(text, start, end, vocabulary.get(text))


def _names_category(run: Sequence[str], vocabulary: Mapping[str, str]) -> bool:
    return any(" ".join(run[k:j]) in vocabulary for k in range(len(run)) for j in range(k + 1, len(run) + 1))
