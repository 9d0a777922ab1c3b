"""The maps of a recorded group, built once and cached per (recordings, encoder, mapping config, code).

Building the two visit maps of an episode from its recordings is the expensive part of the static
gate (seconds per episode); answering from built maps takes milliseconds. A :class:`GroupMaps`
holds everything the arms, the diagnostics and the figures need from the recordings:

- both visits' maps in their *lean* form (:func:`lean_map`: what an InstanceMap message carries):
  the point clouds, the incremental history and the sightings between the first and the last are
  dropped once the diagnostics that need them (PA, TBS) are computed, so an entry loads in a few
  milliseconds;
- the ground truth read from the same frames (visit 1, the first and last frame of visit 2, the
  mover's instance at every visit-2 frame) and the instances discoverable in each tour;
- the map and memory diagnostics (:mod:`ovman_eval.diagnostics`) of the agent's maps and association;
- the text embeddings of the group's noun phrases, so that answering from a cached entry needs
  no language model.

Entries are pickles in one directory, named by a key over the recordings (metadata and file
size/mtime), the dataset's episode hash, the encoder description, the mapping configuration and
the source of the code that builds maps; a change to any of them misses the cache. Maps of the
recordings re-rendered under a stress condition (:mod:`ovman_eval.condition_frames`) are separate
entries, keyed also by the condition, its seed, the simulator configuration and its code. Entries are
written atomically (temporary file, then rename), so parallel workers can share a directory.

:class:`PhraseByPhraseEncoder` wraps the configured encoder so that a map cache entry's phrase
vectors spare the language model. Every text embedding is computed for one phrase at a time
(:mod:`ovman_mapping.encoders`), so results do not depend on the number of workers.

Frames: AI2-THOR world (metres).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ovman_core.config import OvmanConfig, to_document
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.diagnostics import appearance_pairs, diagnose_map, diagnose_visits
from ovman_eval.episodes import EpisodeRecord
from ovman_eval.fingerprint import source_fingerprint
from ovman_eval.truth_shares import true_shares
from ovman_mapping.encoders import FeatureEncoder, InstanceEvidence, label_text, make_encoder
from ovman_mapping.instances import Instance, InstanceMap, Sighting, at_wire_precision
from ovman_mapping.segmenter import segmenter_identity
from ovman_query.arms import TrueShares
from ovman_query.association import Association
from ovman_sim.recording import SEGMENT_TOPICS, RecordedFrame, RecordingError, has_segments, read_visit
from ovman_sim.world import Observation

CACHE_FORMAT = 4
"""Bumped when :class:`GroupMaps` changes shape."""
SIMULATOR = "simulator"
"""``mapping_node.segmenter.kind`` of the simulator's segments (every other kind reads pixels only)."""
UNAVAILABLE = "unavailable"
"""The key of ``GroupMaps.diagnostics`` (and of a result's diagnostics) when they cannot be computed."""
NO_SEGMENTS = {
    UNAVAILABLE: "the recordings carry no simulator segments (/camera/instances/*): the map and memory "
    "diagnostics need the instances each frame saw"
}

_KEY_SOURCES = (
    ("ovman_mapping", None),
    ("ovman_sim", "recording.py"),
    ("ovman_sim", "bundle.py"),
    ("ovman_eval", "map_cache.py"),
    ("ovman_eval", "diagnostics.py"),
    ("ovman_eval", "truth_shares.py"),
    ("ovman_query", "association.py"),
)
"""Source files whose content keys the cache: the mapper, the recording reader, this module, the
diagnostics, the true categories and the association they are computed with (None: every .py of
the package)."""


class MapCacheError(RuntimeError):
    """A cache entry cannot be read or written (names the file)."""


class PhraseByPhraseEncoder:
    """A :class:`ovman_mapping.encoders.FeatureEncoder` that starts the wrapped encoder only when
    a text embedding is missing from ``known`` (vectors preloaded from a cache entry), with torch
    limited to ``benchmark.encoder_threads`` once a model loads."""

    def __init__(self, config: OvmanConfig) -> None:
        self._config = config.mapping_node.encoder
        self._threads = config.benchmark_node.benchmark.encoder_threads
        if self._threads < 1:
            raise ValueError(f"config benchmark_node.benchmark.encoder_threads must be at least 1, got {self._threads}")
        self._inner: FeatureEncoder | None = None
        self._description: str | None = None
        self.known: dict[str, np.ndarray] = {}

    @property
    def kind(self) -> str:
        return self._config.kind

    @property
    def inner(self) -> FeatureEncoder:
        """The wrapped encoder (cheap to make: its model loads on the first embedding it computes)."""
        if self._inner is None:
            self._inner = make_encoder(self._config, self._threads)
        return self._inner

    @property
    def description(self) -> str:
        if self._description is None:
            self._description = self.inner.description
        return self._description

    def _one(self, phrase: str) -> np.ndarray:
        vector = self.known.get(phrase)
        if vector is None:
            vector = np.asarray(self.inner.embed_text([phrase])[0], dtype=np.float64)
            self.known[phrase] = vector
        return vector

    def embed_text(self, phrases: Sequence[str]) -> np.ndarray:
        if not phrases:
            return np.zeros((0, 0))
        return np.stack([self._one(p) for p in phrases])

    def embed_labels(self, labels: Sequence[str]) -> np.ndarray:
        return self.embed_text([label_text(label) for label in labels])

    def embed_instances(self, evidence: Sequence[InstanceEvidence]) -> np.ndarray:
        return self.inner.embed_instances(evidence)

    def warm_up(self) -> None:
        self.inner.warm_up()


@dataclasses.dataclass(frozen=True)
class GroupTruth:
    """Ground truth read from a group's recordings (AI2-THOR world frame).

    ``visit2_end`` is the evaluated world; ``carried`` the mover's instance at every visit-2 frame
    (empty without a mover); ``discoverable1``/``discoverable2`` the instances seen in at least one
    frame of each tour (the diagnostics' G_base); ``boxes``: per visit, every distinct object box
    (id and box) its frames show, in order of first appearance (the true categories of map
    instances, :mod:`ovman_eval.truth_shares`).
    """

    visit1: WorldState
    visit2_start: WorldState
    visit2_end: WorldState
    carried: tuple[ObjectState, ...]
    discoverable1: frozenset[str]
    discoverable2: frozenset[str]
    boxes: dict[int, tuple[ObjectState, ...]]


class TruthCollector:
    """Builds a :class:`GroupTruth` from a group's recorded frames, visit 1 then visit 2, each in
    recording order (the mover, ``moving_id``, is carried through visit 2)."""

    def __init__(self, moving_id: str | None) -> None:
        self.moving_id = moving_id
        self.first: dict[int, WorldState] = {}
        self.last: dict[int, WorldState] = {}
        self.seen: dict[int, set[str]] = {1: set(), 2: set()}
        self.carried: list[ObjectState] = []
        self.boxes: dict[int, dict[tuple[str, tuple[float, ...], tuple[float, ...]], ObjectState]] = {1: {}, 2: {}}

    def add(self, visit: int, objects: WorldState, seen: Iterable[str]) -> None:
        """One frame: every object's state and the instances its camera saw."""
        self.first.setdefault(visit, objects)
        self.last[visit] = objects
        self.seen[visit].update(seen)
        boxes = self.boxes[visit]
        for obj in objects:
            boxes.setdefault((obj.instance_id, obj.box.lo, obj.box.hi), obj)
        if visit == 2 and self.moving_id is not None and self.moving_id in objects:
            self.carried.append(objects[self.moving_id])

    def check(self, visit: int, recording: Path, episode_id: str) -> None:
        """RecordingError when ``recording`` (``visit``) gave no frame."""
        if visit not in self.first:
            raise RecordingError(f"{recording}: episode {episode_id}: no frames recorded")

    def truth(self) -> GroupTruth:
        return GroupTruth(
            visit1=self.first[1],
            visit2_start=self.first[2],
            visit2_end=self.last[2],
            carried=tuple(self.carried),
            discoverable1=frozenset(i for i in self.seen[1] if i in self.first[1]),
            discoverable2=frozenset(i for i in self.seen[2] if i in self.last[2]),
            boxes={visit: tuple(boxes.values()) for visit, boxes in self.boxes.items()},
        )


@dataclasses.dataclass(frozen=True)
class GroupMaps:
    """One cache entry (see the module docstring). ``diagnostics``: ``visit1``/``visit2`` map
    summaries and ``memory`` (SIR and per-change-kind counts) as plain JSON-able dicts; the
    association depends only on the maps and the configuration, so it is kept too."""

    format_version: int
    group_id: str
    encoder: str
    map1: InstanceMap
    map2: InstanceMap
    truth: GroupTruth
    diagnostics: dict[str, Any]
    phrases: dict[str, np.ndarray]
    association: Association | None = None
    """The agent's association of ``map1`` and ``map2`` (None when not computed)."""
    shares: dict[int, TrueShares] = dataclasses.field(default_factory=dict)
    """Per visit, the true category shares of the map's instances (:mod:`ovman_eval.truth_shares`;
    ground truth, read by the oracle_grounding arm only)."""


def lean_map(instance_map: InstanceMap) -> InstanceMap:
    """``instance_map`` reduced to what an InstanceMap message carries and the arms read: no point
    clouds, no incremental history, and of the sightings only their number (the support) with the
    first and the last one (first and last seen, the latest position); the sightings between are
    repeats of the first, so that a cache entry holds a few objects per instance instead of one per
    frame that saw it (it loads three times faster). Features, colour histograms and label shares
    are at the message's precision (:func:`ovman_mapping.instances.at_wire_precision`)."""
    empty = np.zeros((0, 3))
    instances: tuple[Instance, ...] = tuple(
        dataclasses.replace(at_wire_precision(i), points=empty, sightings=_count_first_last(i.sightings))
        for i in instance_map.instances
    )
    return dataclasses.replace(instance_map, instances=instances, history=(), aliases={})


def _count_first_last(sightings: tuple[Sighting, ...]) -> tuple[Sighting, ...]:
    if len(sightings) <= 2:
        return sightings
    return (sightings[0],) * (len(sightings) - 1) + (sightings[-1],)


def code_fingerprint() -> str:
    """sha256 over the source files listed in :data:`_KEY_SOURCES`."""
    return source_fingerprint(_KEY_SOURCES)


def _recording_stamp(path: Path) -> dict[str, Any]:
    """A cheap identity of a recording directory: its metadata.yaml and its files' sizes and mtimes."""
    if not path.is_dir():
        raise RecordingError(f"{path}: recording directory missing")
    stamp: dict[str, Any] = {}
    for entry in sorted(path.iterdir()):
        info = entry.stat()
        stamp[entry.name] = [info.st_size, info.st_mtime_ns]
    metadata = path / "metadata.yaml"
    if metadata.is_file():
        stamp["metadata.yaml"].append(hashlib.sha256(metadata.read_bytes()).hexdigest())
    return stamp


class CacheKeys:
    """Entry names for one (configuration, encoder, dataset): the parts common to every group are
    hashed once, the recordings of each group at every call (see the module docstring)."""

    def __init__(self, config: OvmanConfig, encoder_description: str, dataset_hash: str) -> None:
        document = to_document(config)
        identity = {
            "format": CACHE_FORMAT,
            "dataset": dataset_hash,
            "encoder": encoder_description,
            "mapping": document["mapping_node"],
            "segmenter": segmenter_identity(config.mapping_node.segmenter),
            "association": document["query_node"]["ros__parameters"]["association"],
            "gate": config.benchmark_node.diagnostics.match_gate,
            "truth_margin": config.benchmark_node.diagnostics.truth_margin,
            "moved_threshold": config.task.min_displacement,
            "code": code_fingerprint(),
        }
        self.common = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    def of(self, dataset_dir: Path, record: EpisodeRecord, condition: dict[str, Any] | None = None) -> str:
        """The entry of ``record``'s group; ``condition``: what keys maps of re-rendered frames (its
        ``name``, seed, configuration and code; None for the recordings as they are)."""
        identity = {
            "common": self.common,
            "group": record.group_id,
            "visit1": _recording_stamp(dataset_dir / record.recordings.visit1),
            "visit2": _recording_stamp(dataset_dir / record.recordings.visit2),
        }
        if condition is not None:
            identity["condition"] = condition
        text = json.dumps(identity, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:20]
        return f"{record.group_id}-{digest}" if condition is None else f"{record.group_id}-{condition['name']}-{digest}"


def cache_key(
    dataset_dir: Path, record: EpisodeRecord, config: OvmanConfig, encoder_description: str, dataset_hash: str
) -> str:
    """The entry name of ``record``'s group (see the module docstring)."""
    return CacheKeys(config, encoder_description, dataset_hash).of(dataset_dir, record)


class MapCache:
    """A directory of :class:`GroupMaps` pickles (``None`` directory: nothing is kept)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}.pickle"

    def get(self, key: str) -> GroupMaps | None:
        path = self.path(key)
        if path is None or not path.is_file():
            return None
        try:
            data = path.read_bytes()
            # Unpickling creates thousands of small objects; the cyclic collector would scan every
            # live object several times meanwhile (3x slower). Nothing here makes cycles.
            collecting = gc.isenabled()
            gc.disable()
            try:
                entry = pickle.loads(data)
            finally:
                if collecting:
                    gc.enable()
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as err:
            raise MapCacheError(f"{path}: unreadable map cache entry ({err}); delete it to rebuild") from err
        if not isinstance(entry, GroupMaps) or entry.format_version != CACHE_FORMAT:
            return None
        return entry

    def put(self, key: str, entry: GroupMaps) -> None:
        path = self.path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                pickle.dump(entry, stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def build_group_maps(
    dataset_dir: Path,
    record: EpisodeRecord,
    phrases: Iterable[str],
    configs: Sequence[OvmanConfig],
    encoder: PhraseByPhraseEncoder,
    sensor: Callable[[RecordedFrame], Observation] | None = None,
) -> list[GroupMaps]:
    """Read both recordings of ``record``'s group once (and re-render them once): for each of
    ``configs`` (e.g. the agent's segmenter and the simulator's), build the maps, the ground truth,
    the diagnostics and the phrase embeddings. Raises RecordingError for a bad recording.

    What the mapper reads of a frame (:func:`mapper_input`): with a label-blind segmenter
    (``learned``), only what a robot's camera gives (:attr:`ovman_sim.recording.RecordedFrame.camera`:
    colour, depth, camera_info, the pose topic and the stamp, as mapping_node reads them); with the
    simulator segmenter, that and the simulator's segments. ``sensor``: the frame re-rendered under
    a stress condition (:class:`ovman_eval.condition_frames.ConditionSensor`), called in recording
    order; its colour and depth replace the recorded ones. The ground truth is
    always the recording's; the map diagnostics need the instances each frame saw, so recordings
    without the simulator's segments (:data:`ovman_sim.recording.SEGMENT_TOPICS`) get
    :data:`UNAVAILABLE` diagnostics instead."""
    from ovman_mapping.fusion import MapBuilder
    from ovman_query.association import associate

    recordings = [(1, dataset_dir / record.recordings.visit1), (2, dataset_dir / record.recordings.visit2)]
    segmented = all(has_segments(path) for _, path in recordings)
    blind = [config.mapping_node.segmenter.kind != SIMULATOR for config in configs]
    if not (segmented or all(blind)):
        raise RecordingError(
            f"{recordings[0][1]} (or visit 2): no simulator segments ({', '.join(SEGMENT_TOPICS)}), which the "
            "simulator segmenter needs (mapping_node.segmenter.kind simulator; the sim_perception arm)"
        )
    collector = TruthCollector(record.moving_id)
    maps: list[dict[int, InstanceMap]] = [{} for _ in configs]
    for visit, path in recordings:
        builders = [MapBuilder(config.mapping_node, encoder, visit) for config in configs]
        for frame in read_visit(path):
            seen = frame if sensor is None else dataclasses.replace(frame, observation=sensor(frame))
            for builder, reads_pixels in zip(builders, blind, strict=True):
                builder.add(mapper_input(seen, reads_pixels))
            collector.add(visit, frame.objects, frame.observation.segment_instances.values())
        collector.check(visit, path, record.episode_id)
        for built, builder in zip(maps, builders, strict=True):
            built[visit] = builder.build()
    truth = collector.truth()
    vectors = {p: encoder.embed_text([p])[0] for p in sorted(set(phrases))}
    entries = []
    for config, built in zip(configs, maps, strict=True):
        # The arms read the lean maps (at the wire's precision, as query_node receives them): the
        # association is theirs, so that the cached one is the one the graph computes.
        lean1, lean2 = lean_map(built[1]), lean_map(built[2])
        association = associate(lean1, lean2, config.query_node.association)
        margin = config.benchmark_node.diagnostics.truth_margin
        entries.append(
            GroupMaps(
                format_version=CACHE_FORMAT,
                group_id=record.group_id,
                encoder=encoder.description,
                map1=lean1,
                map2=lean2,
                truth=truth,
                diagnostics=_diagnostics(built, truth, association, config) if segmented else dict(NO_SEGMENTS),
                phrases=vectors,
                association=association,
                shares={visit: true_shares(built[visit], truth.boxes[visit], margin) for visit in (1, 2)},
            )
        )
    return entries


def mapper_input(frame: RecordedFrame, blind: bool) -> Observation:
    """What the mapper reads of a recorded ``frame``, exactly as mapping_node reads the recording's
    topics: its camera view (:attr:`ovman_sim.recording.RecordedFrame.camera`) with the colour and
    depth of its observation (the recorded ones, or a stress condition's re-rendering), and with
    the simulator's segments and labels unless ``blind`` (never the ground-truth ids)."""
    assert frame.camera is not None, "a frame read from a recording has its camera view"
    seen = frame.observation
    view = dataclasses.replace(frame.camera, rgb=seen.rgb, depth=seen.depth)
    if blind:
        return view
    return dataclasses.replace(view, segments=seen.segments, segment_labels=seen.segment_labels)


def _diagnostics(
    maps: dict[int, InstanceMap], truth: GroupTruth, association: Association, config: OvmanConfig
) -> dict[str, Any]:
    """The map and memory diagnostics of a group's maps (:mod:`ovman_eval.diagnostics`), JSON-able."""
    gate = config.benchmark_node.diagnostics.match_gate
    first = diagnose_map(maps[1], truth.visit1, truth.discoverable1, gate)
    second = diagnose_map(maps[2], truth.visit2_end, truth.discoverable2, gate)
    memory = diagnose_visits(association, first, second, truth.visit1, truth.visit2_end, config.task.min_displacement)
    colour_cue = appearance_pairs(maps[1], maps[2], first.match, second.match, truth.visit1, truth.visit2_end)
    return _plain_numbers(
        {
            "visit1": first.summary(),
            "visit2": second.summary(),
            "memory": {
                "sir": memory.identity.score,
                "identity_ratio": memory.identity.ratio,
                "carried": memory.identity.carried,
                "resolved": memory.identity.resolved,
                "changes": {
                    kind.value: {"predicted": s.predicted, "correct": s.correct, "relevant": s.relevant}
                    for kind, s in memory.changes.items()
                },
                "appearance": {"same": list(colour_cue.same), "different": list(colour_cue.different)},
            },
        }
    )


def _plain_numbers(value: Any) -> Any:
    """Numpy scalars as Python numbers (JSON-able), recursively."""
    if isinstance(value, dict):
        return {k: _plain_numbers(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value
