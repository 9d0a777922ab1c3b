"""How benchmark_node follows a moving target while nav_node drives: the estimate after each frame.

No ROS: the node hands these the frames it received and publishes what they return, one target
update (a floor point and a footprint) per frame: :class:`TruthFollower` for the oracle arms (the
ground truth), :class:`SightFollower` for the map arms (the agent's own sightings).
:class:`TruthMessage` is one ``ovman/ground_truth`` record decoded only as far as every frame needs.
Frames: AI2-THOR world (metres; floor (x, z)); stamps in nanoseconds.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence

from ovman_ros.bundle import (
    BundleFormatError,
    GroundTruthFrame,
    ground_truth_header,
    object_state_from_dict,
    parse_ground_truth_json,
)

from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose
from ovman_eval.benchmark.tracking import LabelTracker
from ovman_nav.executor import NavTarget
from ovman_ros import bundle

Estimate = tuple[int, NavTarget]
"""A target estimate after the frame stamped (ns)."""


@dataclasses.dataclass(frozen=True)
class TruthMessage:
    """One ``ovman/ground_truth`` message, decoded as far as every frame is needed: its stamp (ns)
    and the agent pose (AI2-THOR world); :meth:`frame` and :meth:`object_target` parse the objects
    of the few frames they are read from."""

    stamp_ns: int
    pose: AgentPose
    text: str

    @classmethod
    def parse(cls, text: str) -> TruthMessage:
        """BundleFormatError for a message that is not a ground-truth record."""
        try:
            stamp_ns, pose = ground_truth_header(text)
        except BundleFormatError as err:
            raise BundleFormatError(f"{bundle.GROUND_TRUTH_TOPIC}: not a ground-truth record: {err}") from None
        return cls(stamp_ns, pose, text)

    def frame(self) -> GroundTruthFrame:
        """Every object and the agent at this frame."""
        return parse_ground_truth_json(self.text)

    def object_target(self, instance_id: str) -> NavTarget | None:
        """One object at this frame as a navigation target: its floor position (x, z) and footprint
        (None: not in the world)."""
        try:
            objects = json.loads(self.text)["objects"]
            found = next((o for o in objects if o["instance_id"] == instance_id), None)
            if found is None:
                return None
            obj = object_state_from_dict(found)
            return NavTarget(obj.floor, obj.box.footprint)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise BundleFormatError(f"{bundle.GROUND_TRUTH_TOPIC}: bad objects: {err!r}") from None


class TruthFollower:
    """Follows ``instance`` in the ground-truth frames that arrive after the first ``seen`` of them."""

    def __init__(self, instance: str, start: NavTarget, seen: int) -> None:
        self.instance = instance
        self.estimate = start
        self.seen = seen

    def follow(self, frames: Sequence[TruthMessage]) -> list[Estimate]:
        """The estimate after each frame of ``frames`` (the growing list of every frame received)
        not seen before: the instance's target there, or the last known one while it is absent."""
        out = []
        for frame in frames[self.seen :]:
            now = frame.object_target(self.instance)
            if now is not None:
                self.estimate = now
            out.append((frame.stamp_ns, self.estimate))
        self.seen = len(frames)
        return out


class SightFollower:
    """Follows a label by sight with ``tracker``, from ``start`` (the answer's target)."""

    def __init__(self, tracker: LabelTracker, start: NavTarget) -> None:
        self.tracker = tracker
        self.estimate = start

    @property
    def retargets(self) -> int:
        """Sightings that moved the estimate so far."""
        return self.tracker.updates

    def look(self, observations: Iterable[tuple[int, Observation]]) -> list[Estimate]:
        """The estimate after each observation (stamp ns, camera frame): the latest sighting within
        the tracker's gate, else the estimate before it."""
        out = []
        for stamp_ns, observation in observations:
            self.estimate = self.tracker.observe(observation) or self.estimate
            out.append((stamp_ns, self.estimate))
        return out
