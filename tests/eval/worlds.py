"""Hand-built ground-truth world states for the task-semantics tests."""

from ovman_core.boxes import Box3
from ovman_core.world_state import ObjectState, WorldState

SIZE = (0.4, 0.6, 0.4)


def obj(instance_id: str, x: float, z: float, category: str | None = None) -> ObjectState:
    category = category or instance_id.split("_")[0]
    centre = (x, 0.3, z)
    return ObjectState(instance_id, category, centre, Box3.from_center_size(centre, SIZE))


def state(*objects: ObjectState) -> WorldState:
    return WorldState.of(list(objects))
