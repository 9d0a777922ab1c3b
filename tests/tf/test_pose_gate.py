"""Frames waiting for their camera pose (ovman_ros.pose_gate): released in order with the pose of
their own stamp, dropped with a counted reason, never paired with another stamp's pose."""

from __future__ import annotations

import pytest
from ovman_ros.bundle import Transform
from ovman_ros.pose_gate import PENDING_FULL, PoseGate
from ovman_ros.tf_buffer import EXTRAPOLATION_FUTURE, EXTRAPOLATION_PAST, UNKNOWN_FRAME, TransformBuffer

S = 1_000_000_000
IDENTITY = (0.0, 0.0, 0.0, 1.0)


def tree() -> TransformBuffer:
    buffer = TransformBuffer()
    buffer.set_transform(Transform("base_link", "optical", (0.0, 0.0, 1.5), IDENTITY), 0, static=True)
    return buffer


def move(buffer: TransformBuffer, stamp_ns: int, x: float) -> None:
    buffer.set_transform(Transform("map", "base_link", (x, 0.0, 0.0), IDENTITY), stamp_ns)


def test_a_frame_before_its_transform_waits_and_gets_the_pose_of_its_own_stamp():
    buffer = tree()
    gate: PoseGate[str] = PoseGate(buffer, "map", timeout_s=0.5, max_pending=10)
    move(buffer, 1 * S, 1.0)
    gate.add(2 * S, "optical", "frame 2", now=0.0)
    assert gate.poll(now=0.1) == ([], [])  # the tree has only 1 s: no stale pose is used
    move(buffer, 3 * S, 3.0)
    ready, dropped = gate.poll(now=0.2)
    assert dropped == [] and [(item, pose.translation) for item, pose in ready] == [("frame 2", (2.0, 0.0, 1.5))]
    assert (gate.released, gate.pending) == (1, 0)


def test_frames_come_out_in_order_a_newer_one_waiting_behind_an_older_one():
    buffer = tree()
    gate: PoseGate[int] = PoseGate(buffer, "map", timeout_s=0.5, max_pending=10)
    move(buffer, 1 * S, 1.0)
    gate.add(2 * S, "optical", 2, now=0.0)
    gate.add(1 * S, "optical", 1, now=0.0)  # its pose is known, but frame 2 came first
    assert gate.poll(now=0.1) == ([], [])
    move(buffer, 2 * S, 2.0)
    assert [item for item, _ in gate.poll(now=0.2)[0]] == [2, 1]


def test_a_frame_whose_transform_never_comes_is_dropped_after_the_timeout_with_the_reason():
    buffer = tree()
    gate: PoseGate[str] = PoseGate(buffer, "map", timeout_s=0.5, max_pending=10)
    move(buffer, 1 * S, 1.0)
    gate.add(2 * S, "optical", "frame 2", now=0.0)
    assert gate.poll(now=0.49) == ([], [])
    ready, dropped = gate.poll(now=0.5)
    assert ready == [] and [(d.item, d.reason) for d in dropped] == [("frame 2", EXTRAPOLATION_FUTURE)]
    assert "within 0.5 s" in dropped[0].message and "2000000000 ns" in dropped[0].message
    assert gate.drops == {EXTRAPOLATION_FUTURE: 1}


def test_a_gap_in_the_tree_drops_only_the_frames_inside_it():
    buffer = tree()
    gate: PoseGate[int] = PoseGate(buffer, "map", timeout_s=0.5, max_pending=10)
    move(buffer, 1 * S, 1.0)
    gate.add(1 * S, "optical", 1, now=0.0)
    gate.add(2 * S, "optical", 2, now=0.0)  # the robot's TF stalls here...
    assert [item for item, _ in gate.poll(now=0.1)[0]] == [1]
    ready, dropped = gate.poll(now=0.6)
    assert ready == [] and [d.item for d in dropped] == [2]
    move(buffer, 3 * S, 3.0)  # ...and comes back
    gate.add(3 * S, "optical", 3, now=0.7)
    assert [item for item, _ in gate.poll(now=0.7)[0]] == [3]


def test_a_frame_older_than_the_history_is_dropped_at_once():
    buffer = tree()
    gate: PoseGate[str] = PoseGate(buffer, "map", timeout_s=5.0, max_pending=10)
    move(buffer, 2 * S, 2.0)
    move(buffer, 3 * S, 3.0)
    gate.add(1 * S, "optical", "too old", now=0.0)
    ready, dropped = gate.poll(now=0.0)
    assert ready == [] and [d.reason for d in dropped] == [EXTRAPOLATION_PAST]


def test_an_unknown_camera_frame_waits_for_the_static_tree_then_is_dropped():
    buffer = TransformBuffer()
    gate: PoseGate[str] = PoseGate(buffer, "map", timeout_s=0.5, max_pending=10)
    move(buffer, 1 * S, 1.0)
    gate.add(1 * S, "optical", "frame", now=0.0)
    assert gate.poll(now=0.1) == ([], [])  # /tf_static may be late
    assert [d.reason for d in gate.poll(now=0.6)[1]] == [UNKNOWN_FRAME]


def test_more_waiting_frames_than_the_bound_drop_the_oldest():
    gate: PoseGate[int] = PoseGate(tree(), "map", timeout_s=0.5, max_pending=2)
    assert gate.add(1, "optical", 1, now=0.0) == []
    assert gate.add(2, "optical", 2, now=0.0) == []
    dropped = gate.add(3, "optical", 3, now=0.0)
    assert [(d.item, d.reason) for d in dropped] == [(1, PENDING_FULL)] and gate.pending == 2
    assert gate.reset() == [2, 3] and gate.drops == {} and gate.pending == 0


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"target": ""}, "non-empty frame id"),
        ({"timeout_s": 0.0}, "positive seconds"),
        ({"max_pending": 0}, "at least one frame"),
    ],
)
def test_a_gate_that_cannot_work_is_refused(kwargs, why):
    arguments = {"target": "map", "timeout_s": 0.5, "max_pending": 3, **kwargs}
    with pytest.raises(ValueError, match=why):
        PoseGate(tree(), **arguments)
