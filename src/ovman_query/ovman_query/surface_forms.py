"""The benchmark's vocabulary of surface forms: how a change query is phrased, and how categories
are named.

Each relation has phrasings (templates with ``{x}`` for the noun phrase), split once and for all
into a training set (what the parser learns its cues from) and a held-out set (what its accuracy
is reported on, TASK.md §5.5). Category names are AI2-THOR object types (``CoffeeTable``); their
surface names are the words of the type (``coffee table``) plus synonyms (``couch`` → ``Sofa``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from ovman_core.relations import Relation
from ovman_mapping.encoders import label_text

PLACEHOLDER = "{x}"


@dataclasses.dataclass(frozen=True)
class Phrasings:
    """The templates of one relation: ``train`` for learning, ``held_out`` for evaluation only."""

    train: tuple[str, ...]
    held_out: tuple[str, ...]


PHRASINGS: Mapping[Relation, Phrasings] = {
    Relation.MOVED: Phrasings(
        train=(
            "go to the {x} that was moved",
            "find the {x} that moved",
            "take me to the moved {x}",
            "where is the {x} that someone moved",
            "navigate to the {x} that has been moved",
            "the {x} that was relocated",
            "go to the {x} in its new place",
        ),
        held_out=(
            "find the relocated {x}",
            "go to the {x} that someone has moved",
            "the {x} in its new location",
            "where is the {x} that was moved elsewhere",
        ),
    ),
    Relation.FORMER: Phrasings(
        train=(
            "go to where the {x} used to be",
            "take me to the old place of the {x}",
            "where was the {x} before it was moved",
            "navigate to the former position of the {x}",
            "go to the spot the {x} was moved from",
            "find where the {x} was originally",
            "the previous location of the {x}",
        ),
        held_out=(
            "where did the {x} use to be",
            "go to the original spot of the {x}",
            "the old position of the {x}",
            "take me to the former location of the {x}",
        ),
    ),
    Relation.REMOVED: Phrasings(
        train=(
            "go to where the {x} was removed",
            "find the place of the {x} that is gone",
            "where was the {x} that disappeared",
            "take me to the spot of the missing {x}",
            "go to the {x} that was taken away",
            "the {x} that is no longer there",
            "navigate to where the removed {x} stood",
        ),
        held_out=(
            "the place of the {x} that disappeared",
            "go to the {x} that went missing",
            "where the removed {x} was",
            "the {x} that someone took away",
        ),
    ),
    Relation.APPEARED: Phrasings(
        train=(
            "go to the {x} that appeared",
            "find the new {x}",
            "take me to the {x} that was added",
            "the {x} that wasn't there before",
            "navigate to the newly placed {x}",
            "where is the {x} that showed up",
            "go to the {x} someone brought in",
        ),
        held_out=(
            "the {x} that has appeared",
            "find the {x} that was newly added",
            "go to the new {x} in the room",
            "the {x} that showed up recently",
        ),
    ),
    Relation.STABLE: Phrasings(
        train=(
            "go to the {x} that did not move",
            "find the {x} that stayed in place",
            "take me to the {x} that is still where it was",
            "the {x} that was not moved",
            "navigate to the unmoved {x}",
            "go to the {x} that stayed put",
            "where is the {x} that remained in the same place",
        ),
        held_out=(
            "the {x} that stayed where it was",
            "go to the {x} that was not moved at all",
            "find the {x} that is still in the same place",
            "the {x} nobody touched",
        ),
    ),
    Relation.MOVING: Phrasings(
        train=(
            "go to the {x} that is moving",
            "follow the moving {x}",
            "find the {x} that keeps moving",
            "the {x} that is being carried around",
            "take me to the {x} in motion",
            "navigate to the {x} someone is carrying",
            "where is the {x} that is moving around",
        ),
        held_out=(
            "catch the moving {x}",
            "the {x} that is being carried",
            "go to the {x} that keeps moving around",
            "find the {x} that is on the move",
        ),
    ),
}
"""Phrasings per relation (every relation has at least 6; the split is fixed here)."""

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


def training_phrasings() -> dict[Relation, tuple[str, ...]]:
    return {relation: forms.train for relation, forms in PHRASINGS.items()}


def held_out_phrasings() -> dict[Relation, tuple[str, ...]]:
    return {relation: forms.held_out for relation, forms in PHRASINGS.items()}
