"""The map cache: exact entries without pickles, damaged entries rebuilt, keys over the recordings' content."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import pickle
import random
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ovman_core.array_bundle import MAGIC, pack_bundle
from ovman_core.boxes import Box3
from ovman_core.relations import Relation
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.benchmark.evaluator import GroupEvaluator
from ovman_eval.benchmark.map_cache import (
    CacheKeys,
    DamagedEntryWarning,
    MapCache,
    PhraseByPhraseEncoder,
    build_group_maps,
)
from ovman_eval.benchmark.map_entry import CACHE_FORMAT, GroupMaps, GroupTruth
from ovman_eval.benchmark.request import TIMING_KEYS, dataset_hash
from ovman_eval.generation.dataset import read_episodes
from ovman_mapping.instances import CrossVisitEvidence, Instance, InstanceMap, MapSnapshot, Sighting
from ovman_query.association import Association, MatchedPair

from .generation_setup import one_scene_dataset, small_config

KEY = "moving-0000-test"


@pytest.fixture(scope="module")
def config():
    return small_config()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, config):
    return one_scene_dataset(tmp_path_factory, (Relation.MOVING,), config)


@pytest.fixture(scope="module")
def entry(dataset, config) -> GroupMaps:
    """The maps of the dataset's (only) group, as built for the cache."""
    records = read_episodes(dataset)
    phrases = [r.query.noun_phrase for r in records]
    (built,) = build_group_maps(dataset, records[0], phrases, [config], PhraseByPhraseEncoder(config))
    return built


def assert_identical(a: Any, b: Any, where: str = "entry") -> None:
    """``a`` and ``b`` are equal and of the same types all the way down: dataclasses field by field,
    mappings in the same order, arrays of the same dtype, shape and bytes, floats bit for bit."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            assert_identical(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, np.ndarray):
        assert (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes()), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key, value in a.items():
            assert_identical(value, b[key], f"{where}[{key!r}]")
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{where}[{k}]")
    elif isinstance(a, float):
        assert a.hex() == b.hex(), f"{where}: {a!r} vs {b!r}"
    else:
        assert a == b, where


def damaged(cache: MapCache, key: str) -> list[str]:
    """The DamagedEntryWarning messages of reading ``key``, which must come back as None."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get(key) is None
    return [str(w.message) for w in caught if issubclass(w.category, DamagedEntryWarning)]


def test_a_real_entry_comes_back_identical(entry, tmp_path):
    cache = MapCache(tmp_path)
    cache.put(KEY, entry)
    assert [p.name for p in tmp_path.iterdir()] == [f"{KEY}.maps"]
    loaded = cache.get(KEY)
    assert loaded is not None
    assert_identical(entry, loaded)
    assert loaded.truth == entry.truth and loaded.association == entry.association
    assert loaded.diagnostics == entry.diagnostics and loaded.shares == entry.shares
    assert entry.truth.carried and len(entry.map1) and entry.format_version == CACHE_FORMAT
    assert all(i.feature.flags.writeable for i in loaded.map1), "arrays are writable, as built"


def every_field_set() -> GroupMaps:
    """A small entry in which every field of every cached type holds a value."""
    box = Box3((-0.0, 0.5, 1.0), (0.25, 1.5, 2.0))
    sighting = Sighting(frame_index=3, step=7, position=(0.1, 0.2, 0.3), pixel_count=40)
    instance = Instance(
        uid="v1:0",
        position=(1.0 / 3.0, -2.5, math.pi),
        box=box,
        points=np.arange(6, dtype=np.float64).reshape(2, 3) / 7.0,
        feature=np.array([0.6, 0.8], dtype=np.float32),
        colour=np.array([0.25, 0.75]),
        labels={"Mug": 0.625, "Cup": 0.375},
        sightings=(sighting, sighting, Sighting(9, 12, (0.4, 0.5, 0.6), 2)),
        moving=True,
        motion_evidence="seen gone from where it was",
    )
    other = dataclasses.replace(instance, uid="v1:1", feature=np.zeros(3), points=np.zeros((0, 3)), moving=False)
    map1 = InstanceMap(
        visit=1,
        instances=(instance, other),
        encoder="test",
        frames=12,
        history=(MapSnapshot(3, 7, {"v1:0": (0.1, 0.2, 0.3)}, frozenset({"v1:0"})), MapSnapshot(4, 8, {})),
        aliases={"w:0": "v1:0"},
    )
    mug = ObjectState("Mug_1", "Mug", (0.125, 1.0, 1.5), box, movable=False)
    truth = GroupTruth(
        visit1=WorldState({"Mug_1": mug}),
        visit2_start=WorldState({}),
        visit2_end=WorldState({"Mug_1": dataclasses.replace(mug, position=(1e-300, 1.0, 1.5))}),
        carried=(mug, mug),
        discoverable1=frozenset({"Mug_1"}),
        discoverable2=frozenset(),
        boxes={1: (mug,), 2: ()},
    )
    return GroupMaps(
        format_version=CACHE_FORMAT,
        group_id="moved-0001",
        encoder="test",
        map1=map1,
        map2=InstanceMap(
            visit=2, instances=(), encoder="test", prior=CrossVisitEvidence(frozenset({"v1:1"}), frozenset())
        ),
        truth=truth,
        diagnostics={"visit1": {"aec": 0.1, "n": 3, "ok": True, "none": None, "list": [1, 2.5, "x"]}},
        phrases={"the mug": np.array([1.0, 2.0]), "a cup": np.array([3.0, 4.0])},
        association=Association(
            (MatchedPair("v1:0", "v2:0", 2, 0.5, 0.25, 1.0 / 3.0, 0.1),),
            ("v1:1",),
            (),
            unconfirmed=("v1:2",),
            unseen=(MatchedPair("v1:2", "v2:3", 3, 0.25, 0.25, 2.0, 1.5),),
        ),
        shares={1: {"v1:0": {"Mug": 0.75, "": 0.25}, "v1:1": {}}, 2: {}},
    )


_ENCODED: list[bytes] = []


def encoded_entry() -> bytes:
    """The bytes of the every_field_set() entry (encoded once)."""
    if not _ENCODED:
        with tempfile.TemporaryDirectory() as directory:
            cache = MapCache(Path(directory))
            cache.put(KEY, every_field_set())
            _ENCODED.append(cache.path(KEY).read_bytes())
    return _ENCODED[0]


def test_every_field_comes_back_identical_when_set(tmp_path):
    entry = every_field_set()
    cache = MapCache(tmp_path)
    for variant in (entry, dataclasses.replace(entry, association=None, shares={})):
        cache.put(KEY, variant)
        assert_identical(variant, cache.get(KEY))


def test_the_codec_stores_every_field():
    """A field added to a cached type must be added to the codec in ovman_eval.benchmark.map_cache (and
    CACHE_FORMAT bumped); then add it here and to test_every_field_comes_back_identical_when_set."""
    fields = {cls.__name__: {f.name for f in dataclasses.fields(cls)} for cls in (GroupMaps, GroupTruth, Instance)}
    assert fields == {
        "GroupMaps": {"format_version", "group_id", "encoder", "map1", "map2", "truth", "diagnostics", "phrases"}
        | {"association", "shares"},
        "GroupTruth": {"visit1", "visit2_start", "visit2_end", "carried", "discoverable1", "discoverable2", "boxes"},
        "Instance": {"uid", "position", "box", "points", "feature", "colour", "labels", "sightings", "moving"}
        | {"motion_evidence"},
    }
    others = (InstanceMap, MapSnapshot, Sighting, Association, MatchedPair, ObjectState, Box3, CrossVisitEvidence)
    assert [len(dataclasses.fields(cls)) for cls in others] == [7, 4, 4, 5, 7, 5, 2, 2]


def test_diagnostics_that_json_would_change_are_refused_when_written(entry, tmp_path):
    for bad in ({"visit1": (1, 2)}, {"visit1": [np.float64(1.0)]}, {1: "x"}):
        with pytest.raises(TypeError, match="diagnostics"):
            MapCache(tmp_path).put(KEY, dataclasses.replace(entry, diagnostics=bad))
    assert not list(tmp_path.iterdir())


def test_a_flipped_byte_anywhere_is_detected(entry, tmp_path):
    cache = MapCache(tmp_path)
    cache.put(KEY, entry)
    path = cache.path(KEY)
    good = path.read_bytes()
    rng = random.Random(22)
    positions = sorted({0, len(good) - 1, *rng.sample(range(len(good)), 100)})
    for position in positions:
        flipped = bytearray(good)
        flipped[position] ^= rng.randrange(1, 256)
        path.write_bytes(bytes(flipped))
        messages = damaged(cache, KEY)
        assert len(messages) == 1 and str(path) in messages[0], f"byte {position}: {messages}"
    path.write_bytes(good)
    assert_identical(entry, cache.get(KEY))


@pytest.mark.parametrize("cut", [0, 7, 47, 1000, -1])
def test_a_truncated_entry_is_detected(entry, tmp_path, cut):
    cache = MapCache(tmp_path)
    cache.put(KEY, entry)
    path = cache.path(KEY)
    path.write_bytes(path.read_bytes()[:cut])
    (message,) = damaged(cache, KEY)
    assert str(path) in message


def test_a_garbage_or_truncated_entry_is_rebuilt_with_a_warning(dataset, config, tmp_path):
    records = read_episodes(dataset)
    evaluator = GroupEvaluator(config, dataset, records, MapCache(tmp_path), dataset_hash(dataset))
    built = evaluator.group_maps(records, dict.fromkeys(TIMING_KEYS, 0.0))
    (path,) = tmp_path.glob("*.maps")
    good = path.read_bytes()
    for bad in (random.Random(0).randbytes(len(good)), good[: len(good) // 2]):
        path.write_bytes(bad)
        timings = dict.fromkeys(TIMING_KEYS, 0.0)
        with pytest.warns(DamagedEntryWarning, match="damaged map cache entry"):
            rebuilt = evaluator.group_maps(records, timings)
        assert timings["maps_build_s"] > 0.0
        assert_identical(built, rebuilt)
        assert path.read_bytes() == good, "the rebuilt entry overwrote the damaged one"


def test_loading_runs_no_code(entry, tmp_path):
    marker = tmp_path / "marker"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    payload = pickle.dumps(Payload())
    pickle.loads(payload)  # the payload is live: unpickled, it creates the marker
    assert marker.exists()
    marker.unlink()
    cache = MapCache(tmp_path / "maps")
    cache.put(KEY, entry)
    cache.path(KEY).write_bytes(payload)
    (message,) = damaged(cache, KEY)
    assert "not a bundle" in message
    # Nor does a file that passes the checksum but names an object array (a bundle holds numbers only).
    bundle = pack_bundle({"format_version": CACHE_FORMAT}, [np.zeros(1)]).replace(b'"<f8"', b'"|O8"')
    payload_start = len(MAGIC) + hashlib.sha256().digest_size
    cache.path(KEY).write_bytes(MAGIC + hashlib.sha256(bundle[payload_start:]).digest() + bundle[payload_start:])
    (message,) = damaged(cache, KEY)
    assert "bool, integer and float arrays only" in message
    assert not marker.exists()


def test_the_key_follows_the_recordings_content_not_their_mtime(dataset, config, tmp_path):
    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    record = read_episodes(copy)[0]
    keys = CacheKeys(config, "test encoder", "test dataset")
    before = keys.of(copy, record)
    recording = max((copy / record.recordings.visit1).iterdir(), key=lambda p: p.stat().st_size)
    info = recording.stat()

    def rewrite_byte(position: int, value: int) -> None:
        with recording.open("r+b") as stream:
            stream.seek(position)
            stream.write(bytes([value]))
        os.utime(recording, ns=(info.st_atime_ns, info.st_mtime_ns))
        assert (recording.stat().st_size, recording.stat().st_mtime_ns) == (info.st_size, info.st_mtime_ns)

    middle = info.st_size // 2
    original = recording.read_bytes()[middle]
    rewrite_byte(middle, original ^ 0x01)
    assert keys.of(copy, record) != before
    rewrite_byte(middle, original)
    assert keys.of(copy, record) == before
    os.utime(recording, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    assert keys.of(copy, record) == before
    assert keys.of(copy, record) != CacheKeys(config, "another encoder", "test dataset").of(copy, record)


FUZZ = settings(max_examples=150, deadline=None, derandomize=True)


@FUZZ
@given(st.binary(max_size=600))
def test_an_entry_of_any_bytes_is_rebuilt_with_a_warning(data):
    with tempfile.TemporaryDirectory() as directory:
        cache = MapCache(Path(directory))
        cache.path(KEY).write_bytes(data)
        (message,) = damaged(cache, KEY)
        assert str(cache.path(KEY)) in message


@FUZZ
@given(st.data())
def test_an_entry_with_any_bytes_replaced_is_rebuilt_or_read(data):
    """Bytes replaced anywhere, with the checksum made to match (as code writing a bad entry would):
    the entry is read or reported damaged, never an exception out of get()."""
    good = bytearray(encoded_entry())
    start = data.draw(st.integers(len(MAGIC), len(good) - 1))
    patch = data.draw(st.binary(min_size=1, max_size=16))
    bad = good[:start] + patch + good[start + len(patch) :]
    payload_start = len(MAGIC) + hashlib.sha256().digest_size
    bad[len(MAGIC) : payload_start] = hashlib.sha256(bad[payload_start:]).digest()
    with tempfile.TemporaryDirectory() as directory:
        cache = MapCache(Path(directory))
        cache.path(KEY).write_bytes(bytes(bad))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = cache.get(KEY)
        assert (loaded is None) == any(issubclass(w.category, DamagedEntryWarning) for w in caught)
        assert loaded is None or isinstance(loaded, GroupMaps)


def test_source_fingerprints_cover_data_files_by_pattern(tmp_path, monkeypatch):
    from ovman_eval.runs.fingerprint import source_fingerprint

    package = tmp_path / "fp_pkg"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "data" / "a.json").write_text("[1]")
    monkeypatch.syspath_prepend(str(tmp_path))
    sources = (("fp_pkg", None), ("fp_pkg", "data/*.json"))
    before = source_fingerprint(sources)
    source_fingerprint.cache_clear()
    (package / "data" / "a.json").write_text("[2]")
    assert source_fingerprint(sources) != before
    source_fingerprint.cache_clear()
