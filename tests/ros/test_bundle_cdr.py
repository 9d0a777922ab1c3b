"""A CameraBundle's CDR composed from recorded messages and read without rclpy (ovman_ros.bundle_cdr),
checked against rclpy's own serialisation, on recordings of embedded-world frames."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

try:
    from ovman_ros.messages import CAMERA_MESSAGES, image_array
    from rclpy.serialization import deserialize_message, serialize_message

    from ovman_interfaces.msg import CameraBundle
    from ovman_ros import bundle_cdr
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.config import load_config
from ovman_ros import bundle
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.recording import RecordedFrame, VisitInfo, read_visit_raw, write_visit
from ovman_sim.tours import tour_observations

pytestmark = pytest.mark.ros

CONFIG = load_config()
FRAME_NAMES = ("map", "m", "a_long_map_frame")
"""Map frame names of different lengths: the pose's header (and so where every later member starts)
changes length with them."""


@pytest.fixture(scope="module")
def frames() -> list[RecordedFrame]:
    sim = dataclasses.replace(CONFIG.sim_node, tour=dataclasses.replace(CONFIG.sim_node.tour, max_waypoints=2))
    world = EmbeddedWorld(sim)
    world.reset("embedded-2")
    return [RecordedFrame(o, world.objects()) for o in tour_observations(world, sim.tour, sim.world)][:5]


@pytest.fixture(scope="module", params=FRAME_NAMES)
def recording(request: pytest.FixtureRequest, frames: list[RecordedFrame], tmp_path_factory) -> Path:
    names = dataclasses.replace(CONFIG.frames, map=request.param, optical=request.param + "_optical")
    path = tmp_path_factory.mktemp("bundle-cdr") / "visit1"
    return write_visit(path, VisitInfo("embedded-2", 1, CONFIG.sim_node.node.step_dt, names), frames)


def stored(recording: Path) -> list[dict[str, bytes]]:
    return [frame.messages for frame in read_visit_raw(recording)]


def test_the_members_are_the_messages_fields_in_their_order():
    assert tuple(member for member, _, _ in bundle_cdr.MEMBERS) == tuple(CameraBundle.get_fields_and_field_types())
    assert {topic for _, topic, _ in bundle_cdr.MEMBERS} == set(CAMERA_MESSAGES)


def test_a_composed_bundle_is_the_recorded_messages_for_rclpy(recording: Path):
    for messages in stored(recording):
        combined = deserialize_message(bundle_cdr.compose(messages), CameraBundle)
        for member, topic, _ in bundle_cdr.MEMBERS:
            assert getattr(combined, member) == deserialize_message(messages[topic], CAMERA_MESSAGES[topic]), member


def test_decode_reads_what_rclpy_reads_with_the_images_viewing_the_received_bytes(recording: Path):
    for messages in stored(recording):
        data = bundle_cdr.compose(messages)
        expected = deserialize_message(data, CameraBundle)
        for given in (data, serialize_message(expected)):  # composed by a player, or serialised by rclpy
            got = bundle_cdr.decode(given)
            for member in ("rgb", "depth", "instances"):
                image, reference = getattr(got, member), getattr(expected, member)
                assert (image.encoding, image.width, image.height, image.step) == (
                    reference.encoding,
                    reference.width,
                    reference.height,
                    reference.step,
                )
                assert np.array_equal(image_array(image), image_array(reference), equal_nan=True)
                assert not image.data.flags.owndata  # a view of the bytes, not a copy
                assert image.header.frame_id == reference.header.frame_id
                assert (image.header.stamp.sec, image.header.stamp.nanosec) == (
                    reference.header.stamp.sec,
                    reference.header.stamp.nanosec,
                )
            assert list(got.camera_info.k) == list(expected.camera_info.k)
            assert got.camera_info.distortion_model == expected.camera_info.distortion_model
            assert got.labels.data == expected.labels.data


def test_only_every_member_in_plain_little_endian_cdr_composes(recording: Path, monkeypatch):
    messages = stored(recording)[0]
    missing = {t: m for t, m in messages.items() if t != bundle.DEPTH_TOPIC}
    with pytest.raises(bundle_cdr.CdrError, match=f"member depth: no {bundle.DEPTH_TOPIC} message"):
        bundle_cdr.compose(missing)
    big_endian = {**messages, bundle.RGB_TOPIC: b"\x00\x00\x00\x00" + messages[bundle.RGB_TOPIC][4:]}
    with pytest.raises(bundle_cdr.CdrError, match=r"member rgb \(/camera/color/image_raw\): encapsulation 00000000"):
        bundle_cdr.compose(big_endian)
    # A member order with the camera info after a member ending off an 8-byte boundary would move
    # its float64 fields: refused, not composed wrong.
    labels_first = (bundle_cdr.MEMBERS[-1], *bundle_cdr.MEMBERS[:-1])
    monkeypatch.setattr(bundle_cdr, "MEMBERS", labels_first)
    odd = {**messages, bundle.INSTANCE_LABELS_TOPIC: bundle_cdr.CDR_LE + (5).to_bytes(4, "little") + b"{}{}\x00"}
    with pytest.raises(bundle_cdr.CdrError, match=r"member camera_info .* not a multiple of its alignment 8"):
        bundle_cdr.compose(odd)


def test_bytes_that_are_no_bundle_are_a_cdr_error(recording: Path):
    data = bundle_cdr.compose(stored(recording)[0])
    with pytest.raises(bundle_cdr.CdrError, match=r"not a CameraBundle \(1000 bytes\)"):
        bundle_cdr.decode(data[:1000])
