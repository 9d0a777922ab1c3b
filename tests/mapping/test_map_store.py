"""The map store: visits written atomically and read back equal; damaged or foreign files refused by name."""

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from ovman_core.array_bundle import pack_bundle
from ovman_mapping import maps_command
from ovman_mapping.fusion import MapBuilder
from ovman_mapping.map_store import STORE_FORMAT, MapStore, MapStoreError, StoredVisit, default_store_dir, new_map_id

from .scenes import look_around, tour
from .test_fusion import CHAIR, CONFIG, ENCODER, VASE, blind

DAY_NS = 86_400 * 10**9
MONDAY_NS = 1_796_601_600 * 10**9  # 2026-12-07T00:00:00Z


def mapped(visit: int, frames, prior=None):
    builder = MapBuilder(CONFIG, ENCODER, visit, prior=prior)
    for frame in frames:
        builder.add(frame)
    return builder.build(), builder.views()


def stored_pair(store: MapStore) -> tuple[StoredVisit, StoredVisit]:
    first = blind(tour([CHAIR, VASE], look_around(0.0, 0.0)))
    second = blind(tour([CHAIR], look_around(0.0, 0.0), first_step=10))
    map1, views1 = mapped(1, first)
    one = StoredVisit(
        map_id=new_map_id(1, MONDAY_NS),
        name="home",
        visit=1,
        follows=None,
        frame_id="map",
        camera=first[0].intrinsics,
        created_ns=MONDAY_NS,
        identity={"code": "abc", "segmenter": "simulator", "encoder": ENCODER.description},
        map=map1,
        views=views1,
        fused=len(first),
    )
    store.write(one)
    map2, _ = mapped(2, second, prior=one.prior)
    two = dataclasses.replace(
        one, map_id=new_map_id(2, MONDAY_NS + DAY_NS), visit=2, follows=one.map_id, map=map2, views=(),
        created_ns=MONDAY_NS + DAY_NS,
    )  # fmt: skip
    store.write(two)
    return one, two


def test_a_stored_pair_reads_back_equal_and_is_found_as_the_latest(tmp_path: Path):
    store = MapStore(tmp_path / "maps")
    one, two = stored_pair(store)
    assert store.map_ids() == ["20261207T000000000Z-v1", "20261208T000000000Z-v2"]
    loaded1, loaded2 = store.pair()
    assert (loaded1.map_id, loaded2.map_id) == (one.map_id, two.map_id)
    for a, b in ((one, loaded1), (two, loaded2)):
        assert (a.name, a.visit, a.follows, a.frame_id, a.camera, a.identity, a.fused) == (
            b.name, b.visit, b.follows, b.frame_id, b.camera, b.identity, b.fused,
        )  # fmt: skip
        assert [(i.uid, i.label, i.position, i.moving, i.sightings) for i in a.map] == [
            (i.uid, i.label, i.position, i.moving, i.sightings) for i in b.map
        ]
        assert all(np.array_equal(x.feature, y.feature) for x, y in zip(a.map, b.map, strict=True))
    assert loaded2.map.prior == two.map.prior and two.map.prior.gone  # the vase seen gone, across visits
    assert len(loaded1.views) == len(one.views) > 0
    assert all(np.array_equal(x.depth, y.depth) for x, y in zip(one.views, loaded1.views, strict=True))
    # A visit 2 mapped against the loaded visit 1 is the one mapped against the kept one.
    again, _ = mapped(2, blind(tour([CHAIR], look_around(0.0, 0.0), first_step=10)), prior=loaded1.prior)
    assert again.prior == two.map.prior


def test_damaged_truncated_and_foreign_files_are_refused_by_name(tmp_path: Path):
    store = MapStore(tmp_path)
    one, _ = stored_pair(store)
    path = store.path_of(one.map_id)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(MapStoreError, match=rf"{path}: not an intact map store entry \(sha256 mismatch"):
        store.load(one.map_id)
    path.write_bytes(bytes(data[:100]))
    with pytest.raises(MapStoreError, match=str(path)):
        store.load(one.map_id)
    path.write_bytes(pack_bundle({"kind": "something-else"}, []))
    with pytest.raises(MapStoreError, match="not a map store entry"):
        store.load(one.map_id)
    path.write_bytes(pack_bundle({"kind": "ovman-visit-map", "format": STORE_FORMAT + 1}, []))
    with pytest.raises(MapStoreError, match=f"format {STORE_FORMAT + 1}, expected {STORE_FORMAT}"):
        store.load(one.map_id)
    path.write_bytes(pack_bundle({"kind": "ovman-visit-map", "format": STORE_FORMAT}, []))
    with pytest.raises(MapStoreError, match="malformed map store entry"):
        store.load(one.map_id)
    with pytest.raises(MapStoreError, match="no such stored map"):
        store.load("20260101T000000000Z-v1")
    with pytest.raises(MapStoreError, match="expected a name"):
        store.path_of("../elsewhere")


def test_removing_the_visit_1_leaves_its_visit_2_without_a_pair(tmp_path: Path):
    store = MapStore(tmp_path)
    one, two = stored_pair(store)
    store.remove(one.map_id)
    assert store.map_ids() == [two.map_id]
    with pytest.raises(MapStoreError, match="no such stored map"):
        store.pair()
    with pytest.raises(MapStoreError, match="no stored visit 2"):
        MapStore(tmp_path / "empty").pair()


def test_the_default_store_is_under_xdg_data_home(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_store_dir() == tmp_path / "ovman" / "maps"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_store_dir() == Path.home() / ".local" / "share" / "ovman" / "maps"


def maps(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    return maps_command.add(parser)(parser.parse_args(list(argv)))


def test_ovman_maps_lists_shows_and_removes_stored_visits_and_names_a_damaged_one(tmp_path: Path, capsys):
    store = MapStore(tmp_path)
    one, two = stored_pair(store)
    (tmp_path / "20261209T000000000Z-v1.ovmap").write_bytes(b"not a map")
    assert maps("list", "--store", str(tmp_path), "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["map_id"] for row in listed["maps"]] == [one.map_id, two.map_id, "20261209T000000000Z-v1"]
    assert listed["maps"][1]["follows"] == one.map_id and listed["maps"][1]["instances"] == len(two.map)
    assert "not an intact map store entry" in listed["maps"][2]["damaged"]
    assert maps("list", "--store", str(tmp_path)) == 0
    assert "DAMAGED" in capsys.readouterr().out
    assert maps("show", one.map_id, "--store", str(tmp_path), "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["created"] == "2026-12-07T00:00:00Z" and shown["camera"] == one.camera.describe()
    assert sorted(i["label"] for i in shown["instances"]) == ["Chair", "Vase"]
    assert maps("show", "20261209T000000000Z-v1", "--store", str(tmp_path)) == 1
    assert "20261209T000000000Z-v1.ovmap: not an intact map store entry" in capsys.readouterr().out
    assert maps("rm", one.map_id, "--store", str(tmp_path)) == 0
    assert store.map_ids() == [two.map_id, "20261209T000000000Z-v1"]
    assert maps("rm", one.map_id, "--store", str(tmp_path)) == 1
