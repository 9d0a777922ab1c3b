"""The maps of a recorded group, built once and cached per (recordings, encoder, mapping config, code).

A :class:`GroupMaps` holds all the arms, diagnostics and figures need of the recordings: both
visits' lean maps, the ground truth read from the same frames, the map and memory diagnostics and
the phrase embeddings (answering from an entry needs no language model). An entry is one
``<key>.maps`` file (:mod:`ovman_core.array_bundle`: reading runs no code, floats come back bit
for bit), written atomically so parallel workers share a directory; a damaged one is reported and
rebuilt. Text embeddings are computed one phrase at a time, so results do not depend on the number
of workers. Frames: AI2-THOR world (metres).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ovman_core.config import OvmanConfig, to_document
from ovman_core.files import atomic_write_bytes
from ovman_core.observation import Observation
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.analysis.diagnostics import appearance_pairs, diagnose_map, diagnose_visits
from ovman_eval.analysis.remember import visit_memory
from ovman_eval.benchmark.map_entry import CACHE_FORMAT, GroupMaps, GroupTruth, decode_entry, encode_entry
from ovman_eval.benchmark.truth_shares import true_shares
from ovman_eval.runs.fingerprint import source_fingerprint
from ovman_eval.task.episodes import EpisodeRecord
from ovman_mapping.encoders import FeatureEncoder, InstanceEvidence, encoder_class, label_text, make_encoder
from ovman_mapping.instances import Instance, InstanceMap, Sighting, at_wire_precision
from ovman_mapping.segmenter import SIMULATOR, segmenter_identity
from ovman_query.association import CUES, Association
from ovman_sim.recording import SEGMENT_TOPICS, RecordedFrame, RecordingError, has_segments, read_visit

ENTRY_SUFFIX = ".maps"
"""The file name suffix of an entry (after its key)."""
UNAVAILABLE = "unavailable"
"""The key of ``GroupMaps.diagnostics`` (and of a result's diagnostics) when they cannot be computed."""
NO_SEGMENTS = {
    UNAVAILABLE: "the recordings carry no simulator segments (/camera/instances/*): the map and memory "
    "diagnostics need the instances each frame saw"
}

_KEY_SOURCES = (
    ("ovman_mapping", None),
    ("ovman_sim", "recording.py"),
    ("ovman_ros", "bundle.py"),
    ("ovman_eval.benchmark", "map_cache.py"),
    ("ovman_eval.benchmark", "map_entry.py"),
    ("ovman_eval.analysis", "diagnostics.py"),
    ("ovman_eval.analysis", "remember.py"),
    ("ovman_eval.benchmark", "truth_shares.py"),
    ("ovman_query", "association.py"),
)
"""Source files whose content keys the cache: the mapper, the recording reader, this module, the
diagnostics (and the Remember metrics), the true categories and the association they are computed
with (None: every .py of the package)."""


class MapCacheError(RuntimeError):
    """A cache entry cannot be read or written (names the file)."""


class DamagedEntryWarning(UserWarning):
    """A cache entry is damaged (names the file and what is wrong); it is rebuilt."""


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
    def reads_views(self) -> bool:
        return encoder_class(self._config.kind).reads_views

    @property
    def made(self) -> bool:
        """Whether the wrapped encoder was made (only a phrase not :attr:`known` makes it)."""
        return self._inner is not None

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


_DIGEST_CHUNK = 1 << 20
"""Bytes read at a time when hashing a recording file."""
_file_digests: dict[tuple[str, int, int, int, int, int], str] = {}
"""sha256 (hex) of the recording files this process has read, by (path, size, mtime_ns, ctime_ns,
device, inode): a file is hashed again as soon as one of them changes (a write changes its ctime,
even when its mtime is set back)."""


def _file_digest(path: Path) -> str:
    """sha256 (hex) of the content of the file at ``path``, read once per process (see ``_file_digests``)."""
    info = path.stat()
    identity = (str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_dev, info.st_ino)
    digest = _file_digests.get(identity)
    if digest is None:
        sha = hashlib.sha256()
        with path.open("rb") as stream:
            while chunk := stream.read(_DIGEST_CHUNK):
                sha.update(chunk)
        digest = _file_digests[identity] = sha.hexdigest()
    return digest


def _recording_stamp(path: Path) -> dict[str, str]:
    """The identity of a recording directory: the sha256 of every file in it, by relative path."""
    if not path.is_dir():
        raise RecordingError(f"{path}: recording directory missing")
    files = (entry for entry in sorted(path.rglob("*")) if entry.is_file())
    return {entry.relative_to(path).as_posix(): _file_digest(entry) for entry in files}


class CacheKeys:
    """Entry names for one (configuration, encoder, dataset): the parts common to every group are
    hashed once, the recordings of each group at every call. A name is a sha256 over the content of
    the recordings' files, the dataset's hash, the encoder, the mapping configuration and the code
    that builds maps, so a change to any of them misses the cache."""

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


class MapCache:
    """A directory of :class:`GroupMaps` entries (``None`` directory: nothing is kept), one
    ``<key>.maps`` file each (:mod:`ovman_eval.benchmark.map_entry`), with a sha256 of its own bytes."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}{ENTRY_SUFFIX}"

    def get(self, key: str) -> GroupMaps | None:
        """The entry of ``key``; None when there is none, or it is of another format, or it is
        damaged (then with a :class:`DamagedEntryWarning`: the caller rebuilds it and :meth:`put`
        overwrites it). MapCacheError when the file exists but cannot be read."""
        path = self.path(key)
        if path is None:
            return None
        try:
            # A bytearray, so that the arrays are writable like the ones the maps were built with.
            data = bytearray(path.read_bytes())
        except FileNotFoundError:
            return None
        except OSError as err:
            raise MapCacheError(f"{path}: unreadable map cache entry ({err})") from err
        # Decoding creates thousands of small objects; the cyclic collector would scan every live
        # object several times meanwhile (3x slower). Nothing here makes cycles.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return decode_entry(data)
        except Exception as err:  # whatever a damaged file makes decoding raise, the entry is rebuilt
            why = f"{type(err).__name__}: {err}"
            warnings.warn(f"{path}: damaged map cache entry, rebuilt ({why})", DamagedEntryWarning, stacklevel=2)
            return None
        finally:
            if collecting:
                gc.enable()

    def put(self, key: str, entry: GroupMaps) -> None:
        path = self.path(key)
        if path is None:
            return
        atomic_write_bytes(path, encode_entry(entry))


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
    a stress condition (:class:`ovman_eval.benchmark.condition_frames.ConditionSensor`), called in recording
    order; its colour and depth replace the recorded ones. The ground truth is
    always the recording's; the map diagnostics need the instances each frame saw, so recordings
    without the simulator's segments (:data:`ovman_sim.recording.SEGMENT_TOPICS`) get
    :data:`UNAVAILABLE` diagnostics instead."""
    from ovman_mapping.cross_visit import PriorVisit
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
    priors: list[PriorVisit | None] = [None for _ in configs]
    for visit, path in recordings:
        builders = [
            MapBuilder(
                config.mapping_node,
                encoder,
                visit,
                prior=prior,
                batch_frames=config.mapping_node.segmenter.batch_frames,
            )
            for config, prior in zip(configs, priors, strict=True)
        ]
        for frame in read_visit(path):
            seen = frame if sensor is None else dataclasses.replace(frame, observation=sensor(frame))
            for builder, reads_pixels in zip(builders, blind, strict=True):
                builder.add(mapper_input(seen, reads_pixels))
            collector.add(visit, frame.objects, frame.observation.segment_instances.values())
        collector.check(visit, path, record.episode_id)
        for built, builder in zip(maps, builders, strict=True):
            built[visit] = builder.build()
        # Visit 2 is mapped with visit 1 at hand, as mapping_node does (cross-visit evidence).
        priors = [PriorVisit(built[visit], builder.views()) for built, builder in zip(maps, builders, strict=True)]
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
    """The map and memory diagnostics of a group's maps (:mod:`ovman_eval.analysis.diagnostics`), JSON-able."""
    gate = config.benchmark_node.diagnostics.match_gate
    first = diagnose_map(maps[1], truth.visit1, truth.discoverable1, gate)
    second = diagnose_map(maps[2], truth.visit2_end, truth.discoverable2, gate)
    memory = diagnose_visits(association, first, second, truth.visit1, truth.visit2_end, config.task.min_displacement)
    cues = appearance_pairs(maps[1], maps[2], first.match, second.match, truth.visit1, truth.visit2_end)
    load_bin = config.benchmark_node.diagnostics.memory_load_bin
    return _plain_numbers(
        {
            "visit1": first.summary(),
            "visit2": second.summary(),
            "remember": {
                f"visit{visit}": visit_memory(maps[visit].history, maps[visit].aliases, load_bin) for visit in (1, 2)
            },
            "memory": {
                "sir": memory.identity.score,
                "identity_ratio": memory.identity.ratio,
                "carried": memory.identity.carried,
                "resolved": memory.identity.resolved,
                "changes": {
                    kind.value: {"predicted": s.predicted, "correct": s.correct, "relevant": s.relevant}
                    for kind, s in memory.changes.items()
                },
                "appearance": {
                    "cues": list(CUES),
                    "same": [list(row) for row in cues.same],
                    "different": [list(row) for row in cues.different],
                },
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
