"""The true category of a map instance: the majority of its points (ovman_eval.benchmark.truth_shares)."""

from __future__ import annotations

import numpy as np
import pytest

from ovman_core.boxes import Box3
from ovman_core.config import ConfigError
from ovman_core.world_state import ObjectState
from ovman_eval.benchmark.truth_shares import true_shares
from ovman_mapping.instances import Instance, InstanceMap, Sighting
from ovman_query.arms import BACKGROUND, true_category


def box_object(instance_id: str, category: str, lo, hi) -> ObjectState:
    box = Box3(tuple(lo), tuple(hi))
    return ObjectState(instance_id, category, box.center, box)


TABLE = box_object("Table_1", "DiningTable", (0.0, 0.0, 0.0), (1.0, 0.8, 1.0))
VASE = box_object("Vase_1", "Vase", (0.4, 0.8, 0.4), (0.6, 1.1, 0.6))
"""A vase standing on a table: its box touches the table's top face."""


def with_points(uid: str, points) -> InstanceMap:
    """A one-instance map whose instance (labelled Chair by its segmenter) has ``points``."""
    centre = (0.5, 0.5, 0.5)
    one = Instance(
        uid=uid,
        position=centre,
        box=Box3.from_center_size(centre, (0.2, 0.2, 0.2)),
        points=np.asarray(points, dtype=float).reshape(-1, 3),
        feature=np.ones(1),
        colour=np.ones(1),
        labels={"Chair": 1.0},
        sightings=(Sighting(0, 0, centre, 100),),
    )
    return InstanceMap(visit=1, instances=(one,), encoder="test")


def test_each_point_counts_for_the_smallest_box_that_holds_it_and_the_rest_is_background():
    vase_points = [(0.5, 0.9 + 0.01 * k, 0.5) for k in range(6)]
    table_points = [(0.2, 0.5, 0.2), (0.8, 0.5, 0.8)]
    outside = [(3.0, 0.5, 3.0), (0.5, 2.0, 0.5)]
    shares = true_shares(with_points("a", vase_points + table_points + outside), [TABLE, VASE], 0.0)
    assert shares["a"] == pytest.approx({"Vase": 0.6, "DiningTable": 0.2, BACKGROUND: 0.2})
    assert true_category(shares["a"]) == "Vase"
    # The vase's bottom face lies inside both boxes (touching faces): the smaller one takes it.
    assert true_shares(with_points("b", [(0.5, 0.8, 0.5)]), [TABLE, VASE], 0.0)["b"] == {"Vase": 1.0}


def test_the_margin_takes_points_just_outside_a_box_and_an_empty_instance_has_no_category():
    near = [(1.03, 0.5, 0.5)] * 3
    assert true_shares(with_points("a", near), [TABLE], 0.0)["a"] == {BACKGROUND: 1.0}
    assert true_shares(with_points("a", near), [TABLE], 0.05)["a"] == {"DiningTable": 1.0}
    assert true_shares(with_points("e", np.zeros((0, 3))), [TABLE], 0.05)["e"] == {}
    assert true_shares(with_points("a", near), [], 0.05)["a"] == {BACKGROUND: 1.0}
    for bad in (-0.01, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="truth_margin"):
            true_shares(with_points("a", near), [TABLE], bad)


def test_points_are_judged_at_the_precision_the_map_message_carries():
    # 1.0 + 1e-9 rounds to 1.0 in float32: inside the table's box on both sides of the wire.
    shares = true_shares(with_points("a", [(1.0 + 1e-9, 0.5, 0.5)]), [TABLE], 0.0)
    assert shares["a"] == {"DiningTable": 1.0}
