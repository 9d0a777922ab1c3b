"""The one typed configuration of the stack, loaded from ``config/ovman.yaml``.

The YAML file is in the ROS 2 parameters layout: ``/**`` holds the constants every node shares and
each node has its own top-level key with ``ros__parameters``. This module turns it into frozen
dataclasses, rejecting unknown keys, missing keys and wrong types with a message that names the
file and the dotted key. Nodes declare the same dotted names as ROS parameters
(:func:`node_parameters`) so a value can be overridden on the command line or in a launch file.
"""

from __future__ import annotations

import array
import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any

import yaml

CONFIG_ENV = "OVMAN_CONFIG"
SHARED_KEY = "/**"
PARAMS_KEY = "ros__parameters"


class ConfigError(ValueError):
    """A configuration file is missing, unreadable, or has a bad key or value."""


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """Constants of the task itself (TASK.md §1-4). Distances in metres on the floor plane."""

    success_radius: float
    static_gate_radius: float
    min_displacement: float
    stable_tolerance: float
    separation_radius: float
    drift_tolerance: float
    max_steps: int
    far_miss_distance: float
    certification_runs: int


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

    variants_per_category: int
    home_share: float
    size_jitter: float
    hue_jitter: float
    tone_jitter: float
    library_seed: int


@dataclasses.dataclass(frozen=True)
class WorldConfig:
    """Agent embodiment and world choice. Metres and degrees."""

    kind: str
    grid_size: float
    rotate_step_deg: float
    look_step_deg: float
    horizon_min_deg: float
    horizon_max_deg: float
    agent_radius: float
    camera_height: float
    appearance: AppearanceConfig


@dataclasses.dataclass(frozen=True)
class CameraConfig:
    """Pinhole camera: image size in pixels, vertical field of view in degrees, depth range in m."""

    width: int
    height: int
    vertical_fov_deg: float
    near: float
    far: float


@dataclasses.dataclass(frozen=True)
class EmbeddedWorldConfig:
    """Procedural home generator of the embedded world. Metres."""

    rooms_min: int
    rooms_max: int
    room_size_min: float
    room_size_max: float
    wall_height: float
    door_width: float
    furniture_per_room_min: int
    furniture_per_room_max: int
    small_objects_per_room_min: int
    small_objects_per_room_max: int
    wall_thickness: float
    door_clearance: float
    wall_margin: float
    furniture_gap: float
    surface_margin: float
    contact_tolerance: float
    placement_attempts: int
    placement_spacing: float
    room_free_fraction: float
    ambient_light: float
    diffuse_light: float
    light_direction: list[float]
    distance_falloff: float
    floor_tile_size: float
    floor_tile_contrast: float


@dataclasses.dataclass(frozen=True)
class Ai2thorConfig:
    """AI2-THOR controller settings (see shared/design/notes/ai2thor.md)."""

    commit_id: str
    platform: str
    x_display: str
    start_timeout_s: float
    server_timeout_s: float
    settle_max_steps: int
    local_executable_path: str
    quality: str
    structural_types: list[str]
    position_tolerance: float
    depth_saturation_tolerance: float


@dataclasses.dataclass(frozen=True)
class TourConfig:
    """Coverage tour over the reachable positions of one visit."""

    waypoint_spacing: float
    max_waypoints: int
    turns_per_waypoint: int
    horizon_deg: float


@dataclasses.dataclass(frozen=True)
class MoverConfig:
    """The mover that carries one instance during visit 2 of moving episodes."""

    steps_per_move: int
    hop_length: float
    keep_direction_prob: float


@dataclasses.dataclass(frozen=True)
class ConditionsConfig:
    """Stress conditions of the second seed: reduced light/visibility and randomised textures."""

    name: str
    low_light_gain: float
    low_light_noise_std: float
    low_light_visibility: float
    texture_hue_jitter: float
    texture_period_min: float
    texture_period_max: float
    texture_contrast: float


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
    landing_offset_std: float
    knock_radius: float
    knock_probability: float
    slide_mean: float
    settle_steps: int


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
    depth_noise_base: float
    depth_noise_quadratic: float
    noise_cell_px: int
    max_range: float
    edge_jump: float
    edge_dropout: float
    pose_noise_translation: float
    pose_noise_yaw_deg: float


@dataclasses.dataclass(frozen=True)
class SimNodeConfig:
    """sim_node's ROS side: sim time, publishing and what it loads at start-up."""

    step_dt: float
    play_period_s: float
    play_ack_timeout_s: float
    act_camera: bool
    camera_output: str
    qos_depth: int
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

    voxel_size: float
    min_segment_pixels: int
    max_depth: float
    outlier_std_ratio: float
    outlier_neighbours: int
    segment_outlier_removal: bool
    pixel_stride: int
    min_segment_points: int
    merge_distance: float
    merge_feature_similarity: float
    merge_overlap: float
    overlap_voxel_size: float
    colour_weight: float
    motion_distance: float
    vacancy_margin: float
    vacancy_fraction: float
    vacancy_min_points: int
    vacancy_check_points: int
    vacancy_min_pixels: int


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Feature encoder choice: ``label`` (offline) or ``clip`` (open_clip)."""

    kind: str
    clip_model: str
    clip_weights: str
    views_per_instance: int
    colour_bins: int
    clip_prompt: str
    crop_padding: float
    batch_size: int
    text_cache: bool
    text_cache_dir: str


@dataclasses.dataclass(frozen=True)
class SegmenterConfig:
    """Where segments come from (ovman_mapping.segmenter): ``learned`` (the project's network),
    ``simulator`` (the simulator's masks; oracle and diagnostic arms only) or ``clip``;
    probabilities in [0, 1]; ``threads``: torch intra-op threads."""

    kind: str
    model: str
    boundary_threshold: float
    min_confidence: float
    threads: int


@dataclasses.dataclass(frozen=True)
class MappingNodeParams:
    """mapping_node's ROS side: camera input, subscription depth, synchroniser bound, visit control (seconds)."""

    camera_input: str
    qos_depth: int
    qos_keep_all: bool
    sync_max_pending: int
    start_visit: int
    finish_timeout_s: float
    step_dt: float


@dataclasses.dataclass(frozen=True)
class MapMarkersConfig:
    """RViz markers of the per-visit maps: opacity and colours in [0, 1], text sizes in metres."""

    box_alpha: float
    text_height: float
    text_offset: float
    visit1_rgb: list[float]
    visit2_rgb: list[float]
    moving_rgb: list[float]


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
    """Query parser: naive Bayes over cue n-grams of the training phrasings."""

    max_ngram: int
    smoothing: float
    min_log_odds: float


@dataclasses.dataclass(frozen=True)
class GroundingConfig:
    """Grounding: every instance within ``delta_g`` of the best text-feature score; scores are
    rounded to ``score_decimals`` decimals before any comparison."""

    delta_g: float
    score_decimals: int


@dataclasses.dataclass(frozen=True)
class AssociationConfig:
    """Two-stage Hungarian association across visits."""

    stay_distance_gate: float
    feature_weight: float
    distance_weight: float
    relocation_max_dissimilarity: float
    stay_max_dissimilarity: float
    colour_weight: float


@dataclasses.dataclass(frozen=True)
class AnswerMarkersConfig:
    """RViz marker of the latest answer: colour and opacity in [0, 1], sizes in metres."""

    rgb: list[float]
    alpha: float
    disc_height: float
    text_height: float
    text_offset: float


@dataclasses.dataclass(frozen=True)
class QueryConfig:
    """Parameters of ``query_node``."""

    parser: ParserConfig
    grounding: GroundingConfig
    association: AssociationConfig
    seed: int
    markers: AnswerMarkersConfig


@dataclasses.dataclass(frozen=True)
class NavigationParams:
    """Navigation on the reachable grid."""

    backend: str
    block_expiry_steps: int
    max_replans: int
    retarget_distance: float
    approach_margin: float
    max_collisions: int
    nav2_poll_period_s: float
    nav2_timeout_s: float
    scene: str
    feedback_period_s: float
    sim_timeout_s: float
    sequence_actions: int
    sequence_position_tolerance: float
    sequence_yaw_tolerance_deg: float


@dataclasses.dataclass(frozen=True)
class NavConfig:
    """Parameters of ``nav_node``."""

    navigation: NavigationParams


@dataclasses.dataclass(frozen=True)
class BenchmarkParams:
    """Benchmark run: arms, seeds, worker processes, moving-target tracking (m), the default dataset."""

    arms: list[str]
    seeds: list[int]
    workers: int
    track_gate: float
    default_scenes: int
    default_per_relation: int
    default_seed: int
    encoder_threads: int


@dataclasses.dataclass(frozen=True)
class GenerationParams:
    """Episode generation and certification (TASK.md §4, ``ovman generate``). Metres, counts."""

    max_attempts_per_episode: int
    attempts_per_scene: int
    held_out_phrase_fraction: float
    min_start_distance: float
    multi_change_min: int
    multi_change_max: int
    workers: int
    progress_period_s: float


@dataclasses.dataclass(frozen=True)
class DiagnosticsParams:
    """Map and memory diagnostics (TASK.md §8, ``ovman_eval.diagnostics``) and the true category
    of map instances (``ovman_eval.truth_shares``). Metres."""

    match_gate: float
    truth_margin: float


@dataclasses.dataclass(frozen=True)
class SweepParams:
    """``ovman sweep`` (``ovman_eval.sweep``): the values of each admissibility setting re-derived on a
    finished run (the grid is their product), and the filters also switched off. Metres."""

    drift_tolerance: list[float]
    stable_tolerance: list[float]
    min_displacement: list[float]
    separation_radius: list[float]
    toggled_filters: list[str]


@dataclasses.dataclass(frozen=True)
class BenchmarkNodeParams:
    """benchmark_node's ROS side and ``ovman launch``: waits on the graph, in seconds."""

    start_timeout_s: float
    call_timeout_s: float
    navigate_timeout_s: float
    message_timeout_s: float
    camera_retry_s: float
    handshake_retry_s: float
    groups_ahead: int
    shutdown_timeout_s: float


@dataclasses.dataclass(frozen=True)
class PerceptionParams:
    """``ovman train-perception`` / ``eval-perception``: perception homes, frames, the network and
    its training (ovman_eval.perception)."""

    train_homes: int
    test_homes: int
    frame_stride: int
    epochs: int
    batch_size: int
    learning_rate: float
    seed: int
    widths: list[int]
    decoder_stages: int
    input_stride: int
    threads: int
    iou_threshold: float


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
    """How every node uses ROS 2 (ovman_sim.spinning)."""

    qos_event_warnings: bool


@dataclasses.dataclass(frozen=True)
class SharedConfig:
    """The ``/**`` block: constants every node shares."""

    task: TaskConfig
    frames: FramesConfig
    ros: RosConfig


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
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from err
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    return config_from_document(document, str(path))


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

    Used by nodes to apply ROS parameter overrides; values are type-checked as in the file.
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
    hints = typing.get_type_hints(cls)
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
        return field_type(**{k: _build(t, value[k], source, f"{where}.{k}") for k, t in hints.items()})
    return _scalar(field_type, value, source, where)


def _scalar(field_type: Any, value: Any, source: str, where: str) -> Any:
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
    return value
