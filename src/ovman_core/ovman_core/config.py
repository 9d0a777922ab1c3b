"""The one typed configuration of the stack, loaded from ``config/ovman.yaml`` (ROS 2 params layout).

One frozen dataclass per section; each field declares its range (:class:`Range`, :class:`AtLeast`,
:class:`SumAtMost`) and is explained by the attribute docstring under it (:func:`describe`; ``ovman
config --markdown`` writes docs/configuration.md from them). Loading rejects every unknown, missing,
duplicate, mistyped or out-of-range key, naming the file and the key. It holds no values (the YAML
file does) and imports neither rclpy nor another OVMAN package.

Why one module: a key is declared, checked, explained and exposed in one place.
"""

from __future__ import annotations

import array
import ast
import dataclasses
import functools
import inspect
import itertools
import math
import os
import sys
import types
import typing
from collections.abc import Hashable
from pathlib import Path
from typing import Annotated, Any

import yaml

CONFIG_ENV = "OVMAN_CONFIG"
SHARED_KEY = "/**"
PARAMS_KEY = "ros__parameters"


class ConfigError(ValueError):
    """A configuration file is missing, unreadable, or has a bad key or value."""


@dataclasses.dataclass(frozen=True)
class Range:
    """Field metadata: the interval a number (each item, for a list) must lie in, in the field's
    units; ``None`` leaves that side unbounded, ``open_low``/``open_high`` exclude that end. NaN
    lies in no range."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def __contains__(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.open_low else value >= self.low)
        below = self.high is None or (value < self.high if self.open_high else value <= self.high)
        return above and below

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.open_low else '>='} {_number(self.low)}"
        if self.low is None:
            return f"{'<' if self.open_high else '<='} {_number(self.high)}"
        left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
        return f"in {left}{_number(self.low)}, {_number(self.high)}{right}"


@dataclasses.dataclass(frozen=True)
class AtLeast:
    """Field metadata: the value must be at least (``strict``: above) the field ``other`` of the
    same section, e.g. a maximum and its minimum."""

    other: str
    strict: bool = False


@dataclasses.dataclass(frozen=True)
class SumAtMost:
    """Field metadata: the value plus the fields ``others`` of the same section is at most
    ``total``, e.g. weights that share one whole."""

    others: tuple[str, ...]
    total: float


MAX_COUNT = 1_000_000
"""Largest count, number of steps or size the config accepts: far above any useful value, far below
what overflows an array size."""
MAX_PIXELS = 16_384
"""(px): largest image side, stride or cell."""
MAX_THREADS = 1024
"""Most threads or worker processes."""
INT64 = Range(-(2**63), 2**63 - 1)
"""What a ROS integer parameter holds: every int of the config lies in it."""

Positive = Annotated[float, Range(0.0, open_low=True)]
"""A length, duration, divisor or step: finite and > 0."""
NonNegative = Annotated[float, Range(0.0)]
"""A tolerance, margin, standard deviation, weight or period where 0 means none: finite and >= 0."""
Fraction = Annotated[float, Range(0.0, 1.0)]
"""A probability, share, similarity, opacity or colour channel in [0, 1]."""
HueJitter = Annotated[float, Range(0.0, 0.5)]
"""A fraction of the hue circle drawn uniformly in ±it: 0.5 already reaches every hue."""
PitchDeg = Annotated[float, Range(-90.0, 90.0)]
"""(deg): a camera pitch, negative looks up; ±90 is straight up or down."""
StepDeg = Annotated[float, Range(0.0, 360.0, open_low=True)]
"""(deg): one rotation step, in (0, 360]."""
Count = Annotated[int, Range(1, MAX_COUNT)]
"""A count, size or number of steps >= 1."""
CountOrZero = Annotated[int, Range(0, MAX_COUNT)]
"""A count >= 0 (0: none)."""
Pixels = Annotated[int, Range(1, MAX_PIXELS)]
"""(px): an image side, stride or cell >= 1."""
Threads = Annotated[int, Range(1, MAX_THREADS)]
"""A number of threads or worker processes >= 1."""
Seed = Annotated[int, Range(0, INT64.high)]
"""A random seed >= 0 (numpy refuses negative ones)."""


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """Constants of the task itself (TASK.md §1-4): the success tests, the admissibility rules and
    the certification of episodes. Distances in metres on the floor plane."""

    success_radius: Positive
    """R (m): embodied success when the agent issues Stop within the step budget at a floor position
    whose distance to the footprint of the answer region (0 inside it) is at most R (TASK.md §3, Eq.
    4); 1.0 m is the ObjectNav stop-within-1 m convention. For a moving answer the footprint is taken
    when the agent stops."""
    static_gate_radius: Positive
    """(m): the static gate: a predicted answer point succeeds when it lies within this distance of
    the true answer point (TASK.md §3); an abstention fails. It is also the radius of the answer disc
    query_node draws (``markers``)."""
    min_displacement: Annotated[Positive, AtLeast("stable_tolerance", strict=True)]
    """Δmin (m): the floor displacement from which an instance counts as moved (TASK.md §1): a moved
    or former episode needs its instance displaced at least this far, and the decision rules answer
    moved/former only with a relocated pair displaced at least this far. Must exceed
    ``stable_tolerance``."""
    stable_tolerance: NonNegative
    """τ (m): the largest floor displacement of an instance that still counts as stable, both when
    stable episodes are generated and when the decision rules pick a stable pair (TASK.md §1, Eq. 9).
    """
    separation_radius: Positive
    """R_sep (m): the anti-shortcut rule (TASK.md §2): every other instance of the queried category
    in visit 2 must lie farther than this from the answer footprint, so stopping beside a distractor
    never passes the success test; 2R (the default) keeps that guarantee."""
    drift_tolerance: NonNegative
    """(m): Algorithm 1 lines 6-7: after the visit-2 recording every object's pose is re-read from
    the simulator, and a candidate whose instances drifted more than this from what was recorded is
    rejected (the recordings would no longer describe the evaluated world)."""
    max_steps: Count
    """T_max: the primitive actions an embodied run may take; an episode whose agent has not stopped
    by then fails (TASK.md §3)."""
    far_miss_distance: NonNegative
    """(m): the failure partition (TASK.md §7, Table V): a failed prediction farther than this from
    the answer point is a far miss ("predicted more than 2 m away")."""
    certification_runs: CountOrZero
    """Algorithm 1 line 9: after the one feasibility run, this many further oracle runs from fresh
    resets must all succeed before an episode is emitted (the paper: three); 0 certifies on the
    feasibility run alone."""


@dataclasses.dataclass(frozen=True)
class FramesConfig:
    """TF frame ids (REP 105 names by default). Floor positions are AI2-THOR world (x, z) in the core
    and REP 103 ``map`` on the wire."""

    map: str
    """The fixed world frame (REP 105) of every pose, map and marker on the wire."""
    odom: str
    """The odometry frame; in simulation it coincides with ``map`` (an identity transform)."""
    base: str
    """The robot base frame, on the floor under the camera."""
    camera: str
    """The camera body frame (REP 103: x forward, y left, z up)."""
    optical: str
    """The camera's optical frame (z forward, x right, y down), the frame of the images and
    camera_info."""


@dataclasses.dataclass(frozen=True)
class AppearanceConfig:
    """How the embedded world's instances of one category look alike (TASK.md §10).

    Each category has ``variants_per_category`` assets (proportions and colours, drawn from
    ``library_seed`` and the category); a home's instance takes the home's usual asset of its
    category with probability ``home_share`` and any asset otherwise, then differs from it by a
    small jitter: ``size_jitter`` (fraction of each dimension), ``hue_jitter`` (fraction of the
    hue circle) and ``tone_jitter`` (saturation and value, 0-1 scale).
    """

    variants_per_category: Count
    """Assets (proportions and colours) per category, like a simulator's asset library: with few of
    them, look-alike instances are common, as in a real home (TASK.md §10)."""
    home_share: Fraction
    """The probability that an instance is its home's usual asset of its category; otherwise it is
    any asset of the category. So a dining table's chairs are mostly one set."""
    size_jitter: Annotated[float, Range(0.0, 1.0, open_high=True)]
    """The fraction by which each dimension of one instance differs from its asset's, drawn uniformly
    in ±this."""
    hue_jitter: HueJitter
    """The fraction of the hue circle by which one instance's colours differ from its asset's
    (uniform ±). 0: the instances of an asset share its materials, as a simulator's do. With 0.01
    (and ``tone_jitter`` 0.03) the colour cue's same-category AUROC was 0.78 on the default set, far
    above the paper's 0.588: colour would give identity away (TASK.md §10)."""
    tone_jitter: Fraction
    """Saturation and value (0-1 scale) by which one instance's colours differ from its asset's,
    drawn uniformly in ±this."""
    library_seed: Seed
    """The seed of the asset library: the same assets exist in every home."""


@dataclasses.dataclass(frozen=True)
class WorldConfig:
    """The world sim_node simulates and the agent's embodiment in it. Metres and degrees."""

    kind: str
    """The world sim_node simulates: ``embedded`` (the project's procedural homes, no simulator
    install needed) or ``ai2thor`` (AI2-THOR scenes, settings in ``ai2thor``)."""
    grid_size: Positive
    """(m): the agent's position lattice and the length of one MoveAhead."""
    rotate_step_deg: StepDeg
    """(deg): the yaw change of one RotateLeft or RotateRight."""
    look_step_deg: StepDeg
    """(deg): the pitch change of one LookUp or LookDown."""
    horizon_min_deg: PitchDeg
    """(deg): the most upward camera pitch the agent may reach (negative looks up)."""
    horizon_max_deg: Annotated[PitchDeg, AtLeast("horizon_min_deg")]
    """(deg): the most downward camera pitch the agent may reach; at least ``horizon_min_deg``."""
    agent_radius: Positive
    """(m): the radius of the agent's capsule, used for collisions and for which grid cells are
    reachable."""
    camera_height: Positive
    """(m): the camera's height above the floor; 1.576 is AI2-THOR's (capsule centre 0.901 plus
    0.675)."""
    appearance: AppearanceConfig


@dataclasses.dataclass(frozen=True)
class CameraConfig:
    """Pinhole camera: image size in pixels, vertical field of view in degrees, depth range in m."""

    width: Pixels
    """(px): image width of the simulated camera."""
    height: Pixels
    """(px): image height of the simulated camera."""
    vertical_fov_deg: Annotated[float, Range(0.0, 180.0, open_low=True, open_high=True)]
    """(deg): the vertical field of view; the pinhole intrinsics (focal lengths, principal point)
    derive from it and the image size, never hard-coded."""
    near: Positive
    """(m): the nearest valid depth."""
    far: Annotated[Positive, AtLeast("near", strict=True)]
    """(m): the farthest valid depth; farther pixels read as ``far``. Must exceed ``near``."""


@dataclasses.dataclass(frozen=True)
class EmbeddedWorldConfig:
    """The embedded world's procedural home generator: rooms, doors, furniture and small objects,
    and its shading. Metres."""

    rooms_min: Count
    """The fewest rooms in one procedural home."""
    rooms_max: Annotated[Count, AtLeast("rooms_min")]
    """The most rooms in one procedural home; at least ``rooms_min``."""
    room_size_min: Positive
    """(m): the shortest side of a room."""
    room_size_max: Annotated[Positive, AtLeast("room_size_min")]
    """(m): the longest side of a room; at least ``room_size_min``."""
    wall_height: Positive
    """(m): the height of the walls."""
    door_width: Positive
    """(m): the width of the doorway opening between two adjacent rooms."""
    furniture_per_room_min: CountOrZero
    """The fewest large objects (tables, sofas, beds...) placed in a room."""
    furniture_per_room_max: Annotated[CountOrZero, AtLeast("furniture_per_room_min")]
    """The most large objects placed in a room; at least ``furniture_per_room_min``."""
    small_objects_per_room_min: CountOrZero
    """The fewest small objects placed on the floor and on furniture tops of a room."""
    small_objects_per_room_max: Annotated[CountOrZero, AtLeast("small_objects_per_room_min")]
    """The most small objects placed in a room; at least ``small_objects_per_room_min``."""
    wall_thickness: Positive
    """(m): walls are boxes of this thickness centred on the room boundaries."""
    door_clearance: NonNegative
    """(m): the depth on each side of a doorway kept free of furniture and floor objects."""
    wall_margin: NonNegative
    """(m): the free floor kept between free-standing furniture and the walls."""
    furniture_gap: NonNegative
    """(m): the smallest gap between two pieces of furniture, or between furniture and a wall."""
    surface_margin: NonNegative
    """(m): the gap kept between small objects on a surface, and between them and the surface's
    edges."""
    contact_tolerance: NonNegative
    """(m): the height slack for "resting on" and the overlap slack for touching boxes."""
    placement_attempts: Count
    """Random tries to place one object before it is skipped."""
    placement_spacing: Positive
    """(m): the lattice of candidate placements on furniture tops."""
    room_free_fraction: Fraction
    """Each room keeps at least this fraction of its grid cells free for the agent."""
    ambient_light: Fraction
    """Shading: the intensity (0-1) of faces turned away from the light."""
    diffuse_light: Fraction
    """Shading: the intensity (0-1) added to faces facing the light."""
    light_direction: list[Annotated[float, Range(-1.0, 1.0)]]
    """Shading: the direction from the scene towards the light in the world frame (x, y up, z); three
    entries, not all zero, need not be unit length."""
    distance_falloff: NonNegative
    """(1/m): rendered intensity is divided by 1 + this x depth."""
    floor_tile_size: Positive
    """(m): the checker period of the floor tiles."""
    floor_tile_contrast: Fraction
    """The fraction by which every other floor tile is darker."""


@dataclasses.dataclass(frozen=True)
class Ai2thorConfig:
    """AI2-THOR controller settings (see shared/design/notes/ai2thor.md)."""

    commit_id: str
    """The AI2-THOR Unity build to run, pinned: the build ai2thor 5.0.0 ships with."""
    platform: str
    """``CloudRendering`` (Vulkan, no X server) or ``Linux64`` (needs an X display, ``x_display``)."""
    x_display: str
    """The X display for ``Linux64``; ExternalBuild launches need it too."""
    start_timeout_s: Positive
    """(s): the watchdog on the Controller's start-up."""
    server_timeout_s: Positive
    """(s): the timeout of one simulator step."""
    settle_max_steps: Count
    """Pass steps allowed for physics to come to rest after a change."""
    local_executable_path: str
    """A Unity player binary to run instead of the release directory
    ``~/.ai2thor/releases/thor-<platform>-<commit_id>``; empty: the release directory."""
    quality: str
    """The Unity quality preset, an ai2thor QUALITY_SETTINGS name (e.g. ``Very Low``, ``Low``,
    ``High``, ``Ultra``)."""
    structural_types: list[str]
    """objectTypes that are structure, not objects: left out of the object list and of the segments."""
    position_tolerance: NonNegative
    """(m): the largest distance at which a pose counts as on a reachable grid cell."""
    depth_saturation_tolerance: NonNegative
    """(m): depth within this of ``far`` - ``near`` reads as "nothing in range" (NaN)."""


@dataclasses.dataclass(frozen=True)
class TourConfig:
    """Coverage tour over the reachable positions of one visit."""

    waypoint_spacing: Positive
    """(m): the spacing of the coverage waypoints laid over the reachable grid."""
    max_waypoints: Count
    """The most waypoints in one tour."""
    turns_per_waypoint: Count
    """Rotations at each waypoint (4 x 90° is a full turn)."""
    horizon_deg: PitchDeg
    """(deg): the camera pitch during tours (30: looking slightly down)."""


@dataclasses.dataclass(frozen=True)
class MoverConfig:
    """The mover that carries one instance during visit 2 of moving episodes."""

    steps_per_move: Count
    """World steps between two moves of the carried instance."""
    hop_length: Positive
    """(m): the length of one move along the reachable grid (a multiple of ``world.grid_size``)."""
    keep_direction_prob: Fraction
    """The probability that the mover keeps its heading when it can."""


@dataclasses.dataclass(frozen=True)
class ConditionsConfig:
    """Stress conditions of the second seed: reduced light/visibility and randomised textures."""

    name: str
    """The condition sim_node renders under: ``baseline``, ``low_light`` (reduced light and
    visibility) or ``texture`` (randomised textures and colours), the stress conditions of TASK.md
    §8."""
    low_light_gain: NonNegative
    """The multiplier on rendered intensity under ``low_light``."""
    low_light_noise_std: NonNegative
    """(0-255 intensity units): the standard deviation of Gaussian pixel noise under ``low_light``."""
    low_light_visibility: Positive
    """(m): under ``low_light``, depth beyond this is invalid (NaN)."""
    texture_hue_jitter: HueJitter
    """Under ``texture``: the fraction of the hue circle by which instance colours are randomised."""
    texture_period_min: Positive
    """(m): the shortest checker period of the random textures."""
    texture_period_max: Annotated[Positive, AtLeast("texture_period_min")]
    """(m): the longest checker period of the random textures; at least ``texture_period_min``."""
    texture_contrast: Fraction
    """The fraction by which the dark squares of the random textures are dimmed."""


@dataclasses.dataclass(frozen=True)
class PhysicsConfig:
    """Settling of the embedded world after a change (TASK.md §4 step 3, §10; Algorithm 1's drift
    check, lines 6-7, rejects what moved while recorded). Metres, world steps.

    A moved or added object lands off its intended destination by a seeded offset (each floor axis
    normal with std ``landing_offset_std``). Every movable object that carries nothing and whose
    footprint lies within ``knock_radius`` of the changed object's old or new footprint is knocked
    with probability ``knock_probability``: it slides an exponentially distributed length of mean
    ``slide_mean`` in a uniform direction over the next ``settle_steps`` world steps, and stops
    early where the slide would leave its support or hit something. ``enabled`` false: changes
    land exactly and nothing settles.
    """

    enabled: bool
    """True: the embedded world settles after a change as below. False: changes land exactly and
    nothing settles, a world that never drifts (TASK.md §10)."""
    landing_offset_std: NonNegative
    """(m): per floor axis, the standard deviation of the normal offset between where a moved or
    added object lands and its intended destination."""
    knock_radius: NonNegative
    """(m): movable objects that carry nothing and whose footprint is this close to the changed
    object's old or new footprint may be knocked."""
    knock_probability: Fraction
    """The probability that each such neighbour is knocked."""
    slide_mean: Positive
    """(m): the mean length of a knocked object's slide (exponentially distributed, in a uniform
    direction); the slide stops early at its support's edge or at an obstacle."""
    settle_steps: Count
    """World steps over which a knocked object slides to rest (8 steps of ``node.step_dt`` 0.1 s are
    0.8 s)."""


@dataclasses.dataclass(frozen=True)
class SensorConfig:
    """The embedded world's RGB-D sensor model (a consumer depth camera). Metres, degrees.

    Depth noise: normal with std ``depth_noise_base + depth_noise_quadratic · z²`` at planar depth
    ``z``, one deviate per square cell of ``noise_cell_px`` pixels (the camera's matching window).
    Missing depth (NaN): beyond ``max_range``, and with probability ``edge_dropout`` at a pixel
    whose 4-neighbour differs by more than ``edge_jump`` of the nearer depth (an object's edge).
    Pose noise on the reported camera pose (off by default, as the paper uses the simulator's
    pose): each floor axis normal with std ``pose_noise_translation``, yaw normal with std
    ``pose_noise_yaw_deg``. ``enabled`` false: the ideal camera (exact depth and pose).
    """

    enabled: bool
    """True: the embedded world's camera behaves as a consumer RGB-D sensor as below. False: the
    ideal camera (exact depth, the simulator's pose)."""
    depth_noise_base: NonNegative
    """(m): the standard deviation of depth noise at zero range."""
    depth_noise_quadratic: NonNegative
    """(1/m): the depth noise grows as ``depth_noise_base`` + this x depth², the axial noise of
    Kinect-class cameras: about 2 cm at 3 m and 7 cm at 6 m."""
    noise_cell_px: Pixels
    """(px): one noise deviate per square cell of this many pixels: a depth camera matches a window,
    so neighbouring errors are correlated (4 px here is about a 9 px window at 640x480)."""
    max_range: Positive
    """(m): depth beyond this is missing (NaN); the RGB image still shows it."""
    edge_jump: Positive
    """The fraction of a pixel's depth by which a 4-neighbour must be nearer for the pixel to lie on
    an object's edge."""
    edge_dropout: Fraction
    """The probability that an edge pixel's depth is missing (NaN)."""
    pose_noise_translation: NonNegative
    """(m): the standard deviation of the reported camera position per floor axis. 0: the simulator's
    pose, as the paper uses."""
    pose_noise_yaw_deg: NonNegative
    """(deg): the standard deviation of the reported yaw. 0: the simulator's pose."""


@dataclasses.dataclass(frozen=True)
class SimNodeConfig:
    """sim_node's ROS side: sim time, publishing and what it loads at start-up."""

    step_dt: Positive
    """(s): the sim time one world step advances: /clock, message stamps and recordings."""
    play_period_s: NonNegative
    """(s, wall clock): the pause between bundles when playing a tour or a recording, for watching in
    real time. 0: no pause: as fast as the subscribers acknowledge (flow control,
    ``play_ack_timeout_s``)."""
    play_ack_timeout_s: Positive
    """(s, wall clock): with ``play_period_s`` 0, the longest wait, after every ``qos_depth`` frames,
    for every reliable subscriber to acknowledge them."""
    play_match_timeout_s: Positive
    """(s, wall clock): the longest wait, before play_tour's first frame, for the subscriptions its
    request names (PlayTour.srv topics) to be matched; then play_tour fails."""
    act_camera: bool
    """True: render and publish the camera bundle (images, labels, camera_info; the pose on /tf) after
    every Act and LoadVisit. False: clock, tf, odom and ground truth only, nothing rendered. The one
    parameter sim_node lets change at run time."""
    camera_output: str
    """Where a frame's camera messages go: ``topics`` (the six standard /camera/... topics, as a
    robot's driver publishes them; RViz shows these), ``bundle`` (one ovman_interfaces/CameraBundle
    on /camera/bundle: one message per frame for a mapper) or ``both``."""
    qos_depth: Count
    """The history depth of the bundle publishers (reliable, transient local: late joiners get the
    latest)."""
    scene: str
    """The scene loaded at start-up, e.g. ``embedded-3``; empty: wait for the load_visit service."""
    recording: str
    """A recorded visit (rosbag2 directory) loaded at start-up instead of a live world; empty: none."""


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """Parameters of ``sim_node``: the simulated world (embedded or AI2-THOR), its camera, physics
    and sensor models, the coverage tour, the mover, the stress conditions and the node's ROS side."""

    world: WorldConfig
    camera: CameraConfig
    embedded: EmbeddedWorldConfig
    physics: PhysicsConfig
    sensor: SensorConfig
    ai2thor: Ai2thorConfig
    tour: TourConfig
    mover: MoverConfig
    conditions: ConditionsConfig
    node: SimNodeConfig


@dataclasses.dataclass(frozen=True)
class MappingParams:
    """Per-visit instance mapping (ovman_mapping.backprojection, fusion and cross_visit): segments
    back-projected with depth and pose and fused into 3D instances, and the free-space evidence of
    what left and arrived. Metres, pixels, similarities and shares in [0, 1]."""

    voxel_size: Positive
    """(m): the voxel edge to which each segment's back-projected point cloud is downsampled."""
    min_segment_pixels: CountOrZero
    """Segments with fewer pixels than this are ignored as noise."""
    max_depth: Positive
    """(m): depth farther than this is not back-projected (and cross-visit points beyond it are not
    visible)."""
    outlier_std_ratio: Positive
    """Statistical outlier removal: a point whose mean distance to its ``outlier_neighbours`` nearest
    neighbours exceeds the mean of that distance + this x its standard deviation is dropped."""
    outlier_neighbours: Count
    """The neighbours whose mean distance the outlier removal compares."""
    segment_outlier_removal: bool
    """True: also clean every frame's segments with the outlier removal (real sensors with flying
    pixels; about 0.5 ms a segment). Instances are always cleaned."""
    segment_depth_gap: NonNegative
    """(m): a segment's sampled depths, sorted, are split where they jump by more than this, and only
    the largest part is back-projected: a mask that spills over an object's edge takes in the
    background behind it. 0: off."""
    pixel_stride: Pixels
    """(px): back-project every n-th pixel in both directions (the voxels are coarser anyway). A
    segmenter whose masks come in larger blocks (the learned network's 4x4-pixel output cells) gets
    one pixel a block, its centre."""
    min_segment_points: Count
    """A segment needs this many valid-depth pixels on the sampling lattice to be used."""
    merge_distance: NonNegative
    """(m): a segment joins an instance only if their boxes are at most this far apart."""
    merge_feature_similarity: Fraction
    """The feature similarity a segment needs to join an instance: (1 - w) x the cosine of their
    label distributions + w x the Bhattacharyya coefficient of their colour histograms, w =
    ``colour_weight`` (ovman_mapping.fusion)."""
    merge_overlap: Fraction
    """A segment joins an instance only if, besides, this share of its occupancy voxels (edge
    ``overlap_voxel_size``) is already occupied by the instance, unless one box centre lies inside
    the other box."""
    overlap_voxel_size: Positive
    """(m): the voxel edge of that occupancy test, coarser than ``voxel_size`` to absorb depth noise.
    """
    colour_weight: Fraction
    """w: the weight of the colour Bhattacharyya coefficient in the fusion's feature similarity; the
    rest is the cosine of the label distributions."""
    motion_distance: Positive
    """(m): the motion attribute marks a track of fragments whose sightings lie at least this far
    apart (a moving object), and vacated instances with no continuation."""
    vacancy_margin: NonNegative
    """(m): a point is seen empty where the observed depth lies more than this behind it (the view
    passes through where the object was), within a visit and across visits; with the simulator's
    exact labels a pixel labelled otherwise also counts within a visit."""
    vacancy_fraction: Fraction
    """The share of an instance's visible points that one frame after its last sighting must see
    empty to call it vacated (gone) within a visit."""
    vacancy_min_points: Count
    """The fewest visible points with valid depth a frame needs to judge an instance (all of them for
    instances with fewer check points)."""
    vacancy_check_points: Count
    """The most points per instance used by the vacancy tests (its fused points, evenly subsampled)."""
    vacancy_min_pixels: CountOrZero
    """(px): a frame judges an instance only if the instance would cover this much of that frame's
    image."""
    frame_memory_mb: Positive
    """(MB): the most a visit's map builder keeps of its frames' depth and segment ids for the
    free-space and cross-visit evidence, read after the visit's last frame. Past it every 2nd kept
    frame is dropped, then every 4th, and so on (ovman_mapping.frame_store): a robot's long tour
    keeps evenly spread frames, its vacancy steps coarser. A benchmark visit (about 150 frames of
    0.4 MB at 320x240) stays far below it; a 848x480 frame takes 2.4 MB.
    """
    fold_points: Count
    """A track holding more of its sightings' points than this sums them per voxel (edge
    ``voxel_size``; ovman_mapping.track_cloud), so that an object sighted for minutes costs its
    voxels, not its frames. Its geometry is the same mean point per voxel; its vacancy check points
    are subsampled from those means instead of the raw points. No track of a benchmark visit
    reaches it."""
    store_dir: str
    """The map store's folder (ovman_mapping.map_store): mapping_node writes every finished visit's
    map there, query_node loads a pair from it, ``ovman maps`` reads it. Empty: $XDG_DATA_HOME/ovman/maps,
    else ~/.local/share/ovman/maps."""
    store_name: str
    """The name stored visits get: the place mapped (one store may hold several homes). A visit 2 is
    mapped against the latest stored visit 1 of this name only."""
    cross_visit_empty_fraction: Annotated[Fraction, AtLeast("cross_visit_occupied_fraction", strict=True)]
    """A frame of the other visit sees an instance's place empty when at least this share of its
    visible points has the observed depth more than ``vacancy_margin`` behind them (depth only, no
    labels; ovman_mapping.cross_visit). It is lower than the within-visit ``vacancy_fraction``
    because a thin object's points lie a few centimetres above the surface it stood on, and seen from
    above part of them do not pass the margin. Must exceed ``cross_visit_occupied_fraction``."""
    cross_visit_occupied_fraction: Fraction
    """A frame sees the place occupied when at most this share of the visible points has (between the
    two fractions the frame abstains); the place was seen empty when more frames saw it empty than
    occupied.

    The two fractions were chosen on a development set (homes embedded-5000..5007, no benchmark
    scene): with the simulator's segments 47 of 55 changed instances were seen changed and 8 of 3,916
    unchanged ones claimed; with the learned segmenter 24 of 28 and 17 of 3,620 (the within-visit 0.8
    saw 28 of 55)."""


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """The feature encoder of instances and query texts (ovman_mapping.encoders): ``label`` (offline)
    or ``clip`` (open_clip). query_node declares these keys too: queries must be embedded with the
    encoder that built the maps."""

    kind: str
    """The feature encoder: ``label`` (offline: an instance's segmenter label distribution embedded
    with the MiniLM sentence model, which embeds the query texts too; the association adds the crops'
    hue-saturation histogram) or ``clip`` (open_clip: the mean image embedding of an instance's best
    crops, texts through the same model)."""
    clip_model: str
    """The open_clip model name (clip mode)."""
    clip_weights: str
    """Path of a local open_clip checkpoint; empty: a randomly initialised model (tests and
    benchmarks only; nothing is ever downloaded)."""
    views_per_instance: Count
    """In clip mode, the best views (most pixels) of each instance that are encoded and averaged."""
    colour_bins: Annotated[int, Range(1, 256)]
    """Bins per channel of the joint hue x saturation colour histogram."""
    clip_prompt: str
    """The clip text template; ``{}`` is replaced by the phrase."""
    crop_padding: NonNegative
    """Image crops grow by this fraction of their size on each side (clip mode)."""
    batch_size: Count
    """Image crops per forward pass. Text is embedded one phrase per pass: a phrase's vector must not
    depend on its batch."""
    text_cache: bool
    """True: keep text embeddings on disk, per model identity, so a process whose phrases were all
    embedded before never loads the model."""
    text_cache_dir: str
    """The folder of that cache; empty: $XDG_CACHE_HOME/ovman/text-embeddings, else
    ~/.cache/ovman/text-embeddings."""


@dataclasses.dataclass(frozen=True)
class SegmenterConfig:
    """Where a frame's segments come from (ovman_mapping.segmenter): the learned network, its
    proposals labelled by CLIP, or the simulator's masks (ground truth). Probabilities in [0, 1]."""

    kind: str
    """The agent's segmenter: ``learned`` (the project's RGB-D network; reads pixels only), ``clip``
    (the network's class-agnostic proposals labelled by open_clip crop features, ``encoder.clip_*``;
    the default on AI2-THOR datasets) or ``simulator`` (the simulator's masks and labels: ground
    truth, for the oracle and diagnostic arms; the sim_perception arm always uses it) or ``topic``
    (mapping_node only: each frame's ovman_interfaces/Segments published by another node on
    ``segmentation/segments``, such as segmenter_node or a robot's own segmenter; docs/robot.md)."""
    model: str
    """The directory of a trained model (segmenter.json and segmenter.safetensors, from ``ovman
    train-perception``); empty: the model shipped in ovman_mapping/models/segmenter."""
    boundary_threshold: Fraction
    """Output cells whose instance-boundary probability exceeds this seed no segment; 1.0: the
    boundary head is not used. Chosen on 4 training homes with the shipped model: the F1 of precision
    and recall was 0.548 at 1.0, 0.509 at 0.99 and 0.430 at 0.95, since splitting by class separates
    touching objects better than the head."""
    merge_cells: CountOrZero
    """(output cells of 4x4 px): a fragment of one class smaller than this (class noise) joins the
    neighbouring fragment it shares the longest border with; 0: never."""
    min_confidence: Fraction
    """Segments whose mean own-class probability is below this are dropped."""
    threads: Threads
    """Torch intra-op threads of the learned network (one per benchmark worker). A speed setting: 1
    and 2 threads give the same segment masks, with label shares and confidences equal to float
    rounding (1e-7; tests/mapping/test_segmenter.py), so mapping_node alone on a 2-core robot may use
    2 (benchmarks/bench_mapping.py --threads 2)."""
    precision: str
    """The learned network's arithmetic: ``float32`` or ``bfloat16`` (torch.autocast on the CPU).
    bfloat16 is 1.6x faster on a CPU with native bfloat16 (e.g. AVX512-BF16 or AMX) and gives the
    same held-out precision, recall and accuracy to 0.001 with the packaged model, but 0.09 % of the
    cells get another class, so maps and results differ a little from float32's; it is slow on CPUs
    without native support."""
    batch_frames: Count
    """Frames the in-process map builder (the benchmark's map cache, build_map) segments in one pass
    of the learned network. A speed setting only: a frame's segments are the same alone and in a
    batch, bit for bit (tests/mapping/test_segmenter.py), so mapping_node, which fuses each frame as
    it arrives, agrees with it; 8 frames took 2.3 ms a frame for the network on one thread against
    2.7 ms alone (benchmarks/bench_mapping.py)."""
    min_view_share: Annotated[float, Range(0.0, 1.0, open_low=True)]
    """The learned network reads a camera through its training camera's geometry
    (ovman_mapping.camera_resampling): a frame is scaled to the model's focal length, then cropped
    or padded (``padding``) to its image. A camera whose image covers less than this share of the model's input
    area is refused (SegmenterError naming this key). A camera with at least the training camera's
    field of view covers 1; a RealSense D435's colour stream (16:9, 42.5 degrees vertical) covers
    0.20 of the 320x240, 90-degree training view, an Azure Kinect's (1280x720, 59 degrees) 0.43.
    With edge padding the held-out top-1 accuracy (2 homes) is 0.92 at a share of 1, 0.82 at 0.15
    and 0.72 at 0.10, precision and recall about 0.5 throughout, hence 0.15."""
    padding: str
    """How the learned network's view is filled beyond a camera's image (a camera narrower than the
    training camera, or off-centre): ``edge`` (the nearest edge pixel's colour and depth, repeated) or
    ``black`` (black colour, no depth). No camera pixel lies there, so nothing of it is mapped, but
    the network, never trained on borders, sees it: on 2 held-out homes black padding of a 320x240
    camera of 85 degrees (0.84 of the view) dropped precision from 0.54 to 0.19 (edge: 0.54), and of
    a D435's view from 0.50 (edge) to 0.13, so edge is the default."""


@dataclasses.dataclass(frozen=True)
class MappingNodeParams:
    """mapping_node's ROS side (ovman_mapping.mapping_node): camera input, subscription depth,
    synchroniser bound and visit control. Seconds."""

    camera_input: str
    """``topics``: synchronise the six standard /camera/... topics by stamp (a robot's camera);
    ``bundle``: one ovman_interfaces/CameraBundle per frame on /camera/bundle (sim_node's
    ``node.camera_output`` bundle or both)."""
    map_frame: str
    """The fixed frame the camera's pose is looked up in on the frame tree (/tf, /tf_static), and the
    frame of the published maps (REP 105 ``map``)."""
    optical_frame: str
    """The camera frame whose pose is looked up at each image's stamp; "" takes the colour image's
    header.frame_id (a driver's ``camera_color_optical_frame``)."""
    tf_timeout_s: Positive
    """(s, steady clock): how long a frame waits for the transform of its stamp (a robot's TF often
    arrives after its images); then it is dropped and counted with the reason, never fused with another
    stamp's pose. Extrapolation into the future is never done."""
    tf_max_pending: Count
    """The most frames waiting for their camera pose; beyond it the oldest is dropped and counted."""
    frame_policy: str
    """What happens to frames that arrive while one is fused (ovman_mapping.frame_queue): ``keep_newest``
    (a robot's camera: at most one frame waits, a newer one replaces it and the replaced one is counted
    as skipped, so the map follows the camera) or ``keep_all`` (every frame is fused, in order: a
    recorded tour, the benchmark graph, which sets it). Counts go to /diagnostics and finish_visit."""
    max_rate_hz: NonNegative
    """(Hz): frames stamped less than 1/this after the last frame let through are skipped and counted,
    by image stamp (the same tour gives the same map on any machine); 0: no limit."""
    qos_depth: Count
    """The history depth of the camera subscriptions (reliable): frames that may queue while one is
    fused; beyond it the oldest is overwritten."""
    qos_keep_all: bool
    """True: the subscriptions keep every frame until it is fused, whatever ``qos_depth``: lossless,
    but memory grows while fusing lags (the benchmark graph's unpaced tours set it)."""
    sync_max_pending: Count
    """The most stamps with an incomplete set of topics the exact-stamp synchroniser holds; beyond it
    the oldest is dropped."""
    start_visit: Annotated[int, Range(0, 2)]
    """The visit (1 or 2) opened at start-up; 0: none until the mapping/start_visit service."""
    finish_timeout_s: Positive
    """(s): how long mapping/finish_visit waits for the expected frames when its request gives no timeout."""
    store_maps: bool
    """Write every finished visit's map to the map store (``mapping.store_dir``), and map a visit 2
    against the store's latest visit 1 when this process mapped none. The benchmark graph sets
    false: its visits are the run's, not a robot's."""
    step_dt: Positive
    """(s): a frame's step (the order the mapper counts frames in) is its stamp divided by this; the
    simulator's labels table, which gives the world step, is not read. Keep it equal to sim_node's
    ``node.step_dt``."""


@dataclasses.dataclass(frozen=True)
class MapMarkersConfig:
    """RViz markers of the per-visit maps (``/ovman/map/visit<n>/markers``): opacity and colours in
    [0, 1], text sizes in metres."""

    box_alpha: Fraction
    """The opacity (0-1) of the instance boxes."""
    text_height: Positive
    """(m): the height of the label texts."""
    text_offset: NonNegative
    """(m): a label text floats this far above its box."""
    visit1_rgb: list[Fraction]
    """The colour (red, green, blue, each 0-1) of visit-1 boxes."""
    visit2_rgb: list[Fraction]
    """The colour (red, green, blue, each 0-1) of visit-2 boxes."""
    moving_rgb: list[Fraction]
    """The colour (red, green, blue, each 0-1) of the boxes of instances with the motion attribute."""


@dataclasses.dataclass(frozen=True)
class MappingConfig:
    """Parameters of ``mapping_node``: the per-visit instance maps built from the camera frames."""

    mapping: MappingParams
    segmenter: SegmenterConfig
    encoder: EncoderConfig
    node: MappingNodeParams
    markers: MapMarkersConfig


@dataclasses.dataclass(frozen=True)
class ParserConfig:
    """Query parser (ovman_query.parser): cue rules with negation, the sentence-model fallback
    and the text length limit."""

    max_text_length: Annotated[int, Range(1, 100_000)]
    """(characters): longer query texts are refused (INVALID_REQUEST through /ovman/query, exit code
    2 from ``ovman parse``)."""
    fallback: bool
    """True: when no cue says which change is meant, the sentence model (the encoder's text
    embedding) picks the nearest relation centroid of the training phrasings. False: such a text is a
    parse failure."""
    fallback_scale: Positive
    """The softmax scale of that choice over the cosines to the six relation centroids."""
    fallback_min_confidence: Fraction
    """Below this softmax probability the sentence model's choice is a parse failure. It lies above
    the 0.66 that texts naming no change at all get ("show me something", "i want something")."""


@dataclasses.dataclass(frozen=True)
class GroundingConfig:
    """Grounding: every instance within ``delta_g`` of the best text-feature score; scores are
    rounded to ``score_decimals`` decimals before any comparison."""

    delta_g: NonNegative
    """δ_g: every instance whose score lies within this of the best score is grounded (TASK.md §5,
    step 3)."""
    score_decimals: Annotated[int, Range(0, 15)]
    """Scores are rounded to this many decimals before they are compared, so float noise between
    processes (torch threads, float32 maps on the wire) cannot break a tie differently."""
    min_score: Annotated[float, Range(-1.0, 1.0)]
    """(cosine): when no instance of either visit scores at least this against the noun phrase, the
    answer is ABSTAINED ("nothing in the maps matches"). With ``encoder.kind`` label (MiniLM) an
    instance of a named category scores about 0.8-1.0 and unrelated objects 0.3-0.5 (guitar 0.38,
    umbrella 0.44); CLIP's text-image cosines are lower, so set about 0.2 with ``encoder.kind`` clip.
    """


@dataclasses.dataclass(frozen=True)
class AssociationConfig:
    """Two-stage Hungarian association across visits (TASK.md §5 step 2, ovman_query.association):
    stage one matches instances that stayed (a distance gate), stage two the rest by features alone
    (relocations); unmatched instances are removal and appearance candidates."""

    stay_distance_gate: NonNegative
    """(m): stage one of the association (instances that stayed) matches only pairs closer than this.
    """
    feature_weight: NonNegative
    """The weight of feature dissimilarity in the stage-one cost."""
    distance_weight: NonNegative
    """(1/m): the weight of distance in the stage-one cost."""
    relocation_max_dissimilarity: NonNegative
    """Stage two (relocations, by features alone) pairs need a feature dissimilarity below this."""
    stay_max_dissimilarity: NonNegative
    """Stage one pairs need a feature dissimilarity below this."""
    colour_weight: Fraction
    """w_c: feature dissimilarity = 1 - ((1 - w_c - w_x) x feature cosine + w_c x colour
    Bhattacharyya coefficient + w_x x extent likeness) (ovman_query.association.CUES). The variants:
    the embedding alone (w_c, w_x = 0, 0), colour alone (1, 0), extent alone (0, 1), or the weights
    ``ovman fit-appearance`` fits."""
    extent_weight: Annotated[Fraction, SumAtMost(("colour_weight",), 1.0)]
    """w_x: the weight of the back-projected extent cue, exp(-mean |ln ratio|) of the two boxes'
    sorted sizes; ``colour_weight`` + this is at most 1."""
    require_seen_change: bool
    """True: with a visit-2 map that carries cross-visit free-space evidence, claim a removal,
    arrival or relocation only where the other visit saw the place empty, and a stay only where
    neither did; the decision rules fall back on the unconfirmed rest only when no seen change
    answers. False: every unmatched instance is a change, as in the paper."""


@dataclasses.dataclass(frozen=True)
class AnswerMarkersConfig:
    """RViz marker of the latest answer (/ovman/answer/markers): colour and opacity in [0, 1], sizes
    in metres."""

    rgb: list[Fraction]
    """The colour (red, green, blue, each 0-1) of the answer disc and text."""
    alpha: Fraction
    """The opacity (0-1) of the disc, whose radius is ``task.static_gate_radius``."""
    disc_height: Positive
    """(m): the thickness of the disc on the floor."""
    text_height: Positive
    """(m): the height of the answer text."""
    text_offset: NonNegative
    """(m): the answer text floats this far above the floor."""


@dataclasses.dataclass(frozen=True)
class QueryConfig:
    """Parameters of ``query_node``, which answers /ovman/query: parsing, grounding, the association
    across visits and the answer marker."""

    parser: ParserConfig
    grounding: GroundingConfig
    association: AssociationConfig
    seed: Seed
    """Seeds the single-visit arm's stochastic pick among its grounded candidates."""
    load_stored_visits: bool
    """At start-up, load the map store's latest visit pair (mapping_node's ``mapping.store_dir``)
    when it holds one, so that a query after a restart is answered as before it; query/load_visits
    loads one on request. The benchmark graph sets false: its maps come from its own run."""
    markers: AnswerMarkersConfig


@dataclasses.dataclass(frozen=True)
class NavigationParams:
    """Navigation on the grid of reachable positions (ovman_nav; TASK.md §5 step 5): plan, execute,
    replan around blocked edges and follow a moving target."""

    backend: str
    """``builtin`` (A* on the 4-connected grid of reachable positions) or ``nav2`` (Nav2's
    BasicNavigator)."""
    block_expiry_steps: Count
    """When the target may move (moving episodes), a blocked edge expires this many world steps after
    the collision, since the obstacle may have been the mover; otherwise blocks last."""
    max_replans: CountOrZero
    """Replans after failures before the executor gives up as unreachable."""
    retarget_distance: NonNegative
    """(m): a newer estimate of the target farther than this from the current one triggers a replan."""
    approach_margin: NonNegative
    """(m): the builtin executor stops within R (``task.success_radius``) minus this of its estimate
    of the target, so a map a few cm off still passes R against the true object (one grid cell); R
    when nothing inside the margin is reachable. Keep it below ``task.success_radius``."""
    max_collisions: CountOrZero
    """Blocked MoveAheads before the executor gives up with COLLISION_LIMIT."""
    nav2_poll_period_s: Positive
    """(s): how often the nav2 backend polls BasicNavigator for feedback."""
    nav2_timeout_s: Positive
    """(s): the nav2 backend gives up with TIMEOUT after this long."""
    scene: str
    """The scene of the in-process world that ``python -m ovman_eval.graph.nav_in_world`` drives,
    e.g. ``embedded-3``; empty: drive sim_node over DDS. nav_node itself refuses a scene: it never
    imports the simulator."""
    feedback_period_s: NonNegative
    """(s): nav_node publishes Navigate feedback at most this often; 0: after every action."""
    sim_timeout_s: Positive
    """(s): without a scene, nav_node waits this long for sim_node's act service, /map, the robot's pose on /tf and
    each Act reply."""
    sequence_actions: Count
    """The most actions sent to a world in one request (sim_node's act_sequence) while a fixed
    target's plan holds; 1: one action per request."""
    sequence_position_tolerance: NonNegative
    """(m): a sent action that ends farther than this from its predicted position ends the sequence;
    the rest is not executed."""
    sequence_yaw_tolerance_deg: NonNegative
    """(deg): likewise for the predicted yaw."""


@dataclasses.dataclass(frozen=True)
class NavConfig:
    """Parameters of ``nav_node``, which serves the Navigate action (/ovman/navigate)."""

    navigation: NavigationParams


@dataclasses.dataclass(frozen=True)
class BenchmarkParams:
    """Benchmark run: arms, seeds, worker processes (and the Ray backend's task retries), moving-target
    tracking (m), the default dataset (its single-change split and its multi-change part), the
    paper-scale preset."""

    arms: list[str]
    """The arms ``ovman benchmark`` and benchmark_node run (TASK.md §6), in the order of tables and
    results files."""
    seeds: list[Seed]
    """The run seeds; each reseeds the agents' stochastic choices."""
    workers: Threads
    """Parallel worker processes (with ``--backend ray``: Ray tasks at a time)."""
    ray_task_retries: CountOrZero
    """With ``--backend ray`` (``ovman generate``, ``ovman benchmark``, ``ovman sweep``, ``ovman
    train-perception``): Ray runs a unit again on another worker this many times when its worker
    process dies; then the run stops, its finished units kept for a resume."""
    ray_connect_timeout_s: Positive
    """(s): with ``--backend ray --ray-address``, how long the cluster's head may take to accept the
    connection and answer before the command stops with an error."""
    track_gate: Positive
    """(m): a moving target's new sighting (same segmenter label) must lie this close to the agent's
    last estimate to be followed; keep it below ``task.separation_radius``."""
    default_scenes: Count
    """The default dataset of ``make benchmark``: embedded homes embedded-0..N-1."""
    default_per_relation: Count
    """The default dataset's single-change episodes per relation."""
    default_multi_change_per_relation: CountOrZero
    """The default dataset's multi-change part (2-3 changed instances of the queried category;
    ``generation.multi_change_*``): groups per relation, each asking one query per relation its
    changes answer; run into RUN/multi_change and tabulated in the report's "Multi-change split". 0:
    no multi-change part. 1 keeps ``make benchmark`` near its 10-minute budget: 2 took 10 min 53 s
    cold, 1 min 21 s of it the part. ``make paper`` runs ``paper_multi_change_per_relation``."""
    default_seed: Seed
    """The default dataset's generation run seed."""
    paper_scenes: Count
    """``ovman generate --preset paper`` (``make paper``): embedded homes embedded-0..N-1, as the
    paper's 20 scenes."""
    paper_per_relation: Count
    """The paper preset's single-change episodes per relation (the paper: 219 in all, 32-40 per
    relation); a slot given up is a shortfall."""
    paper_multi_change_per_relation: Count
    """The paper preset's multi-change groups per relation. Each group asks about 2.5 queries: 12
    made 168 episodes in 72 groups (the paper: 170), 14 made 207."""
    encoder_threads: Threads
    """Torch intra-op threads per benchmark process: one phrase at a time is fastest on one thread,
    and results stay independent of the worker count."""


@dataclasses.dataclass(frozen=True)
class GenerationParams:
    """Episode generation and certification (TASK.md §4, ``ovman generate``); the tour is
    ``sim_node.tour`` and the oracle navigates with ``nav_node.navigation``. Metres, counts."""

    max_attempts_per_episode: Count
    """Candidates sampled for one episode slot before the slot is given up (reported as a shortfall).
    """
    attempts_per_scene: Count
    """Consecutive candidates a slot draws in its scene before trying the next scene."""
    held_out_phrase_fraction: Fraction
    """The probability that an episode's phrase uses a held-out surface form (else a training one),
    so the parser is also tested on phrasings it never saw."""
    min_start_distance: NonNegative
    """(m): the start pose lies at least this far (floor distance) from every answer region."""
    multi_change_min: Annotated[int, Range(2, MAX_COUNT)]
    """The fewest changed instances of the queried category in a multi-change episode."""
    multi_change_max: Annotated[int, Range(2, MAX_COUNT), AtLeast("multi_change_min")]
    """The most changed instances of the queried category in a multi-change episode; at least
    ``multi_change_min``."""
    workers: Threads
    """Parallel generation processes, each running its own world."""
    progress_period_s: NonNegative
    """(s, wall clock): the shortest interval between two redraws of the progress bar on stderr."""


@dataclasses.dataclass(frozen=True)
class DiagnosticsParams:
    """Map and memory diagnostics (TASK.md §8, ``ovman_eval.analysis.diagnostics`` and
    ``ovman_eval.analysis.remember``) and the true category of map instances
    (``ovman_eval.benchmark.truth_shares``). Metres; ``memory_load_bin`` in working tracks."""

    match_gate: NonNegative
    """(m): a map instance matches a ground-truth instance of its category only if their box centres
    are at most this far apart (3D)."""
    truth_margin: NonNegative
    """(m): oracle_grounding's true category of a map instance is the majority of its points, each
    given the smallest ground-truth object box that holds it when grown by this on every side (fused
    points are voxel centres, ``mapping.voxel_size`` apart)."""
    memory_load_bin: Count
    """(working tracks): the width of the load bins of the working-memory curve, P(forget | tracks
    held), EMRD's Miller's law (ovman_eval.analysis.remember)."""


@dataclasses.dataclass(frozen=True)
class SweepParams:
    """``ovman sweep`` (``ovman_eval.analysis.sweep``, the paper's §III-C): admissibility re-derived on
    a finished run for every setting in the product of these lists, and with filters switched off.
    Metres."""

    drift_tolerance: list[NonNegative]
    """(m): the drift tolerances tried (``task.drift_tolerance``, Algorithm 1 lines 6-7)."""
    stable_tolerance: list[NonNegative]
    """τ (m): the stable tolerances tried (``task.stable_tolerance``); each must lie below every Δmin
    tried."""
    min_displacement: list[Positive]
    """Δmin (m): the minimum displacements tried (``task.min_displacement``)."""
    separation_radius: list[Positive]
    """R_sep (m): the anti-shortcut separations tried (``task.separation_radius``); 2R and more keep
    the guarantee."""
    toggled_filters: list[str]
    """Filters also switched off (``anti_shortcut``, ``drift``), each doubling the grid: the defaults
    make 2 x 4 x 4 x 2 x 4 = 256 settings."""


@dataclasses.dataclass(frozen=True)
class BenchmarkNodeParams:
    """benchmark_node's ROS side (ovman_eval.graph.benchmark_node) and ``ovman launch``: waits on the
    graph, in seconds."""

    start_timeout_s: Positive
    """(s): how long benchmark_node waits at start-up for every service and action of the graph
    (nodes load models)."""
    call_timeout_s: Positive
    """(s): the longest wait for one service reply (load_visit, play_tour, finish_visit, query, act).
    """
    navigate_timeout_s: Positive
    """(s): the longest wait for one Navigate goal to end."""
    message_timeout_s: Positive
    """(s): the longest wait for a latched map, /map or ground-truth frame after the call that
    publishes it."""
    camera_retry_s: Positive
    """(s): while the camera subscriptions made for following a target by sight are being matched,
    how long a Stop's camera bundle is awaited before another Stop is sent."""
    handshake_retry_s: Positive
    """(s): at start-up, how long benchmark_node waits for each node's answer to a request that
    changes nothing (get_parameters, none named) before sending it again: a discovered service can
    lose its first answers while the server has not yet matched this client."""
    groups_ahead: Count
    """Recorded groups whose maps and static gate benchmark_node may prepare (through the player,
    mapping_node and query_node) ahead of the group whose embodied runs go on."""
    shutdown_timeout_s: Positive
    """(s): ``ovman launch`` waits this long for the nodes to exit after SIGINT, then after SIGTERM,
    then sends SIGKILL."""
    discovery_wait_s: Positive
    """(s): ``ovman launch`` looks this long for nodes of the graph's names already on the domain
    before it starts one (refused if any)."""


@dataclasses.dataclass(frozen=True)
class PerceptionParams:
    """``ovman train-perception`` / ``eval-perception``: perception homes, frames, the network and
    its training (ovman_eval.perception.training)."""

    train_homes: Count
    """Homes perception-train-0..N-1 rendered for training (a seed namespace no episode can use)."""
    test_homes: Count
    """Homes perception-test-0..N-1 rendered for the held-out figures."""
    frame_stride: Count
    """Keep every n-th frame of each home's coverage tour (``sim_node.tour``)."""
    epochs: Count
    """Passes over the training frames; 24 gave a held-out F1 of 0.41 against 0.39 with 12."""
    batch_size: Count
    """Frames per optimiser step."""
    learning_rate: Positive
    """Adam's step size, cosine-decayed to 0 over the epochs."""
    seed: Seed
    """Seeds the weights' initialisation and the frame order (and the flips)."""
    widths: list[Count]
    """Channels of the network's three stride-2 stages."""
    decoder_stages: Annotated[int, Range(1, 3)]
    """Decoder steps back from 1/8 of the network input (1, 2 or 3; more is finer and slower)."""
    context_dilation: Annotated[int, Range(1, 8)]
    """The last two blocks of the 1/8 stage are dilated by this and by twice this: a wider context at
    the same cost; 1: plain convolutions."""
    input_stride: Pixels
    """Camera pixels per network input pixel, on each side."""
    train_conditions: list[str]
    """Training home k is rendered under entry k mod the list's length (``baseline``, ``low_light``,
    ``texture``): the stress conditions as augmentation."""
    flip: bool
    """True: mirror each training frame left-right with probability 1/2 (seeded by
    ``perception.seed``)."""
    threads: Threads
    """Torch intra-op threads while training; the result depends on it only to float rounding."""
    iou_threshold: Annotated[float, Range(0.0, 1.0, open_low=True)]
    """A predicted segment matches a ground-truth one at this mask IoU or more (for precision, recall
    and accuracy)."""


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """Parameters of ``benchmark_node`` and of the commands that run the benchmark in-process
    (``ovman generate``, ``ovman benchmark``, ``ovman sweep``, ``ovman train-perception``)."""

    benchmark: BenchmarkParams
    generation: GenerationParams
    diagnostics: DiagnosticsParams
    sweep: SweepParams
    perception: PerceptionParams
    node: BenchmarkNodeParams


@dataclasses.dataclass(frozen=True)
class RosConfig:
    """How every node uses ROS 2 (ovman_ros.spinning)."""

    qos_event_warnings: bool
    """True: every publisher and subscription of a node gets an event handler that warns when an
    endpoint of its topic has incompatible QoS (ovman_ros.spinning), so a silent mismatch shows in
    the log. False: no handlers, which saves some CPU on every executor wake-up."""
    tf_backend: str
    """Where a node looks the frame tree up (ovman_ros.tf_listener): ``tf2_ros`` (tf2's Buffer and
    TransformListener, on a ROS 2 workstation), ``pytransform3d`` (ovman_ros.tf_buffer fed from /tf
    and /tf_static, the pip route, where tf2_ros is not installable), or ``auto``: tf2_ros where it
    imports, else pytransform3d. Both interpolate, chain and refuse as tf2 does."""
    tf_cache_s: Positive
    """(s): how much history of each moving transform a node keeps (tf2's cache time, 10 s by
    default); a frame older than the newest transform by more is refused as extrapolation into the past."""


@dataclasses.dataclass(frozen=True)
class LimitsConfig:
    """What the stack accepts at its boundaries (camera frames, InstanceMap messages): every
    coordinate finite and within ``max_coordinate`` metres of the origin on each axis, and at most
    ``max_map_instances`` instances in one map (bounds the association's memory)."""

    max_coordinate: Positive
    """(m): every camera position, instance position, box corner and point the stack accepts (camera
    frames, InstanceMap messages) must be finite and within this distance of the origin on each axis;
    anything else is refused naming the field (ovman_mapping.instances.map_problem)."""
    max_map_instances: Annotated[int, Range(1, 100_000)]
    """The most instances one InstanceMap may hold for query_node (and benchmark_node) to accept it;
    it bounds the association's memory. Two maps of 5000 instances go from messages to a change set
    in 4.2 s at 1.46 GB peak RSS (benchmarks/bench_map_limit.py)."""


@dataclasses.dataclass(frozen=True)
class SharedConfig:
    """The ``/**`` block: constants every node shares."""

    task: TaskConfig
    frames: FramesConfig
    ros: RosConfig
    limits: LimitsConfig


@dataclasses.dataclass(frozen=True)
class OvmanConfig:
    """The whole configuration; ``source`` is the file it came from."""

    shared: SharedConfig
    sim_node: SimConfig
    mapping_node: MappingConfig
    query_node: QueryConfig
    nav_node: NavConfig
    benchmark_node: BenchmarkConfig
    source: str = ""

    @property
    def task(self) -> TaskConfig:
        return self.shared.task

    @property
    def frames(self) -> FramesConfig:
        return self.shared.frames


# YAML top-level key -> OvmanConfig field.
_SECTIONS = {
    SHARED_KEY: "shared",
    "sim_node": "sim_node",
    "mapping_node": "mapping_node",
    "query_node": "query_node",
    "nav_node": "nav_node",
    "benchmark_node": "benchmark_node",
}
NODE_NAMES = tuple(key for key in _SECTIONS if key != SHARED_KEY)


def default_config_path() -> Path:
    """The config file used when none is given.

    ``$OVMAN_CONFIG`` if set; else ``config/ovman.yaml`` of the source checkout this module lives
    in; else the copy installed in ovman_core's ament share directory (colcon installs).
    """
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    checkout = Path(__file__).resolve().parents[3] / "config" / "ovman.yaml"
    if checkout.is_file():
        return checkout
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        raise ConfigError(
            f"no config file: {checkout} does not exist, ament_index_python is not importable; "
            f"set {CONFIG_ENV} to the path of ovman.yaml"
        ) from None
    return Path(get_package_share_directory("ovman_core")) / "config" / "ovman.yaml"


def load_config(path: str | os.PathLike[str] | None = None) -> OvmanConfig:
    """Load and validate the configuration file (the default one when ``path`` is None)."""
    path = Path(path) if path is not None else default_config_path()
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ConfigError(
            f"{path}: not UTF-8 text: byte 0x{data[err.start]:02x} at byte offset {err.start} (line {line})"
        ) from None
    try:
        document = yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKeyError as err:
        raise ConfigError(f"{path}: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    return config_from_document(document, str(path))


class _DuplicateKeyError(yaml.YAMLError):
    """A mapping of the YAML file holds a key twice; the message gives both lines (from 1)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a mapping with a repeated key is an error (PyYAML keeps
    the last value silently). Merge keys (``<<``) may still be overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # the base constructor reports it
            line = key_node.start_mark.line + 1
            if key in first_lines:
                raise _DuplicateKeyError(f"line {line}: duplicate key {key!r} (first at line {first_lines[key]})")
            first_lines[key] = line
        return super().construct_mapping(node, deep=deep)


def config_from_document(document: Any, source: str) -> OvmanConfig:
    """Build the typed config from a parsed YAML document; ``source`` names it in errors."""
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: expected a mapping of node names at the top level")
    _check_keys(document, set(_SECTIONS), source, "")
    values: dict[str, Any] = {}
    for key, field_name in _SECTIONS.items():
        node = document[key]
        if not isinstance(node, dict) or set(node) != {PARAMS_KEY}:
            raise ConfigError(f"{source}: '{key}' must hold exactly one key, '{PARAMS_KEY}'")
        field_type = _field_types(OvmanConfig)[field_name]
        values[field_name] = _build(field_type, node[PARAMS_KEY], source, key + "." + PARAMS_KEY)
    return OvmanConfig(**values, source=source)


def stored_config(document: Any, source: str, defaults: OvmanConfig) -> tuple[OvmanConfig, list[str]]:
    """The typed config of a document an earlier version wrote (a dataset's manifest): every key
    that ``defaults`` has and ``document`` lacks, at any depth, taken from ``defaults``; returns the
    config and the dotted names of the keys taken (sorted; [] when the document was complete).
    Everything the document holds is still checked as :func:`config_from_document` checks a file
    (an unknown key, a malformed or out-of-range value: ConfigError naming ``source``)."""
    added: list[str] = []

    def complete(value: Any, default: Any, where: str) -> Any:
        if not isinstance(value, dict) or not isinstance(default, dict):
            return value
        out = dict(value)
        for key, fallback in default.items():
            name = f"{where}.{key}" if where else key
            if key in out:
                out[key] = complete(out[key], fallback, name)
            else:
                out[key] = fallback
                added.append(name)
        return out

    config = config_from_document(complete(document, to_document(defaults), ""), source)
    return config, sorted(added)


def check_ranges(section: str, values: Any, checks: dict[str, tuple[bool, str]]) -> None:
    """Raise ConfigError naming the first key of ``section`` (e.g. ``sim_node.sensor``) whose
    check failed: ``checks`` maps a field of ``values`` to (it is in range, what was expected).
    Write each check so that NaN fails it (``0.0 <= x``, not ``not x < 0.0``)."""
    for key, (ok, expected) in checks.items():
        if not ok:
            raise ConfigError(f"config {section}.{key} = {getattr(values, key)!r}: expected {expected}")


def node_parameters(config: OvmanConfig, node: str) -> dict[str, Any]:
    """Flat ``{dotted.name: value}`` ROS parameters of one node: the shared block plus its own."""
    if node not in NODE_NAMES:
        raise ConfigError(f"unknown node '{node}'; expected one of {', '.join(NODE_NAMES)}")
    params = _flatten(config.shared)
    params.update(_flatten(getattr(config, node)))
    return params


def parameter_value(value: Any) -> Any:
    """A value read back from a ROS parameter in the config's own type: rclpy returns array
    parameters as ``array.array`` (or tuples), the config holds lists."""
    return list(value) if isinstance(value, array.array | tuple) else value


def with_parameters(config: OvmanConfig, node: str, params: dict[str, Any]) -> OvmanConfig:
    """A copy of ``config`` with ``node``'s dotted parameters (shared ones included) replaced.

    Used by nodes to apply ROS parameter overrides; values are type- and range-checked as in the file.
    """
    document = to_document(config)
    for name, value in params.items():
        section = SHARED_KEY if name.split(".")[0] in _field_types(SharedConfig) else node
        target = document[section][PARAMS_KEY]
        *parents, leaf = name.split(".")
        for part in parents:
            if not isinstance(target.get(part), dict):
                raise ConfigError(f"parameter '{name}': no such section '{part}' in '{section}'")
            target = target[part]
        if leaf not in target:
            raise ConfigError(f"parameter '{name}': unknown key '{leaf}' in '{section}'")
        target[leaf] = value
    return config_from_document(document, f"{config.source} + parameters of {node}")


def to_document(config: OvmanConfig) -> dict[str, Any]:
    """The YAML document (ROS params layout) that loads back into ``config``."""
    return {key: {PARAMS_KEY: _as_dict(getattr(config, name))} for key, name in _SECTIONS.items()}


# ------------------------------------------------------------------------------ explanations


@dataclasses.dataclass(frozen=True)
class KeyDoc:
    """One leaf key of the configuration, as docs/configuration.md and ``ovman config --explain``
    show it."""

    node: str
    """``/**`` (every node shares the key) or the node whose ``ros__parameters`` hold it."""
    name: str
    """The dotted ROS parameter name the nodes declare, e.g. ``task.success_radius``."""
    type: str
    """``float`` (a ROS double), ``int``, ``bool``, ``str`` or ``list[...]`` of one of them."""
    constraints: tuple[str, ...]
    """What the loader checks beyond the type, e.g. ``> 0``, ``each in [0, 1]``,
    ``>= embedded.rooms_min``; () when nothing."""
    value: Any
    """The key's value in the configuration described (its default, for config/ovman.yaml)."""
    explanation: str
    """The attribute docstring of the key's field ("" when it has none)."""

    @property
    def path(self) -> str:
        """The key as the loader's errors name it: ``/**.ros__parameters.task.success_radius``."""
        return f"{self.node}.{PARAMS_KEY}.{self.name}"


@dataclasses.dataclass(frozen=True)
class SectionDoc:
    """One section of the configuration (or a node's whole block, ``name`` "") and its leaf keys."""

    node: str
    name: str
    """Dotted, as the key names start: ``world.appearance``; "" for the block of ``node`` itself."""
    explanation: str
    """The docstring of the section's dataclass."""
    keys: tuple[KeyDoc, ...]
    """The leaf keys directly in this section, in file order (a subsection's keys are its own)."""


def explanations(cls: type) -> dict[str, str]:
    """Field name -> explanation of the fields of the config dataclass ``cls``: the string literal
    right after each field in the class body (an attribute docstring, the Sphinx convention), read
    from the module source with ``ast`` and cleaned as docstrings are. Fields without one are left out."""
    return dict(_explanations(cls.__module__, cls.__qualname__))


def describe(config: OvmanConfig) -> list[SectionDoc]:
    """Every section of ``config`` in file order (``/**`` first, then the nodes; within each, the
    block itself, then its sections depth-first), with each leaf key's type, constraints, value and
    explanation."""
    sections: list[SectionDoc] = []
    for node, field_name in _SECTIONS.items():
        _describe_section(getattr(config, field_name), node, "", sections)
    return sections


def _describe_section(value: Any, node: str, prefix: str, out: list[SectionDoc]) -> None:
    cls = type(value)
    hints, texts = _field_types(cls), explanations(cls)
    keys, nested = [], []
    for name, hint in hints.items():
        item = getattr(value, name)
        if dataclasses.is_dataclass(item):
            nested.append((item, f"{prefix}{name}."))
            continue
        keys.append(
            KeyDoc(
                node=node,
                name=prefix + name,
                type=_type_name(hint),
                constraints=_constraints(hint, name, prefix),
                value=list(item) if isinstance(item, list) else item,
                explanation=texts.get(name, ""),
            )
        )
    out.append(SectionDoc(node, prefix.removesuffix("."), inspect.getdoc(cls) or "", tuple(keys)))
    for item, name in nested:
        _describe_section(item, node, name, out)


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is list:
        return f"list[{_type_name(typing.get_args(hint)[0])}]"
    return hint.__name__


def _constraints(hint: Any, name: str, prefix: str) -> tuple[str, ...]:
    """The field's declared metadata as text: its range (each item's, for a list), the fields it
    must be at least, and the sums it shares; other fields named with ``prefix``."""
    out = []
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        out += [f"each {m}" for m in getattr(item, "__metadata__", ()) if isinstance(m, Range)]
    for m in getattr(hint, "__metadata__", ()):
        if isinstance(m, Range):
            out.append(str(m))
        elif isinstance(m, AtLeast):
            out.append(f"{'>' if m.strict else '>='} {prefix}{m.other}")
        elif isinstance(m, SumAtMost):
            out.append(" + ".join(prefix + n for n in (name, *m.others)) + f" <= {_number(m.total)}")
    return tuple(out)


@functools.cache
def _module_body(module: str) -> list[ast.stmt]:
    try:
        return ast.parse(inspect.getsource(sys.modules[module])).body
    except (OSError, TypeError) as err:
        raise ConfigError(f"explanations: cannot read the source of {module} ({err})") from err


@functools.cache
def _explanations(module: str, qualname: str) -> tuple[tuple[str, str], ...]:
    body = _module_body(module)
    for part in qualname.split("."):
        body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == part), [])
    return tuple(
        (field.target.id, inspect.cleandoc(text.value.value).strip())
        for field, text in itertools.pairwise(body)
        if isinstance(field, ast.AnnAssign)
        and isinstance(field.target, ast.Name)
        and isinstance(text, ast.Expr)
        and isinstance(text.value, ast.Constant)
        and isinstance(text.value.value, str)
    )


def _as_dict(value: Any) -> dict[str, Any]:
    return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return _as_dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        name = prefix + f.name
        if dataclasses.is_dataclass(item):
            out.update(_flatten(item, name + "."))
        else:
            out[name] = list(item) if isinstance(item, list) else item
    return out


def _field_types(cls: type) -> dict[str, Any]:
    """Field name -> type of a config dataclass, ``Annotated`` metadata (ranges) kept."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != "source"}


def _check_keys(mapping: dict[str, Any], expected: set[str], source: str, where: str) -> None:
    unknown = sorted(set(map(str, mapping)) - expected)
    missing = sorted(expected - set(map(str, mapping)))
    place = f"'{where}'" if where else "the top level"
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {', '.join(repr(where + '.' + k if where else k) for k in unknown)} "
            f"in {place}; expected {', '.join(sorted(expected))}"
        )
    if missing:
        raise ConfigError(
            f"{source}: missing key(s) {', '.join(repr(where + '.' + k if where else k) for k in missing)} in {place}"
        )


def _build(field_type: Any, value: Any, source: str, where: str) -> Any:
    if dataclasses.is_dataclass(field_type):
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: '{where}' must be a mapping, got {type(value).__name__}")
        hints = _field_types(field_type)
        _check_keys(value, set(hints), source, where)
        values = {k: _build(t, value[k], source, f"{where}.{k}") for k, t in hints.items()}
        _check_order(hints, values, source, where)
        return field_type(**values)
    return _scalar(field_type, value, source, where)


def _check_order(hints: dict[str, Any], values: dict[str, Any], source: str, where: str) -> None:
    """ConfigError unless every field with :class:`AtLeast` metadata is at least (above) its other,
    and every field with :class:`SumAtMost` metadata sums with its others to at most the total."""
    for name, hint in hints.items():
        for order in getattr(hint, "__metadata__", ()):
            if isinstance(order, AtLeast):
                value, other = values[name], values[order.other]
                if not (value > other if order.strict else value >= other):
                    raise ConfigError(
                        f"{source}: '{where}.{name}' = {value!r}: expected {'>' if order.strict else '>='} "
                        f"'{where}.{order.other}' ({other!r})"
                    )
            if isinstance(order, SumAtMost):
                total = values[name] + sum(values[o] for o in order.others)
                if total > order.total:
                    summed = " + ".join(f"'{where}.{n}' ({values[n]!r})" for n in (name, *order.others))
                    raise ConfigError(f"{source}: {summed} = {total!r}: expected <= {_number(order.total)}")


def _scalar(field_type: Any, value: Any, source: str, where: str) -> Any:
    """``value`` checked against ``field_type``: the exact type, a finite float, then its declared
    :class:`Range` (an int without one: :data:`INT64`); lists item by item."""
    bounds = next((m for m in getattr(field_type, "__metadata__", ()) if isinstance(m, Range)), None)
    if typing.get_origin(field_type) is Annotated:
        field_type = typing.get_args(field_type)[0]
    origin = typing.get_origin(field_type)
    if origin is list:
        (item_type,) = typing.get_args(field_type)
        if not isinstance(value, list):
            raise ConfigError(f"{source}: '{where}' must be a list, got {value!r}")
        return [_scalar(item_type, v, source, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(field_type, types.UnionType):
        raise ConfigError(f"{source}: '{where}': union types are not supported in the config")
    # bool is an int subclass and ints are not doubles for ROS: require the exact YAML type.
    ok = type(value) is field_type
    if not ok:
        hint = (
            " (write it with a decimal point, e.g. 1.0: ROS parameters are typed)"
            if (field_type is float and type(value) is int)
            else ""
        )
        raise ConfigError(
            f"{source}: '{where}' must be {field_type.__name__}, got {type(value).__name__} {value!r}{hint}"
        )
    if field_type is float and not math.isfinite(value):
        expected = "a finite number" + (f" {bounds}" if bounds is not None else "")
        raise ConfigError(f"{source}: '{where}' = {value!r}: expected {expected}")
    if bounds is None and field_type is int:
        bounds = INT64
    if bounds is not None and value not in bounds:
        raise ConfigError(f"{source}: '{where}' = {value!r}: expected {bounds}")
    return value


def _number(value: float | None) -> str:
    """A bound as the error messages print it: ``0``, ``0.5``, ``1000000``."""
    return f"{value:g}" if isinstance(value, float) else str(value)
