"""Hand-built instance maps for the query tests (no rendering): instances with chosen positions,
features and colours."""

import numpy as np

from ovman_core.boxes import Box3
from ovman_mapping.instances import Instance, InstanceMap, Sighting

AXES = ("Box", "Chair", "Sofa", "Vase")
"""Feature axis of each label: a label's feature is its one-hot vector; the last axis is the
"unknown word" axis. The same space as ``OneHotEncoder(AXES)`` of tests/mapping/scenes.py."""
BINS = 4


def colour(k: int) -> np.ndarray:
    """A histogram concentrated in bin ``k``."""
    h = np.full(BINS * BINS, 0.0)
    h[k] = 1.0
    return h


def feature(label: str, tilt: float = 0.0) -> np.ndarray:
    """Unit feature of ``label``, optionally tilted towards the last axis (lower query score)."""
    f = np.zeros(len(AXES) + 1)
    f[AXES.index(label)] = 1.0
    f[-1] = tilt
    return f / np.linalg.norm(f)


def instance(
    uid: str,
    label: str,
    x: float,
    z: float,
    hue: int = 0,
    tilt: float = 0.0,
    moving: bool = False,
    last_step: int = 10,
    sightings: int = 3,
) -> Instance:
    centre = (x, 0.3, z)
    box = Box3.from_center_size(centre, (0.4, 0.6, 0.4))
    steps = np.linspace(0, last_step, sightings).round().astype(int)
    return Instance(
        uid=uid,
        position=centre,
        box=box,
        points=np.array([box.lo, box.hi]),
        feature=feature(label, tilt),
        colour=colour(hue),
        labels={label: 1.0},
        sightings=tuple(Sighting(n, int(s), centre, 100) for n, s in enumerate(steps)),
        moving=moving,
    )


def instance_map(visit: int, *instances: Instance) -> InstanceMap:
    return InstanceMap(visit=visit, instances=tuple(instances), encoder="onehot (test double)")


def text(label: str) -> np.ndarray:
    """The query embedding of a label (same space as :func:`feature`)."""
    return feature(label)
