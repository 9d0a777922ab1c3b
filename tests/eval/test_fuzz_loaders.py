"""A bounded property-based fuzz of the loaders (issue 22): whatever the input, each loader returns
a valid value or raises its own error type with a message; it never crashes with another exception.

Loaders here: the config (a document with one leaf replaced, and arbitrary file bytes), an episode
line (a valid record with one field replaced, and arbitrary text), a recording's metadata
(arbitrary bytes as its metadata.yaml and .mcap). Map cache entries are fuzzed in
tests/eval/test_map_cache.py, Query requests in tests/query/test_query_requests.py, InstanceMap
messages in tests/ros/test_map_messages.py.
Derandomised: every run tries the same examples.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ovman_core.config import ConfigError, OvmanConfig, config_from_document, load_config, to_document
from ovman_eval.task.episodes import EpisodeFormatError, episode_from_json, episode_to_dict
from ovman_sim.recording import RecordingError, read_visit_info

from .test_sweep import moved

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=8,
)
DOCUMENT = to_document(load_config())
EPISODE = episode_to_dict(moved("fuzz-0000", 2.2)[0])


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))] or [path]
    if isinstance(value, list) and value:
        return [p for k, v in enumerate(value) for p in _leaves(v, (*path, k))]
    return [path]


def _replaced(document: Any, path: tuple, value: Any) -> Any:
    out = copy.deepcopy(document)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


@FUZZ
@given(st.sampled_from(_leaves(DOCUMENT)), JSON_VALUES)
def test_a_config_with_any_value_in_any_key_loads_or_is_a_config_error(path, value):
    try:
        config = config_from_document(_replaced(DOCUMENT, path, value), "fuzz.yaml")
    except ConfigError as err:
        assert "fuzz.yaml" in str(err)
    else:
        assert isinstance(config, OvmanConfig)


@FUZZ
@given(st.binary(max_size=400))
def test_a_config_file_of_any_bytes_is_a_config_error(data):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ovman.yaml"
        path.write_bytes(data)
        with pytest.raises(ConfigError, match=r"ovman\.yaml"):
            load_config(path)


@FUZZ
@given(st.sampled_from(_leaves(EPISODE)), JSON_VALUES)
def test_an_episode_line_with_any_value_in_any_field_parses_or_is_an_episode_format_error(path, value):
    line = json.dumps(_replaced(EPISODE, path, value))
    try:
        record = episode_from_json(line)
    except EpisodeFormatError as err:
        assert err.problems or str(err)
    else:
        values = (record.start_pose.x, record.start_pose.z, *record.answer.point)
        assert all(math.isfinite(v) for v in values)


@FUZZ
@given(st.text(max_size=300))
def test_any_text_as_an_episode_line_parses_or_is_an_episode_format_error(text):
    with contextlib.suppress(EpisodeFormatError):
        episode_from_json(text)


@FUZZ
@given(st.binary(max_size=600))
def test_a_recording_whose_metadata_is_any_bytes_is_a_recording_error(data):
    with tempfile.TemporaryDirectory() as directory:
        visit = Path(directory) / "visit1"
        visit.mkdir()
        (visit / "metadata.yaml").write_bytes(data)
        (visit / "visit1_0.mcap").write_bytes(data)
        with pytest.raises(RecordingError):
            read_visit_info(visit)
