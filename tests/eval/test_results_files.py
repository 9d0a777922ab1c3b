"""Result and sketch lines carry a checksum; readers return the intact lines and name the damaged ones."""

from __future__ import annotations

import hashlib
import json

import pytest

from ovman_eval.runs.results import (
    CHECKSUM,
    FORMAT_VERSION,
    RESULTS,
    SKETCHES,
    DamagedLine,
    ResultsError,
    complete_episodes,
    read_checked_lines,
    read_results,
    read_sketches,
    record_from_dict,
    to_json_line,
)

from .benchmark_records import record, sketch

MISMATCH = "checksum mismatch: the line was changed after it was written"


def records(n: int = 4) -> list:
    return [record(f"e{i}", "two_visit", i % 2 == 0, i % 2 == 0) for i in range(n)]


def write_results(directory, lines: list[str], end: str = "\n"):
    path = directory / RESULTS
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


def test_every_line_ends_with_the_sha256_of_the_rest_of_the_line():
    line = to_json_line(records(1)[0])
    body, _, tail = line.rpartition(f',"{CHECKSUM}":"')
    assert tail.endswith('"}') and len(tail) == 64 + 2
    assert hashlib.sha256((body + "}").encode()).hexdigest() == tail[:64]
    document = json.loads(line)
    assert document["format_version"] == FORMAT_VERSION == 2
    del document[CHECKSUM]
    assert body + "}" == json.dumps(document, sort_keys=True, separators=(",", ":"))  # the canonical rest
    assert record_from_dict(json.loads(line)) == records(1)[0]


def test_a_line_edited_to_other_valid_json_is_skipped_and_named_by_file_and_line(tmp_path):
    lines = [to_json_line(r) for r in records()]
    edited = lines[1].replace('"success":false', '"success":true')
    assert edited != lines[1] and json.loads(edited)["static"]["success"] is True
    path = write_results(tmp_path, [lines[0], edited, *lines[2:]])
    read = read_results(tmp_path)
    assert [r.episode_id for r in read] == ["e0", "e2", "e3"]
    assert read.damaged == (DamagedLine(path, 2, MISMATCH),)
    assert str(read.damaged[0]) == f"{path} line 2: {MISMATCH}"


def test_blank_garbage_unchecked_and_truncated_lines_are_damaged_with_their_reason(tmp_path):
    lines = [to_json_line(r) for r in records()]
    unchecked = json.dumps({k: v for k, v in json.loads(lines[2]).items() if k != CHECKSUM})
    path = tmp_path / RESULTS
    path.write_bytes(
        "\n".join([lines[0], "", "{garbage", unchecked, lines[1]]).encode()
        + b"\n\xff\xfe\x00\n"
        + lines[3][:-9].encode()
    )
    read = read_results(tmp_path)
    assert [r.episode_id for r in read] == ["e0", "e1"]
    reasons = {d.line: d.reason for d in read.damaged}
    assert sorted(reasons) == [2, 3, 4, 6, 7]
    assert reasons[2] == "blank line"
    assert reasons[3].startswith("not valid JSON")
    assert reasons[4] == "no sha256 checksum (edited, or not written by `ovman benchmark`)"
    assert reasons[6].startswith("not valid JSON")
    assert reasons[7] == "truncated: the last line has no newline"


def test_a_torn_last_line_of_a_partial_file_is_dropped_without_a_report(tmp_path):
    lines = [to_json_line(r) for r in records()]
    path = write_results(tmp_path, [*lines[:3], lines[3][:40]], end="")
    items, damaged = read_checked_lines(path, record_from_dict, partial=True)
    assert [r.episode_id for r in items] == ["e0", "e1", "e2"] and damaged == []
    items, damaged = read_checked_lines(path, record_from_dict)  # a final file: the same tail is damaged
    assert len(items) == 3 and damaged == [DamagedLine(path, 4, "truncated: the last line has no newline")]


def test_a_run_of_the_format_before_checksums_is_refused_with_a_clear_message(tmp_path):
    old = []
    for r in records(2):
        document = json.loads(to_json_line(r))
        del document[CHECKSUM]
        old.append(json.dumps({**document, "format_version": 1}, sort_keys=True, separators=(",", ":")))
    path = write_results(tmp_path, old)
    with pytest.raises(ResultsError) as raised:
        read_results(tmp_path)
    assert str(raised.value) == (
        f"{path}: no intact result line (2 damaged; line 1: result format 1 without a checksum (written by an "
        "older OVMAN); this reader understands format 2: run the benchmark again into a new run directory)"
    )


def test_a_line_with_a_valid_checksum_but_a_bad_field_is_damaged(tmp_path):
    line = to_json_line(records(1)[0])
    document = json.loads(line)
    del document[CHECKSUM], document["arm"]
    body = json.dumps(document, sort_keys=True, separators=(",", ":"))
    forged = f'{body[:-1]},"{CHECKSUM}":"{hashlib.sha256(body.encode()).hexdigest()}"}}'
    path = write_results(tmp_path, [line, forged])
    read = read_results(tmp_path)
    assert len(read) == 1
    (damaged,) = read.damaged
    assert (damaged.path, damaged.line) == (path, 2)
    assert damaged.reason.startswith("result line of episode 'e0': bad or missing field")


def test_sketches_are_read_by_group_with_their_damaged_lines(tmp_path):
    lines = [to_json_line(sketch(f"g{i}")) for i in range(3)]
    edited = lines[1].replace('"scene":"embedded-0"', '"scene":"embedded-9"')
    (tmp_path / SKETCHES).write_text("\n".join([lines[0], edited, lines[2]]) + "\n")
    read = read_sketches(tmp_path)
    assert sorted(read) == ["g0", "g2"]
    assert read.damaged == (DamagedLine(tmp_path / SKETCHES, 2, MISMATCH),)
    assert read_sketches(tmp_path / "nowhere") == {} and read_sketches(tmp_path / "nowhere").damaged == ()


def test_episodes_that_lost_a_record_are_left_out_whole_so_the_arms_stay_paired():
    every = [record(f"e{i}", arm, True, True) for i in range(3) for arm in ("two_visit", "given_answer")]
    kept, left_out = complete_episodes([r for r in every if (r.episode_id, r.arm) != ("e1", "given_answer")])
    assert [(r.episode_id, r.arm) for r in kept] == [
        (e, a) for e in ("e0", "e2") for a in ("two_visit", "given_answer")
    ]
    assert left_out == ["e1"]
    assert complete_episodes(every) == (every, [])
