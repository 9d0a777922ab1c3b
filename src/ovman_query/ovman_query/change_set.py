"""The change set between two visits' maps, from their association (what query_node publishes).

One entry per matched pair and per unmatched instance: a pair is ``MOVING`` when its visit-2
instance carries the motion attribute, else ``MOVED`` from a floor displacement of
``task.min_displacement`` (Δmin) on and ``STAYED`` below; an unmatched visit-1 instance is
``REMOVED``, an unmatched visit-2 one ``APPEARED`` (``MOVING`` with the motion attribute).
Unconfirmed instances are no change and are not listed, unless a visit-2 one moves. An unmatched
instance's cost is the stage-two gate ``association.relocation_max_dissimilarity``. Positions:
AI2-THOR world frame (metres); displacement is the floor distance.
"""

from __future__ import annotations

import dataclasses
import enum

from ovman_core.boxes import Vec3
from ovman_core.config import AssociationConfig, TaskConfig
from ovman_mapping.instances import InstanceMap
from ovman_query.association import Association


class ChangeKind(enum.IntEnum):
    """Kinds of change; the values are those of ovman_interfaces/InstanceChange."""

    STAYED = 0
    MOVED = 1
    REMOVED = 2
    APPEARED = 3
    MOVING = 4


@dataclasses.dataclass(frozen=True)
class Change:
    """One entry: uids (None where absent), positions (world, metres; None where absent), the floor
    displacement (0 unless both exist) and the association cost."""

    kind: ChangeKind
    label: str
    uid1: str | None
    uid2: str | None
    position1: Vec3 | None
    position2: Vec3 | None
    displacement: float
    cost: float


def change_set(
    map1: InstanceMap, map2: InstanceMap, association: Association, task: TaskConfig, config: AssociationConfig
) -> list[Change]:
    """Pairs in association order, then removed, then appeared instances (see the module docstring)."""
    instances1 = {i.uid: i for i in map1}
    instances2 = {i.uid: i for i in map2}
    changes = []
    for pair in association.pairs:
        a, b = instances1[pair.uid1], instances2[pair.uid2]
        if b.moving:
            kind = ChangeKind.MOVING
        else:
            kind = ChangeKind.MOVED if pair.displacement >= task.min_displacement else ChangeKind.STAYED
        changes.append(Change(kind, b.label, a.uid, b.uid, a.position, b.position, pair.displacement, pair.cost))
    unmatched = config.relocation_max_dissimilarity
    for uid in association.removed:
        a = instances1[uid]
        changes.append(Change(ChangeKind.REMOVED, a.label, uid, None, a.position, None, 0.0, unmatched))
    for uid in association.appeared:
        b = instances2[uid]
        kind = ChangeKind.MOVING if b.moving else ChangeKind.APPEARED
        changes.append(Change(kind, b.label, None, uid, None, b.position, 0.0, unmatched))
    for uid in association.unconfirmed:
        b = instances2.get(uid)
        if b is not None and b.moving:
            changes.append(Change(ChangeKind.MOVING, b.label, None, uid, None, b.position, 0.0, unmatched))
    return changes
