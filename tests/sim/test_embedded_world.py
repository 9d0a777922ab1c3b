"""The embedded world: procedural homes, rendering, the agent, changes, the mover, stress conditions."""

from __future__ import annotations

import colorsys
import dataclasses
import itertools
import re
import warnings

import numpy as np
import pytest

from ovman_core.actions import Action
from ovman_core.config import load_config
from ovman_core.frames import optical_axes_thor
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.floor_grid import point_rect_distance
from ovman_sim.homes import (
    CATEGORIES,
    category_assets,
    generate_home,
    object_parts,
    object_supports,
    parse_scene,
    scene_name,
)
from ovman_sim.sensor import degrade_depth, edge_pixels
from ovman_sim.tours import plan_tour
from ovman_sim.world import AddObject, Condition, MoveObject, RemoveObject, World

from .scenes import world_at

SCENE = "embedded-1"


@pytest.fixture(scope="module")
def shipped():
    """The shipped sim_node config: sensor model and physics on."""
    return load_config().sim_node


@pytest.fixture(scope="module")
def sim(shipped):
    """The exact world: the ideal camera (exact depth and pose) and changes that land exactly and
    settle nothing, for the tests of geometry, rendering and change rules."""
    return dataclasses.replace(
        shipped,
        sensor=dataclasses.replace(shipped.sensor, enabled=False),
        physics=dataclasses.replace(shipped.physics, enabled=False),
    )


@pytest.fixture
def world(sim):
    yield from world_at(sim, SCENE)


def tour_poses(world: EmbeddedWorld) -> list[AgentPose]:
    sim = world.config
    plan = plan_tour(world.reachable_positions(), world.agent_pose().floor, sim.world.grid_size, sim.tour)
    return plan.poses(sim.world.rotate_step_deg)


def frames_at(world: EmbeddedWorld, poses):
    for pose in poses:
        assert world.teleport(pose).success, pose
        yield world.observe()


def world_points(obs, mask: np.ndarray) -> np.ndarray:
    """World points (N, 3) of the pixels in ``mask``, back-projected with depth, intrinsics and pose."""
    v, u = np.nonzero(mask)
    optical = obs.intrinsics.back_project(u, v, obs.depth[v, u])
    axes = optical_axes_thor(obs.pose.yaw_deg, obs.pose.horizon_deg)
    return np.asarray(obs.camera_position) + optical @ axes.T


def inside(points: np.ndarray, box, tol: float) -> np.ndarray:
    return np.all((points >= np.array(box.lo) - tol) & (points <= np.array(box.hi) + tol), axis=1)


def instance_pixels(obs, instance_id: str) -> np.ndarray:
    ids = [k for k, v in obs.segment_instances.items() if v == instance_id]
    return np.isin(obs.segments, ids)


def floor_object(world: EmbeddedWorld, min_size: float = 0.0):
    """A movable object standing on the floor, carrying nothing."""
    for obj in world.objects():
        on_floor = obj.movable and abs(obj.box.lo[1]) < 1e-6
        if on_floor and min(obj.box.size[0], obj.box.size[2]) >= min_size and not world.resting_on(obj.instance_id):
            return obj
    raise AssertionError("the test home has no movable floor object")


# ---------------------------------------------------------------- protocol, scenes, determinism


def test_embedded_world_implements_the_world_protocol(world):
    assert isinstance(world, World)


def test_scene_names_round_trip_and_other_names_are_rejected(sim):
    assert parse_scene(scene_name(7)) == 7
    for bad in ("FloorPlan1", "embedded-", "embedded--3", "embedded-1x"):
        with pytest.raises(ValueError, match=r"embedded-<seed>"):
            parse_scene(bad)
    with pytest.raises(ValueError, match=r"embedded-<seed>"):
        EmbeddedWorld(sim).reset("FloorPlan1")


def test_same_seed_gives_the_same_home_frames_and_objects(sim):
    a, b = EmbeddedWorld(sim), EmbeddedWorld(sim)
    a.reset(SCENE)
    b.reset(SCENE)
    assert generate_home(1, sim.world, sim.embedded) == generate_home(1, sim.world, sim.embedded)
    assert a.objects() == b.objects()
    poses = tour_poses(a)[::9]
    for fa, fb in zip(frames_at(a, poses), frames_at(b, poses), strict=True):
        np.testing.assert_array_equal(fa.rgb, fb.rgb)
        np.testing.assert_array_equal(fa.depth, fb.depth)
        np.testing.assert_array_equal(fa.segments, fb.segments)
        assert fa.segment_instances == fb.segment_instances
    b.reset("embedded-2")
    assert a.objects() != b.objects()


def test_homes_use_a_rich_vocabulary_with_repeated_categories_and_varied_instances(world):
    assert len(CATEGORIES) >= 30
    state = world.objects()
    by_category: dict[str, list] = {}
    for obj in state:
        by_category.setdefault(obj.category, []).append(obj)
    assert len(by_category) >= 20
    repeated = {c: objs for c, objs in by_category.items() if len(objs) >= 2}
    assert len(repeated) >= 8
    sizes_vary = [c for c, objs in repeated.items() if len({o.box.size for o in objs}) > 1]
    colours_vary = [
        c for c, objs in repeated.items() if len({world.appearance(o.instance_id).primary for o in objs}) > 1
    ]
    # Look-alikes share their asset's colours; sizes always differ by the per-instance jitter.
    assert len(sizes_vary) >= 5 and len(colours_vary) >= 2
    for obj in state:
        assert re.fullmatch(rf"{obj.category}_\d+", obj.instance_id)
        assert obj.position == pytest.approx(obj.box.center)
    assert all(o.movable for o in by_category.get("Chair", []))
    assert not any(o.movable for o in by_category["Sofa"])


def test_objects_rest_on_the_floor_or_a_furniture_support_without_overlapping(world):
    state = list(world.objects())
    tol = world.config.embedded.contact_tolerance
    supports = [s for o in state for s in object_supports(o.category, o.box, world.appearance(o.instance_id).facing)]
    for obj in state:
        bottom = obj.box.lo[1]
        on_support = any(
            abs(bottom - s.y) <= tol
            and s.x_min - tol <= obj.box.lo[0]
            and obj.box.hi[0] <= s.x_max + tol
            and s.z_min - tol <= obj.box.lo[2]
            and obj.box.hi[2] <= s.z_max + tol
            for s in supports
        )
        assert abs(bottom) <= tol or on_support, obj.instance_id
    boxes = [(w, "wall") for w in world.home.walls]
    for obj in state:
        boxes += [
            (p.box, obj.instance_id)
            for p in object_parts(obj.category, obj.box, world.appearance(obj.instance_id).facing)
        ]
    lo = np.array([b.lo for b, _ in boxes])
    hi = np.array([b.hi for b, _ in boxes])
    owner = np.array([o for _, o in boxes])
    overlap = np.all((lo[:, None] < hi[None] - tol) & (lo[None] < hi[:, None] - tol), axis=2)
    overlap &= owner[:, None] != owner[None, :]
    pairs = {tuple(sorted((owner[i], owner[j]))) for i, j in zip(*np.nonzero(overlap), strict=True)}
    assert not pairs


# ---------------------------------------------------------------- rendering


def test_back_projected_pixels_of_every_instance_land_on_its_box(world):
    state = world.objects()
    checked = set()
    for obs in frames_at(world, tour_poses(world)[::5]):
        assert obs.rgb.dtype == np.uint8 and obs.rgb.shape == (obs.intrinsics.height, obs.intrinsics.width, 3)
        assert obs.depth.dtype == np.float32 and obs.segments.dtype == np.int32
        for segment, instance_id in obs.segment_instances.items():
            points = world_points(obs, obs.segments == segment)
            assert inside(points, state[instance_id].box, 2e-3).all(), instance_id
            checked.add(instance_id)
    assert len(checked) >= 30


def test_depth_is_planar_along_the_optical_axis(world):
    # Stand next to the outer wall z = 0 facing it (yaw 180 looks along −z): a planar depth image of
    # a wall perpendicular to the optical axis is constant; a ray-length image would not be.
    cells = [p for p in world.reachable_positions() if p[1] == min(q[1] for q in world.reachable_positions())]
    x, z = cells[len(cells) // 2]
    assert world.teleport(AgentPose(x, z, 180.0, 0.0)).success
    obs = world.observe()
    wall_face = world.config.embedded.wall_thickness / 2.0
    row = obs.depth[obs.intrinsics.height // 2]
    assert np.allclose(row, z - wall_face, atol=1e-5)


def test_segment_ids_are_numbered_per_frame_by_first_appearance(world):
    state = world.objects()
    obs = next(frames_at(world, [tour_poses(world)[0]]))
    k = len(obs.segment_instances)
    assert k > 3
    assert sorted(np.unique(obs.segments[obs.segments > 0]).tolist()) == list(range(1, k + 1))
    flat = obs.segments.ravel()
    firsts = [int(np.argmax(flat == s)) for s in range(1, k + 1)]
    assert firsts == sorted(firsts)
    for segment, instance_id in obs.segment_instances.items():
        assert obs.segment_labels[segment] == state[instance_id].category


# ---------------------------------------------------------------- agent and reachability


def test_reachable_cells_keep_a_capsule_radius_from_walls_and_objects(world):
    radius = world.config.world.agent_radius
    rects = [(w.lo[0], w.lo[2], w.hi[0], w.hi[2]) for w in world.home.walls]
    rects += [(o.box.lo[0], o.box.lo[2], o.box.hi[0], o.box.hi[2]) for o in world.objects()]
    rects = np.array(rects)
    reachable = world.reachable_positions()
    assert len(reachable) > 100
    for point in reachable:
        assert point_rect_distance(point, rects).min() >= radius - 1e-6, point


def test_every_room_and_doorway_is_reachable_from_the_start(world):
    reachable = world.reachable_positions()
    g = world.config.world.grid_size
    cells = {(round(x / g), round(z / g)) for x, z in reachable}
    start = (round(world.agent_pose().x / g), round(world.agent_pose().z / g))
    seen, todo = {start}, [start]
    while todo:
        i, j = todo.pop()
        for nb in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
            if nb in cells and nb not in seen:
                seen.add(nb)
                todo.append(nb)
    assert seen == cells
    home = world.home
    assert len(home.rooms) >= 2 and len(home.doorways) >= len(home.rooms) - 1
    for room in home.rooms:
        assert any(room.contains(p, margin=0.3) for p in reachable), room.name
    for door in home.doorways:
        assert any(door.x_min <= x <= door.x_max and door.z_min <= z <= door.z_max for x, z in reachable), door


def test_move_ahead_into_a_wall_fails_with_collided_and_keeps_the_pose(world):
    for _ in range(200):
        before = world.agent_pose()
        result = world.step(Action.MOVE_AHEAD)
        if not result.success:
            break
        assert world.agent_pose() != before
    assert result.collided and not result.success and "blocked" in result.message
    assert world.agent_pose() == before
    # Facing the outer wall at the lowest reachable z is always blocked.
    x, z = min(world.reachable_positions(), key=lambda p: (p[1], p[0]))
    assert world.teleport(AgentPose(x, z, 180.0, 0.0)).success
    result = world.step(Action.MOVE_AHEAD)
    assert result.collided and world.agent_pose() == AgentPose(x, z, 180.0, 0.0)


def test_rotations_turn_clockwise_and_look_actions_respect_the_horizon_limits(world):
    cfg = world.config.world
    world.step(Action.ROTATE_RIGHT)
    assert world.agent_pose().yaw_deg == cfg.rotate_step_deg
    world.step(Action.ROTATE_LEFT)
    world.step(Action.ROTATE_LEFT)
    assert world.agent_pose().yaw_deg == 360.0 - cfg.rotate_step_deg
    results = [world.step(Action.LOOK_DOWN) for _ in range(5)]
    assert world.agent_pose().horizon_deg == cfg.horizon_max_deg
    assert not results[-1].success and not results[-1].collided and "horizon" in results[-1].message
    assert world.step(Action.STOP).success


def test_teleport_to_a_blocked_or_off_grid_pose_fails_without_moving(world):
    before = world.agent_pose()
    sofa = world.objects().of_category("Sofa")[0]
    g = world.config.world.grid_size
    on_sofa = (round(sofa.position[0] / g) * g, round(sofa.position[2] / g) * g)
    for pose, words in (
        (AgentPose(on_sofa[0], on_sofa[1]), "blocked"),
        (AgentPose(before.x + 0.1, before.z), "grid"),
        (AgentPose(before.x, before.z, 45.0), "rotate_step"),
        (AgentPose(before.x, before.z, 0.0, 80.0), "horizon"),
    ):
        result = world.teleport(pose)
        assert not result.success and words in result.message
        assert world.agent_pose() == before


def test_reset_with_objects_sets_exactly_those_objects_and_the_pose(world):
    state = world.objects()
    fewer = WorldState.of([o for o in state if o.instance_id != "Sofa_1"])
    x, z = world.reachable_positions()[10]
    world.reset(SCENE, fewer, AgentPose(x, z, 90.0, 30.0))
    assert world.objects() == fewer
    assert world.agent_pose() == AgentPose(x, z, 90.0, 30.0)
    with pytest.raises(ValueError, match="cannot place the agent"):
        world.reset(SCENE, pose=AgentPose(x + 0.1, z))


def test_config_that_breaks_the_grid_is_rejected(sim):
    with pytest.raises(ValueError, match="rotate_step_deg"):
        EmbeddedWorld(dataclasses.replace(sim, world=dataclasses.replace(sim.world, rotate_step_deg=45.0)))
    with pytest.raises(ValueError, match="hop_length"):
        EmbeddedWorld(dataclasses.replace(sim, mover=dataclasses.replace(sim.mover, hop_length=0.3)))


# ---------------------------------------------------------------- changes


def far_candidate(
    world: EmbeddedWorld, instance_id: str, on_floor: bool, min_distance: float = 1.5, new: ObjectState | None = None
):
    """A placement of ``instance_id`` (or of the ``new`` instance not yet added) on the floor or not,
    at least ``min_distance`` from where it is."""
    obj = world.objects().objects.get(instance_id)
    size_y = (obj or new).box.size[1]
    for c in world.candidate_placements(instance_id):
        if on_floor != (abs(c[1] - size_y / 2.0) < 1e-6):
            continue
        if obj is None or np.hypot(c[0] - obj.position[0], c[2] - obj.position[2]) >= min_distance:
            return c
    raise AssertionError(f"no candidate placement for {instance_id}")


def test_move_takes_effect_in_the_state_the_render_and_reachability(world):
    obj = floor_object(world, min_size=0.3)
    before_reach = set(world.reachable_positions())
    target = far_candidate(world, obj.instance_id, on_floor=True)
    assert world.apply_change(MoveObject(obj.instance_id, target)).success
    moved = world.objects()[obj.instance_id]
    assert moved.position == pytest.approx(target) and moved.box.size == pytest.approx(obj.box.size)
    after_reach = set(world.reachable_positions())
    assert before_reach - after_reach and after_reach - before_reach
    seen = 0
    for obs in frames_at(world, tour_poses(world)):
        mask = instance_pixels(obs, obj.instance_id)
        if mask.any():
            assert inside(world_points(obs, mask), moved.box, 2e-3).all()
            seen += 1
    assert seen > 0


def test_remove_takes_effect_in_the_state_the_render_and_reachability(world):
    obj = floor_object(world, min_size=0.3)
    before_reach = set(world.reachable_positions())
    assert world.apply_change(RemoveObject(obj.instance_id)).success
    assert obj.instance_id not in world.objects()
    assert set(world.reachable_positions()) > before_reach
    for obs in frames_at(world, tour_poses(world)):
        assert obj.instance_id not in obs.segment_instances.values()


def test_add_takes_effect_in_the_state_the_render_and_reachability(world):
    template = world.new_instance("Basketball", "Basketball_99")
    assert template is not None and template.category == "Basketball" and template.movable
    assert world.new_instance("Spaceship", "Spaceship_1") is None
    before_reach = set(world.reachable_positions())
    position = far_candidate(world, "Basketball_99", on_floor=True, new=template)
    box = template.box.translated(tuple(p - c for p, c in zip(position, template.box.center, strict=True)))
    added = dataclasses.replace(template, position=box.center, box=box)
    assert world.apply_change(AddObject(added)).success
    assert world.objects()["Basketball_99"] == added
    assert set(world.reachable_positions()) < before_reach
    assert any(instance_pixels(obs, "Basketball_99").any() for obs in frames_at(world, tour_poses(world)))


def test_candidate_placements_on_floors_and_tops_are_accepted_as_moves(world):
    mug = world.objects().of_category("Mug")[0]
    candidates = world.candidate_placements(mug.instance_id)
    assert candidates == sorted(candidates) and len(candidates) > 20
    assert all(abs(c[1] - mug.box.size[1] / 2.0) > 0.05 for c in candidates)  # mugs do not go on the floor
    for c in candidates[:: max(len(candidates) // 12, 1)]:
        result = world.apply_change(MoveObject(mug.instance_id, c))
        assert result.success, result.message
    assert world.candidate_placements("Sofa_1") == []


def test_invalid_changes_are_rejected_with_a_clear_message_and_change_nothing(world):
    state = world.objects()
    sofa = state.of_category("Sofa")[0]
    loaded = [o.instance_id for o in state if world.resting_on(o.instance_id)]
    assert loaded, "the test home has no furniture carrying objects"
    chair = state.of_category("Chair")[0]
    mug = state.of_category("Mug")[0]
    cases = [
        (MoveObject("Nothing_1", (1.0, 0.5, 1.0)), "no such instance"),
        (MoveObject(sofa.instance_id, (1.0, 0.5, 1.0)), "not movable"),
        (MoveObject(mug.instance_id, (mug.position[0], mug.position[1] + 0.5, mug.position[2])), "would not rest"),
        (MoveObject(chair.instance_id, (sofa.position[0], chair.position[1], sofa.position[2])), "intersect"),
        (
            MoveObject(chair.instance_id, (*world.agent_pose().floor[:1], chair.position[1], world.agent_pose().z)),
            "land on the agent",
        ),
        (RemoveObject("Nothing_1"), "no such instance"),
        (AddObject(state[mug.instance_id]), "already present"),
        (RemoveObject(loaded[0]), "carries"),
    ]
    for change, words in cases:
        result = world.apply_change(change)
        assert not result.success and words in result.message, (change, result.message)
        assert world.objects() == state
    with pytest.raises(TypeError):
        world.apply_change("move it")  # type: ignore[arg-type]


# ---------------------------------------------------------------- mover


def mover_track(sim, seed: int, steps: int = 60, instance_id: str | None = None):
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    instance_id = instance_id or floor_object(world).instance_id
    world.start_mover(instance_id, seed)
    track = [world.objects()[instance_id].position]
    for _ in range(steps):
        world.step(Action.ROTATE_RIGHT)
        track.append(world.objects()[instance_id].position)
    return world, instance_id, track


def test_occupancy_kept_across_mover_hops_equals_one_built_from_scratch(sim):
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    instance_id = floor_object(world).instance_id
    world.start_mover(instance_id, 5)
    other = next(o.instance_id for o in world.objects() if o.instance_id != instance_id)
    scratch = EmbeddedWorld(sim)
    positions = set()
    for _ in range(40):
        world.step(Action.ROTATE_RIGHT)
        positions.add(world.objects()[instance_id].position)
        kept = [world.occupancy(), world.occupancy(exclude=instance_id), world.occupancy(exclude=other)]
        scratch.reset(SCENE, world.objects(), world.agent_pose())  # the same objects, nothing cached
        fresh = [scratch.occupancy(), scratch.occupancy(exclude=instance_id), scratch.occupancy(exclude=other)]
        for a, b in zip(kept, fresh, strict=True):
            assert (a.cells == b.cells).all() and (a.edges_x == b.edges_x).all() and (a.edges_z == b.edges_z).all()
    assert len(positions) > 3  # the mover did hop


def test_mover_carries_the_instance_along_free_lattice_cells(sim):
    world, instance_id, track = mover_track(sim, seed=3)
    g, hop = sim.world.grid_size, sim.mover.hop_length
    radius = sim.world.agent_radius
    others = np.array(
        [(w.lo[0], w.lo[2], w.hi[0], w.hi[2]) for w in world.home.walls]
        + [
            (o.box.lo[0], o.box.lo[2], o.box.hi[0], o.box.hi[2])
            for o in world.objects()
            if o.instance_id != instance_id
        ]
    )
    hops = 0
    for step, (a, b) in enumerate(itertools.pairwise(track), start=1):
        assert abs(b[1] - track[0][1]) < 1e-9  # stays on the floor
        d = np.hypot(b[0] - a[0], b[2] - a[2])
        if step % sim.mover.steps_per_move:
            assert d == 0.0
        elif d > 0:
            hops += 1
            assert d == pytest.approx(hop)
        assert abs(b[0] / g - round(b[0] / g)) < 1e-6 and abs(b[2] / g - round(b[2] / g)) < 1e-6
        assert point_rect_distance((b[0], b[2]), others).min() >= radius - 1e-6
    assert hops >= len(track) // sim.mover.steps_per_move // 2
    world.stop_mover()
    here = world.objects()[instance_id].position
    for _ in range(6):
        world.step(Action.ROTATE_LEFT)
    assert world.objects()[instance_id].position == here


def test_stop_ends_the_episode_without_advancing_time_or_the_mover(sim):
    world, instance_id, _ = mover_track(sim, seed=3, steps=1)
    before = (world.objects()[instance_id].position, world.agent_pose(), world.observe().step)
    for _ in range(2 * sim.mover.steps_per_move):
        assert world.step(Action.STOP).success
    assert (world.objects()[instance_id].position, world.agent_pose(), world.observe().step) == before


def test_mover_is_deterministic_per_seed_and_seeds_differ(sim):
    _, _, a = mover_track(sim, seed=5)
    _, _, b = mover_track(sim, seed=5)
    _, _, c = mover_track(sim, seed=6)
    assert a == b
    assert a != c


def test_mover_rejects_furniture_that_cannot_move(world):
    with pytest.raises(ValueError, match="not movable"):
        world.start_mover("Sofa_1", 0)


# ---------------------------------------------------------------- stress conditions


def test_low_light_is_darker_noisier_and_has_no_depth_beyond_visibility(world):
    cond = world.config.conditions
    poses = tour_poses(world)[::7]
    base = list(frames_at(world, poses))
    world.set_condition(Condition.LOW_LIGHT, seed=1)
    dark = list(frames_at(world, poses))
    beyond_seen = False
    for b, d in zip(base, dark, strict=True):
        assert d.rgb.mean() < 0.6 * b.rgb.mean()
        far = ~(b.depth <= cond.low_light_visibility)
        beyond_seen |= bool((b.depth > cond.low_light_visibility).any())
        assert np.isnan(d.depth[far]).all()
        np.testing.assert_array_equal(d.depth[~far], b.depth[~far])
        assert (d.segments[far] == 0).all()
    assert beyond_seen
    again = list(frames_at(world, poses[:2]))
    np.testing.assert_array_equal(again[0].rgb, dark[0].rgb)


def test_texture_changes_colours_but_not_geometry_depth_or_segments(world):
    poses = tour_poses(world)[::11]
    base = list(frames_at(world, poses))
    world.set_condition(Condition.TEXTURE, seed=2)
    textured = list(frames_at(world, poses))
    for b, t in zip(base, textured, strict=True):
        np.testing.assert_array_equal(t.depth, b.depth)
        np.testing.assert_array_equal(t.segments, b.segments)
        assert np.abs(t.rgb.astype(int) - b.rgb.astype(int)).mean() > 10.0
    world.set_condition(Condition.TEXTURE, seed=3)
    other = next(frames_at(world, poses[:1]))
    assert not np.array_equal(other.rgb, textured[0].rgb)


def test_condition_from_config_applies_from_the_start(sim):
    dim = EmbeddedWorld(dataclasses.replace(sim, conditions=dataclasses.replace(sim.conditions, name="low_light")))
    bright = EmbeddedWorld(sim)
    dim.reset(SCENE)
    bright.reset(SCENE)
    assert dim.observe().rgb.mean() < bright.observe().rgb.mean()
    with pytest.raises(ValueError, match=r"conditions\.name"):
        EmbeddedWorld(dataclasses.replace(sim, conditions=dataclasses.replace(sim.conditions, name="fog")))


# ---------------------------------------------------------------- appearance as assets (TASK.md §10)


def test_look_alikes_share_an_asset_and_differ_only_by_a_small_jitter(shipped):
    look = shipped.world.appearance
    shared = repeated = 0
    for seed in range(4):
        home = generate_home(seed, shipped.world, shipped.embedded)
        by_category: dict[str, list] = {}
        for placed in home.objects:
            by_category.setdefault(placed.state.category, []).append(placed.appearance)
        for category, looks in by_category.items():
            assets = category_assets(category, look)
            assert len(assets) == look.variants_per_category
            for app in looks:
                base = colorsys.hsv_to_rgb(
                    assets[app.asset].primary[0] % 1.0, *np.clip(assets[app.asset].primary[1:], 0, 1)
                )
                assert np.abs(np.subtract(app.primary, base)).max() < 0.1, category
            if len(looks) >= 2:
                repeated += 1
                shared += len({a.asset for a in looks}) < len(looks)
    assert repeated >= 20 and shared / repeated >= 0.6


def test_the_chairs_around_a_dining_table_are_one_set(shipped):
    for seed in range(8):
        home = generate_home(seed, shipped.world, shipped.embedded)
        tables = [p for p in home.objects if p.state.category == "DiningTable"]
        for table in tables:
            box = table.state.box
            chairs = [
                p
                for p in home.objects
                if p.state.category == "Chair" and box.footprint.distance_to(p.state.floor) < 0.6
            ]
            if len(chairs) >= 2:
                assert len({c.appearance.asset for c in chairs}) == 1
                return
    raise AssertionError("no dining table with two chairs in eight homes")


def test_appearance_config_out_of_range_is_refused_naming_the_key(shipped):
    for key, bad in (("variants_per_category", 0), ("home_share", 1.5), ("size_jitter", float("nan"))):
        look = dataclasses.replace(shipped.world.appearance, **{key: bad})
        world = dataclasses.replace(shipped.world, appearance=look)
        with pytest.raises(ValueError, match=rf"world\.appearance\.{key}"):
            generate_home(0, world, shipped.embedded)


# ---------------------------------------------------------------- physics settling


def knocking(shipped, **physics):
    """The shipped config with every neighbour within 1 m knocked (and the ideal camera)."""
    settings = {"knock_radius": 1.0, "knock_probability": 1.0, "slide_mean": 0.08, **physics}
    return dataclasses.replace(
        shipped,
        physics=dataclasses.replace(shipped.physics, **settings),
        sensor=dataclasses.replace(shipped.sensor, enabled=False),
    )


def move_with_neighbours(world: EmbeddedWorld):
    """Move a small object that has movable neighbours; returns (instance id, intended destination)."""
    for obj in world.objects():
        if not obj.movable or abs(obj.box.lo[1]) < 1e-6 or world.resting_on(obj.instance_id):
            continue
        target = far_candidate(world, obj.instance_id, on_floor=False, min_distance=1.5)
        return obj.instance_id, target
    raise AssertionError("no small object to move")


def test_a_change_knocks_neighbours_which_slide_over_the_settle_steps_and_stop(shipped):
    sim = knocking(shipped)
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    instance_id, target = move_with_neighbours(world)
    assert world.apply_change(MoveObject(instance_id, target)).success
    landed = world.objects()[instance_id].position
    offset = np.hypot(landed[0] - target[0], landed[2] - target[2])
    assert 0.0 < offset < 5 * sim.physics.landing_offset_std
    start = world.objects()
    states = [start]
    for _ in range(sim.physics.settle_steps + 3):
        world.step(Action.ROTATE_LEFT)
        states.append(world.objects())
    moved = [i for i in start.objects if start[i].position != states[-1][i].position]
    assert moved and instance_id not in moved
    # Settled by the last settle step, then at rest; every state is a valid world.
    assert states[sim.physics.settle_steps] == states[-1]
    for i in moved:
        path = [s[i].floor for s in states[: sim.physics.settle_steps + 1]]
        steps = [np.hypot(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(path)]
        assert max(steps) < 0.5 and np.hypot(path[-1][0] - path[0][0], path[-1][1] - path[0][1]) > 0.0


def test_the_same_change_settles_the_same_way_and_physics_off_settles_nothing(shipped):
    sim = knocking(shipped)
    runs = []
    for _ in range(2):
        world = EmbeddedWorld(sim)
        world.reset(SCENE)
        instance_id, target = move_with_neighbours(world)
        world.apply_change(MoveObject(instance_id, target))
        for _ in range(sim.physics.settle_steps):
            world.step(Action.ROTATE_RIGHT)
        runs.append(world.objects())
    assert runs[0] == runs[1]
    exact = EmbeddedWorld(dataclasses.replace(sim, physics=dataclasses.replace(sim.physics, enabled=False)))
    exact.reset(SCENE)
    before = exact.objects()
    assert exact.apply_change(MoveObject(instance_id, target)).success
    assert exact.objects()[instance_id].position == pytest.approx(target)
    for _ in range(sim.physics.settle_steps):
        exact.step(Action.ROTATE_RIGHT)
    after = exact.objects()
    assert all(after[i] == before[i] for i in before.objects if i != instance_id)


def test_a_reset_ends_every_slide(shipped):
    sim = knocking(shipped)
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    instance_id, target = move_with_neighbours(world)
    world.apply_change(MoveObject(instance_id, target))
    evaluated = world.objects()
    world.reset(SCENE, evaluated, world.agent_pose())
    for _ in range(sim.physics.settle_steps):
        world.step(Action.ROTATE_RIGHT)
    assert world.objects() == evaluated


def test_physics_config_out_of_range_is_refused_naming_the_key(shipped):
    for key, bad in (("knock_probability", -0.1), ("slide_mean", 0.0), ("settle_steps", 0)):
        with pytest.raises(ValueError, match=rf"physics\.{key}"):
            EmbeddedWorld(dataclasses.replace(shipped, physics=dataclasses.replace(shipped.physics, **{key: bad})))


# ---------------------------------------------------------------- the sensor model


def test_depth_noise_grows_with_range_and_depth_is_missing_beyond_range_and_at_edges(shipped, sim):
    noisy, exact = EmbeddedWorld(shipped), EmbeddedWorld(sim)
    noisy.reset(SCENE)
    exact.reset(SCENE)
    sensor = shipped.sensor
    near_err, far_err = [], []
    beyond = edges = dropped = 0
    for a, b in zip(frames_at(noisy, tour_poses(noisy)[::6]), frames_at(exact, tour_poses(exact)[::6]), strict=True):
        z, d = b.depth, a.depth
        both = np.isfinite(z) & np.isfinite(d)
        near_err.append((d - z)[both & (z < 1.5)])
        far_err.append((d - z)[both & (z > 3.5) & (z <= sensor.max_range)])
        out = z > sensor.max_range
        beyond += int(out.sum())
        assert np.isnan(d[out]).all()
        edge = edge_pixels(z, sensor.edge_jump) & (z <= sensor.max_range)
        edges += int(edge.sum())
        dropped += int(np.isnan(d[edge]).sum())
        assert not np.isnan(d[~edge & ~out & np.isfinite(z)]).any()
        np.testing.assert_array_equal(a.segments, b.segments)
        np.testing.assert_array_equal(a.rgb, b.rgb)
    near, far = np.concatenate(near_err), np.concatenate(far_err)
    assert beyond > 0 and edges > 0
    assert 0.3 * sensor.edge_dropout < dropped / edges < 1.7 * sensor.edge_dropout
    assert np.std(far) > 3 * np.std(near) > 0.0
    assert np.std(far) == pytest.approx(sensor.depth_noise_base + sensor.depth_noise_quadratic * 4.5**2, rel=0.6)


def test_sensor_noise_is_seeded_by_the_condition_seed_and_the_frame(shipped):
    a, b = EmbeddedWorld(shipped), EmbeddedWorld(shipped)
    for world in (a, b):
        world.reset(SCENE)
        world.set_condition(Condition.BASELINE, seed=7)
    pose = tour_poses(a)[3]
    fa, fb = next(frames_at(a, [pose])), next(frames_at(b, [pose]))
    np.testing.assert_array_equal(fa.depth, fb.depth)
    b.set_condition(Condition.BASELINE, seed=8)
    assert not np.array_equal(next(frames_at(b, [pose])).depth, fa.depth, equal_nan=True)


def test_pose_noise_is_off_by_default_and_perturbs_only_the_rendered_frame_when_on(shipped):
    world = EmbeddedWorld(shipped)
    world.reset(SCENE)
    assert world.observe().pose == world.agent_pose()
    sensor = dataclasses.replace(shipped.sensor, pose_noise_translation=0.05, pose_noise_yaw_deg=2.0)
    shaky = EmbeddedWorld(dataclasses.replace(shipped, sensor=sensor))
    shaky.reset(SCENE)
    frame = shaky.observe()
    true = shaky.agent_pose()
    assert frame.pose != true and frame.pose.horizon_deg == true.horizon_deg
    assert np.hypot(frame.pose.x - true.x, frame.pose.z - true.z) < 0.3
    assert frame.camera_position[0] == frame.pose.x and frame.camera_position[2] == frame.pose.z
    assert shaky.observe_pose().pose == true
    again = EmbeddedWorld(dataclasses.replace(shipped, sensor=sensor))
    again.reset(SCENE)
    assert again.observe().pose == frame.pose


def test_sensor_config_out_of_range_is_refused_naming_the_key(shipped):
    for key, bad in (("max_range", 0.0), ("edge_dropout", 2.0), ("noise_cell_px", 0), ("depth_noise_base", -1.0)):
        with pytest.raises(ValueError, match=rf"sensor\.{key}"):
            EmbeddedWorld(dataclasses.replace(shipped, sensor=dataclasses.replace(shipped.sensor, **{key: bad})))


@pytest.mark.parametrize(
    "depth",
    [np.full((48, 64), np.nan), np.zeros((0, 0)), np.zeros((4, 5)), np.full((3, 3), np.inf), np.ones((7, 9))],
    ids=["all-nan", "empty", "zeros", "inf", "odd-size"],
)
def test_the_sensor_reads_degenerate_depth_without_crashing_or_warning(shipped, depth):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = degrade_depth(depth.astype(np.float32), shipped.sensor, np.random.default_rng(0))
    assert out.shape == depth.shape and out.dtype == np.float32
    valid = np.isfinite(depth) & (depth > 0.0) & (depth <= shipped.sensor.max_range)
    assert np.isnan(out[~valid]).all() and (out[valid] > 0.0).all()


def test_nan_settings_are_refused_naming_the_key(shipped):
    nan = float("nan")
    with pytest.raises(ValueError, match=r"sim_node\.sensor\.edge_jump = nan"):
        EmbeddedWorld(dataclasses.replace(shipped, sensor=dataclasses.replace(shipped.sensor, edge_jump=nan)))
    with pytest.raises(ValueError, match=r"sim_node\.physics\.knock_radius = nan"):
        EmbeddedWorld(dataclasses.replace(shipped, physics=dataclasses.replace(shipped.physics, knock_radius=nan)))
