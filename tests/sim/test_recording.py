"""Recorded visits: exact round trips, an independent MCAP/ROS 2 decoder, rosbag2 metadata, clear
errors for damaged files, atomic writes."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from ovman_core.boxes import Box3
from ovman_core.camera import Intrinsics
from ovman_core.config import FramesConfig, load_config, to_document
from ovman_core.frames import optical_axes_thor, ros_to_thor_points
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_eval.cli.main import main
from ovman_ros import bundle
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.recording import (
    FRAME_TOPICS,
    STATIC_TOPICS,
    RecordedFrame,
    RecordingError,
    VisitInfo,
    VisitWriter,
    read_visit,
    read_visit_info,
    read_visit_raw,
    write_visit,
)
from ovman_sim.tours import tour_observations

FRAMES = load_config().frames
INFO = VisitInfo(scene="embedded-7", visit=2, step_dt=0.1, frames=FRAMES)
INTRINSICS = Intrinsics.from_vertical_fov(64, 48, 90.0)


def synthetic_frames(count: int, seed: int = 0) -> list[RecordedFrame]:
    """Random but valid frames: NaN holes in depth, several segments, a carried object that
    moves every frame (as in a moving episode), awkward float poses."""
    rng = np.random.default_rng(seed)
    h, w = INTRINSICS.height, INTRINSICS.width
    frames = []
    for i in range(count):
        depth = rng.uniform(0.1, 9.0, (h, w)).astype(np.float32)
        depth[rng.random((h, w)) < 0.1] = np.nan
        segments = rng.integers(0, 4, (h, w), dtype=np.int32)
        carried = (0.1 * i + 1.0 / 3.0, 0.45, -2.0 + 0.25 * i)
        objects = WorldState.of(
            [
                ObjectState("Sofa|1", "Sofa", (1.5, 0.4, 2.0), Box3((0.5, 0.0, 1.5), (2.5, 0.8, 2.5)), movable=False),
                ObjectState("Mug|3", "Mug", carried, Box3.from_center_size(carried, (0.1, 0.1, 0.1))),
            ]
        )
        pose = AgentPose(x=0.25 * i - 1.0 / 7.0, z=-0.5 + 0.25 * i, yaw_deg=(90.0 * i) % 360.0, horizon_deg=30.0)
        observation = Observation(
            rgb=rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
            depth=depth,
            segments=segments,
            segment_labels={1: "Sofa", 2: "Mug", 3: "Mug"},
            segment_instances={1: "Sofa|1", 2: "Mug|3", 3: "Mug|9"},
            pose=pose,
            camera_position=(pose.x, 1.576, pose.z),
            intrinsics=INTRINSICS,
            step=3 * i + 1,
        )
        frames.append(RecordedFrame(observation, objects))
    return frames


def assert_same_frame(expected: RecordedFrame, got: RecordedFrame) -> None:
    a, b = expected.observation, got.observation
    assert b.rgb.dtype == np.uint8 and np.array_equal(a.rgb, b.rgb)
    assert b.depth.dtype == np.float32 and np.array_equal(a.depth, b.depth, equal_nan=True)
    assert b.segments.dtype == np.int32 and np.array_equal(a.segments, b.segments)
    assert dict(a.segment_labels) == dict(b.segment_labels)
    assert dict(a.segment_instances) == dict(b.segment_instances)
    assert (a.pose, a.camera_position, a.intrinsics, a.step) == (b.pose, b.camera_position, b.intrinsics, b.step)
    assert expected.objects == got.objects


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RecordedFrame]]:
    frames = synthetic_frames(6)
    path = tmp_path_factory.mktemp("rec") / "visit2"
    write_visit(path, INFO, frames)
    return path, frames


def test_round_trip_rebuilds_the_written_observations_and_ground_truth_exactly(recorded):
    path, frames = recorded
    back = list(read_visit(path))
    assert len(back) == len(frames)
    for expected, got in zip(frames, back, strict=True):
        assert_same_frame(expected, got)
    assert read_visit_info(path) == (INFO, len(frames))


def test_raw_frames_are_the_stored_bytes_with_the_recorded_stamps_and_steps(recorded):
    path, frames = recorded
    raw = list(read_visit_raw(path))
    with (path / f"{path.name}.mcap").open("rb") as stream:
        stored = [
            (channel.topic, message.log_time, message.data)
            for _, channel, message in make_reader(stream).iter_messages()
        ]
    assert [(f.stamp_ns, f.step) for f in raw] == [
        (stamp, frame.observation.step) for stamp, frame in zip(sorted({t for _, t, _ in stored}), frames, strict=True)
    ]
    assert [(topic, f.stamp_ns, f.messages[topic]) for f in raw for topic in f.messages] == stored
    assert set(raw[0].messages) == set(FRAME_TOPICS) | set(STATIC_TOPICS)
    assert all(set(f.messages) == set(FRAME_TOPICS) for f in raw[1:])


def test_a_frame_whose_labels_are_stamped_otherwise_is_refused_by_both_readers(tmp_path, monkeypatch):
    frames = synthetic_frames(2)
    monkeypatch.setattr(
        bundle,
        "labels_json",
        lambda observation, stamp: json.dumps({"stamp_ns": stamp + 1, "step": observation.step, "labels": {}}),
    )
    path = write_visit(tmp_path / "visit1", INFO, frames)
    monkeypatch.undo()
    with pytest.raises(RecordingError, match=f"{path}: frame at stamp .* ns: topic {bundle.INSTANCE_LABELS_TOPIC}"):
        list(read_visit_raw(path))
    with pytest.raises(RecordingError, match=f"{path}: frame at stamp .* ns"):
        list(read_visit(path))


def test_recording_is_a_rosbag2_directory_with_version_9_metadata(recorded):
    path, frames = recorded
    assert sorted(p.name for p in path.iterdir()) == ["metadata.yaml", "visit2.mcap"]
    info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["version"] == 9 and info["storage_identifier"] == "mcap"
    assert info["relative_file_paths"] == ["visit2.mcap"]
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    assert counts == {**dict.fromkeys(FRAME_TOPICS, len(frames)), **dict.fromkeys(STATIC_TOPICS, 1)}
    assert info["message_count"] == sum(counts.values())
    first, last = (round(f.observation.step * INFO.step_dt * 1e9) for f in (frames[0], frames[-1]))
    assert info["starting_time"]["nanoseconds_since_epoch"] == first
    assert info["duration"]["nanoseconds"] == last - first
    qos = {
        t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"]
        for t in info["topics_with_message_count"]
    }
    assert [q["durability"] for q in qos[bundle.TF_STATIC_TOPIC]] == ["transient_local"]


def test_type_hashes_equal_those_of_the_installed_ros_message_packages(recorded):
    # The wheels (and scripts/build_interfaces.sh for tf2_msgs) install <prefix>/share/<pkg>/msg/<T>.json.
    path, _ = recorded
    info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    for topic in info["topics_with_message_count"]:
        meta = topic["topic_metadata"]
        package, _, name = meta["type"].split("/")
        description = Path(sys.prefix) / "share" / package / "msg" / f"{name}.json"
        assert description.is_file(), f"{description} missing: install requirements/lock.txt and build_interfaces.sh"
        hashes = {h["type_name"]: h["hash_string"] for h in json.loads(description.read_text())["type_hashes"]}
        assert meta["type_description_hash"] == hashes[meta["type"]], meta["name"]


def decoded_messages(path: Path) -> dict[str, list[tuple[int, object]]]:
    """Every message decoded by the ``mcap`` reader and ``mcap_ros2``'s decoder, which parse the
    schemas stored in the file: nothing of rosbags (our serialiser) takes part."""
    out: dict[str, list[tuple[int, object]]] = {}
    with (path / f"{path.name}.mcap").open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
            assert schema.encoding == "ros2msg" and channel.message_encoding == "cdr"
            assert schema.name == {**FRAME_TOPICS, **STATIC_TOPICS}[channel.topic]
            out.setdefault(channel.topic, []).append((message.log_time, decoded))
    return out


def test_an_independent_mcap_ros2_decoder_reads_images_camera_info_and_transforms(recorded):
    path, frames = recorded
    messages = decoded_messages(path)
    assert set(messages) == set(FRAME_TOPICS) | set(STATIC_TOPICS)
    ((_, static),) = messages[bundle.TF_STATIC_TOPIC]
    assert [(t.header.frame_id, t.child_frame_id) for t in static.transforms] == [
        (FRAMES.map, FRAMES.odom),
        (FRAMES.camera, FRAMES.optical),
    ]
    optical = static.transforms[1].transform.rotation
    assert (optical.x, optical.y, optical.z, optical.w) == (-0.5, 0.5, -0.5, 0.5)
    for index, frame in enumerate(frames):
        obs = frame.observation
        stamp = round(obs.step * INFO.step_dt * 1e9)  # steps of these frames always advance
        got = {topic: items[index] for topic, items in messages.items() if topic in FRAME_TOPICS}
        assert {log_time for log_time, _ in got.values()} == {stamp}
        h, w = obs.depth.shape
        for topic, encoding, array, bpp in (
            (bundle.RGB_TOPIC, "rgb8", obs.rgb, 3),
            (bundle.DEPTH_TOPIC, "32FC1", obs.depth, 4),
            (bundle.INSTANCES_TOPIC, "32SC1", obs.segments, 4),
        ):
            image = got[topic][1]
            assert (image.encoding, image.height, image.width, image.step, image.is_bigendian) == (
                encoding,
                h,
                w,
                w * bpp,
                0,
            )
            assert image.header.frame_id == FRAMES.optical
            assert image.header.stamp.sec * 10**9 + image.header.stamp.nanosec == stamp
            assert bytes(image.data) == array.astype(array.dtype.newbyteorder("<")).tobytes()
        info = got[bundle.CAMERA_INFO_TOPIC][1]
        assert (info.width, info.height, info.distortion_model) == (w, h, "plumb_bob")
        assert list(info.k) == pytest.approx(list(INTRINSICS.matrix.ravel()), abs=0.0)
        assert list(info.d) == [0.0] * 5
        assert list(info.p) == [INTRINSICS.fx, 0, INTRINSICS.cx, 0, 0, INTRINSICS.fy, INTRINSICS.cy, 0, 0, 0, 1, 0]
        tf = got[bundle.TF_TOPIC][1]
        chain = [(t.header.frame_id, t.child_frame_id) for t in tf.transforms]
        assert chain == [(FRAMES.odom, FRAMES.base), (FRAMES.base, FRAMES.camera)]
        base, mount = tf.transforms
        assert base.transform.translation.z == 0.0
        assert mount.transform.translation.z == pytest.approx(obs.camera_position[1])
        labels = json.loads(got[bundle.INSTANCE_LABELS_TOPIC][1].data)
        assert labels == {"stamp_ns": stamp, "step": obs.step, "labels": {"1": "Sofa", "2": "Mug", "3": "Mug"}}
        truth = json.loads(got[bundle.GROUND_TRUTH_TOPIC][1].data)
        assert truth["segment_instances"] == {"1": "Sofa|1", "2": "Mug|3", "3": "Mug|9"}
        assert {o["instance_id"]: tuple(o["position"]) for o in truth["objects"]}["Mug|3"] == frame.objects[
            "Mug|3"
        ].position
        # The tree map -> odom -> base_link -> camera_link -> optical frame, chained here by hand,
        # back-projects a depth pixel onto the world point the simulator's camera sees.
        v, u = 5, 40
        point = INTRINSICS.back_project(np.array([u]), np.array([v]), np.array([2.0]))[0]
        (map_odom, link_optical), (odom_base, base_link) = static.transforms, tf.transforms
        for edge in (link_optical, base_link, odom_base, map_odom):
            o, t = edge.transform.rotation, edge.transform.translation
            point = _quaternion_matrix(o.x, o.y, o.z, o.w) @ point + np.array([t.x, t.y, t.z])
        world = ros_to_thor_points(point[None])[0]
        q = INTRINSICS.back_project(np.array([u]), np.array([v]), np.array([2.0]))[0]
        expected = np.asarray(obs.camera_position) + optical_axes_thor(obs.pose.yaw_deg, obs.pose.horizon_deg) @ q
        assert np.allclose(world, expected, atol=1e-9)


def _quaternion_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    # Written out here (not scipy) so the check shares no code with the writer.
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


# ---- errors ---------------------------------------------------------------------------------------


def copy_recording(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for item in src.iterdir():
        (dst / item.name.replace(src.name, dst.name)).write_bytes(item.read_bytes())
    meta = (dst / "metadata.yaml").read_text().replace(f"{src.name}.mcap", f"{dst.name}.mcap")
    (dst / "metadata.yaml").write_text(meta)
    return dst


@pytest.mark.parametrize("reader", [read_visit, read_visit_raw])
def test_a_missing_recording_fails_naming_the_path(tmp_path, reader):
    with pytest.raises(RecordingError, match=re.escape(f"{tmp_path / 'nowhere'}: no recording there")):
        reader(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordingError, match=r"metadata\.yaml is missing"):
        reader(tmp_path / "empty")


def test_a_truncated_file_fails_at_open_naming_the_file(recorded, tmp_path):
    path, _ = recorded
    bad = copy_recording(path, tmp_path / "cut")
    storage = bad / "cut.mcap"
    storage.write_bytes(storage.read_bytes()[: storage.stat().st_size * 2 // 3])
    with pytest.raises(RecordingError, match=re.escape(f"{bad}: cannot open the recording (corrupt or truncated)")):
        read_visit(bad)


@pytest.mark.parametrize("reader", [read_visit, read_visit_raw])
def test_a_damaged_chunk_fails_naming_the_file_frame_and_topics_instead_of_decoding_wrong_pixels(
    recorded, tmp_path, reader
):
    path, _ = recorded
    bad = copy_recording(path, tmp_path / "flip")
    storage = bad / "flip.mcap"
    data = bytearray(storage.read_bytes())
    with storage.open("rb") as stream:
        chunks = make_reader(stream).get_summary().chunk_indexes
    chunk = chunks[len(chunks) // 2]
    middle = chunk.chunk_start_offset + chunk.chunk_length // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    storage.write_bytes(bytes(data))
    frames = reader(bad)
    with pytest.raises(
        RecordingError, match=re.escape(f"{bad}: cannot read frame ") + r"\d+ \(topics /camera/.*corrupt"
    ):
        list(frames)


@pytest.mark.parametrize("reader", [read_visit, read_visit_raw])
def test_a_topic_with_fewer_messages_than_frames_is_reported_as_truncated(recorded, tmp_path, reader):
    path, _ = recorded
    bad = copy_recording(path, tmp_path / "short")
    meta = yaml.safe_load((bad / "metadata.yaml").read_text())
    topics = meta["rosbag2_bagfile_information"]["topics_with_message_count"]
    depth = next(t for t in topics if t["topic_metadata"]["name"] == bundle.DEPTH_TOPIC)
    depth["message_count"] -= 1
    (bad / "metadata.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(RecordingError, match=f"topic {bundle.DEPTH_TOPIC} has 5 messages for 6 frames"):
        reader(bad)


def test_a_bag_without_the_ovman_entry_is_rejected_as_not_a_visit(recorded, tmp_path):
    path, _ = recorded
    bad = copy_recording(path, tmp_path / "foreign")
    meta = yaml.safe_load((bad / "metadata.yaml").read_text())
    meta["rosbag2_bagfile_information"]["custom_data"] = None
    (bad / "metadata.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(RecordingError, match="not an OVMAN visit"):
        read_visit(bad)


# ---- writing ---------------------------------------------------------------------------------------


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    target = tmp_path / "visit"
    (frame,) = synthetic_frames(1)
    with pytest.raises(RuntimeError, match="simulator died"), VisitWriter(target, INFO) as writer:
        writer.write(frame.observation, frame.objects)
        raise RuntimeError("simulator died")
    assert os.listdir(tmp_path) == []


def test_an_existing_recording_is_replaced_only_when_asked(recorded, tmp_path):
    path, frames = recorded
    target = copy_recording(path, tmp_path / "visit")
    with pytest.raises(RecordingError, match="already exists"):
        write_visit(target, INFO, frames[:2])
    write_visit(target, INFO, frames[:2], overwrite=True)
    assert len(list(read_visit(target))) == 2
    assert os.listdir(tmp_path) == ["visit"]


def test_frames_without_a_world_step_between_get_their_own_stamps_and_keep_their_steps(tmp_path):
    # A tour teleports between waypoints without a world step: 4, 4 (teleport), 5, 5, 9.
    steps = [4, 4, 5, 5, 9]
    frames = [
        RecordedFrame(Observation(**{**f.observation.__dict__, "step": s}), f.objects)
        for f, s in zip(synthetic_frames(len(steps)), steps, strict=True)
    ]
    write_visit(tmp_path / "v", INFO, frames)
    assert [f.observation.step for f in read_visit(tmp_path / "v")] == steps
    stamps = [t for t, _ in decoded_messages(tmp_path / "v")[bundle.RGB_TOPIC]]
    dt = 100_000_000
    assert stamps == [4 * dt, 5 * dt, 6 * dt, 7 * dt, 11 * dt]


def test_an_observation_that_does_not_match_its_intrinsics_is_refused(tmp_path):
    (frame,) = synthetic_frames(1)
    wrong = Observation(**{**frame.observation.__dict__, "depth": frame.observation.depth.astype(np.float64)})
    with pytest.raises(RecordingError, match=r"depth must be float32 \(48, 64\).*got float64"):
        write_visit(tmp_path / "v", INFO, [RecordedFrame(wrong, frame.objects)])


def test_an_empty_visit_is_not_written(tmp_path):
    with pytest.raises(RecordingError, match="no frames"):
        write_visit(tmp_path / "v", INFO, [])
    assert os.listdir(tmp_path) == []


def test_visit_info_frames_round_trip_custom_frame_names(tmp_path):
    frames = FramesConfig("world", "odom2", "base_footprint", "cam", "cam_optical")
    info = VisitInfo("FloorPlan1", 1, 0.25, frames)
    write_visit(tmp_path / "v", info, synthetic_frames(2))
    assert read_visit_info(tmp_path / "v") == (info, 2)
    messages = decoded_messages(tmp_path / "v")
    assert messages[bundle.RGB_TOPIC][0][1].header.frame_id == "cam_optical"


# ---- the embedded world ------------------------------------------------------------------------------


def live_tour(config, scene: str, carried: str | None) -> list[RecordedFrame]:
    """A short tour of a fresh embedded world, with the mover carrying ``carried`` (if given)."""
    world = EmbeddedWorld(config.sim_node)
    try:
        world.reset(scene)
        if carried is not None:
            world.start_mover(carried, seed=11)
        tour = dataclasses.replace(config.sim_node.tour, max_waypoints=4)
        return [
            RecordedFrame(observation, world.objects())
            for observation in tour_observations(world, tour, config.sim_node.world)
        ]
    finally:
        world.close()


def test_a_recorded_embedded_tour_replays_as_the_live_world_renders_it(tmp_path):
    config = load_config()
    scene = "embedded-3"
    probe = EmbeddedWorld(config.sim_node)
    probe.reset(scene)
    carried = next(o.instance_id for o in probe.objects() if o.movable)
    probe.close()
    recorded_frames = live_tour(config, scene, carried)
    write_visit(tmp_path / "tour", VisitInfo(scene, 2, config.sim_node.node.step_dt, config.frames), recorded_frames)
    replayed = list(read_visit(tmp_path / "tour"))
    live = live_tour(config, scene, carried)  # a second, independent run of the same visit
    assert len(replayed) == len(live) == 16
    for expected, got in zip(live, replayed, strict=True):
        assert_same_frame(expected, got)
    positions = {f.objects[carried].position for f in replayed}
    assert len(positions) > 1, "the mover should have carried the instance during the tour"


def test_ovman_record_visit_writes_a_readable_recording_of_the_tour(tmp_path, capsys):
    document = to_document(load_config())
    document["sim_node"]["ros__parameters"]["tour"]["max_waypoints"] = 1
    config_path = tmp_path / "ovman.yaml"
    config_path.write_text(yaml.safe_dump(document))
    out = tmp_path / "visit"
    assert main(["record-visit", "--scene", "embedded-5", "--out", str(out), "--config", str(config_path)]) == 0
    frames = list(read_visit(out))
    assert len(frames) == load_config().sim_node.tour.turns_per_waypoint
    assert read_visit_info(out)[0].scene == "embedded-5"
    assert main(["record-visit", "--scene", "embedded-5", "--out", str(out), "--config", str(config_path)]) == 1
    assert "already exists" in capsys.readouterr().err


def test_sensor_readings_are_recorded_as_16uc1_millimetres_and_read_back_bit_exact(tmp_path):
    """Millimetre readings (the sensor model's) go out as 16UC1, 0 = missing, what RGB-D drivers
    publish; an ideal camera's exact depth stays 32FC1 (see the module test above)."""
    frames = synthetic_frames(3, seed=4)
    for frame in frames:
        depth = frame.observation.depth
        depth[:] = np.rint(depth * np.float32(1000.0)) / np.float32(1000.0)
    path = tmp_path / "visit1"
    write_visit(path, INFO, frames)
    messages = decoded_messages(path)
    for (_, image), frame in zip(messages[bundle.DEPTH_TOPIC], frames, strict=True):
        z = frame.observation.depth
        assert (image.encoding, image.step) == ("16UC1", z.shape[1] * 2)
        mm = np.frombuffer(bytes(image.data), dtype="<u2").reshape(z.shape)
        assert np.array_equal(mm == 0, np.isnan(z))
        assert np.array_equal(mm[mm > 0], np.rint(z[~np.isnan(z)] * 1000.0).astype(np.uint16))
    for expected, got in zip(frames, read_visit(path), strict=True):
        assert_same_frame(expected, got)
