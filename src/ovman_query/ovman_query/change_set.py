"""The change set between two visits' maps, from their association (what query_node publishes).

One entry per matched pair and per unmatched instance:

- a pair whose visit-2 instance carries the motion attribute is ``MOVING``; otherwise a pair is
  ``MOVED`` when its floor displacement is at least ``task.min_displacement`` (Δmin) and
  ``STAYED`` below (TASK.md §1 calls an instance moved only from Δmin on);
- an unmatched visit-1 instance is ``REMOVED``; an unmatched visit-2 instance is ``APPEARED``, or
  ``MOVING`` when it carries the motion attribute;
- an unconfirmed instance (unmatched, but the other visit did not see its place empty: see
  :mod:`ovman_query.association`) is no change and is not listed, unless it is a visit-2 instance
  with the motion attribute (``MOVING``: its own frames saw it move).

Costs: a pair's cost in its association stage; an unmatched instance gets the stage-two gate
``association.relocation_max_dissimilarity`` (every pairing it had was at least that dissimilar).
Positions: AI2-THOR world frame (metres); displacement is the floor distance.
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
