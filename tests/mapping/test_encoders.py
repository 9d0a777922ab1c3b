"""The feature encoders: MiniLM label features (offline) and open_clip with random weights.

Models load once per module (module-scoped fixtures); nothing is downloaded (HF_HUB_OFFLINE=1,
random CLIP weights).
"""

import dataclasses
import os

import numpy as np
import pytest

from ovman_core.config import load_config
from ovman_mapping.encoders import (
    ClipEncoder,
    EncoderError,
    InstanceEvidence,
    LabelEncoder,
    label_text,
    make_encoder,
    padded_crop,
)
from ovman_mapping.fusion import build_map
from ovman_mapping.segmenter import with_segmenter

from .scenes import look_around, on_floor, tour

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The box scenes test fusion and decisions on exact segments: the simulator's (the segmenter has its own tests).
CONFIG = with_segmenter(load_config().mapping_node, "simulator")


@pytest.fixture(scope="module")
def label_encoder():
    return LabelEncoder(CONFIG.encoder)


@pytest.fixture(scope="module")
def clip_encoder():
    config = dataclasses.replace(CONFIG.encoder, kind="clip", clip_weights="", views_per_instance=2)
    return ClipEncoder(config)


def unit_rows(matrix):
    return np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


def test_label_text_splits_thor_types_into_words():
    assert label_text("CoffeeTable") == "coffee table"
    assert label_text("TVStand") == "tv stand"
    assert label_text("Basketball") == "basketball"


def test_label_encoder_puts_synonyms_next_to_their_category(label_encoder):
    labels = ["Sofa", "Chair", "Fridge", "GarbageCan", "Vase"]
    label_vectors = label_encoder.embed_labels(labels)
    queries = label_encoder.embed_text(["couch", "refrigerator", "trash can"])
    assert unit_rows(label_vectors) and unit_rows(queries)
    best = [labels[k] for k in np.argmax(queries @ label_vectors.T, axis=1)]
    assert best == ["Sofa", "Fridge", "GarbageCan"]


def test_label_encoder_instance_feature_is_its_label_distribution(label_encoder):
    evidence = [InstanceEvidence({"Sofa": 1.0}, []), InstanceEvidence({"Sofa": 0.5, "ArmChair": 0.5}, [])]
    features = label_encoder.embed_instances(evidence)
    sofa = label_encoder.embed_labels(["Sofa"])[0]
    assert unit_rows(features)
    assert features[0] @ sofa == pytest.approx(1.0, abs=1e-6)
    assert 0.5 < features[1] @ sofa < 1.0


def test_text_embeddings_are_cached_and_stable(label_encoder):
    first = label_encoder.embed_text(["the vase", "a mug"])
    again = label_encoder.embed_text(["a mug", "the vase"])
    assert np.array_equal(first[::-1], again)


def test_label_encoder_description_names_the_model(label_encoder):
    assert "MiniLM" in label_encoder.description and "label" in label_encoder.description


def test_clip_encoder_embeds_crops_and_text_in_one_space(clip_encoder):
    rng = np.random.default_rng(0)
    red = np.zeros((40, 30, 3), dtype=np.uint8)
    red[..., 0] = 220
    noise = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    images = clip_encoder.embed_images([red, noise, red])
    text = clip_encoder.embed_text(["vase", "sofa"])
    assert images.shape[1] == text.shape[1] == 512
    assert unit_rows(images) and unit_rows(text)
    assert np.allclose(images[0], images[2], atol=1e-5)
    evidence = [InstanceEvidence({"Vase": 1.0}, [red, noise, noise]), InstanceEvidence({"Box": 1.0}, [noise])]
    features = clip_encoder.embed_instances(evidence)
    # Two of the three views count (views_per_instance = 2): the mean of red and noise.
    expected = images[0] + images[1]
    assert np.allclose(features[0], expected / np.linalg.norm(expected), atol=1e-5)
    assert "random weights" in clip_encoder.description


def test_clip_encoder_maps_a_rendered_scene_end_to_end(clip_encoder):
    boxes = [
        on_floor("Vase_1", "Vase", 0.0, 2.0, size=(0.3, 0.5, 0.3), colour=(200, 200, 40)),
        on_floor("Chair_1", "Chair", 2.0, 0.0, colour=(200, 40, 40)),
    ]
    config = dataclasses.replace(CONFIG, encoder=clip_encoder.config)
    instance_map = build_map(tour(boxes, look_around(0.0, 0.0)), config, clip_encoder, visit=1)
    assert sorted(i.label for i in instance_map) == ["Chair", "Vase"]
    assert instance_map.features().shape == (2, 512)
    assert instance_map.encoder.startswith("clip:ViT-B-32")


def test_missing_clip_checkpoint_is_a_named_error():
    config = dataclasses.replace(CONFIG.encoder, kind="clip", clip_weights="/nonexistent/clip.bin")
    with pytest.raises(EncoderError, match=r"encoder\.clip_weights"):
        ClipEncoder(config).embed_text(["vase"])


def test_unknown_encoder_kind_and_bad_prompt_are_rejected():
    with pytest.raises(EncoderError, match=r"encoder\.kind"):
        make_encoder(dataclasses.replace(CONFIG.encoder, kind="dino"))
    with pytest.raises(EncoderError, match="clip_prompt"):
        ClipEncoder(dataclasses.replace(CONFIG.encoder, clip_prompt="a photo"))


def test_padded_crop_grows_and_clamps_to_the_image():
    image = np.arange(100 * 80 * 3, dtype=np.uint8).reshape(100, 80, 3)
    assert padded_crop(image, (10, 10, 30, 50), 0.1).shape == (24, 48, 3)
    assert padded_crop(image, (0, 0, 100, 80), 0.5).shape == (100, 80, 3)
