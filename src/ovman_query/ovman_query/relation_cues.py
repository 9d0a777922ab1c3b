"""Which change a query asks about, read from its words by cues with negation and scope.

A *cue* is a short word pattern that says something about a change: an event (``moved``,
``showed up``), a place in time (``used to be``, ``where it is now``) or presence (``here``), which
says something only when negated. Cues are matched longest first, left to right, without overlap;
a negator applies to the first cue starting within :data:`SCOPE` words. Each cue adds its weight
(:data:`MEANINGS`) to one relation; the highest total is read, its confidence its share of the top two.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence

from ovman_core.relations import Relation

SCOPE = 4
"""Words after a negator within which the cue it negates must start."""

NEGATORS = frozenset({"not", "never", "no", "nobody", "none", "nothing", "without", "noone", "neither"})
PAST_AUXILIARIES = frozenset({"was", "were", "did", "had"})
PRESENT_AUXILIARIES = frozenset({"is", "are", "does", "do", "has", "have", "will", "can", "am"})
PRESENT_TIME = frozenset({"now", "anymore", "currently", "today"})
EXISTENCE = frozenset(
    {"exist", "exists", "existed", "around", "anywhere", "house", "home", "apartment", "flat", "more"}
)
"""Words that make "no longer" / "not ... anymore" about existence, not about a place."""
PAST_TIME = frozenset({"before", "earlier", "last", "first", "previously", "originally", "ago", "yesterday", "morning"})

_PLACE_TEXT = "place places spot spots location locations position positions home room rooms corner area part site"
TIME_PREPOSITIONS = frozenset({"after", "before", "since", "upon", "from"})
AUXILIARIES = PAST_AUXILIARIES | PRESENT_AUXILIARIES | {"got", "gets", "been", "be"}
PEOPLE_PRONOUNS = frozenset({"you", "we", "i", "they"})
PRESENCE_WORDS = frozenset({"here", "there", "around", "present", "exist", "exists", "existed", "seen", "inside"})
PLACE_NOUNS = frozenset(_PLACE_TEXT.split())
_MOVE_TEXT = """move moved moves relocate relocated relocates shift shifted shifts reposition repositioned
    rearrange rearranged rearranges displace displaced transfer transferred transfers shuffle shuffled
    touch touched touches carried moving budge budged budges nudge nudged swapped swap switched dragged pushed
    pulled slid"""
MOVE_WORDS = frozenset(_MOVE_TEXT.split())
"""Verbs of a completed move (a negated one means the object stayed)."""

_W = frozenset


@dataclasses.dataclass(frozen=True)
class Cue:
    """A word pattern: ``slots`` of alternative words, matched in order with at most ``gap``
    other words between consecutive slots; ``kind`` names what it says (see :data:`MEANINGS`)."""

    kind: str
    slots: tuple[frozenset[str], ...]
    gap: int = 0


def _cue(kind: str, pattern: str, gap: int = 0) -> Cue:
    """``pattern``: slots separated by spaces, alternatives by ``|`` (``"stay|stayed put"``)."""
    return Cue(kind, tuple(_W(slot.split("|")) for slot in pattern.split()), gap)


PLACES = "|".join(sorted(PLACE_NOUNS))
CUES: tuple[Cue, ...] = (
    # ongoing motion
    _cue("moving", "moving|movin"),
    _cue("moving", "in motion"),
    _cue("moving", "on the move"),
    _cue("moving", "being moved|carried|carted|pushed|dragged|wheeled|taken"),
    _cue("moving", "keep|keeps|kept moving|changing|getting|carrying|going|rolling|travelling|traveling|wandering"),
    _cue("moving", "is|are carrying|moving|pushing|dragging"),
    _cue("moving", "carrying"),
    _cue("moving", "walking|running|wandering|roaming|travelling|traveling|drifting|rolling|circling"),
    _cue("moving", "roams|wanders|travels|drifts"),
    _cue("moving", "follow|following|chase|chasing|pursue|pursuing|intercept|track|tracking"),
    _cue("moving", "go|going|run|head after"),
    _cue("moving", "catch"),
    _cue("moving", "never stops|stop"),
    _cue("moving", "moves|moving|carried|carrying|dragged|pushed around|about"),
    _cue("moving", "dragging|pushing|pulling|wheeling|carting|hauling|bouncing"),
    # removal
    _cue("gone", "removed|remove|removes|gone|missing|disappeared|disappear|disappears|vanished|vanish|vanishes"),
    _cue("gone", "discarded|deleted|lost|absent|binned|trashed|stolen|stole|tossed|toss|dumped|dump|donated"),
    _cue("gone", "sold|recycled|chucked|scrapped|disposed|misplaced|destroyed|broken|broke|smashed"),
    _cue("gone", "gave|given|give away"),
    _cue("gone", "gave|given|give to", gap=3),
    _cue("gone", "took|taken|threw|thrown|throw|carted|cleared away|out", gap=3),
    _cue("gone", "got|get|gotten rid"),
    _cue("gone", "went missing"),
    _cue("gone", "took"),
    _cue("gone_weak", "no longer"),
    _cue("gone_weak", "not|no anymore|more", gap=3),
    _cue("gone_weak", f"empty|vacant|bare {PLACES}"),
    # arrival
    _cue("new", "new|newly|freshly|brand|extra|additional|added|add|adds|appeared|appear|appears|arrived|bought"),
    _cue("new", "brought|brings|bring in|into|over|home|here"),
    _cue("new", "brought"),
    _cue("new", "showed|shown|show|turned|turn|popped|pop|cropped|shows|turns|pops up"),
    _cue("new", "came|come|comes in"),
    _cue("new", "delivered|ordered|purchased|received|installed|unboxed|unpacked|acquired"),
    _cue("new_weak", "came|come|comes from"),
    _cue("new", "placed|put|set|left|brought recently|today|tonight|yesterday|since|just", gap=3),
    _cue("new", "dropped|drop off"),
    _cue("new", "placed|put|set there|here|down recently|since|just", gap=1),
    _cue("new", "recently|just placed|put|added|set|appeared|got|bought|received|arrived"),
    _cue("new_weak", "placed"),
    # staying
    _cue("same", "stayed|stay|stays|staying|remained|remain|remains|remaining"),
    _cue("same", "stayed|stay|stays|staying|kept|left put|still"),
    _cue("same", "unmoved|untouched|unchanged|stationary|undisturbed|unmoving"),
    _cue("same", "left alone|untouched|there|where|behind"),
    _cue("same", f"same {PLACES}"),
    _cue("same", "still"),
    _cue("same", "right|exactly|just where"),
    _cue("same", "in place"),
    _cue("same", "left|kept as it|they was|were|is|are", gap=1),
    _cue("same", "stop|stops|stopped|stopping moving"),
    _cue("same", f"in its|their {PLACES}"),
    # former place
    _cue("former", "used|use to", gap=3),
    _cue("former", f"{PLACES} where it|they was|were|stood|sat"),
    _cue("former", "was|were|stood|sat|lay before"),
    _cue("former", "original|originally|former|formerly|previous|previously|initial|initially|prior"),
    _cue("former", f"old|earlier|first|usual|past {PLACES}", gap=2),
    _cue("former", "from which|where " + "|".join(sorted(MOVE_WORDS | {"taken", "took"})), gap=4),
    _cue("former", "at first"),
    _cue("former", "moved|taken|shifted|relocated|carried away from"),
    _cue("former", "moved|taken|shifted|relocated|carried from"),
    _cue("former", "before " + "|".join(sorted(MOVE_WORDS | {"put"})), gap=5),
    _cue("former", "at|in the start|beginning"),
    _cue("former", "to begin|start with"),
    _cue("former", "old|original|previous|former|earlier|usual one"),
    _cue("former", "is|sits|lies now empty|vacant|free|bare"),
    _cue("former", "now empty|vacant|free|bare"),
    _cue("former_weak", "before|earlier"),
    # a move
    _cue("move", "|".join(sorted(MOVE_WORDS - {"moving", "carried"}))),
    _cue("move", "messed|mess|messing|fiddled|tampered with"),
    _cue("move", "carried|put|placed|taken|moved to"),
    _cue("move", "carried"),
    _cue("move", "put"),
    _cue("move", "ended up"),
    _cue("move", f"change|changed|changes|changing {PLACES}"),
    _cue("move", "elsewhere"),
    _cue("move", "somewhere|someplace|anywhere else|new|different"),
    _cue("move_place", f"new|different|another|other {PLACES}"),
    # where the object is now (only with a move)
    _cue("now", "where it|they|is|sits|stands|lies now|is|sits|stands|lies", gap=3),
    _cue("now", "is|sits|stands|lies|it now"),
    _cue("now", "where now", gap=4),
    # presence: meaningful when negated
    _cue("presence", "here|there|anywhere|around|present|exist|exists|existed|seen|inside"),
    _cue("presence", "in the house|home|room|apartment|flat"),
)
"""Every cue; a longer match wins over a shorter one at the same place."""

# The weights order the cues by how decisive they are when several appear; they are design choices,
# not fitted to any data.
MEANINGS: dict[str, tuple[Relation, float] | None] = {
    "moving": (Relation.MOVING, 4.0),
    "gone": (Relation.REMOVED, 3.0),
    "new": (Relation.APPEARED, 3.0),
    "same": (Relation.STABLE, 2.5),
    "former": (Relation.FORMER, 2.0),
    "new_weak": (Relation.APPEARED, 1.6),
    "move": (Relation.MOVED, 1.5),
    "move_place": (Relation.MOVED, 1.5),
    "gone_weak": (Relation.REMOVED, 1.2),
    "former_weak": (Relation.FORMER, 1.0),
    "now": None,
    "presence": None,
}
"""What an unnegated cue of each kind says, and how decisive it is (None: nothing on its own)."""

DESTINATION_VERBS = frozenset(
    {"go", "take", "navigate", "head", "bring", "drive", "return", "get", "show", "find", "locate", "lead", "reach"}
)
DESTINATION_SPAN = 6
"""Words after ``go to`` (and the like) that name where to go: cues there weigh :data:`DESTINATION_BONUS` more."""
DESTINATION_BONUS = 1.5
NOW_BONUS = 1.0
"""Added to moved when the sentence has a move and says where the object is now (a ``now`` cue)."""


@dataclasses.dataclass(frozen=True)
class Match:
    """A cue found from ``words[start]`` to ``words[end - 1]``, its own words at ``positions``
    (the words a gap skipped are not the cue's); ``negated`` by a negator before it."""

    cue: Cue
    start: int
    end: int
    positions: tuple[int, ...]
    negated: bool = False


@dataclasses.dataclass(frozen=True)
class Reading:
    """Relation scores of a text's cues, best first; empty when no cue says anything."""

    scores: tuple[tuple[Relation, float], ...]
    matches: tuple[Match, ...]

    @property
    def relation(self) -> Relation | None:
        return self.scores[0][0] if self.scores else None

    @property
    def confidence(self) -> float:
        """The best total's share of the best two (1.0 when only one relation scored)."""
        if not self.scores:
            return 0.0
        best = self.scores[0][1]
        second = self.scores[1][1] if len(self.scores) > 1 else 0.0
        return best / (best + second)

    def cue_words(self, words: Sequence[str]) -> list[str]:
        """The matched cues as text, in order (for explanations)."""
        return [("not " if m.negated else "") + " ".join(words[k] for k in m.positions) for m in self.matches]


def _match_at(cue: Cue, words: Sequence[str], start: int) -> tuple[int, ...] | None:
    """Positions of ``cue``'s words matched from ``start``, or None."""
    if words[start] not in cue.slots[0]:
        return None
    positions = [start]
    for slot in cue.slots[1:]:
        after = positions[-1] + 1
        for step in range(cue.gap + 1):
            if after + step < len(words) and words[after + step] in slot:
                positions.append(after + step)
                break
        else:
            return None
    return tuple(positions)


@functools.lru_cache(maxsize=4)
def _by_first_word(cues: tuple[Cue, ...]) -> dict[str, tuple[Cue, ...]]:
    """The cues that can start at each word."""
    index: dict[str, list[Cue]] = {}
    for cue in cues:
        for word in cue.slots[0]:
            index.setdefault(word, []).append(cue)
    return {word: tuple(found) for word, found in index.items()}


def find_cues(words: Sequence[str], cues: Iterable[Cue] = CUES) -> list[Match]:
    """Cue matches that share no word, left to right, the longest at each position; a cue may
    start among the words another one's gap skipped."""
    starting = _by_first_word(tuple(cues))
    matches: list[Match] = []
    used: set[int] = set()
    for i in range(len(words)):
        if i in used:
            continue
        best: tuple[tuple[int, ...], Cue] | None = None
        for cue in starting.get(words[i], ()):
            positions = _match_at(cue, words, i)
            if positions is None or used.intersection(positions):
                continue
            if best is None or positions[-1] > best[0][-1]:
                best = (positions, cue)
        if best is not None:
            matches.append(Match(best[1], i, best[0][-1] + 1, best[0]))
            used.update(best[0])
    return matches


def _negate(matches: list[Match], words: Sequence[str]) -> list[Match]:
    covered = {k for m in matches for k in range(m.start, m.end)}
    negated: set[int] = set()
    for i, word in enumerate(words):
        if word not in NEGATORS or i in covered:
            continue
        if word == "no" and i + 1 < len(words) and words[i + 1] == "longer":
            continue
        for n, match in enumerate(matches):
            if i < match.start <= i + SCOPE and n not in negated:
                negated.add(n)
                break
    return [dataclasses.replace(m, negated=n in negated) for n, m in enumerate(matches)]


def _tense(match: Match, words: Sequence[str]) -> str:
    """``past`` or ``present``: of the auxiliaries around a negated cue, else of time words."""
    window = words[max(match.start - SCOPE - 2, 0) : match.start]
    for word in reversed(window):
        if word in PAST_AUXILIARIES:
            return "past"
        if word in PRESENT_AUXILIARIES:
            return "present"
    rest = set(words[match.end :])
    if rest & PAST_TIME and not rest & PRESENT_TIME:
        return "past"
    return "present"


def _clause(words: Sequence[str]) -> bool:
    """The words start a clause: a verb (an auxiliary, a move, a past tense) within two words."""
    return any(w in AUXILIARIES or w in MOVE_WORDS or w.endswith("ed") for w in words[:3])


def _meaning(match: Match, words: Sequence[str]) -> tuple[Relation, float] | None:
    kind, first = match.cue.kind, words[match.start]
    before = words[max(match.start - 2, 0) : match.start]
    following = words[match.end : match.end + SCOPE]
    if kind == "moving" and first == "being" and before[-1:] and before[-1] in TIME_PREPOSITIONS:
        return MEANINGS["move"]  # "after being moved": a move that is over
    if kind == "moving" and first in ("go", "going", "run", "head") and _clause(following):
        return None  # "go after it was moved", "go after someone moved it": after in time, not a chase
    if kind == "gone" and len(before) == 2 and before[0] in PEOPLE_PRONOUNS and before[1] in AUXILIARIES:
        return None  # "while you were gone": the speaker, not the object
    if kind == "gone_weak" and not match.negated:
        no_more = first == "no" and words[match.start + 1] != "longer"  # "no X anymore", "no more"
        existence = no_more or EXISTENCE.intersection(words[match.start : match.end + SCOPE])
        if existence:
            return Relation.REMOVED, 3.0  # "not in the house anymore", "no X anymore": it no longer exists
    if not match.negated:
        return MEANINGS[kind]
    if kind in ("former", "former_weak"):
        if PRESENCE_WORDS.intersection(following):
            return Relation.APPEARED, 3.0  # "didn't use to be here"
        return Relation.MOVED, 2.0  # "not where it was before", "not the old spot"
    if kind == "move":
        return Relation.STABLE, 2.5
    if kind == "move_place":
        return Relation.FORMER, 1.0  # "not the new spot"
    if kind == "same":
        ongoing = _tense(match, words) == "present" or words[match.start].endswith("ing")
        return (Relation.MOVING, 4.0) if ongoing else (Relation.MOVED, 1.5)
    if kind == "presence":
        past = _tense(match, words) == "past" or "yet" in words[match.end : match.end + SCOPE]
        return (Relation.APPEARED, 3.0) if past else (Relation.REMOVED, 2.0)
    if kind == "moving":
        return Relation.STABLE, 2.5
    if kind in ("new", "new_weak"):
        return Relation.STABLE, 1.0
    return MEANINGS[kind]


def _destination_starts(words: Sequence[str]) -> list[int]:
    """Positions right after a request for a destination (``go to``, ``take me to``, ``show me``)."""
    starts = []
    for k, word in enumerate(words):
        if word in DESTINATION_VERBS:
            rest = words[k + 1 : k + 4]
            if "to" in rest:
                starts.append(k + 2 + rest.index("to"))
            elif word in ("find", "locate", "show", "reach"):
                starts.append(k + 1)
    return starts


def read_relation(words: Sequence[str]) -> Reading:
    """The :class:`Reading` of a query's words. A negated move or motion reads stable; negated
    staying moved (moving with a present or future auxiliary); negated presence appeared in the past
    and removed in the present; negated newness weakly stable. A move whose sentence also says where
    the object is now gets :data:`NOW_BONUS` ("moved, go to where it is now" is moved, not former)."""
    matches = _negate(find_cues(words), words)
    totals: dict[Relation, float] = {}
    strongest: dict[Relation, float] = {}
    destinations = _destination_starts(words)
    meanings = [_meaning(match, words) for match in matches]
    # Where to go decides between the places of a move (before, after, unmoved); a removal's place
    # is always its former one, so a removal is never outweighed by it.
    removal = any(m is not None and m[0] is Relation.REMOVED and m[1] >= 3.0 for m in meanings)
    for match, meaning in zip(matches, meanings, strict=True):
        if meaning is not None:
            relation, weight = meaning
            in_destination = any(d <= match.start < d + DESTINATION_SPAN for d in destinations)
            if in_destination and not removal and relation in (Relation.MOVED, Relation.FORMER):
                weight += DESTINATION_BONUS
            totals[relation] = totals.get(relation, 0.0) + weight
            strongest[relation] = max(strongest.get(relation, 0.0), weight)
    says_now = any(m.cue.kind == "now" and not m.negated for m in matches)
    if says_now and Relation.MOVED in totals:
        totals[Relation.MOVED] += NOW_BONUS
        strongest[Relation.MOVED] = max(strongest[Relation.MOVED], NOW_BONUS)
    order = list(Relation)
    ranked = sorted(totals.items(), key=lambda item: (-item[1], -strongest[item[0]], order.index(item[0])))
    return Reading(tuple(ranked), tuple(matches))
