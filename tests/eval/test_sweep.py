"""The admissibility sweep: each setting re-derives admissibility from the recorded ground truth
and the stored drift and oracle paths; the static memory margin over the admitted episodes, its
range and its sign; the grid of the config; `ovman sweep` on a generated dataset and run."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ovman_core.boxes import Box3, Vec3
from ovman_core.config import SweepParams, load_config
from ovman_core.relations import Relation
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_eval.analysis.report import write_report
from ovman_eval.analysis.sweep import (
    ANSWER_CHANGED,
    ANTI_SHORTCUT,
    DRIFT,
    FILTERS,
    LIMITATION,
    NO_UNIQUE_ANSWER,
    SWEEP_FILE,
    EpisodeTruth,
    SweepError,
    SweepSetting,
    drop_reason,
    generation_setting,
    read_sweep,
    read_truths,
    settings_grid,
    sweep,
    sweep_table,
    write_sweep,
)
from ovman_eval.benchmark.request import BenchmarkRequest
from ovman_eval.benchmark.runner import run_benchmark
from ovman_eval.cli.main import main
from ovman_eval.generation.dataset import read_episodes
from ovman_eval.runs.results import read_results
from ovman_eval.task.episodes import (
    FORMAT_VERSION,
    AnswerRecord,
    Certification,
    ChangeRecord,
    DriftCheck,
    EpisodeRecord,
    InstanceIds,
    OracleRun,
    QueryRecord,
    Recordings,
    SceneSpec,
    SeedRecord,
)
from ovman_query.arms import Arm

from .benchmark_records import record as result_record
from .generation_setup import generate, request, small_config

TASK = load_config().task
BASE = generation_setting(TASK)
SIZE: Vec3 = (0.2, 0.3, 0.2)


def obj(instance_id: str, x: float, z: float, category: str = "Vase") -> ObjectState:
    centre = (x, 0.5, z)
    return ObjectState(instance_id, category, centre, Box3.from_center_size(centre, SIZE))


def episode(
    episode_id: str,
    relation: Relation,
    w1: list[ObjectState],
    w2: list[ObjectState],
    answer: str = "Vase_1",
    *,
    drift: float = 0.0,
    moving: str | None = None,
    target_path: tuple[tuple[float, float], ...] = (),
) -> tuple[EpisodeRecord, EpisodeTruth]:
    """A record and its ground truth; only what the sweep reads is meaningful."""
    s1, s2 = WorldState.of(w1), WorldState.of(w2)
    state = s1 if relation.answer_visit == 1 else s2
    target = state[answer]
    changes = () if moving is None else (ChangeRecord("moving", moving, "Vase", None, None, SIZE, 7),)
    run = OracleRun("feasibility", None, True, "NONE", 10, 2.5, 2.5, (0.0, 0.0), 0.5, target_path)
    record = EpisodeRecord(
        format_version=FORMAT_VERSION,
        episode_id=episode_id,
        split="single",
        group_id=episode_id,
        scene=SceneSpec("embedded", "embedded-0", "baseline", 0),
        start_pose=AgentPose(0.0, 0.0),
        changes=changes,
        query=QueryRecord("Vase", relation, "vase", "where is the {}", "where is the vase", "train"),
        answer=AnswerRecord(answer, target.floor, target.box.footprint, relation.vacated),
        instances=InstanceIds(tuple(o.instance_id for o in w1), tuple(o.instance_id for o in w2)),
        seeds=SeedRecord(0, None),
        certification=Certification(1.0, (run,)),
        recordings=Recordings(f"recordings/{episode_id}/visit1", f"recordings/{episode_id}/visit2", 1, 1),
        drift=DriftCheck(TASK.drift_tolerance, drift, 0.0, 0.0, 0.0),
    )
    carried = () if moving is None else (s2[moving],)
    return record, EpisodeTruth(s1, s2, carried)


def moved(episode_id: str, d: float, *, distractor_gap: float = 6.0, **kwargs) -> tuple[EpisodeRecord, EpisodeTruth]:
    """Vase_1 moved by ``d`` m along x; Vase_2 ``distractor_gap`` m (footprint to footprint) beyond it."""
    far = obj("Vase_2", d + 0.2 + distractor_gap, 0.0)
    return episode(episode_id, Relation.MOVED, [obj("Vase_1", 0.0, 0.0), far], [obj("Vase_1", d, 0.0), far], **kwargs)


def results(outcomes: dict[str, tuple[bool, float]]) -> list:
    """two_visit static success and single_visit probability per episode."""
    out = []
    for eid, (success, probability) in outcomes.items():
        out.append(result_record(eid, "two_visit", success))
        out.append(result_record(eid, "single_visit", False, probability=probability))
    return out


def run_sweep(pairs, outcomes, settings):
    records = [r for r, _ in pairs]
    truths = {r.episode_id: t for r, t in pairs}
    return sweep(records, truths, results(outcomes), settings, TASK)


def setting(**changes) -> SweepSetting:
    return dataclasses.replace(BASE, **changes)


# ---- re-deriving each filter ---------------------------------------------------------------------


def test_every_episode_the_generator_emitted_passes_its_own_setting():
    pairs = [moved("a", 2.2), moved("b", 1.6, distractor_gap=2.2, drift=0.04)]
    assert [drop_reason(r, t, BASE, TASK) for r, t in pairs] == [None, None]


def test_a_larger_min_displacement_drops_a_move_shorter_than_it():
    record, truth = moved("a", 1.7)
    assert drop_reason(record, truth, setting(min_displacement=2.0), TASK) == NO_UNIQUE_ANSWER
    assert drop_reason(record, truth, setting(min_displacement=1.6), TASK) is None


def test_a_smaller_min_displacement_drops_an_episode_where_a_second_instance_then_counts_as_moved():
    w1 = [obj("Vase_1", 0.0, 0.0), obj("Vase_2", 0.0, 8.0)]
    w2 = [obj("Vase_1", 2.0, 0.0), obj("Vase_2", 1.2, 8.0)]  # Vase_2: 1.2 m, ambiguous under Δmin 1.5
    record, truth = episode("a", Relation.MOVED, w1, w2)
    assert drop_reason(record, truth, BASE, TASK) is None
    assert drop_reason(record, truth, setting(min_displacement=1.0), TASK) == NO_UNIQUE_ANSWER


def test_a_smaller_stable_tolerance_drops_a_stable_instance_that_shifted_more():
    w1 = [obj("Vase_1", 0.0, 0.0), obj("Vase_2", 0.0, 5.0)]
    w2 = [obj("Vase_1", 0.08, 0.0), obj("Vase_2", 3.0, 8.0)]
    record, truth = episode("a", Relation.STABLE, w1, w2)
    assert drop_reason(record, truth, BASE, TASK) is None
    assert drop_reason(record, truth, setting(stable_tolerance=0.05), TASK) == NO_UNIQUE_ANSWER


def test_an_answer_on_another_instance_than_the_scored_one_is_dropped():
    record, truth = moved("a", 2.2)
    record = dataclasses.replace(record, answer=dataclasses.replace(record.answer, instance_id="Vase_2"))
    assert drop_reason(record, truth, BASE, TASK) == ANSWER_CHANGED


def test_a_larger_separation_drops_a_distractor_between_the_two_radii_unless_the_filter_is_off():
    record, truth = moved("a", 2.2, distractor_gap=2.2)
    assert drop_reason(record, truth, setting(separation_radius=2.5), TASK) == "distractor_near_answer"
    assert drop_reason(record, truth, setting(separation_radius=2.5, filters=(DRIFT,)), TASK) is None


def test_a_smaller_drift_tolerance_drops_the_recorded_drift_unless_the_filter_is_off():
    record, truth = moved("a", 2.2, drift=0.03)
    assert drop_reason(record, truth, setting(drift_tolerance=0.02), TASK) == DRIFT
    assert drop_reason(record, truth, setting(drift_tolerance=0.02, filters=(ANTI_SHORTCUT,)), TASK) is None


def test_the_oracle_runs_of_a_carried_answer_count_as_answer_regions():
    carried = obj("Vase_1", 0.0, 0.0)
    distractor = obj("Vase_2", 5.0, 0.0)
    pairs = {
        path: episode(
            "m", Relation.MOVING, [carried, distractor], [carried, distractor], moving="Vase_1", target_path=path
        )
        for path in (((0.0, 0.0),), ((0.0, 0.0), (2.6, 0.0)))  # the second passes 2.2 m from Vase_2
    }
    wide = setting(separation_radius=2.5)
    (near_free, truth_free), (near_path, truth_path) = pairs.values()
    assert drop_reason(near_free, truth_free, wide, TASK) is None
    assert drop_reason(near_path, truth_path, wide, TASK) == "distractor_near_answer"
    assert drop_reason(near_path, truth_path, BASE, TASK) is None


# ---- the margin ----------------------------------------------------------------------------------


def test_dropping_the_episodes_the_two_visit_agent_solves_flips_the_sign_of_the_margin():
    pairs = [moved("solved", 1.7), moved("failed", 2.2)]
    outcomes = {"solved": (True, 0.1), "failed": (False, 0.4)}
    result = run_sweep(pairs, outcomes, [BASE, setting(min_displacement=2.0)])
    own, strict = result.rows
    assert (own.admitted, own.margin) == (2, pytest.approx(0.5 - 0.25))
    assert (strict.admitted, strict.margin, strict.dropped) == (1, pytest.approx(-0.4), {NO_UNIQUE_ANSWER: 1})
    assert result.reference is own and result.reference_in_grid
    assert result.reference_sign == 1
    assert result.sign_changed == [strict]
    summary = result.summary()
    assert summary["min"] == pytest.approx(-0.4) and summary["max"] == pytest.approx(0.25)
    assert summary["sign_changes"] and summary["lowest"]["label"] == strict.setting.label
    assert summary["distinct_admitted_sets"] == 2


def test_a_margin_that_keeps_its_sign_reports_no_change_and_its_range():
    pairs = [moved("a", 1.7), moved("b", 2.2), moved("c", 2.2)]
    outcomes = {"a": (False, 0.2), "b": (True, 0.2), "c": (True, 0.6)}
    result = run_sweep(pairs, outcomes, [BASE, setting(min_displacement=2.0)])
    assert [r.margin for r in result.rows] == [pytest.approx(2 / 3 - 1.0 / 3), pytest.approx(1.0 - 0.4)]
    assert not result.sign_changed and not result.summary()["sign_changes"]
    assert result.rows[1].p_value == pytest.approx(0.2 * 0.6)  # P(both single-visit picks succeed)


def test_a_setting_admitting_nothing_is_left_out_of_the_range_and_the_own_setting_is_computed_off_grid():
    pairs = [moved("a", 1.7)]
    result = run_sweep(pairs, {"a": (True, 0.5)}, [setting(min_displacement=2.0), setting(min_displacement=1.6)])
    assert result.rows[0].margin is None and result.empty == [result.rows[0]]
    assert not result.reference_in_grid and result.reference.margin == pytest.approx(0.5)
    assert result.margins == [pytest.approx(0.5)]


def test_an_episode_the_own_setting_drops_is_flagged_as_a_disagreement_with_generation():
    pairs = [moved("a", 2.2), moved("b", 2.2, distractor_gap=1.5)]  # b: a distractor generation would reject
    result = run_sweep(pairs, {"a": (True, 0.5), "b": (False, 0.5)}, [BASE])
    assert result.reference.admitted == 1
    assert any("drops 1 of its episodes (distractor_near_answer 1)" in n for n in sweep_table(result).notes)


def test_a_run_without_the_single_visit_arm_or_an_episode_is_refused():
    pairs = [moved("a", 2.2), moved("b", 2.2)]
    with pytest.raises(SweepError, match="single_visit"):
        only_two = [result_record("a", "two_visit", True), result_record("b", "two_visit", True)]
        sweep([r for r, _ in pairs], {r.episode_id: t for r, t in pairs}, only_two, [BASE], TASK)
    with pytest.raises(SweepError, match="no results for 1 episode"):
        run_sweep(pairs, {"a": (True, 0.5)}, [BASE])


def test_the_table_has_a_row_per_value_and_states_the_sign_and_the_limitation():
    pairs = [moved("solved", 1.7), moved("failed", 2.2)]
    grid = settings_grid(SweepParams([0.05], [0.1], [1.5, 2.0], [2.0], [ANTI_SHORTCUT]))
    result = run_sweep(pairs, {"solved": (True, 0.1), "failed": (False, 0.4)}, grid)
    table = sweep_table(result)
    labels = [(row[0], row[1]) for row in table.rows]
    assert ("Δmin (m)", "2") in labels and ("anti_shortcut filter", "off") in labels
    assert table.rows[0][2] == "4" and table.rows[0][4] == "-0.400 – 0.250"
    assert LIMITATION in table.notes
    assert "differs from the dataset's own (positive) under 2 setting(s)" in table.notes[0]
    assert "### " in table.markdown()


def test_sweep_json_reads_back_into_the_same_result_and_table(tmp_path):
    pairs = [moved("solved", 1.7), moved("failed", 2.2)]
    grid = settings_grid(SweepParams([0.05], [0.1], [1.5, 2.0], [2.0], [ANTI_SHORTCUT]))
    result = run_sweep(pairs, {"solved": (True, 0.1), "failed": (False, 0.4)}, grid)
    assert read_sweep(tmp_path) is None
    write_sweep(tmp_path, result, "some/dataset")
    again = read_sweep(tmp_path)
    assert again == result
    assert sweep_table(again).markdown() == sweep_table(result).markdown()
    (tmp_path / SWEEP_FILE).write_text('{"format_version": 1, "rows": []}')
    with pytest.raises(SweepError, match="bad or missing field"):
        read_sweep(tmp_path)


# ---- the grid ------------------------------------------------------------------------------------


def test_the_default_grid_has_256_settings_including_the_generation_setting():
    config = load_config()
    grid = settings_grid(config.benchmark_node.sweep)
    assert len(grid) == 256 == len(set(grid))
    assert generation_setting(config.task) in grid
    assert {s.filters for s in grid} == {FILTERS, (ANTI_SHORTCUT,), (DRIFT,), ()}


@pytest.mark.parametrize(
    ("params", "key"),
    [
        (SweepParams([0.05], [0.1, 1.5], [1.5], [2.0], []), "stable_tolerance"),
        (SweepParams([], [0.1], [1.5], [2.0], []), "drift_tolerance"),
        (SweepParams([0.05], [0.1], [1.5, 1.5], [2.0], []), "min_displacement"),
        (SweepParams([0.05], [0.1], [1.5], [-2.0], []), "separation_radius"),
        (SweepParams([0.05], [0.1], [1.5], [2.0], ["certification"]), "toggled_filters"),
    ],
)
def test_a_bad_grid_is_refused_naming_the_config_key(params, key):
    with pytest.raises(SweepError, match=key):
        settings_grid(params)


# ---- end to end ----------------------------------------------------------------------------------


@pytest.mark.pool
def test_ovman_sweep_on_a_generated_dataset_reproduces_the_runs_margin_at_the_generation_setting(tmp_path, capsys):
    config = small_config()
    dataset = tmp_path / "ds"
    generate(dataset, request((Relation.MOVED, Relation.STABLE), scenes=("embedded-0",)), config)
    req = BenchmarkRequest(dataset, (Arm.TWO_VISIT, Arm.SINGLE_VISIT), (0,), static_only=True)
    run_dir = run_benchmark(req, config, out_root=tmp_path / "runs", workers=1, cache_dir=tmp_path / "maps").run_dir
    records = read_episodes(dataset)
    truths = read_truths(dataset, records)
    assert all(drop_reason(r, truths[r.episode_id], BASE, config.task) is None for r in records)

    assert read_truths(dataset, records, workers=2) == truths  # two worker processes read the same truth

    assert main(["sweep", str(run_dir), "--dataset", str(dataset), "--quiet", "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    document = json.loads((run_dir / SWEEP_FILE).read_text())
    scored = read_results(run_dir)
    two = [r.static.success for r in scored if r.arm == "two_visit"]
    single = [r.static.success_probability for r in scored if r.arm == "single_visit"]
    summary = document["summary"]
    assert summary["settings"] == 256 and document["generation_setting_in_grid"]
    assert summary["generation_setting_admits"] == len(records) == document["episodes"]
    assert summary["at_generation_setting"] == pytest.approx(sum(two) / len(two) - sum(single) / len(single))
    assert summary["min"] <= summary["at_generation_setting"] <= summary["max"]
    assert document["limitation"] == LIMITATION
    assert "Static memory margin over the admissibility settings" in printed
    assert read_sweep(run_dir).summary() == summary
    markdown = write_report(run_dir, episode_figures=False)[0].read_text()
    assert "### Static memory margin over the admissibility settings" in markdown
    assert main(["sweep", str(tmp_path / "runs")]) == 1  # not a run directory
