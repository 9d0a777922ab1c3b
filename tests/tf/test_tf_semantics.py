"""tf2's lookup semantics, one suite for every backend of ovman_ros's TF lookups.

The pip route's :class:`ovman_ros.tf_buffer.TransformBuffer` always; tf2_ros's Buffer (through
:class:`ovman_ros.tf_listener.Tf2RosLookup`) wherever tf2_ros imports. Expected values come from
scipy (rotations, Slerp), not from either backend.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from ovman_ros.bundle import Transform
from ovman_ros.tf_buffer import (
    DISCONNECTED,
    EXTRAPOLATION_FUTURE,
    EXTRAPOLATION_PAST,
    NO_DATA,
    UNKNOWN_FRAME,
    TransformBuffer,
    TransformError,
)
from scipy.spatial.transform import Rotation, Slerp

S = 1_000_000_000  # ns


class PipBackend:
    name = "pytransform3d"

    def __init__(self, cache_s: float) -> None:
        self.buffer = TransformBuffer(cache_s)

    def set(self, parent: str, child: str, t, q, stamp_ns: int, static: bool = False) -> None:
        self.buffer.set_transform(Transform(parent, child, tuple(t), tuple(q)), stamp_ns, static)

    def lookup(self, target: str, source: str, stamp_ns: int | None) -> Transform:
        return self.buffer.lookup(target, source, stamp_ns)

    def latest(self, target: str, source: str) -> tuple[Transform, int]:
        return self.buffer.latest(target, source)

    def clear(self) -> None:
        self.buffer.clear()


class Tf2RosBackend:
    name = "tf2_ros"

    def __init__(self, cache_s: float) -> None:
        import tf2_ros
        from ovman_ros.tf_listener import Tf2RosLookup
        from rclpy.duration import Duration

        self.buffer = tf2_ros.Buffer(cache_time=Duration(seconds=cache_s))
        self.lookup_ = Tf2RosLookup(self.buffer)

    def set(self, parent: str, child: str, t, q, stamp_ns: int, static: bool = False) -> None:
        from geometry_msgs.msg import TransformStamped

        message = TransformStamped()
        message.header.frame_id, message.child_frame_id = parent, child
        message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp_ns, S)
        tr, rot = message.transform.translation, message.transform.rotation
        tr.x, tr.y, tr.z = (float(v) for v in t)
        rot.x, rot.y, rot.z, rot.w = (float(v) for v in q)
        if static:
            self.buffer.set_transform_static(message, "test")
        else:
            self.buffer.set_transform(message, "test")

    def lookup(self, target: str, source: str, stamp_ns: int | None) -> Transform:
        return self.lookup_.lookup(target, source, stamp_ns)

    def latest(self, target: str, source: str) -> tuple[Transform, int]:
        return self.lookup_.latest(target, source)

    def clear(self) -> None:
        self.lookup_.clear()


BACKENDS = [
    pytest.param(PipBackend, id="pytransform3d"),
    pytest.param(
        Tf2RosBackend,
        id="tf2_ros",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("tf2_ros") is None, reason="tf2_ros does not import (not on PyPI)"
        ),
    ),
]


@pytest.fixture(params=BACKENDS)
def tf(request):
    return request.param(10.0)


def yaw(deg: float) -> tuple[float, float, float, float]:
    return tuple(Rotation.from_euler("z", deg, degrees=True).as_quat())


def pitch(deg: float) -> tuple[float, float, float, float]:
    return tuple(Rotation.from_euler("y", deg, degrees=True).as_quat())


OPTICAL = (-0.5, 0.5, -0.5, 0.5)


def robot_tree(tf, stamps=(1 * S, 2 * S)) -> None:
    """map -> odom (static), odom -> base_link (moving), base_link -> camera_link (moving pitch),
    camera_link -> optical (static): a robot's tree."""
    tf.set("map", "odom", (0.5, -1.0, 0.0), yaw(10.0), 0, static=True)
    tf.set("camera_link", "optical", (0.0, 0.0, 0.0), OPTICAL, 0, static=True)
    for k, stamp in enumerate(stamps):
        tf.set("odom", "base_link", (1.0 + k, 2.0 * k, 0.0), yaw(30.0 + 40.0 * k), stamp)
        tf.set("base_link", "camera_link", (0.1, 0.0, 1.2), pitch(5.0 + 10.0 * k), stamp)


def compose(*edges) -> tuple[np.ndarray, Rotation]:
    """Chain (translation, rotation) edges parent-first: the child's pose in the first parent."""
    t, r = np.zeros(3), Rotation.identity()
    for tr, rot in edges:
        t = t + r.apply(tr)
        r = r * rot
    return t, r


def assert_pose(got: Transform, t: np.ndarray, r: Rotation, tol: float = 1e-9) -> None:
    assert np.allclose(got.translation, t, atol=tol, rtol=0.0)
    assert (Rotation.from_quat(got.rotation) * r.inv()).magnitude() < tol


def expected_at(alpha: float) -> tuple[np.ndarray, Rotation]:
    """The robot tree's optical frame in map, each moving edge interpolated as tf2 does."""
    base = Slerp([0, 1], Rotation.from_quat([yaw(30.0), yaw(70.0)]))([alpha])[0]
    link = Slerp([0, 1], Rotation.from_quat([pitch(5.0), pitch(15.0)]))([alpha])[0]
    return compose(
        ((0.5, -1.0, 0.0), Rotation.from_quat(yaw(10.0))),
        ((1.0 + alpha, 2.0 * alpha, 0.0), base),
        ((0.1, 0.0, 1.2), link),
        ((0.0, 0.0, 0.0), Rotation.from_quat(OPTICAL)),
    )


def test_a_chain_at_a_stored_stamp_composes_the_stored_transforms(tf):
    robot_tree(tf)
    assert_pose(tf.lookup("map", "optical", 1 * S), *expected_at(0.0))
    assert_pose(tf.lookup("map", "optical", 2 * S), *expected_at(1.0))
    # The inverse direction is the inverse transform.
    t, r = expected_at(1.0)
    assert_pose(tf.lookup("optical", "map", 2 * S), -r.inv().apply(t), r.inv())


@pytest.mark.parametrize("alpha", [0.25, 0.5, 0.9])
def test_between_stamps_each_edge_is_interpolated_linearly_and_by_slerp(tf, alpha):
    robot_tree(tf)
    assert_pose(tf.lookup("map", "optical", 1 * S + round(alpha * S)), *expected_at(alpha))


def test_rotation_interpolates_the_short_way_round(tf):
    tf.set("map", "base_link", (0.0, 0.0, 0.0), yaw(170.0), 1 * S)
    tf.set("map", "base_link", (0.0, 0.0, 0.0), tuple(-np.array(yaw(-170.0))), 2 * S)  # -q: the same rotation
    got = tf.lookup("map", "base_link", 1 * S + S // 2)
    assert_pose(got, np.zeros(3), Rotation.from_quat(yaw(180.0)))


def test_static_transforms_hold_at_every_time(tf):
    tf.set("map", "odom", (1.0, 2.0, 3.0), yaw(45.0), 5 * S, static=True)
    tf.set("odom", "marker", (0.0, 1.0, 0.0), yaw(-45.0), 5 * S, static=True)
    expected = compose(
        ((1.0, 2.0, 3.0), Rotation.from_quat(yaw(45.0))), ((0.0, 1.0, 0.0), Rotation.from_quat(yaw(-45.0)))
    )
    for stamp in (1, 5 * S, 10_000 * S, None):
        assert_pose(tf.lookup("map", "marker", stamp), *expected)


def test_the_latest_common_time_is_the_oldest_newest_sample_on_the_path(tf):
    robot_tree(tf, stamps=(1 * S, 2 * S))
    tf.set("odom", "base_link", (3.0, 4.0, 0.0), yaw(90.0), 3 * S)  # base_link is newer than camera_link
    assert_pose(tf.lookup("map", "optical", None), *compose(*_edges_at_2s()))
    latest, stamp = tf.latest("map", "optical")  # what a node reads as its pose now, and when
    assert stamp == 2 * S
    assert_pose(latest, *compose(*_edges_at_2s()))


def test_the_latest_pose_through_static_transforms_only_is_stamped_zero(tf):
    tf.set("base_link", "camera_link", (0.1, 0.0, 1.2), pitch(15.0), 5 * S, static=True)
    transform, stamp = tf.latest("base_link", "camera_link")
    assert stamp == 0
    assert_pose(transform, (0.1, 0.0, 1.2), Rotation.from_quat(pitch(15.0)))
    with pytest.raises(TransformError) as refused:
        tf.latest("map", "camera_link")
    assert refused.value.reason == UNKNOWN_FRAME


def _edges_at_2s():
    return (
        ((0.5, -1.0, 0.0), Rotation.from_quat(yaw(10.0))),
        ((2.0, 2.0, 0.0), Rotation.from_quat(yaw(70.0))),
        ((0.1, 0.0, 1.2), Rotation.from_quat(pitch(15.0))),
        ((0.0, 0.0, 0.0), Rotation.from_quat(OPTICAL)),
    )


def test_a_stamp_after_the_newest_sample_is_refused_as_extrapolation_into_the_future(tf):
    robot_tree(tf)
    with pytest.raises(TransformError) as refused:
        tf.lookup("map", "optical", 2 * S + 1)
    assert refused.value.reason == EXTRAPOLATION_FUTURE


def test_a_stamp_before_the_oldest_sample_is_refused_as_extrapolation_into_the_past(tf):
    robot_tree(tf)
    with pytest.raises(TransformError) as refused:
        tf.lookup("map", "optical", 1 * S - 1)
    assert refused.value.reason == EXTRAPOLATION_PAST


def test_one_sample_answers_only_its_own_stamp(tf):
    tf.set("map", "base_link", (1.0, 0.0, 0.0), yaw(0.0), 1 * S)
    assert tf.lookup("map", "base_link", 1 * S).translation == (1.0, 0.0, 0.0)
    for stamp in (1 * S - 1, 1 * S + 1):
        # tf2 names no direction with one sample; the pip buffer names one. Both refuse.
        with pytest.raises(TransformError) as refused:
            tf.lookup("map", "base_link", stamp)
        assert refused.value.reason in (EXTRAPOLATION_FUTURE, EXTRAPOLATION_PAST, NO_DATA)


def test_an_unknown_frame_is_refused(tf):
    robot_tree(tf)
    for target, source in (("map", "nowhere"), ("nowhere", "optical")):
        with pytest.raises(TransformError) as refused:
            tf.lookup(target, source, 1 * S)
        assert refused.value.reason == UNKNOWN_FRAME


def test_frames_of_two_trees_are_refused_as_disconnected(tf):
    robot_tree(tf)
    tf.set("world", "other_robot", (0.0, 0.0, 0.0), yaw(0.0), 1 * S)
    with pytest.raises(TransformError) as refused:
        tf.lookup("map", "other_robot", 1 * S)
    assert refused.value.reason == DISCONNECTED


def test_a_frame_in_itself_is_the_identity(tf):
    robot_tree(tf)
    got = tf.lookup("optical", "optical", 1 * S)
    assert got.translation == (0.0, 0.0, 0.0) and abs(got.rotation[3]) == 1.0


def test_history_older_than_the_cache_is_forgotten(tf):
    for k in range(25):  # one sample a second for 24 s; the cache keeps 10 s
        tf.set("map", "base_link", (float(k), 0.0, 0.0), yaw(0.0), k * S)
    assert tf.lookup("map", "base_link", 20 * S).translation == (20.0, 0.0, 0.0)
    with pytest.raises(TransformError) as refused:
        tf.lookup("map", "base_link", 5 * S)
    assert refused.value.reason == EXTRAPOLATION_PAST


def test_clearing_forgets_the_moving_history_and_keeps_the_static_tree(tf):
    robot_tree(tf)
    tf.clear()  # a bag or a simulation starting its clock again
    assert_pose(tf.lookup("map", "odom", None), np.array([0.5, -1.0, 0.0]), Rotation.from_quat(yaw(10.0)))
    with pytest.raises(TransformError):
        tf.lookup("map", "optical", 2 * S)
    robot_tree(tf, stamps=(1, 2))  # earlier stamps than before the clear are taken again
    assert_pose(tf.lookup("map", "optical", 1), *expected_at(0.0))


# ---- the pip buffer's own refusals at its input -------------------------------------------------


@pytest.mark.parametrize(
    ("translation", "rotation", "why"),
    [
        ((math.nan, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), "nan"),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), r"0\.0, 0\.0, 0\.0, 0\.0\)"),
        ((0.0, math.inf, 0.0), (0.0, 0.0, 0.0, 1.0), "inf"),
    ],
)
def test_a_transform_that_is_not_finite_is_refused_naming_the_frames(translation, rotation, why):
    with pytest.raises(ValueError, match=rf"'map' -> 'base_link': not finite or a zero quaternion: .*{why}"):
        TransformBuffer().set_transform(Transform("map", "base_link", translation, rotation), 1)


def test_a_frame_cannot_be_its_own_parent():
    with pytest.raises(ValueError, match="must be non-empty and differ"):
        TransformBuffer().set_transform(Transform("map", "map", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), 1)


def test_a_sample_older_than_the_cache_window_is_not_stored():
    buffer = TransformBuffer(cache_s=1.0)
    assert buffer.set_transform(Transform("map", "base_link", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), 5 * S)
    assert not buffer.set_transform(Transform("map", "base_link", (1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), 3 * S)


def test_a_reparented_frame_keeps_only_its_new_parent():
    buffer = TransformBuffer()
    buffer.set_transform(Transform("odom", "base_link", (1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), 1 * S)
    buffer.set_transform(Transform("map", "base_link", (2.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), 2 * S)
    assert buffer.lookup("map", "base_link", 2 * S).translation == (2.0, 0.0, 0.0)
    with pytest.raises(TransformError) as refused:
        buffer.lookup("odom", "base_link", 1 * S)
    assert refused.value.reason == DISCONNECTED
