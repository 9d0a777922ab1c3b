"""The learned segmenter's homes, training and evaluation (ovman_eval.perception.training) and its commands."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import yaml

from ovman_core.config import ConfigError, load_config, to_document
from ovman_eval.cli.main import main
from ovman_eval.generation.plan import GenerationRequest
from ovman_eval.perception import training as perception
from ovman_mapping.learned_segmenter import MANIFEST_FILE, WEIGHTS_FILE, LearnedSegmenter
from ovman_mapping.segmenter import SimulatorSegmenter
from ovman_sim.homes import MAX_SCENE_SEED, parse_scene, perception_scene, scene_name

CONFIG = load_config()


def tiny_config():
    """One home a split, every 8th tour frame, a 4-channel network, one epoch on one thread."""
    params = dataclasses.replace(
        CONFIG.benchmark_node.perception,
        train_homes=1,
        test_homes=1,
        frame_stride=8,
        epochs=1,
        batch_size=4,
        widths=[4, 4, 4],
        threads=1,
    )
    return dataclasses.replace(CONFIG, benchmark_node=dataclasses.replace(CONFIG.benchmark_node, perception=params))


def test_perception_homes_are_a_seed_namespace_no_episode_can_use():
    train, test = parse_scene(perception_scene("train", 0)), parse_scene(perception_scene("test", 2**32 - 1))
    assert min(train, test) > MAX_SCENE_SEED  # every embedded-<seed> seed is at most MAX_SCENE_SEED
    assert parse_scene(f"embedded-{MAX_SCENE_SEED}") == MAX_SCENE_SEED
    with pytest.raises(ValueError, match="unknown embedded scene"):
        parse_scene(f"embedded-{MAX_SCENE_SEED + 1}")  # which would reach into the perception homes
    assert scene_name(train) == "perception-train-0" and scene_name(test) == f"perception-test-{2**32 - 1}"
    with pytest.raises(ValueError, match="is a perception home"):
        GenerationRequest(world="embedded", scenes=("embedded-1", "perception-test-0"), per_relation=1, seed=0)


def test_the_simulator_segmenter_scores_perfectly_against_its_own_ground_truth():
    frames = list(perception.perception_frames(tiny_config(), "test", 1))
    assert frames and all(f.scene == "perception-test-0" for f in frames)
    figures = perception.evaluate(SimulatorSegmenter(), frames, CONFIG)
    assert figures["segments"] > 10
    assert (figures["precision"], figures["recall"], figures["accuracy"]) == (1.0, 1.0, 1.0)
    assert figures["confusions"] == []


def test_training_is_deterministic_reports_each_stage_and_writes_a_model_the_mapper_loads(tmp_path):
    config = tiny_config()
    steps: list[perception.Step] = []
    first = perception.train_perception(config, tmp_path / "a")
    second = perception.train_perception(config, tmp_path / "b", progress=steps.append)
    assert first["weights_sha256"] == second["weights_sha256"]  # watching does not change the weights
    assert [(s.stage, s.done, s.total, s.unit) for s in steps] == [
        ("render train", 1, 1, "home"),
        ("train", 0, 1, "epoch"),
        ("train", 1, 1, "epoch"),
        *(("evaluate", k, 3, "home") for k in (1, 2, 3)),
    ]
    assert steps[2].message.startswith("epoch 1/1: loss ")
    assert (tmp_path / "a" / WEIGHTS_FILE).read_bytes() == (tmp_path / "b" / WEIGHTS_FILE).read_bytes()
    manifest = json.loads((tmp_path / "a" / MANIFEST_FILE).read_text())
    assert manifest["vocabulary"] == list(perception.VOCABULARY)
    assert manifest["training"]["train_scenes"] == ["perception-train-0"]
    assert manifest["training"]["train_scene_conditions"] == [config.benchmark_node.perception.train_conditions[0]]
    assert manifest["context_dilation"] == config.benchmark_node.perception.context_dilation
    assert manifest["held_out"]["test_scenes"] == ["perception-test-0"]
    assert {"precision", "recall", "accuracy"} <= set(manifest["held_out"])
    assert manifest["code_revision"]
    segmenter = LearnedSegmenter(
        dataclasses.replace(config.mapping_node.segmenter, kind="learned", model=str(tmp_path / "a")),
        perception.VOCABULARY,
    )
    frame = next(perception.perception_frames(config, "test", 1))
    out = segmenter.segment(frame.observation)
    assert out.ids.shape == frame.segments.shape


@pytest.mark.pool
def test_worker_processes_render_and_evaluate_the_homes_to_the_same_model_and_figures(tmp_path):
    config = tiny_config()
    params = dataclasses.replace(config.benchmark_node.perception, train_homes=2, test_homes=2)
    config = dataclasses.replace(config, benchmark_node=dataclasses.replace(config.benchmark_node, perception=params))
    here = perception.train_perception(config, tmp_path / "here")
    pooled = perception.train_perception(config, tmp_path / "pooled", workers=2)
    assert (tmp_path / "here" / WEIGHTS_FILE).read_bytes() == (tmp_path / "pooled" / WEIGHTS_FILE).read_bytes()
    assert here["training"]["frames"] == pooled["training"]["frames"]
    assert here["held_out"] == pooled["held_out"]
    assert here["held_out"]["test_scenes"] == ["perception-test-0", "perception-test-1"]
    # the held-out figures are the sum over the homes: each home's own evaluation adds up to them
    segmenter = LearnedSegmenter(
        dataclasses.replace(config.mapping_node.segmenter, kind="learned", model=str(tmp_path / "here")),
        perception.VOCABULARY,
    )
    frames = list(perception.perception_frames(config, "test", 2))
    assert perception.evaluate(segmenter, frames, config) == {
        k: v for k, v in here["held_out"].items() if k not in ("test_scenes", "conditions")
    }


def test_tallies_of_disjoint_frames_add_up():
    a = perception.Tally(2, 5, 4, 3, 2, {"Chair": (1, 2), "Vase": (1, 1)}, {("Chair", "Box"): 1})
    b = perception.Tally(1, 2, 2, 1, 0, {"Chair": (0, 1)}, {("Chair", "Box"): 1, ("Vase", "Bowl"): 2})
    total = a + b
    assert (total.frames, total.segments, total.predicted, total.matched, total.correct) == (3, 7, 6, 4, 2)
    assert total.per_category == {"Chair": (1, 3), "Vase": (1, 1)}
    assert total.confusions == {("Chair", "Box"): 2, ("Vase", "Bowl"): 2}
    assert perception.Tally() + a == a


def test_cell_targets_mark_classes_and_the_borders_between_instances():
    segments = np.zeros((8, 8), np.int32)
    segments[:, :4] = 1
    segments[:, 4:6] = 2
    frame = perception.Frame("perception-test-0", None, segments, {1: "Chair", 2: "Chair"})  # type: ignore[arg-type]
    classes, boundary = perception.cell_targets(frame, 2)
    chair = perception.VOCABULARY.index("Chair") + 1
    assert classes.tolist() == [[chair, chair, chair, 0]] * 4
    assert boundary.tolist() == [[False, True, True, False]] * 4  # instance 1 | instance 2; not at the background


def test_perception_settings_are_range_checked():
    params = CONFIG.benchmark_node.perception
    for key, value in (("iou_threshold", 0.0), ("train_conditions", []), ("train_conditions", ["baseline", "fog"])):
        with pytest.raises(ConfigError, match=rf"benchmark_node\.perception\.{key}"):
            perception.check_perception(dataclasses.replace(params, **{key: value}))


def test_training_homes_cycle_through_the_training_conditions():
    config = tiny_config()
    mixed = list(perception.perception_frames(config, "train", 2, ["baseline", "low_light"]))
    plain = list(perception.perception_frames(config, "train", 2))
    brightness = {
        (name, scene): np.mean([f.observation.rgb.mean() for f in frames if f.scene == scene])
        for name, frames in (("mixed", mixed), ("plain", plain))
        for scene in ("perception-train-0", "perception-train-1")
    }
    assert brightness["mixed", "perception-train-0"] == brightness["plain", "perception-train-0"]  # baseline
    assert brightness["mixed", "perception-train-1"] < 0.6 * brightness["plain", "perception-train-1"]  # low light
    assert [(f.scene, f.observation.step) for f in mixed] == [(f.scene, f.observation.step) for f in plain]


def test_flipping_is_seeded_and_changes_what_is_learned():
    frames = list(perception.perception_frames(tiny_config(), "train", 1))[:8]
    params = dataclasses.replace(tiny_config().benchmark_node.perception, threads=1, epochs=2)
    data = perception.training_set(frames, params)

    def weights(flip: bool) -> list[bytes]:
        model = perception.train_network(data, dataclasses.replace(params, flip=flip))
        return [v.numpy().tobytes() for v in model.state_dict().values()]

    assert params.flip and weights(True) == weights(True)
    assert weights(True) != weights(False)


def test_the_commands_train_and_report_json(tmp_path, capsys):
    document = to_document(tiny_config())
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(document))
    assert main(["train-perception", "--out", str(tmp_path / "model"), "--config", str(path)]) == 0
    assert "held out" in capsys.readouterr().out
    code = main(["eval-perception", "--json", "--model", str(tmp_path / "model"), "--config", str(path)])
    assert code == 0
    figures = json.loads(capsys.readouterr().out)
    assert {"precision", "recall", "accuracy", "per_category", "confusions"} <= set(figures)
    assert main(["eval-perception", "--segmenter", "simulator", "--config", str(path), "--figures", str(tmp_path)]) == 0
    assert "precision 1.000" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.glob("perception-*.png"))
    assert main(["eval-perception", "--model", str(tmp_path / "nothing"), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no segmenter model there" in err and "mapping_node.segmenter.model" in err


def test_training_leaves_torch_settings_as_it_found_them():
    import torch

    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    frames = list(perception.perception_frames(tiny_config(), "train", 1))[:4]
    params = tiny_config().benchmark_node.perception
    perception.train_network(perception.training_set(frames, params), dataclasses.replace(params, threads=1))
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before
