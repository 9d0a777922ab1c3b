"""An :class:`~ovman_mapping.instances.InstanceMap` <-> a JSON document and numpy arrays, for a
checksummed array bundle (:mod:`ovman_core.array_bundle`): the map cache's and the map store's.

Every float is stored in a float64 (or its own dtype's) array and every other value in the JSON
document, so that decoding gives back equal values of the same types. Arrays are referred to by
their index in the bundle. Sightings shared between instances are stored once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ovman_core.boxes import Box3
from ovman_mapping.instances import CrossVisitEvidence, Instance, InstanceMap, MapSnapshot, Sighting


def stored(arrays: list[np.ndarray], array: np.ndarray) -> int:
    """Append ``array`` to ``arrays``; its index."""
    arrays.append(array)
    return len(arrays) - 1


def distinct(items: Iterable[Any]) -> tuple[list[Any], dict[int, int]]:
    """The distinct objects of ``items`` (by identity) in order of first appearance, and the row of
    each by ``id``."""
    rows: list[Any] = []
    row_of: dict[int, int] = {}
    for item in items:
        if id(item) not in row_of:
            row_of[id(item)] = len(rows)
            rows.append(item)
    return rows, row_of


def stored_rows(arrays: list[np.ndarray], rows: list[np.ndarray]) -> dict[str, Any]:
    """``rows`` as one stacked array when they share a dtype and shape (one array to read instead
    of one per instance), else one by one."""
    if rows and len({(row.dtype, row.shape) for row in rows}) == 1:
        return {"stack": stored(arrays, np.stack(rows))}
    return {"each": [stored(arrays, row) for row in rows]}


def rows_of(document: dict[str, Any], arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The rows of a :func:`stored_rows` document."""
    if "stack" in document:
        return list(arrays[document["stack"]])
    return [arrays[k] for k in document["each"]]


def map_document(instance_map: InstanceMap, arrays: list[np.ndarray]) -> dict[str, Any]:
    """The JSON document of ``instance_map``, its arrays appended to ``arrays``."""
    instances = instance_map.instances
    sightings, row_of = distinct(s for i in instances for s in i.sightings)
    return {
        "visit": instance_map.visit,
        "encoder": instance_map.encoder,
        "frames": instance_map.frames,
        "aliases": dict(instance_map.aliases),
        "prior": None
        if instance_map.prior is None
        else {"gone": sorted(instance_map.prior.gone), "new": sorted(instance_map.prior.new)},
        "history": [
            {
                "frame_index": snapshot.frame_index,
                "step": snapshot.step,
                "uids": list(snapshot.positions),
                "seen": sorted(snapshot.seen),
                "positions": stored(arrays, np.array(list(snapshot.positions.values()), dtype=np.float64)),
            }
            for snapshot in instance_map.history
        ],
        "sighting_counts": stored(
            arrays, np.array([(s.frame_index, s.step, s.pixel_count) for s in sightings], dtype=np.int64)
        ),
        "sighting_positions": stored(arrays, np.array([s.position for s in sightings], dtype=np.float64)),
        "uid": [i.uid for i in instances],
        "geometry": stored(arrays, np.array([(*i.position, *i.box.lo, *i.box.hi) for i in instances], np.float64)),
        "points": stored_rows(arrays, [i.points for i in instances]),
        "feature": stored_rows(arrays, [i.feature for i in instances]),
        "colour": stored_rows(arrays, [i.colour for i in instances]),
        "label_names": [list(i.labels) for i in instances],
        "label_shares": stored(arrays, np.array([v for i in instances for v in i.labels.values()], np.float64)),
        "sightings": [[row_of[id(s)] for s in i.sightings] for i in instances],
        "moving": [i.moving for i in instances],
        "motion_evidence": [i.motion_evidence for i in instances],
    }


def map_of(document: dict[str, Any], arrays: list[np.ndarray]) -> InstanceMap:
    """The map of a :func:`map_document` and its bundle's arrays."""
    counts = arrays[document["sighting_counts"]].tolist()
    positions = arrays[document["sighting_positions"]].tolist()
    sightings = [Sighting(c[0], c[1], tuple(p), c[2]) for c, p in zip(counts, positions, strict=True)]
    shares = iter(arrays[document["label_shares"]].tolist())
    instances = tuple(
        Instance(
            uid=uid,
            position=tuple(row[:3]),
            box=Box3(tuple(row[3:6]), tuple(row[6:])),
            points=points,
            feature=feature,
            colour=colour,
            labels={name: next(shares) for name in names},
            sightings=tuple([sightings[k] for k in rows]),
            moving=moving,
            motion_evidence=evidence,
        )
        for uid, row, points, feature, colour, names, rows, moving, evidence in zip(
            document["uid"],
            arrays[document["geometry"]].tolist(),
            rows_of(document["points"], arrays),
            rows_of(document["feature"], arrays),
            rows_of(document["colour"], arrays),
            document["label_names"],
            document["sightings"],
            document["moving"],
            document["motion_evidence"],
            strict=True,
        )
    )
    history = tuple(
        MapSnapshot(
            frame_index=snapshot["frame_index"],
            step=snapshot["step"],
            positions={
                uid: tuple(row)
                for uid, row in zip(snapshot["uids"], arrays[snapshot["positions"]].tolist(), strict=True)
            },
            seen=frozenset(snapshot["seen"]),
        )
        for snapshot in document["history"]
    )
    return InstanceMap(
        visit=document["visit"],
        instances=instances,
        encoder=document["encoder"],
        frames=document["frames"],
        history=history,
        aliases=document["aliases"],
        prior=None
        if document["prior"] is None
        else CrossVisitEvidence(frozenset(document["prior"]["gone"]), frozenset(document["prior"]["new"])),
    )
