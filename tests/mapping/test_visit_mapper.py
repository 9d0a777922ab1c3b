"""The per-visit mapper behind mapping_node: open, feed, finish."""

import dataclasses

import pytest

from ovman_core.config import load_config
from ovman_mapping.fusion import build_map, build_visits
from ovman_mapping.map_store import MapStore
from ovman_mapping.segmenter import with_segmenter
from ovman_mapping.visit_mapper import VisitError, VisitMapper

from .scenes import OneHotEncoder, look_around, on_floor, tour

CONFIG = load_config().mapping_node
SCENE = [
    on_floor("Vase_1", "Vase", 0.0, 3.0, size=(0.3, 0.5, 0.3), colour=(220, 200, 30)),
    on_floor("Chair_1", "Chair", 3.0, -3.0, colour=(200, 30, 30)),
]
FRAMES = tour(SCENE, look_around(0.0, 0.0))


@pytest.fixture
def mapper():
    return VisitMapper(CONFIG, OneHotEncoder(["Vase", "Chair"]))


def test_a_finished_visit_is_the_map_of_its_frames_with_their_stamps(mapper):
    mapper.start(2)
    for n, observation in enumerate(FRAMES):
        assert mapper.add(observation, 1_000 + n)
    instance_map, stamps = mapper.finish(2)
    reference = build_map(FRAMES, CONFIG, OneHotEncoder(["Vase", "Chair"]), visit=2)
    assert stamps == [1_000 + n for n in range(len(FRAMES))]
    assert [(i.uid, i.label, i.position) for i in instance_map] == [(i.uid, i.label, i.position) for i in reference]
    assert mapper.visit is None and mapper.frames == 0
    # Its map messages carry no per-frame history, so a robot's long visit keeps none.
    assert instance_map.history == () and len(reference.history) == len(FRAMES) == instance_map.frames


def test_frames_outside_a_visit_are_counted_and_dropped(mapper):
    assert not mapper.add(FRAMES[0], 1)
    mapper.start(1)
    mapper.add(FRAMES[0], 2)
    mapper.start(1)  # starting again drops what the visit had
    assert mapper.frames == 0 and mapper.unassigned == 1


def test_visit_requests_that_do_not_fit_the_state_are_refused(mapper):
    with pytest.raises(VisitError, match="no visit is open"):
        mapper.finish(1)
    with pytest.raises(VisitError, match="visit must be 1 or 2"):
        mapper.start(3)
    mapper.start(1)
    with pytest.raises(VisitError, match="visit 1 is open"):
        mapper.finish(2)
    mapper.add(FRAMES[0], 5)
    with pytest.raises(VisitError, match="stamps must increase"):
        mapper.add(FRAMES[1], 5)


def test_a_visit_2_is_mapped_against_the_kept_visit_1_and_names_what_changed():
    # Between the visits the vase is removed and a box appears; the chair stays.
    box = on_floor("Box_1", "Box", -3.0, -3.0, colour=(30, 30, 200))
    second = tour([SCENE[1], box], look_around(0.0, 0.0), first_step=100)
    encoder = OneHotEncoder(["Vase", "Chair", "Box"])
    config = with_segmenter(CONFIG, "simulator")  # labels that name the test's boxes
    mapper = VisitMapper(config, encoder)
    mapper.start(1)
    for n, observation in enumerate(FRAMES):
        mapper.add(observation, 1 + n)
    map1, _ = mapper.finish(1)
    assert map1.prior is None and mapper.prior is not None and mapper.prior.map is map1
    mapper.start(2)
    for n, observation in enumerate(second):
        mapper.add(observation, 100 + n)
    map2, _ = mapper.finish(2)
    by_label1 = {i.label: i.uid for i in map1}
    by_label2 = {i.label: i.uid for i in map2}
    assert map2.prior is not None
    assert map2.prior.gone == {by_label1["Vase"]} and map2.prior.new == {by_label2["Box"]}
    reference = build_visits(FRAMES, second, config, encoder)[1]
    assert reference.prior == map2.prior and [i.position for i in reference] == [i.position for i in map2]
    # A new visit 1 drops the kept one: a visit 2 with nothing before it carries no evidence.
    mapper.start(1)
    assert mapper.prior is None


def test_warming_up_builds_the_colour_table_a_first_frame_would_wait_for(mapper):
    from ovman_mapping.backprojection import hue_saturation_cells

    hue_saturation_cells.cache_clear()
    mapper.warm_up()
    assert hue_saturation_cells.cache_info().currsize == 1
    hue_saturation_cells(mapper.config.encoder.colour_bins)
    assert hue_saturation_cells.cache_info().hits == 1  # the first frame's call finds it built


def feed(mapper: VisitMapper, visit: int, frames, first_stamp: int):
    mapper.start(visit)
    for n, observation in enumerate(frames):
        mapper.add(observation, first_stamp + n)
    return mapper.finish(visit, skipped=3)[0]


def test_with_a_store_a_visit_2_in_a_later_process_is_mapped_against_the_stored_visit_1(tmp_path):
    box = on_floor("Box_1", "Box", -3.0, -3.0, colour=(30, 30, 200))
    second = tour([SCENE[1], box], look_around(0.0, 0.0), first_step=100)
    encoder = OneHotEncoder(["Vase", "Chair", "Box"])
    config = with_segmenter(CONFIG, "simulator")
    store = MapStore(tmp_path)
    monday = VisitMapper(config, encoder, store=store)
    map1 = feed(monday, 1, FRAMES, 1)
    first = store.load(monday.stored_id)
    assert first.visit == 1 and first.follows is None and first.name == "home" and first.fused == len(FRAMES)
    assert first.skipped == 3 and first.camera == FRAMES[0].intrinsics and first.frame_id == "map"
    assert first.stamps == tuple(range(1, 1 + len(FRAMES)))
    assert first.identity["encoder"] == encoder.description and first.identity["segmenter"] == "simulator"
    assert [i.uid for i in first.map] == [i.uid for i in map1] and first.views
    del monday  # the process ends
    tuesday = VisitMapper(config, encoder, store=store)
    map2 = feed(tuesday, 2, second, 100)
    assert tuesday.prior_id == first.map_id and store.load(tuesday.stored_id).follows == first.map_id
    reference = build_visits(FRAMES, second, config, encoder)[1]
    assert map2.prior == reference.prior and map2.prior.gone  # the vase, seen gone across the restart
    assert store.pair()[1].map_id == tuesday.stored_id


def test_a_visit_2_is_refused_against_a_stored_visit_1_of_another_frame_or_encoder(tmp_path):
    config = with_segmenter(CONFIG, "simulator")
    store = MapStore(tmp_path)
    feed(VisitMapper(config, OneHotEncoder(["Vase", "Chair"]), store=store), 1, FRAMES, 1)
    with pytest.raises(VisitError, match="is in frame 'map', this node maps in 'odom'"):
        VisitMapper(config, OneHotEncoder(["Vase", "Chair"]), store=store, frame_id="odom").start(2)
    other = OneHotEncoder(["Vase", "Chair"])
    other.description = "onehot (another model)"
    with pytest.raises(VisitError, match="was built by encoder 'onehot \\(test double\\)'"):
        VisitMapper(config, other, store=store).start(2)
    # Another place's visit 1 is not this one's: the visit 2 has no prior.
    office = dataclasses.replace(config, mapping=dataclasses.replace(config.mapping, store_name="office"))
    elsewhere = VisitMapper(office, OneHotEncoder(["Vase", "Chair"]), store=store)
    elsewhere.start(2)
    assert elsewhere.prior is None


def test_a_map_that_cannot_be_stored_is_still_returned_with_the_reason(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    mapper = VisitMapper(with_segmenter(CONFIG, "simulator"), OneHotEncoder(["Vase", "Chair"]), store=MapStore(blocked))
    instance_map = feed(mapper, 1, FRAMES, 1)
    assert len(instance_map) == 2 and mapper.stored_id is None
    assert str(blocked) in mapper.store_problem
