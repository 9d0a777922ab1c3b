"""The on-disk text-embedding store and the encoders' use of it (no model needed where it is warm)."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ovman_core.config import load_config
from ovman_mapping.encoders import ClipEncoder, LabelEncoder
from ovman_mapping.text_store import TextStore, TextStoreError, default_directory, identity, store_directory

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ENCODER = load_config().mapping_node.encoder


def unit(*values):
    vector = np.asarray(values, dtype=float)
    return vector / np.linalg.norm(vector)


def test_store_round_trips_and_keeps_the_first_vector_of_a_phrase(tmp_path):
    store = TextStore(tmp_path, "label", "ab" * 32)
    assert store.read() == {}
    store.add({"vase": unit(1, 0, 0), "chair": unit(0, 1, 0)})
    merged = store.add({"vase": unit(0, 0, 1), "sofa": unit(1, 1, 0)})
    assert sorted(merged) == ["chair", "sofa", "vase"]
    again = TextStore(tmp_path, "label", "ab" * 32).read()
    np.testing.assert_array_equal(again["vase"], unit(1, 0, 0))
    np.testing.assert_array_equal(again["sofa"], unit(1, 1, 0))
    assert store.path.name == "label-" + "ab" * 10 + ".npz"


ADD_SCRIPT = """
import sys
import numpy as np
from ovman_mapping.text_store import TextStore
store = TextStore(sys.argv[1], "label", "cd" * 32)
for k in range(20):
    store.add({f"w{sys.argv[2]}-{k}": np.array([1.0, k, 1.0]) / np.sqrt(2.0 + k * k)})
"""


def test_concurrent_writers_lose_no_phrase(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", ADD_SCRIPT, str(tmp_path), str(w)]) for w in range(3)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    stored = TextStore(tmp_path, "label", "cd" * 32).read()
    assert set(stored) == {f"w{w}-{k}" for w in range(3) for k in range(20)}
    assert not list(tmp_path.glob("*.tmp"))


def test_unreadable_store_names_the_file_and_the_fix(tmp_path):
    store = TextStore(tmp_path, "label", "ef" * 32)
    store.path.write_bytes(b"not an npz file")
    with pytest.raises(TextStoreError, match=f"{store.path}.*delete it"):
        store.read()
    np.savez(store.path, phrases=np.array(["a", "b"]), vectors=np.zeros((3, 4)))
    with pytest.raises(TextStoreError, match=r"expected 'phrases' \(N,\) and 'vectors' \(N, D\)"):
        store.read()


def test_identity_follows_settings_and_file_bytes(tmp_path):
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"\x00" * 10)
    first = identity(["clip", "ViT-B-32"], [weights])
    assert identity(["clip", "ViT-B-32"], [weights]) == first
    assert identity(["clip", "ViT-B-16"], [weights]) != first
    weights.write_bytes(b"\x00" * 9 + b"\x01")
    assert identity(["clip", "ViT-B-32"], [weights]) != first


def test_store_directory_follows_the_config_and_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_directory() == tmp_path / "ovman" / "text-embeddings"
    assert store_directory(ENCODER) == default_directory()
    assert store_directory(dataclasses.replace(ENCODER, text_cache_dir=str(tmp_path / "x"))) == tmp_path / "x"
    assert store_directory(dataclasses.replace(ENCODER, text_cache=False)) is None


def test_clip_keeps_no_store_for_random_weights_and_one_per_checkpoint(tmp_path):
    config = dataclasses.replace(ENCODER, kind="clip", text_cache_dir=str(tmp_path))
    assert ClipEncoder(config).text_store() is None
    checkpoint = tmp_path / "a.pt"
    checkpoint.write_bytes(b"weights a")
    first = ClipEncoder(dataclasses.replace(config, clip_weights=str(checkpoint))).text_store()
    checkpoint.write_bytes(b"weights b")
    second = ClipEncoder(dataclasses.replace(config, clip_weights=str(checkpoint))).text_store()
    assert first is not None and second is not None and first.path != second.path


EMBED_SCRIPT = """
import json, sys
import numpy as np
from ovman_core.config import load_config
from ovman_mapping.encoders import LabelEncoder
import dataclasses
config = load_config().mapping_node.encoder
config = dataclasses.replace(config, text_cache_dir=sys.argv[1], text_cache=sys.argv[2] == "cache")
encoder = LabelEncoder(config, torch_threads=3)
encoder.warm_up()  # as mapping_node and query_node start
loaded_by_warm_up = "sentence_transformers" in sys.modules
vectors = encoder.embed_text(["a vase", "coffee table"])
torch = sys.modules.get("torch")
print(json.dumps({
    "vectors": vectors.tolist(),
    "loaded_by_warm_up": loaded_by_warm_up,
    "model_loaded": "sentence_transformers" in sys.modules,
    "torch_threads": torch.get_num_threads() if torch else None,
}))
"""


def embed_in_fresh_process(directory, cache=True):
    command = [sys.executable, "-c", EMBED_SCRIPT, str(directory), "cache" if cache else "none"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_store_spares_the_model_load_and_gives_the_same_vectors(tmp_path):
    cold = embed_in_fresh_process(tmp_path)
    warm = embed_in_fresh_process(tmp_path)
    # With a store, warming up loads nothing: a cached phrase needs no model, a new one loads it.
    assert not cold["loaded_by_warm_up"] and cold["model_loaded"] and cold["torch_threads"] == 3
    assert not warm["model_loaded"] and warm["torch_threads"] is None  # not even torch was imported
    assert warm["vectors"] == cold["vectors"]


def test_without_a_store_warming_up_loads_the_model(tmp_path):
    uncached = embed_in_fresh_process(tmp_path, cache=False)
    assert uncached["loaded_by_warm_up"] and not list(tmp_path.iterdir())


def test_encoder_without_store_writes_nothing(tmp_path):
    encoder = LabelEncoder(dataclasses.replace(ENCODER, text_cache=False, text_cache_dir=str(tmp_path)))
    vectors = encoder.embed_text(["lamp"])
    assert vectors.shape == (1, 384) and not list(tmp_path.iterdir())
