"""The one typed configuration of the stack, loaded from ``config/ovman.yaml``.

The YAML file is in the ROS 2 parameters layout: ``/**`` holds the constants every node shares and
each node has its own top-level key with ``ros__parameters``. This module turns it into frozen
dataclasses, rejecting unknown keys, missing keys, duplicate keys, wrong types and values out of
range with a message that names the file and the dotted key. Each numeric field declares its range
beside its type (``Annotated[float, Range(...)]``, mostly through the aliases :data:`Positive`,
:data:`NonNegative`, :data:`Fraction`, :data:`Count`...; :class:`AtLeast` orders two fields of one
section); every float must be finite and every int lies within a ROS int64. Nodes declare the same
dotted names as ROS parameters (:func:`node_parameters`) so a value can be overridden on the command
line or in a launch file; the overrides are validated the same way (:func:`with_parameters`).

Why one module of about 900 lines: it is the one typed configuration: one frozen dataclass per
section of config/ovman.yaml with its ranges, and the one loader and ROS parameter mapping that
walk them; a key is declared, checked and exposed in one place.
"""

from __future__ import annotations

import array
import dataclasses
import math
import os
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
    """Constants of the task itself (TASK.md §1-4). Distances in metres on the floor plane."""

    success_radius: Positive
    static_gate_radius: Positive
    min_displacement: Annotated[Positive, AtLeast("stable_tolerance", strict=True)]
    stable_tolerance: NonNegative
    separation_radius: Positive
    drift_tolerance: NonNegative
    max_steps: Count
    far_miss_distance: NonNegative
    certification_runs: CountOrZero


@dataclasses.dataclass(frozen=True)
class FramesConfig:
    """TF frame ids (REP 105 names by default)."""

    map: str
    odom: str
    base: str
    camera: str
    optical: str


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
    home_share: Fraction
    size_jitter: Annotated[float, Range(0.0, 1.0, open_high=True)]
    hue_jitter: HueJitter
    tone_jitter: Fraction
    library_seed: Seed


@dataclasses.dataclass(frozen=True)
class WorldConfig:
    """Agent embodiment and world choice. Metres and degrees."""

    kind: str
    grid_size: Positive
    rotate_step_deg: StepDeg
    look_step_deg: StepDeg
    horizon_min_deg: PitchDeg
    horizon_max_deg: Annotated[PitchDeg, AtLeast("horizon_min_deg")]
    agent_radius: Positive
    camera_height: Positive
    appearance: AppearanceConfig


@dataclasses.dataclass(frozen=True)
class CameraConfig:
    """Pinhole camera: image size in pixels, vertical field of view in degrees, depth range in m."""

    width: Pixels
    height: Pixels
    vertical_fov_deg: Annotated[float, Range(0.0, 180.0, open_low=True, open_high=True)]
    near: Positive
    far: Annotated[Positive, AtLeast("near", strict=True)]


@dataclasses.dataclass(frozen=True)
class EmbeddedWorldConfig:
    """Procedural home generator of the embedded world. Metres."""

    rooms_min: Count
    rooms_max: Annotated[Count, AtLeast("rooms_min")]
    room_size_min: Positive
    room_size_max: Annotated[Positive, AtLeast("room_size_min")]
    wall_height: Positive
    door_width: Positive
    furniture_per_room_min: CountOrZero
    furniture_per_room_max: Annotated[CountOrZero, AtLeast("furniture_per_room_min")]
    small_objects_per_room_min: CountOrZero
    small_objects_per_room_max: Annotated[CountOrZero, AtLeast("small_objects_per_room_min")]
    wall_thickness: Positive
    door_clearance: NonNegative
    wall_margin: NonNegative
    furniture_gap: NonNegative
    surface_margin: NonNegative
    contact_tolerance: NonNegative
    placement_attempts: Count
    placement_spacing: Positive
    room_free_fraction: Fraction
    ambient_light: Fraction
    diffuse_light: Fraction
    light_direction: list[Annotated[float, Range(-1.0, 1.0)]]
    distance_falloff: NonNegative
    floor_tile_size: Positive
    floor_tile_contrast: Fraction


@dataclasses.dataclass(frozen=True)
class Ai2thorConfig:
    """AI2-THOR controller settings (see shared/design/notes/ai2thor.md)."""

    commit_id: str
    platform: str
    x_display: str
    start_timeout_s: Positive
    server_timeout_s: Positive
    settle_max_steps: Count
    local_executable_path: str
    quality: str
    structural_types: list[str]
    position_tolerance: NonNegative
    depth_saturation_tolerance: NonNegative


@dataclasses.dataclass(frozen=True)
class TourConfig:
    """Coverage tour over the reachable positions of one visit."""

    waypoint_spacing: Positive
    max_waypoints: Count
    turns_per_waypoint: Count
    horizon_deg: PitchDeg


@dataclasses.dataclass(frozen=True)
class MoverConfig:
    """The mover that carries one instance during visit 2 of moving episodes."""

    steps_per_move: Count
    hop_length: Positive
    keep_direction_prob: Fraction


@dataclasses.dataclass(frozen=True)
class ConditionsConfig:
    """Stress conditions of the second seed: reduced light/visibility and randomised textures."""

    name: str
    low_light_gain: NonNegative
    low_light_noise_std: NonNegative
    low_light_visibility: Positive
    texture_hue_jitter: HueJitter
    texture_period_min: Positive
    texture_period_max: Annotated[Positive, AtLeast("texture_period_min")]
    texture_contrast: Fraction


@dataclasses.dataclass(frozen=True)
class PhysicsConfig:
    """Settling of the embedded world after a change (TASK.md §4 step 3, §10). Metres, world steps.

    A moved or added object lands off its intended destination by a seeded offset (each floor axis
    normal with std ``landing_offset_std``). Every movable object that carries nothing and whose
    footprint lies within ``knock_radius`` of the changed object's old or new footprint is knocked
    with probability ``knock_probability``: it slides an exponentially distributed length of mean
    ``slide_mean`` in a uniform direction over the next ``settle_steps`` world steps, and stops
    early where the slide would leave its support or hit something. ``enabled`` false: changes
    land exactly and nothing settles.
    """

    enabled: bool
    landing_offset_std: NonNegative
    knock_radius: NonNegative
    knock_probability: Fraction
    slide_mean: Positive
    settle_steps: Count


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
    depth_noise_base: NonNegative
    depth_noise_quadratic: NonNegative
    noise_cell_px: Pixels
    max_range: Positive
    edge_jump: Positive
    edge_dropout: Fraction
    pose_noise_translation: NonNegative
    pose_noise_yaw_deg: NonNegative


@dataclasses.dataclass(frozen=True)
class SimNodeConfig:
    """sim_node's ROS side: sim time, publishing and what it loads at start-up."""

    step_dt: Positive
    play_period_s: NonNegative
    play_ack_timeout_s: Positive
    play_match_timeout_s: Positive
    act_camera: bool
    camera_output: str
    qos_depth: Count
    scene: str
    recording: str


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """Parameters of ``sim_node``."""

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
    """Per-visit instance mapping. Metres, pixels, cosine similarities."""

    voxel_size: Positive
    min_segment_pixels: CountOrZero
    max_depth: Positive
    outlier_std_ratio: Positive
    outlier_neighbours: Count
    segment_outlier_removal: bool
    segment_depth_gap: NonNegative
    pixel_stride: Pixels
    min_segment_points: Count
    merge_distance: NonNegative
    merge_feature_similarity: Fraction
    merge_overlap: Fraction
    overlap_voxel_size: Positive
    colour_weight: Fraction
    motion_distance: Positive
    vacancy_margin: NonNegative
    vacancy_fraction: Fraction
    vacancy_min_points: Count
    vacancy_check_points: Count
    vacancy_min_pixels: CountOrZero
    cross_visit_empty_fraction: Annotated[Fraction, AtLeast("cross_visit_occupied_fraction", strict=True)]
    cross_visit_occupied_fraction: Fraction


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Feature encoder choice: ``label`` (offline) or ``clip`` (open_clip)."""

    kind: str
    clip_model: str
    clip_weights: str
    views_per_instance: Count
    colour_bins: Annotated[int, Range(1, 256)]
    clip_prompt: str
    crop_padding: NonNegative
    batch_size: Count
    text_cache: bool
    text_cache_dir: str


@dataclasses.dataclass(frozen=True)
class SegmenterConfig:
    """Where segments come from (ovman_mapping.segmenter): ``learned`` (the project's network),
    ``simulator`` (the simulator's masks; oracle and diagnostic arms only) or ``clip``;
    probabilities in [0, 1]; ``threads``: torch intra-op threads; ``precision``: the learned
    network's arithmetic (float32 or bfloat16); ``batch_frames``: frames the in-process map
    builder segments in one network pass."""

    kind: str
    model: str
    boundary_threshold: Fraction
    merge_cells: CountOrZero
    min_confidence: Fraction
    threads: Threads
    precision: str
    batch_frames: Count


@dataclasses.dataclass(frozen=True)
class MappingNodeParams:
    """mapping_node's ROS side: camera input, subscription depth, synchroniser bound, visit control (seconds)."""

    camera_input: str
    qos_depth: Count
    qos_keep_all: bool
    sync_max_pending: Count
    start_visit: Annotated[int, Range(0, 2)]
    finish_timeout_s: Positive
    step_dt: Positive


@dataclasses.dataclass(frozen=True)
class MapMarkersConfig:
    """RViz markers of the per-visit maps: opacity and colours in [0, 1], text sizes in metres."""

    box_alpha: Fraction
    text_height: Positive
    text_offset: NonNegative
    visit1_rgb: list[Fraction]
    visit2_rgb: list[Fraction]
    moving_rgb: list[Fraction]


@dataclasses.dataclass(frozen=True)
class MappingConfig:
    """Parameters of ``mapping_node``."""

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
    fallback: bool
    fallback_scale: Positive
    fallback_min_confidence: Fraction


@dataclasses.dataclass(frozen=True)
class GroundingConfig:
    """Grounding: every instance within ``delta_g`` of the best text-feature score; scores are
    rounded to ``score_decimals`` decimals before any comparison."""

    delta_g: NonNegative
    score_decimals: Annotated[int, Range(0, 15)]
    min_score: Annotated[float, Range(-1.0, 1.0)]


@dataclasses.dataclass(frozen=True)
class AssociationConfig:
    """Two-stage Hungarian association across visits."""

    stay_distance_gate: NonNegative
    feature_weight: NonNegative
    distance_weight: NonNegative
    relocation_max_dissimilarity: NonNegative
    stay_max_dissimilarity: NonNegative
    colour_weight: Fraction
    extent_weight: Annotated[Fraction, SumAtMost(("colour_weight",), 1.0)]
    require_seen_change: bool


@dataclasses.dataclass(frozen=True)
class AnswerMarkersConfig:
    """RViz marker of the latest answer: colour and opacity in [0, 1], sizes in metres."""

    rgb: list[Fraction]
    alpha: Fraction
    disc_height: Positive
    text_height: Positive
    text_offset: NonNegative


@dataclasses.dataclass(frozen=True)
class QueryConfig:
    """Parameters of ``query_node``."""

    parser: ParserConfig
    grounding: GroundingConfig
    association: AssociationConfig
    seed: Seed
    markers: AnswerMarkersConfig


@dataclasses.dataclass(frozen=True)
class NavigationParams:
    """Navigation on the reachable grid."""

    backend: str
    block_expiry_steps: Count
    max_replans: CountOrZero
    retarget_distance: NonNegative
    approach_margin: NonNegative
    max_collisions: CountOrZero
    nav2_poll_period_s: Positive
    nav2_timeout_s: Positive
    scene: str
    feedback_period_s: NonNegative
    sim_timeout_s: Positive
    sequence_actions: Count
    sequence_position_tolerance: NonNegative
    sequence_yaw_tolerance_deg: NonNegative


@dataclasses.dataclass(frozen=True)
class NavConfig:
    """Parameters of ``nav_node``."""

    navigation: NavigationParams


@dataclasses.dataclass(frozen=True)
class BenchmarkParams:
    """Benchmark run: arms, seeds, worker processes (and the Ray backend's task retries), moving-target
    tracking (m), the default dataset (its single-change split and its multi-change part), the
    paper-scale preset."""

    arms: list[str]
    seeds: list[Seed]
    workers: Threads
    ray_task_retries: CountOrZero
    ray_connect_timeout_s: Positive
    track_gate: Positive
    default_scenes: Count
    default_per_relation: Count
    default_multi_change_per_relation: CountOrZero
    default_seed: Seed
    paper_scenes: Count
    paper_per_relation: Count
    paper_multi_change_per_relation: Count
    encoder_threads: Threads


@dataclasses.dataclass(frozen=True)
class GenerationParams:
    """Episode generation and certification (TASK.md §4, ``ovman generate``). Metres, counts."""

    max_attempts_per_episode: Count
    attempts_per_scene: Count
    held_out_phrase_fraction: Fraction
    min_start_distance: NonNegative
    multi_change_min: Annotated[int, Range(2, MAX_COUNT)]
    multi_change_max: Annotated[int, Range(2, MAX_COUNT), AtLeast("multi_change_min")]
    workers: Threads
    progress_period_s: NonNegative


@dataclasses.dataclass(frozen=True)
class DiagnosticsParams:
    """Map and memory diagnostics (TASK.md §8, ``ovman_eval.analysis.diagnostics`` and
    ``ovman_eval.analysis.remember``) and the true category of map instances
    (``ovman_eval.benchmark.truth_shares``). Metres; ``memory_load_bin`` in working tracks."""

    match_gate: NonNegative
    truth_margin: NonNegative
    memory_load_bin: Count


@dataclasses.dataclass(frozen=True)
class SweepParams:
    """``ovman sweep`` (``ovman_eval.analysis.sweep``): the values of each admissibility setting re-derived on a
    finished run (the grid is their product), and the filters also switched off. Metres."""

    drift_tolerance: list[NonNegative]
    stable_tolerance: list[NonNegative]
    min_displacement: list[Positive]
    separation_radius: list[Positive]
    toggled_filters: list[str]


@dataclasses.dataclass(frozen=True)
class BenchmarkNodeParams:
    """benchmark_node's ROS side and ``ovman launch``: waits on the graph, in seconds."""

    start_timeout_s: Positive
    call_timeout_s: Positive
    navigate_timeout_s: Positive
    message_timeout_s: Positive
    camera_retry_s: Positive
    handshake_retry_s: Positive
    groups_ahead: Count
    shutdown_timeout_s: Positive
    discovery_wait_s: Positive


@dataclasses.dataclass(frozen=True)
class PerceptionParams:
    """``ovman train-perception`` / ``eval-perception``: perception homes, frames, the network and
    its training (ovman_eval.perception.training)."""

    train_homes: Count
    test_homes: Count
    frame_stride: Count
    epochs: Count
    batch_size: Count
    learning_rate: Positive
    seed: Seed
    widths: list[Count]
    decoder_stages: Annotated[int, Range(1, 3)]
    context_dilation: Annotated[int, Range(1, 8)]
    input_stride: Pixels
    train_conditions: list[str]
    flip: bool
    threads: Threads
    iou_threshold: Annotated[float, Range(0.0, 1.0, open_low=True)]


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """Parameters of ``benchmark_node``."""

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


@dataclasses.dataclass(frozen=True)
class LimitsConfig:
    """What the stack accepts at its boundaries (camera frames, InstanceMap messages): every
    coordinate finite and within ``max_coordinate`` metres of the origin on each axis, and at most
    ``max_map_instances`` instances in one map (bounds the association's memory)."""

    max_coordinate: Positive
    max_map_instances: Annotated[int, Range(1, 100_000)]


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
