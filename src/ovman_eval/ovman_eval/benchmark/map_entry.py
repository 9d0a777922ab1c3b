"""A map cache entry and its file format: :class:`GroupMaps` <-> a JSON document and numpy arrays.

An entry holds a recorded group's lean maps, its ground truth (:class:`GroupTruth`), diagnostics,
phrase vectors, association and true category shares (:mod:`ovman_eval.benchmark.map_cache` says
what each is for). :func:`encode_entry` stores every float in a float64 (or its own dtype's) array
and every other value in the JSON document of a checksummed array bundle
(:mod:`ovman_core.array_bundle`), so that :func:`decode_entry` gives back equal values of the
same types, and reading runs no code. Frames: AI2-THOR world (metres).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ovman_core.array_bundle import pack_bundle, unpack_bundle
from ovman_core.boxes import Box3
from ovman_core.world_state import ObjectState, WorldState
from ovman_mapping.instances import InstanceMap
from ovman_mapping.map_codec import distinct, map_document, map_of, stored
from ovman_query.arms import TrueShares
from ovman_query.association import Association, MatchedPair

CACHE_FORMAT = 7
"""Bumped when :class:`GroupMaps` or the entry codec changes shape."""


@dataclasses.dataclass(frozen=True)
class GroupTruth:
    """Ground truth read from a group's recordings (AI2-THOR world frame).

    ``visit2_end`` is the evaluated world; ``carried`` the mover's instance at every visit-2 frame
    (empty without a mover); ``discoverable1``/``discoverable2`` the instances seen in at least one
    frame of each tour (the diagnostics' G_base); ``boxes``: per visit, every distinct object box
    (id and box) its frames show, in order of first appearance (the true categories of map
    instances, :mod:`ovman_eval.benchmark.truth_shares`).
    """

    visit1: WorldState
    visit2_start: WorldState
    visit2_end: WorldState
    carried: tuple[ObjectState, ...]
    discoverable1: frozenset[str]
    discoverable2: frozenset[str]
    boxes: dict[int, tuple[ObjectState, ...]]


@dataclasses.dataclass(frozen=True)
class GroupMaps:
    """One cache entry (see the module docstring). ``diagnostics``: ``visit1``/``visit2`` map
    summaries and ``memory`` (SIR and per-change-kind counts) as plain JSON-able dicts; the
    association depends only on the maps and the configuration, so it is kept too."""

    format_version: int
    group_id: str
    encoder: str
    map1: InstanceMap
    map2: InstanceMap
    truth: GroupTruth
    diagnostics: dict[str, Any]
    phrases: dict[str, np.ndarray]
    association: Association | None = None
    """The agent's association of ``map1`` and ``map2`` (None when not computed)."""
    shares: dict[int, TrueShares] = dataclasses.field(default_factory=dict)
    """Per visit, the true category shares of the map's instances (:mod:`ovman_eval.benchmark.truth_shares`;
    ground truth, read by the oracle_grounding arm only)."""


# ---- entry codec: GroupMaps <-> a JSON document and numpy arrays (ovman_core.array_bundle) ----
# The maps go through ovman_mapping.map_codec.
# Every float is stored in a float64 (or its own dtype's) array and every other value in the JSON
# document, so that decoding gives back equal values of the same types. Arrays are referred to by
# their index in the bundle. Sightings and object states shared between places (a lean map repeats
# an instance's first sighting) are stored once.


def encode_entry(entry: GroupMaps) -> bytes:
    """The bytes of an entry file."""
    arrays: list[np.ndarray] = []
    document = {
        "format_version": entry.format_version,
        "group_id": entry.group_id,
        "encoder": entry.encoder,
        "maps": [map_document(m, arrays) for m in (entry.map1, entry.map2)],
        "truth": _truth_document(entry.truth, arrays),
        "diagnostics": _checked_plain(entry.diagnostics, "diagnostics"),
        "phrases": {phrase: stored(arrays, vector) for phrase, vector in entry.phrases.items()},
        "association": None if entry.association is None else _association_document(entry.association, arrays),
        "shares": [[visit, _shares_document(s, arrays)] for visit, s in entry.shares.items()],
    }
    return pack_bundle(document, arrays)


def decode_entry(data: bytearray) -> GroupMaps | None:
    """The entry in ``data``, None when it is of another :data:`CACHE_FORMAT`."""
    document, arrays = unpack_bundle(data)
    if document["format_version"] != CACHE_FORMAT:
        return None
    association = document["association"]
    return GroupMaps(
        format_version=document["format_version"],
        group_id=document["group_id"],
        encoder=document["encoder"],
        map1=map_of(document["maps"][0], arrays),
        map2=map_of(document["maps"][1], arrays),
        truth=_truth_of(document["truth"], arrays),
        diagnostics=document["diagnostics"],
        phrases={phrase: arrays[k] for phrase, k in document["phrases"].items()},
        association=None if association is None else _association_of(association, arrays),
        shares={visit: _shares_of(shares, arrays) for visit, shares in document["shares"]},
    )


def _checked_plain(value: Any, where: str) -> Any:
    """``value`` when JSON gives it back equal and of the same types (dicts with str keys, lists,
    str, int, float, bool, None); TypeError naming ``where`` otherwise."""
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"{where}: key {key!r} is not a str")
            _checked_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, list):
        for k, item in enumerate(value):
            _checked_plain(item, f"{where}[{k}]")
    elif type(value) not in (str, int, float, bool, type(None)):
        raise TypeError(f"{where}: a {type(value).__name__} does not round-trip through JSON")
    return value


def _truth_document(truth: GroupTruth, arrays: list[np.ndarray]) -> dict[str, Any]:
    worlds = {"visit1": truth.visit1, "visit2_start": truth.visit2_start, "visit2_end": truth.visit2_end}
    boxes = [o for visit_boxes in truth.boxes.values() for o in visit_boxes]
    objects, row_of = distinct([o for world in worlds.values() for o in world] + [*truth.carried] + boxes)
    return {
        "instance_id": [o.instance_id for o in objects],
        "category": [o.category for o in objects],
        "movable": [o.movable for o in objects],
        "geometry": stored(arrays, np.array([(*o.position, *o.box.lo, *o.box.hi) for o in objects], np.float64)),
        **{name: [row_of[id(o)] for o in world] for name, world in worlds.items()},
        "carried": [row_of[id(o)] for o in truth.carried],
        "discoverable1": sorted(truth.discoverable1),
        "discoverable2": sorted(truth.discoverable2),
        "boxes": [[visit, [row_of[id(o)] for o in boxes]] for visit, boxes in truth.boxes.items()],
    }


def _truth_of(document: dict[str, Any], arrays: list[np.ndarray]) -> GroupTruth:
    objects = [
        ObjectState(instance_id, category, tuple(row[:3]), Box3(tuple(row[3:6]), tuple(row[6:])), movable)
        for instance_id, category, movable, row in zip(
            document["instance_id"],
            document["category"],
            document["movable"],
            arrays[document["geometry"]].tolist(),
            strict=True,
        )
    ]

    def world(name: str) -> WorldState:
        return WorldState({objects[k].instance_id: objects[k] for k in document[name]})

    return GroupTruth(
        visit1=world("visit1"),
        visit2_start=world("visit2_start"),
        visit2_end=world("visit2_end"),
        carried=tuple(objects[k] for k in document["carried"]),
        discoverable1=frozenset(document["discoverable1"]),
        discoverable2=frozenset(document["discoverable2"]),
        boxes={visit: tuple(objects[k] for k in rows) for visit, rows in document["boxes"]},
    )


def _pairs_document(pairs: tuple[MatchedPair, ...], arrays: list[np.ndarray]) -> dict[str, Any]:
    numbers = np.array([(p.cost, p.dissimilarity, p.distance, p.displacement) for p in pairs], np.float64)
    return {"ids": [[p.uid1, p.uid2, p.stage] for p in pairs], "numbers": stored(arrays, numbers)}


def _pairs_of(document: dict[str, Any], arrays: list[np.ndarray]) -> tuple[MatchedPair, ...]:
    numbers = arrays[document["numbers"]].tolist()
    return tuple(MatchedPair(*pair, *row) for pair, row in zip(document["ids"], numbers, strict=True))


def _association_document(association: Association, arrays: list[np.ndarray]) -> dict[str, Any]:
    return {
        "pairs": _pairs_document(association.pairs, arrays),
        "removed": list(association.removed),
        "appeared": list(association.appeared),
        "unconfirmed": list(association.unconfirmed),
        "unseen": _pairs_document(association.unseen, arrays),
    }


def _association_of(document: dict[str, Any], arrays: list[np.ndarray]) -> Association:
    return Association(
        pairs=_pairs_of(document["pairs"], arrays),
        removed=tuple(document["removed"]),
        appeared=tuple(document["appeared"]),
        unconfirmed=tuple(document["unconfirmed"]),
        unseen=_pairs_of(document["unseen"], arrays),
    )


def _shares_document(shares: TrueShares, arrays: list[np.ndarray]) -> dict[str, Any]:
    return {
        "uids": list(shares),
        "categories": [list(categories) for categories in shares.values()],
        "values": stored(arrays, np.array([v for s in shares.values() for v in s.values()], np.float64)),
    }


def _shares_of(document: dict[str, Any], arrays: list[np.ndarray]) -> TrueShares:
    values = iter(arrays[document["values"]].tolist())
    return {
        uid: {category: next(values) for category in categories}
        for uid, categories in zip(document["uids"], document["categories"], strict=True)
    }
