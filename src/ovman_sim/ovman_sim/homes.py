"""Procedural homes for the embedded world: rooms, doorways, walls, furniture and small objects.

A scene is ``embedded-<seed>``, its home a pure function of the seed and the ``world`` / ``embedded``
config. World frame: AI2-THOR's (metres, y up, left-handed; floor (x, z) at y = 0); the home spans
``[0, size_x] × [0, size_z]``, room boundaries on the agent's lattice. Instances of a category often
share an asset's look, so colour is weak evidence of identity (TASK.md §10).

Why one module: a home is one pure function of its seed; catalogue, layout and placement draw from
one seeded builder, in an order that fixes every home, so they stay together.
"""

from __future__ import annotations

import colorsys
import dataclasses
import functools
import math
import re
import zlib
from collections.abc import Sequence

import numpy as np

from ovman_core.boxes import Box3, Vec2, Vec3
from ovman_core.config import AppearanceConfig, EmbeddedWorldConfig, WorldConfig, check_ranges
from ovman_core.world_state import ObjectState
from ovman_sim.floor_grid import FloorGrid, Occupancy

SCENE_PREFIX = "embedded-"
_SCENE_RE = re.compile(r"^embedded-(\d+)$")
MAX_SCENE_SEED = 2**63 - 1
"""Largest seed of an ``embedded-<seed>`` scene, the only scenes generation and the benchmark use."""
PERCEPTION_PREFIX = "perception-"
PERCEPTION_SPLITS = ("train", "test")
_PERCEPTION_RE = re.compile(r"^perception-(train|test)-(\d+)$")
_PERCEPTION_BASE = 2**63
"""Seeds of the perception homes (``perception-<split>-<k>``, what ``ovman train-perception``
renders and evaluates on) start here, above every ``embedded-<seed>``: a separate namespace."""

RGB = tuple[float, float, float]
HSV = tuple[float, float, float]


def scene_name(seed: int) -> str:
    """The scene string of the home generated from ``seed`` (an embedded or a perception home)."""
    if seed < 0:
        raise ValueError(f"embedded scene seeds are non-negative integers, got {seed}")
    if seed >= _PERCEPTION_BASE:
        split, k = divmod(seed - _PERCEPTION_BASE, 2**32)
        return f"{PERCEPTION_PREFIX}{PERCEPTION_SPLITS[split]}-{k}"
    return f"{SCENE_PREFIX}{seed}"


def perception_scene(split: str, k: int) -> str:
    """The ``k``-th perception home of ``split`` (train or test), disjoint from every embedded scene."""
    if split not in PERCEPTION_SPLITS or not 0 <= k < 2**32:
        raise ValueError(f"perception homes are (train|test, 0 <= k < 2**32), got ({split!r}, {k})")
    return f"{PERCEPTION_PREFIX}{split}-{k}"


def is_perception_scene(scene: str) -> bool:
    return _PERCEPTION_RE.match(scene) is not None


def parse_scene(scene: str) -> int:
    """The home seed of an ``embedded-<seed>`` scene (0 <= seed <= :data:`MAX_SCENE_SEED`) or of a
    perception home ``perception-<train|test>-<k>`` (at least 2**63); ValueError for any other."""
    match = _SCENE_RE.match(scene)
    if match is not None and int(match.group(1)) <= MAX_SCENE_SEED:
        return int(match.group(1))
    perception = _PERCEPTION_RE.match(scene)
    if perception is not None and int(perception.group(2)) < 2**32:
        split = PERCEPTION_SPLITS.index(perception.group(1))
        return _PERCEPTION_BASE + split * 2**32 + int(perception.group(2))
    raise ValueError(f"unknown embedded scene {scene!r}; expected 'embedded-<seed>' with an integer seed in [0, 2**63)")


# ---------------------------------------------------------------------------------------------
# Vocabulary


@dataclasses.dataclass(frozen=True)
class CategorySpec:
    """How one category looks and where it goes.

    Sizes are local ``(width, height, depth)`` in metres: width across the front, depth front to back.
    ``hsv`` is the base colour, ``hsv_jitter`` the spread of the category's assets around it (hue as
    a fraction of the circle); ``secondary`` the colour of secondary parts (legs, frames, pots),
    None = darker primary.
    ``shape`` names the part builder. ``furniture`` objects are laid out per room (``placement``:
    against a ``wall``, ``free``-standing, or as a ``companion`` of another piece); small objects rest
    on the floor when ``floor`` and on the supports of the furniture categories in ``on`` (None =
    any furniture with a support).
    """

    name: str
    size_min: Vec3
    size_max: Vec3
    hsv: HSV
    hsv_jitter: HSV
    shape: str = "block"
    movable: bool = True
    furniture: bool = False
    placement: str = "wall"
    floor: bool = False
    on: tuple[str, ...] | None = None
    secondary: HSV | None = None


_WOOD = (0.08, 0.55, 0.55)
_WOOD_JITTER = (0.02, 0.15, 0.2)
_ANY = (0.5, 0.15, 0.15)
_GREY = (0.5, 0.05, 0.1)
_TOPS = ("Desk", "DiningTable", "CoffeeTable", "Bed", "Sofa", "SideTable", "Dresser", "Ottoman")


def _big(name, lo, hi, hsv, jitter, shape, movable, placement="wall", secondary=None) -> CategorySpec:
    """A furniture category (laid out per room, stands on the floor)."""
    return CategorySpec(name, lo, hi, hsv, jitter, shape, movable, True, placement, secondary=secondary)


def _small(name, lo, hi, hsv, jitter, shape="block", floor=False, on=None, secondary=None) -> CategorySpec:
    """A small-object category (rests on furniture supports, and on the floor when ``floor``)."""
    return CategorySpec(name, lo, hi, hsv, jitter, shape, floor=floor, on=on, secondary=secondary)


# fmt: off
CATEGORIES: dict[str, CategorySpec] = {
    spec.name: spec
    for spec in (
        # name, size_min (w, h, d), size_max, colour hsv, jitter, shape, movable, placement
        _big("Sofa", (1.6, 0.8, 0.85), (2.2, 0.95, 0.95), (0.6, 0.4, 0.55), _ANY, "sofa", False),
        _big("ArmChair", (0.75, 0.8, 0.75), (0.95, 0.95, 0.9), (0.05, 0.45, 0.5), _ANY, "armchair", True),
        _big("Chair", (0.42, 0.85, 0.42), (0.5, 1.0, 0.5), _WOOD, _WOOD_JITTER, "chair", True, "free"),
        _big("DiningTable", (1.2, 0.72, 0.8), (1.8, 0.78, 1.0), _WOOD, _WOOD_JITTER, "table", False, "free"),
        _big("CoffeeTable", (0.8, 0.38, 0.5), (1.2, 0.48, 0.7), _WOOD, _WOOD_JITTER, "table", False, "free"),
        _big("SideTable", (0.4, 0.5, 0.4), (0.6, 0.7, 0.55), _WOOD, _WOOD_JITTER, "table", True),
        _big("Desk", (1.0, 0.72, 0.6), (1.5, 0.78, 0.75), (0.1, 0.3, 0.6), _WOOD_JITTER, "table", False),
        _big("Bed", (1.4, 0.95, 1.95), (1.9, 1.2, 2.1), (0.6, 0.08, 0.92), (0.5, 0.1, 0.05), "bed", False,
             secondary=(0.07, 0.5, 0.4)),
        _big("Dresser", (0.8, 0.8, 0.45), (1.3, 1.05, 0.55), _WOOD, _WOOD_JITTER, "dresser", False),
        _big("Shelf", (0.8, 1.2, 0.3), (1.2, 1.8, 0.4), _WOOD, _WOOD_JITTER, "shelf", False),
        _big("TVStand", (1.1, 0.45, 0.4), (1.6, 0.6, 0.5), (0.0, 0.0, 0.25), (0.1, 0.1, 0.1), "dresser", False),
        _big("CounterTop", (1.4, 0.88, 0.6), (2.4, 0.92, 0.65), (0.0, 0.0, 0.8), (0.5, 0.1, 0.1), "counter", False,
             secondary=(0.1, 0.3, 0.55)),
        _big("Fridge", (0.7, 1.7, 0.7), (0.85, 1.9, 0.75), (0.0, 0.0, 0.9), (0.5, 0.05, 0.05), "fridge", False),
        _big("GarbageCan", (0.3, 0.4, 0.3), (0.4, 0.6, 0.4), (0.35, 0.2, 0.4), _ANY, "block", True),
        _big("FloorLamp", (0.3, 1.4, 0.3), (0.4, 1.7, 0.4), (0.12, 0.25, 0.95), (0.05, 0.1, 0.05), "floor_lamp", True,
             secondary=(0.0, 0.0, 0.2)),
        _big("HousePlant", (0.3, 0.5, 0.3), (0.5, 1.1, 0.5), (0.33, 0.6, 0.45), (0.05, 0.15, 0.15), "plant", True,
             secondary=(0.05, 0.6, 0.55)),
        _big("Ottoman", (0.5, 0.38, 0.5), (0.7, 0.45, 0.7), (0.95, 0.4, 0.5), _ANY, "block", True, "free"),
        _big("Television", (0.8, 0.5, 0.18), (1.2, 0.75, 0.25), (0.0, 0.0, 0.08), (0.0, 0.0, 0.04), "tv", False,
             "companion", secondary=(0.0, 0.0, 0.15)),
        # name, size_min (w, h, d), size_max, colour hsv, jitter, shape / floor / on
        _small("Vase", (0.12, 0.2, 0.12), (0.2, 0.4, 0.2), (0.55, 0.5, 0.6), _ANY, floor=True),
        _small("Box", (0.25, 0.15, 0.25), (0.45, 0.35, 0.45), (0.09, 0.5, 0.65), (0.02, 0.1, 0.1), floor=True),
        _small("Laptop", (0.3, 0.2, 0.22), (0.36, 0.24, 0.26), (0.0, 0.0, 0.3), (0.5, 0.05, 0.15), "laptop", on=_TOPS),
        _small("Book", (0.15, 0.03, 0.2), (0.22, 0.06, 0.28), (0.0, 0.6, 0.55), _ANY),
        _small("Mug", (0.08, 0.09, 0.08), (0.1, 0.11, 0.1), (0.6, 0.5, 0.7), _ANY),
        _small("Pillow", (0.35, 0.12, 0.35), (0.5, 0.18, 0.5), (0.8, 0.35, 0.75), _ANY, on=("Sofa", "ArmChair", "Bed")),
        _small("Bowl", (0.15, 0.06, 0.15), (0.22, 0.09, 0.22), (0.1, 0.2, 0.85), _ANY),
        _small("Plate", (0.2, 0.02, 0.2), (0.27, 0.03, 0.27), (0.0, 0.0, 0.95), (0.5, 0.05, 0.05)),
        _small("Cup", (0.07, 0.1, 0.07), (0.09, 0.12, 0.09), (0.5, 0.3, 0.8), _ANY),
        _small("Bottle", (0.07, 0.25, 0.07), (0.09, 0.32, 0.09), (0.3, 0.7, 0.4), (0.1, 0.2, 0.15)),
        _small("Statue", (0.1, 0.2, 0.1), (0.2, 0.4, 0.2), (0.1, 0.35, 0.45), (0.05, 0.2, 0.2)),
        _small("Candle", (0.05, 0.08, 0.05), (0.08, 0.2, 0.08), (0.12, 0.2, 0.95), (0.05, 0.1, 0.05)),
        _small("RemoteControl", (0.05, 0.02, 0.16), (0.06, 0.03, 0.2), (0.0, 0.0, 0.1), (0.0, 0.0, 0.05)),
        _small("Kettle", (0.16, 0.2, 0.16), (0.2, 0.25, 0.2), (0.55, 0.05, 0.75), (0.5, 0.3, 0.1),
               on=("CounterTop", "DiningTable")),
        _small("Toaster", (0.25, 0.18, 0.15), (0.3, 0.2, 0.18), (0.0, 0.6, 0.7), _ANY, on=("CounterTop",)),
        _small("Basketball", (0.24, 0.24, 0.24), (0.24, 0.24, 0.24), (0.06, 0.85, 0.85), (0.01, 0.05, 0.05),
               floor=True),
        _small("TeddyBear", (0.25, 0.3, 0.2), (0.35, 0.4, 0.25), (0.08, 0.55, 0.5), (0.03, 0.15, 0.15), floor=True,
               on=("Bed", "Sofa", "ArmChair", "Shelf", "Dresser")),
        _small("AlarmClock", (0.12, 0.08, 0.06), (0.16, 0.12, 0.08), (0.0, 0.7, 0.7), _ANY),
        _small("CellPhone", (0.07, 0.01, 0.15), (0.08, 0.015, 0.16), (0.0, 0.0, 0.12), (0.0, 0.0, 0.05)),
        _small("Apple", (0.07, 0.07, 0.07), (0.09, 0.09, 0.09), (0.0, 0.8, 0.75), (0.15, 0.1, 0.1)),
        _small("Bread", (0.25, 0.1, 0.12), (0.3, 0.12, 0.14), (0.09, 0.6, 0.7), (0.02, 0.1, 0.1)),
        _small("Pot", (0.22, 0.14, 0.22), (0.28, 0.18, 0.28), (0.0, 0.0, 0.45), _GREY,
               on=("CounterTop", "DiningTable")),
        _small("SoapBottle", (0.06, 0.16, 0.06), (0.08, 0.2, 0.08), (0.5, 0.5, 0.8), _ANY),
        _small("TissueBox", (0.22, 0.09, 0.11), (0.25, 0.12, 0.13), (0.6, 0.2, 0.9), _ANY),
        _small("Newspaper", (0.28, 0.01, 0.38), (0.32, 0.02, 0.42), (0.0, 0.0, 0.8), (0.0, 0.0, 0.05)),
        _small("DeskLamp", (0.14, 0.35, 0.14), (0.2, 0.5, 0.2), (0.12, 0.3, 0.9), (0.5, 0.2, 0.1), "desk_lamp",
               on=("Desk", "SideTable", "Dresser"), secondary=(0.0, 0.0, 0.25)),
    )
}
# fmt: on
"""The embedded world's vocabulary (AI2-THOR object types)."""


# fmt: off
_ROOM_FURNITURE: dict[str, tuple[tuple[str, ...], dict[str, float]]] = {
    # room kind: (pieces always tried, {optional piece: weight})
    "LivingRoom": (("Sofa", "CoffeeTable", "TVStand"),
                   {"ArmChair": 2.0, "SideTable": 2.0, "Shelf": 1.0, "FloorLamp": 1.0, "HousePlant": 2.0,
                    "Ottoman": 1.0, "GarbageCan": 0.5}),
    "Bedroom": (("Bed", "SideTable"),
                {"SideTable": 1.0, "Dresser": 2.0, "Desk": 1.0, "Shelf": 1.0, "FloorLamp": 1.0, "GarbageCan": 1.0,
                 "HousePlant": 1.0, "ArmChair": 1.0}),
    "Kitchen": (("CounterTop", "Fridge"),
                {"CounterTop": 1.0, "DiningTable": 2.0, "GarbageCan": 2.0, "Shelf": 1.0, "HousePlant": 1.0}),
    "Office": (("Desk", "Shelf"),
               {"Shelf": 1.0, "ArmChair": 1.0, "HousePlant": 1.0, "GarbageCan": 1.0, "FloorLamp": 1.0, "Desk": 1.0,
                "SideTable": 1.0, "Dresser": 1.0}),
    "DiningRoom": (("DiningTable",),
                   {"Dresser": 1.0, "Shelf": 2.0, "HousePlant": 2.0, "SideTable": 1.0, "FloorLamp": 1.0,
                    "Sofa": 0.5}),
}

_ROOM_SMALL: dict[str, dict[str, float]] = {
    # room kind: {small-object category: weight}
    "LivingRoom": {"Vase": 2.0, "Book": 2.0, "RemoteControl": 2.0, "Pillow": 2.0, "Statue": 1.0, "Candle": 1.0,
                   "Box": 1.0, "Laptop": 1.0, "Mug": 1.0, "Basketball": 1.0, "TeddyBear": 1.0, "Bowl": 1.0,
                   "TissueBox": 1.0, "Newspaper": 1.0},
    "Bedroom": {"Pillow": 2.0, "Book": 2.0, "AlarmClock": 2.0, "TeddyBear": 1.0, "Laptop": 1.0, "CellPhone": 1.0,
                "Candle": 1.0, "Box": 1.0, "Vase": 1.0, "Basketball": 1.0, "Mug": 1.0, "DeskLamp": 1.0,
                "TissueBox": 1.0},
    "Kitchen": {"Mug": 2.0, "Cup": 2.0, "Bowl": 2.0, "Plate": 2.0, "Bottle": 2.0, "Kettle": 1.0, "Toaster": 1.0,
                "Apple": 2.0, "Bread": 1.0, "Pot": 1.0, "SoapBottle": 1.0, "Vase": 1.0},
    "Office": {"Laptop": 2.0, "Book": 3.0, "Mug": 2.0, "CellPhone": 1.0, "DeskLamp": 1.0, "Box": 1.0, "Statue": 1.0,
               "Vase": 1.0, "AlarmClock": 1.0, "Bottle": 1.0, "Basketball": 0.5},
    "DiningRoom": {"Plate": 2.0, "Bowl": 2.0, "Cup": 2.0, "Vase": 2.0, "Candle": 2.0, "Bottle": 1.0, "Apple": 1.0,
                   "Statue": 1.0, "Mug": 1.0, "Box": 0.5},
}
# fmt: on

_FLOOR_SHARE = 0.25
"""Probability that a small object allowed on both chooses the floor over a furniture top."""

_FLOOR_COLOURS: dict[str, HSV] = {
    "LivingRoom": (0.08, 0.45, 0.55),
    "Bedroom": (0.06, 0.3, 0.7),
    "Kitchen": (0.0, 0.0, 0.75),
    "Office": (0.58, 0.12, 0.5),
    "DiningRoom": (0.09, 0.5, 0.45),
}
_WALL_COLOUR: HSV = (0.12, 0.08, 0.88)
_CEILING_COLOUR: RGB = (0.95, 0.95, 0.93)


# ---------------------------------------------------------------------------------------------
# Geometry of one object


@dataclasses.dataclass(frozen=True)
class Appearance:
    """How an instance looks: primary and secondary colours (RGB in [0, 1]), its facing (0-3: its
    front towards +z, +x, −z, −x; a moved or added object keeps its geometry) and the index of the
    category's asset it was drawn from."""

    primary: RGB
    secondary: RGB
    facing: int = 0
    asset: int = 0


@dataclasses.dataclass(frozen=True)
class Asset:
    """One appearance variant of a category: local size (width, height, depth; metres) and the
    HSV colours of its primary and secondary parts (hue as a fraction of the circle)."""

    size: Vec3
    primary: HSV
    secondary: HSV


@dataclasses.dataclass(frozen=True)
class Look:
    """One instance drawn from its category's assets: local size (metres), colours (RGB in
    [0, 1]) and the asset's index."""

    size: Vec3
    primary: RGB
    secondary: RGB
    asset: int

    def appearance(self, facing: int) -> Appearance:
        return Appearance(self.primary, self.secondary, facing, self.asset)


@dataclasses.dataclass(frozen=True)
class Part:
    """One box of an object's geometry, world frame; ``tone`` 0 = primary colour, 1 = secondary."""

    box: Box3
    tone: int


@dataclasses.dataclass(frozen=True)
class Support:
    """A rectangle at height ``y`` (world frame, metres) where small objects can rest."""

    x_min: float
    z_min: float
    x_max: float
    z_max: float
    y: float


# A local part: (x0, y0, z0, x1, y1, z1, tone) with x across, z front (+) to back (−), y up from 0.
_LocalPart = tuple[float, float, float, float, float, float, int]
# A local support: (x0, z0, x1, z1, y).
_LocalSupport = tuple[float, float, float, float, float]


def _legs(w: float, d: float, height: float, leg: float) -> list[_LocalPart]:
    hw, hd = w / 2.0, d / 2.0
    return [
        (
            sx * hw - (leg if sx > 0 else 0.0),
            0.0,
            sz * hd - (leg if sz > 0 else 0.0),
            sx * hw + (leg if sx < 0 else 0.0),
            height,
            sz * hd + (leg if sz < 0 else 0.0),
            1,
        )
        for sx in (-1.0, 1.0)
        for sz in (-1.0, 1.0)
    ]


def _local_geometry(shape: str, w: float, h: float, d: float) -> tuple[list[_LocalPart], list[_LocalSupport]]:
    """Parts and supports of a shape with local size (w, h, d); front faces local +z."""
    hw, hd = w / 2.0, d / 2.0
    if shape == "table":
        top = min(0.05, 0.12 * h)
        leg = min(0.06, 0.15 * min(w, d))
        return [(-hw, h - top, -hd, hw, h, hd, 0), *_legs(w, d, h - top, leg)], [(-hw, -hd, hw, hd, h)]
    if shape == "chair":
        seat = min(0.46, 0.5 * h)
        leg = 0.04
        back = 0.06
        return [
            (-hw, seat - 0.05, -hd, hw, seat, hd, 0),
            (-hw, seat, -hd, hw, h, -hd + back, 0),
            *_legs(w, d, seat - 0.05, leg),
        ], []
    if shape in ("sofa", "armchair"):
        seat = 0.42
        back = min(0.22, 0.3 * d)
        arm = min(0.18, 0.2 * w)
        arm_top = min(seat + 0.2, h)
        parts = [
            (-hw, 0.0, -hd, hw, seat, hd, 0),
            (-hw, seat, -hd, hw, h, -hd + back, 0),
            (-hw, seat, -hd + back, -hw + arm, arm_top, hd, 0),
            (hw - arm, seat, -hd + back, hw, arm_top, hd, 0),
        ]
        return parts, [(-hw + arm, -hd + back, hw - arm, hd, seat)]
    if shape == "bed":
        base = 0.3
        mattress = min(0.58, h - 0.1)
        head = 0.08
        parts = [
            (-hw, 0.0, -hd, hw, base, hd, 1),
            (-hw + 0.03, base, -hd + head, hw - 0.03, mattress, hd - 0.03, 0),
            (-hw, base, -hd, hw, h, -hd + head, 1),
        ]
        return parts, [(-hw + 0.03, -hd + head, hw - 0.03, hd - 0.03, mattress)]
    if shape == "shelf":
        side = 0.03
        board = 0.03
        parts = [
            (-hw, 0.0, -hd, -hw + side, h, hd, 0),
            (hw - side, 0.0, -hd, hw, h, hd, 0),
            (-hw + side, 0.0, -hd, hw - side, h, -hd + 0.02, 1),
        ]
        levels = 4
        for k in range(levels):
            y = (h - board) * k / (levels - 1)
            parts.append((-hw + side, y, -hd, hw - side, y + board, hd, 0))
        return parts, [(-hw, -hd, hw, hd, h)]
    if shape == "dresser":
        gap = 0.01
        parts = [(-hw, 0.0, -hd, hw, h, hd - 0.02, 0)]
        drawers = 3
        for k in range(drawers):
            y0 = 0.08 + (h - 0.12) * k / drawers
            y1 = 0.08 + (h - 0.12) * (k + 1) / drawers - gap
            parts.append((-hw + 0.04, y0, hd - 0.02, hw - 0.04, y1, hd, 1))
        return parts, [(-hw, -hd, hw, hd, h)]
    if shape == "counter":
        top = 0.04
        return [(-hw, 0.0, -hd, hw, h - top, hd - 0.03, 1), (-hw, h - top, -hd, hw, h, hd, 0)], [(-hw, -hd, hw, hd, h)]
    if shape == "fridge":
        split = 0.62 * h
        return [
            (-hw, 0.0, -hd, hw, h, hd - 0.04, 0),
            (-hw + 0.01, 0.0, hd - 0.04, hw - 0.01, split - 0.01, hd - 0.02, 0),
            (-hw + 0.01, split, hd - 0.04, hw - 0.01, h, hd - 0.02, 0),
            (hw - 0.1, split + 0.1, hd - 0.02, hw - 0.07, split + 0.45, hd, 1),
        ], []
    if shape == "tv":
        foot = 0.04
        return [
            (-0.3 * hw, 0.0, -hd, 0.3 * hw, foot, hd, 1),
            (-0.05, foot, -0.03, 0.05, 0.1, 0.03, 1),
            (-hw, 0.1, -0.04, hw, h, 0.04, 0),
        ], []
    if shape == "floor_lamp":
        shade = min(0.4, 0.3 * h)
        pole = 0.04
        return [
            (-hw, 0.0, -hd, hw, 0.03, hd, 1),
            (-pole / 2, 0.03, -pole / 2, pole / 2, h - shade, pole / 2, 1),
            (-hw, h - shade, -hd, hw, h, hd, 0),
        ], []
    if shape == "desk_lamp":
        shade = 0.4 * h
        return [
            (-hw * 0.6, 0.0, -hd * 0.6, hw * 0.6, 0.02, hd * 0.6, 1),
            (-0.01, 0.02, -0.01, 0.01, h - shade, 0.01, 1),
            (-hw, h - shade, -hd, hw, h, hd, 0),
        ], []
    if shape == "plant":
        pot = 0.35 * h
        return [(-0.35 * w, 0.0, -0.35 * d, 0.35 * w, pot, 0.35 * d, 1), (-hw, pot, -hd, hw, h, hd, 0)], []
    if shape == "laptop":
        base = 0.02
        return [(-hw, 0.0, -hd, hw, base, hd, 0), (-hw, base, -hd, hw, h, -hd + 0.015, 0)], []
    if shape == "block":
        return [(-hw, 0.0, -hd, hw, h, hd, 0)], []
    raise ValueError(f"unknown object shape {shape!r}")


def _rotate(x: float, z: float, facing: int) -> Vec2:
    """Local (x across, z front) → world offset for a front facing +z, +x, −z, −x (0-3)."""
    if facing == 0:
        return (x, z)
    if facing == 1:
        return (z, -x)
    if facing == 2:
        return (-x, -z)
    return (-z, x)


def world_size(local_size: Vec3, facing: int) -> Vec3:
    """The world-axis box size of an object with local (width, height, depth) and ``facing``."""
    w, h, d = local_size
    return (d, h, w) if facing % 2 else (w, h, d)


def local_size(box: Box3, facing: int) -> Vec3:
    """Inverse of :func:`world_size` for a box."""
    sx, sy, sz = box.size
    return (sz, sy, sx) if facing % 2 else (sx, sy, sz)


def _to_world(rect: tuple[float, float, float, float], facing: int, cx: float, cz: float) -> tuple[float, ...]:
    ax, az = _rotate(rect[0], rect[1], facing)
    bx, bz = _rotate(rect[2], rect[3], facing)
    return (cx + min(ax, bx), cz + min(az, bz), cx + max(ax, bx), cz + max(az, bz))


def shape_of(category: str) -> str:
    spec = CATEGORIES.get(category)
    return spec.shape if spec is not None else "block"


def object_parts(category: str, box: Box3, facing: int) -> list[Part]:
    """The parts of an instance of ``category`` occupying ``box`` with ``facing`` (world frame)."""
    w, h, d = local_size(box, facing)
    cx, _, cz = box.center
    y0 = box.lo[1]
    local, _ = _local_geometry(shape_of(category), w, h, d)
    parts = []
    for x0, ya, z0, x1, yb, z1, tone in local:
        rx0, rz0, rx1, rz1 = _to_world((x0, z0, x1, z1), facing, cx, cz)
        parts.append(Part(Box3((rx0, y0 + ya, rz0), (rx1, y0 + yb, rz1)), tone))
    return parts


def object_supports(category: str, box: Box3, facing: int) -> list[Support]:
    """Where small objects can rest on an instance of ``category`` occupying ``box`` (world frame)."""
    spec = CATEGORIES.get(category)
    if spec is None or not spec.furniture:
        return []
    w, h, d = local_size(box, facing)
    cx, _, cz = box.center
    _, local = _local_geometry(spec.shape, w, h, d)
    out = []
    for x0, z0, x1, z1, y in local:
        rx0, rz0, rx1, rz1 = _to_world((x0, z0, x1, z1), facing, cx, cz)
        out.append(Support(rx0, rz0, rx1, rz1, box.lo[1] + y))
    return out


def _hsv_rgb(h: float, s: float, v: float) -> RGB:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, min(max(s, 0.0), 1.0), min(max(v, 0.0), 1.0))
    return (round(r, 4), round(g, 4), round(b, 4))


@functools.lru_cache(maxsize=512)
def category_assets(category: str, cfg: AppearanceConfig) -> tuple[Asset, ...]:
    """The asset library of ``category``: ``cfg.variants_per_category`` sizes and colours drawn
    from (``cfg.library_seed``, the category, the asset's index), the same in every home."""
    spec = CATEGORIES.get(category)
    hsv, jitter, secondary = (spec.hsv, spec.hsv_jitter, spec.secondary) if spec else ((0.0, 0.0, 0.6), _ANY, None)
    lo, hi = (np.asarray(spec.size_min), np.asarray(spec.size_max)) if spec else (np.full(3, 0.2), np.full(3, 0.2))
    assets = []
    for k in range(cfg.variants_per_category):
        rng = np.random.default_rng([cfg.library_seed, stable_seed(category), k])
        size = lo + rng.uniform(0.0, 1.0, size=3) * (hi - lo)
        offsets = rng.uniform(-1.0, 1.0, size=3) * np.asarray(jitter)
        primary = tuple(float(hsv[i] + offsets[i]) for i in range(3))
        if secondary is None:
            second = (primary[0], primary[1], 0.6 * primary[2])
        else:
            second = (secondary[0] + 0.3 * float(offsets[0]), secondary[1], secondary[2] + 0.5 * float(offsets[2]))
        assets.append(Asset((float(size[0]), float(size[1]), float(size[2])), primary, second))  # type: ignore[arg-type]
    return tuple(assets)


def usual_asset(home_seed: int, category: str, cfg: AppearanceConfig) -> int:
    """The asset of ``category`` that home ``home_seed`` mostly uses."""
    rng = np.random.default_rng([home_seed, stable_seed(category), cfg.library_seed])
    return int(rng.integers(cfg.variants_per_category))


def draw_look(
    category: str, rng: np.random.Generator, cfg: AppearanceConfig, usual: int, asset: int | None = None
) -> Look:
    """An instance of ``category``: asset ``asset`` when given, else the home's ``usual`` asset with
    probability ``cfg.home_share`` and a uniform one otherwise; then the per-instance jitter of
    size (millimetre-rounded) and colour. Always draws the same count of numbers from ``rng``."""
    pick, other = float(rng.uniform()), int(rng.integers(cfg.variants_per_category))
    if asset is None:
        asset = usual if pick < cfg.home_share else other
    base = category_assets(category, cfg)[asset]
    scale = 1.0 + rng.uniform(-cfg.size_jitter, cfg.size_jitter, size=3)
    size = np.round(np.asarray(base.size) * scale, 3)
    dh = float(rng.uniform(-cfg.hue_jitter, cfg.hue_jitter))
    ds, dv = (float(v) for v in rng.uniform(-cfg.tone_jitter, cfg.tone_jitter, size=2))
    primary = _hsv_rgb(base.primary[0] + dh, base.primary[1] + ds, base.primary[2] + dv)
    secondary = _hsv_rgb(base.secondary[0] + dh, base.secondary[1] + ds, base.secondary[2] + dv)
    return Look((float(size[0]), float(size[1]), float(size[2])), primary, secondary, asset)


def stable_seed(*keys: object) -> int:
    """A deterministic 32-bit seed from ``keys`` (crc32 of their repr; Python's hash is salted)."""
    return zlib.crc32(repr(keys).encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# The home


@dataclasses.dataclass(frozen=True)
class Room:
    """A rectangular room ``[x_min, x_max] × [z_min, z_max]`` (wall centre lines), metres."""

    name: str
    kind: str
    x_min: float
    z_min: float
    x_max: float
    z_max: float
    floor_colour: RGB

    def contains(self, point: Vec2, margin: float = 0.0) -> bool:
        return (
            self.x_min + margin <= point[0] <= self.x_max - margin
            and self.z_min + margin <= point[1] <= self.z_max - margin
        )

    @property
    def center(self) -> Vec2:
        return ((self.x_min + self.x_max) / 2.0, (self.z_min + self.z_max) / 2.0)


@dataclasses.dataclass(frozen=True)
class Doorway:
    """An opening in the wall between two rooms: the gap's floor rectangle, metres."""

    x_min: float
    z_min: float
    x_max: float
    z_max: float
    rooms: tuple[str, str]


@dataclasses.dataclass(frozen=True)
class PlacedObject:
    state: ObjectState
    appearance: Appearance


@dataclasses.dataclass(frozen=True)
class Home:
    """One procedural home: structure (rooms, walls, doorways) and its initial objects."""

    seed: int
    size_x: float
    size_z: float
    rooms: tuple[Room, ...]
    doorways: tuple[Doorway, ...]
    walls: tuple[Box3, ...]
    wall_colour: RGB
    ceiling_colour: RGB
    wall_height: float
    objects: tuple[PlacedObject, ...]
    start: Vec2

    @property
    def scene(self) -> str:
        return scene_name(self.seed)

    def grid(self, grid_size: float) -> FloorGrid:
        return FloorGrid.covering(grid_size, self.size_x, self.size_z)

    def structure_occupancy(self, grid: FloorGrid, radius: float) -> Occupancy:
        """Cells and moves blocked by walls and by lying outside every room."""
        occ = Occupancy.empty(grid)
        xs, zs = grid.xs()[:, None], grid.zs()[None, :]
        inside = np.zeros((grid.nx, grid.nz), dtype=bool)
        for room in self.rooms:
            inside |= (xs >= room.x_min) & (xs <= room.x_max) & (zs >= room.z_min) & (zs <= room.z_max)
        occ.block_cells(~inside)
        rects = np.array([[w.lo[0], w.lo[2], w.hi[0], w.hi[2]] for w in self.walls])
        occ.add_rectangles(grid, rects, radius)
        return occ


def _layout_rooms(rng: np.random.Generator, n: int, cfg: EmbeddedWorldConfig, g: float) -> list[tuple[float, ...]]:
    """Room rectangles (x0, z0, x1, z1) in one or two rows, boundaries on the lattice."""

    def length() -> float:
        lo = math.ceil(cfg.room_size_min / g - 1e-9)
        hi = math.floor(cfg.room_size_max / g + 1e-9)
        return round(int(rng.integers(lo, hi + 1)) * g, 6)

    rows = 1 if n <= 2 else 2 if n >= 4 else int(rng.integers(1, 3))
    first = n if rows == 1 else (n + int(rng.integers(0, 2))) // 2
    counts = [first] if rows == 1 else [first, n - first]
    rects = []
    z0 = 0.0
    for count in counts:
        depth = length()
        x0 = 0.0
        for _ in range(count):
            width = length()
            rects.append((x0, z0, round(x0 + width, 6), round(z0 + depth, 6)))
            x0 = round(x0 + width, 6)
        z0 = round(z0 + depth, 6)
    return rects


def _room_kinds(rng: np.random.Generator, n: int) -> list[str]:
    rest = ["Kitchen", "Bedroom", "Office", "DiningRoom", "Bedroom"]
    order = [rest[int(k)] for k in rng.permutation(len(rest))]
    if n > 2 and "Kitchen" not in order[: n - 1]:
        order.remove("Kitchen")
        order.insert(0, "Kitchen")
    return ["LivingRoom", *order[: n - 1]]


def _shared_edges(
    rects: Sequence[tuple[float, ...]], min_overlap: float
) -> list[tuple[int, int, str, float, float, float]]:
    """Adjacent room pairs: (a, b, axis, line, s0, s1) where the wall is x = line ('x') or z = line ('z')
    and the shared stretch is [s0, s1] along the other axis."""
    out = []
    for a in range(len(rects)):
        for b in range(a + 1, len(rects)):
            ra, rb = rects[a], rects[b]
            for axis, (lo_a, hi_a, lo_b, hi_b, s_a0, s_a1, s_b0, s_b1) in (
                ("x", (ra[0], ra[2], rb[0], rb[2], ra[1], ra[3], rb[1], rb[3])),
                ("z", (ra[1], ra[3], rb[1], rb[3], ra[0], ra[2], rb[0], rb[2])),
            ):
                line = hi_a if abs(hi_a - lo_b) < 1e-9 else lo_a if abs(lo_a - hi_b) < 1e-9 else None
                if line is None:
                    continue
                s0, s1 = max(s_a0, s_b0), min(s_a1, s_b1)
                if s1 - s0 >= min_overlap:
                    out.append((a, b, axis, line, s0, s1))
    return out


def _subtract(intervals: list[tuple[float, float]], holes: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = intervals
    for h0, h1 in holes:
        nxt = []
        for a, b in out:
            if h1 <= a or h0 >= b:
                nxt.append((a, b))
                continue
            if h0 > a:
                nxt.append((a, h0))
            if h1 < b:
                nxt.append((h1, b))
        out = nxt
    return out


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + 1e-9:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _walls(rects, doors, t: float, height: float) -> list[Box3]:
    """Wall boxes along every room edge, with the doorway gaps cut out."""
    walls: list[Box3] = []
    for axis in ("x", "z"):
        lines: dict[float, list[tuple[float, float]]] = {}
        for x0, z0, x1, z1 in rects:
            if axis == "x":
                lines.setdefault(x0, []).append((z0, z1))
                lines.setdefault(x1, []).append((z0, z1))
            else:
                lines.setdefault(z0, []).append((x0, x1))
                lines.setdefault(z1, []).append((x0, x1))
        for line in sorted(lines):
            spans = [(a - t / 2.0, b + t / 2.0) for a, b in _union(lines[line])]
            holes = [(d[1], d[2]) for d in doors if d[0] == axis and abs(d[3] - line) < 1e-9]
            for a, b in _subtract(spans, holes):
                if axis == "x":
                    walls.append(Box3((line - t / 2.0, 0.0, a), (line + t / 2.0, height, b)))
                else:
                    walls.append(Box3((a, 0.0, line - t / 2.0), (b, height, line + t / 2.0)))
    return walls


class _Builder:
    """Mutable state while furnishing one home; every check that placement needs lives here."""

    def __init__(self, rng, world: WorldConfig, cfg: EmbeddedWorldConfig, home: Home, zones: list[tuple[float, ...]]):
        self.rng = rng
        self.world = world
        self.cfg = cfg
        self.home = home
        self.zones = np.array(zones, dtype=float).reshape(-1, 4)
        self.grid = home.grid(world.grid_size)
        self.occupancy = home.structure_occupancy(self.grid, world.agent_radius)
        self.part_lo = [np.array(w.lo) for w in home.walls]
        self.part_hi = [np.array(w.hi) for w in home.walls]
        self.part_owner: list[int] = [-1] * len(home.walls)
        self.objects: list[PlacedObject] = []
        self.supports: list[tuple[int, Support]] = []
        self.furniture_rects: list[tuple[float, float, float, float]] = []
        self.counters: dict[str, int] = {}
        xs, zs = self.grid.xs()[:, None], self.grid.zs()[None, :]
        self.room_cells = {
            r.name: (xs > r.x_min) & (xs < r.x_max) & (zs > r.z_min) & (zs < r.z_max) for r in home.rooms
        }

    def interior(self, room: Room) -> tuple[float, float, float, float]:
        t = self.cfg.wall_thickness / 2.0
        return (room.x_min + t, room.z_min + t, room.x_max - t, room.z_max - t)

    def overlaps_parts(self, parts: list[Part], margin: float, exclude: int | None = None) -> bool:
        if not self.part_lo:
            return False
        lo = np.array(self.part_lo)
        hi = np.array(self.part_hi)
        owner = np.array(self.part_owner)
        tol = self.cfg.contact_tolerance
        grow = np.array([margin, 0.0, margin])
        for part in parts:
            plo = np.array(part.box.lo) - grow
            phi = np.array(part.box.hi) + grow
            hit = np.all((plo < hi - tol) & (lo < phi - tol), axis=1)
            if exclude is not None:
                hit &= owner != exclude
            if hit.any():
                return True
        return False

    def floor_rect_ok(self, rect: tuple[float, ...], room: Room, gap: float) -> bool:
        """Inside the room's interior (with ``gap`` to the walls), clear of doorway zones and furniture."""
        ix0, iz0, ix1, iz1 = self.interior(room)
        x0, z0, x1, z1 = rect
        if x0 < ix0 + gap - 1e-9 or z0 < iz0 + gap - 1e-9 or x1 > ix1 - gap + 1e-9 or z1 > iz1 - gap + 1e-9:
            return False
        if len(self.zones):
            z = self.zones
            if np.any((x0 < z[:, 2]) & (z[:, 0] < x1) & (z0 < z[:, 3]) & (z[:, 1] < z1)):
                return False
        for fx0, fz0, fx1, fz1 in self.furniture_rects:
            if x0 < fx1 + gap and fx0 < x1 + gap and z0 < fz1 + gap and fz0 < z1 + gap:
                return False
        return True

    def keeps_home_connected(self, rect: tuple[float, ...]) -> Occupancy | None:
        """The occupancy with ``rect`` added if every free cell stays connected and every room keeps
        its share of free cells; None otherwise."""
        trial = self.occupancy.copy()
        trial.add_rectangles(self.grid, np.array([rect]), self.world.agent_radius)
        count, _ = trial.free_components()
        if count != 1:
            return None
        for cells in self.room_cells.values():
            if (cells & ~trial.cells).sum() < self.cfg.room_free_fraction * cells.sum():
                return None
        return trial

    def new_id(self, category: str) -> str:
        self.counters[category] = self.counters.get(category, 0) + 1
        return f"{category}_{self.counters[category]}"

    def draw(self, category: str, asset: int | None = None) -> Look:
        """A look of ``category`` for this home (see :func:`draw_look`)."""
        appearance = self.world.appearance
        return draw_look(category, self.rng, appearance, usual_asset(self.home.seed, category, appearance), asset)

    def commit(
        self, category: str, box: Box3, facing: int, on_floor_rect: Occupancy | None, look: Look
    ) -> PlacedObject:
        spec = CATEGORIES[category]
        state = ObjectState(self.new_id(category), category, box.center, box, spec.movable)
        placed = PlacedObject(state, look.appearance(facing))
        index = len(self.objects)
        self.objects.append(placed)
        for part in object_parts(category, box, facing):
            self.part_lo.append(np.array(part.box.lo))
            self.part_hi.append(np.array(part.box.hi))
            self.part_owner.append(index)
        for support in object_supports(category, box, facing):
            self.supports.append((index, support))
        if on_floor_rect is not None:
            self.occupancy = on_floor_rect
        return placed

    def try_floor(
        self, category: str, room: Room, centre: Vec2, look: Look, facing: int, gap: float
    ) -> PlacedObject | None:
        """Place ``category`` looking like ``look`` on the floor at ``centre`` if every check passes."""
        sx, sy, sz = world_size(look.size, facing)
        cx, cz = round(centre[0], 3), round(centre[1], 3)
        rect = (cx - sx / 2.0, cz - sz / 2.0, cx + sx / 2.0, cz + sz / 2.0)
        if not self.floor_rect_ok(rect, room, gap):
            return None
        box = Box3((rect[0], 0.0, rect[1]), (rect[2], sy, rect[3]))
        if self.overlaps_parts(object_parts(category, box, facing), 0.0):
            return None
        trial = self.keeps_home_connected(rect)
        if trial is None:
            return None
        placed = self.commit(category, box, facing, trial, look)
        self.furniture_rects.append(rect)
        return placed

    def place_furniture(self, category: str, room: Room) -> PlacedObject | None:
        spec = CATEGORIES[category]
        gap = self.cfg.furniture_gap
        ix0, iz0, ix1, iz1 = self.interior(room)
        for _ in range(self.cfg.placement_attempts):
            look = self.draw(category)
            size = look.size
            if spec.placement == "wall":
                side = int(self.rng.integers(0, 4))
                sx, _, sz = world_size(size, side)
                u = float(self.rng.uniform(0.0, 1.0))
                if side in (0, 2):
                    cx = ix0 + gap + sx / 2.0 + u * max(ix1 - ix0 - 2 * gap - sx, 0.0)
                    cz = iz0 + gap + sz / 2.0 if side == 0 else iz1 - gap - sz / 2.0
                else:
                    cz = iz0 + gap + sz / 2.0 + u * max(iz1 - iz0 - 2 * gap - sz, 0.0)
                    cx = ix0 + gap + sx / 2.0 if side == 1 else ix1 - gap - sx / 2.0
                placed = self.try_floor(category, room, (cx, cz), look, side, gap * 0.5)
            else:
                facing = int(self.rng.integers(0, 4))
                sx, _, sz = world_size(size, facing)
                m = self.cfg.wall_margin
                if ix1 - ix0 - 2 * m < sx or iz1 - iz0 - 2 * m < sz:
                    continue
                cx = float(self.rng.uniform(ix0 + m + sx / 2.0, ix1 - m - sx / 2.0))
                cz = float(self.rng.uniform(iz0 + m + sz / 2.0, iz1 - m - sz / 2.0))
                placed = self.try_floor(category, room, (cx, cz), look, facing, gap)
            if placed is not None:
                return placed
        return None

    def place_in_front(
        self, category: str, room: Room, anchor: PlacedObject, distance: float, face_back: bool
    ) -> PlacedObject | None:
        """Place ``category`` centred in front of ``anchor`` at ``distance`` from its front."""
        facing = anchor.appearance.facing
        look = self.draw(category)
        _, _, d = look.size
        box = anchor.state.box
        _, _, ad = local_size(box, facing)
        fx, fz = _rotate(0.0, ad / 2.0 + distance + d / 2.0, facing)
        own = (facing + 2) % 4 if face_back else facing
        return self.try_floor(
            category, room, (box.center[0] + fx, box.center[2] + fz), look, own, self.cfg.furniture_gap
        )

    def place_chairs(self, room: Room, table: PlacedObject, count: int) -> None:
        """Up to ``count`` chairs around ``table``, one set: every chair is the same asset."""
        box = table.state.box
        chair_set = self.draw("Chair").asset
        long_x = box.size[0] >= box.size[2]
        length = box.size[0] if long_x else box.size[2]
        for k in range(count):
            side = k % 2
            slot = k // 2
            slots = (count + 1 - side) // 2
            along = (slot + 1) / (slots + 1) * length - length / 2.0
            look = self.draw("Chair", chair_set)
            _, _, d = look.size
            gap = self.cfg.furniture_gap * 2
            if long_x:
                facing = 0 if side == 0 else 2
                cz = box.lo[2] - gap - d / 2.0 if side == 0 else box.hi[2] + gap + d / 2.0
                centre = (box.center[0] + along, cz)
            else:
                facing = 1 if side == 0 else 3
                cx = box.lo[0] - gap - d / 2.0 if side == 0 else box.hi[0] + gap + d / 2.0
                centre = (cx, box.center[2] + along)
            self.try_floor("Chair", room, centre, look, facing, self.cfg.furniture_gap)

    def place_on(self, category: str, index: int, support: Support, facing: int | None = None) -> PlacedObject | None:
        """Place a small object on ``support`` of object ``index`` (centred when ``facing`` is given)."""
        margin = self.cfg.surface_margin
        for _ in range(self.cfg.placement_attempts if facing is None else 1):
            look = self.draw(category)
            own = int(self.rng.integers(0, 4)) if facing is None else facing
            sx, sy, sz = world_size(look.size, own)
            free_x = support.x_max - support.x_min - sx - 2 * margin
            free_z = support.z_max - support.z_min - sz - 2 * margin
            if free_x < 0.0 or free_z < 0.0:
                continue
            if facing is None:
                cx = support.x_min + margin + sx / 2.0 + float(self.rng.uniform(0.0, free_x))
                cz = support.z_min + margin + sz / 2.0 + float(self.rng.uniform(0.0, free_z))
            else:
                cx, cz = (support.x_min + support.x_max) / 2.0, (support.z_min + support.z_max) / 2.0
            cx, cz = round(cx, 3), round(cz, 3)
            box = Box3((cx - sx / 2.0, support.y, cz - sz / 2.0), (cx + sx / 2.0, support.y + sy, cz + sz / 2.0))
            parts = object_parts(category, box, own)
            if self.overlaps_parts(parts, 0.0) or self.overlaps_parts(parts, margin, exclude=index):
                continue
            return self.commit(category, box, own, None, look)
        return None


def generate_home(seed: int, world: WorldConfig, cfg: EmbeddedWorldConfig) -> Home:
    """The home of ``embedded-<seed>``: deterministic in ``seed`` and the two config sections."""
    _check_config(world, cfg)
    rng = np.random.default_rng(seed)
    g = world.grid_size
    n = int(rng.integers(cfg.rooms_min, cfg.rooms_max + 1))
    rects = _layout_rooms(rng, n, cfg, g)
    kinds = _room_kinds(rng, n)
    names = _unique_names(kinds)
    rooms = []
    for name, kind, rect in zip(names, kinds, rects, strict=True):
        h, s, v = _FLOOR_COLOURS[kind]
        jitter = rng.uniform(-1.0, 1.0, size=3) * np.array([0.03, 0.1, 0.1])
        rooms.append(Room(name, kind, *rect, _hsv_rgb(h + jitter[0], s + jitter[1], v + jitter[2])))
    # Doorways: a random spanning tree of the adjacency, plus the odd extra door.
    margin = cfg.wall_thickness / 2.0 + g

    def door_centres(s0: float, s1: float) -> tuple[int, int]:
        """Lattice indices of the doorway centres that keep the opening off the wall's ends."""
        lo = math.ceil((s0 + margin + cfg.door_width / 2.0) / g - 1e-9)
        return lo, math.floor((s1 - margin - cfg.door_width / 2.0) / g + 1e-9)

    edges = [
        e for e in _shared_edges(rects, cfg.door_width) if door_centres(e[4], e[5])[0] <= door_centres(e[4], e[5])[1]
    ]
    order = [edges[int(k)] for k in rng.permutation(len(edges))]
    parent = list(range(n))

    def root(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    doors = []
    doorways = []
    for a, b, axis, line, s0, s1 in order:
        joins = root(a) != root(b)
        extra = float(rng.uniform()) < 0.3
        if not joins and not extra:
            continue
        parent[root(a)] = root(b)
        lo, hi = door_centres(s0, s1)
        centre = round(int(rng.integers(lo, hi + 1)) * g, 6)
        d0, d1 = centre - cfg.door_width / 2.0, centre + cfg.door_width / 2.0
        doors.append((axis, d0, d1, line))
        t = cfg.wall_thickness / 2.0
        if axis == "x":
            doorways.append(Doorway(line - t, d0, line + t, d1, (names[a], names[b])))
        else:
            doorways.append(Doorway(d0, line - t, d1, line + t, (names[a], names[b])))
    if len({root(k) for k in range(n)}) != 1:
        raise RuntimeError(f"embedded-{seed}: rooms could not all be joined by doorways; check embedded.door_width")
    size_x = max(r[2] for r in rects)
    size_z = max(r[3] for r in rects)
    wh = cfg.wall_height
    wall_hsv = (_WALL_COLOUR[0] + float(rng.uniform(-0.05, 0.05)), _WALL_COLOUR[1], _WALL_COLOUR[2])
    home = Home(
        seed,
        size_x,
        size_z,
        tuple(rooms),
        tuple(doorways),
        tuple(_walls(rects, doors, cfg.wall_thickness, wh)),
        _hsv_rgb(*wall_hsv),
        _CEILING_COLOUR,
        wh,
        (),
        (0.0, 0.0),
    )
    zones = []
    for door in doorways:
        c = cfg.door_clearance
        if door.x_max - door.x_min < door.z_max - door.z_min:  # a wall along z (x = const)
            zones.append((door.x_min - c, door.z_min, door.x_max + c, door.z_max))
        else:
            zones.append((door.x_min, door.z_min - c, door.x_max, door.z_max + c))
    builder = _Builder(rng, world, cfg, home, zones)
    _furnish(builder, rooms)
    _scatter_small_objects(builder, rooms)
    start = _start_position(builder, rooms[0])
    return dataclasses.replace(home, objects=tuple(builder.objects), start=start)


def _unique_names(kinds: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    names = []
    for kind in kinds:
        seen[kind] = seen.get(kind, 0) + 1
        names.append(kind if kinds.count(kind) == 1 else f"{kind}_{seen[kind]}")
    return names


def _weighted(rng: np.random.Generator, weights: dict[str, float]) -> str:
    names = sorted(weights)
    p = np.array([weights[k] for k in names], dtype=float)
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def _furnish(builder: _Builder, rooms: Sequence[Room]) -> None:
    cfg = builder.cfg
    rng = builder.rng
    for room in rooms:
        required, optional = _ROOM_FURNITURE[room.kind]
        count = int(rng.integers(cfg.furniture_per_room_min, cfg.furniture_per_room_max + 1))
        wanted = list(required) + [_weighted(rng, optional) for _ in range(max(count - len(required), 0))]
        sofa: PlacedObject | None = None
        for category in wanted:
            if category == "CoffeeTable" and sofa is not None:
                placed = builder.place_in_front(category, room, sofa, float(rng.uniform(0.35, 0.55)), False)
                placed = placed or builder.place_furniture(category, room)
            else:
                placed = builder.place_furniture(category, room)
            if placed is None:
                continue
            if category == "Sofa":
                sofa = placed
            elif category == "DiningTable":
                builder.place_chairs(room, placed, int(rng.integers(2, 5)))
            elif category == "Desk":
                builder.place_in_front("Chair", room, placed, builder.cfg.furniture_gap * 2, True)
            elif category == "TVStand":
                index = len(builder.objects) - 1
                for _, support in [s for s in builder.supports if s[0] == index]:
                    builder.place_on("Television", index, support, facing=placed.appearance.facing)


def _scatter_small_objects(builder: _Builder, rooms: Sequence[Room]) -> None:
    cfg = builder.cfg
    rng = builder.rng
    for room in rooms:
        count = int(rng.integers(cfg.small_objects_per_room_min, cfg.small_objects_per_room_max + 1))
        supports = [
            (index, support)
            for index, support in builder.supports
            if room.contains(((support.x_min + support.x_max) / 2.0, (support.z_min + support.z_max) / 2.0))
        ]
        placed_count = 0
        for _ in range(count * 3):
            if placed_count >= count:
                break
            category = _weighted(rng, _ROOM_SMALL[room.kind])
            spec = CATEGORIES[category]
            tops = [
                (index, s)
                for index, s in supports
                if spec.on is None or builder.objects[index].state.category in spec.on
            ]
            use_floor = spec.floor and (not tops or float(rng.uniform()) < _FLOOR_SHARE)
            placed = None
            if use_floor:
                ix0, iz0, ix1, iz1 = builder.interior(room)
                for _attempt in range(cfg.placement_attempts):
                    look = builder.draw(category)
                    facing = int(rng.integers(0, 4))
                    cx = float(rng.uniform(ix0, ix1))
                    cz = float(rng.uniform(iz0, iz1))
                    placed = builder.try_floor(category, room, (cx, cz), look, facing, cfg.furniture_gap)
                    if placed is not None:
                        break
            elif tops:
                index, support = tops[int(rng.integers(0, len(tops)))]
                placed = builder.place_on(category, index, support)
            placed_count += placed is not None


def _start_position(builder: _Builder, room: Room) -> Vec2:
    """The free lattice cell of ``room`` nearest its centre."""
    cells = builder.room_cells[room.name] & ~builder.occupancy.cells
    ii, jj = np.nonzero(cells)
    if ii.size == 0:
        raise RuntimeError(f"embedded-{builder.home.seed}: room {room.name} has no free cell for the agent")
    g = builder.grid.grid_size
    cx, cz = room.center
    k = int(np.argmin((ii * g - cx) ** 2 + (jj * g - cz) ** 2))
    return builder.grid.position(int(ii[k]), int(jj[k]))


def _check_config(world: WorldConfig, cfg: EmbeddedWorldConfig) -> None:
    where = "config sim_node.embedded"
    if not 1 <= cfg.rooms_min <= cfg.rooms_max:
        raise ValueError(f"{where}: need 1 <= rooms_min <= rooms_max, got {cfg.rooms_min}, {cfg.rooms_max}")
    if not 0.0 < cfg.room_size_min <= cfg.room_size_max:
        raise ValueError(f"{where}: need 0 < room_size_min <= room_size_max")
    if math.floor(cfg.room_size_max / world.grid_size + 1e-9) < math.ceil(cfg.room_size_min / world.grid_size - 1e-9):
        raise ValueError(f"{where}: no multiple of world.grid_size lies in [room_size_min, room_size_max]")
    if cfg.door_width < 2 * world.agent_radius:
        raise ValueError(f"{where}.door_width {cfg.door_width} m is narrower than the agent (2 x world.agent_radius)")
    if cfg.room_size_min < cfg.door_width + cfg.wall_thickness + 2 * world.grid_size:
        raise ValueError(f"{where}: room_size_min is too small to hold a doorway of door_width")
    if len(cfg.light_direction) != 3:
        raise ValueError(f"{where}.light_direction must have 3 entries (x, y, z), got {cfg.light_direction}")
    look = world.appearance
    checks = {
        "variants_per_category": (look.variants_per_category >= 1, "an integer >= 1"),
        "home_share": (0.0 <= look.home_share <= 1.0, "a probability in [0, 1]"),
        "size_jitter": (0.0 <= look.size_jitter < 1.0, "a fraction in [0, 1)"),
        "hue_jitter": (0.0 <= look.hue_jitter <= 0.5, "a fraction of the hue circle in [0, 0.5]"),
        "tone_jitter": (0.0 <= look.tone_jitter <= 1.0, "a value in [0, 1]"),
        "library_seed": (look.library_seed >= 0, "a non-negative integer"),
    }
    check_ranges("sim_node.world.appearance", look, checks)
