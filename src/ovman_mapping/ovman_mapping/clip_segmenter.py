"""The ``clip`` segmenter: class-agnostic proposals from pixels, labelled by open_clip crop features.

For workstations with local CLIP weights (``mapping_node.encoder.clip_weights``), and the default of
the agent's arms on AI2-THOR, where the learned network's training assets do not apply. Proposals are
the learned segmenter's class-agnostic segments (RGB and depth only); each one's padded crop through
open_clip's image tower is its ``embedding``, and CLIP's zero-shot softmax over the vocabulary's
prompts gives its labels (shares under 1e-3 dropped). With random weights (tests only) the labels
are meaningless but the path is the real one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ovman_core.config import EncoderConfig, SegmenterConfig
from ovman_mapping.encoders import ClipEncoder, padded_crop
from ovman_mapping.learned_segmenter import LearnedSegmenter
from ovman_mapping.segmenter import Segment, Segmentation

if TYPE_CHECKING:
    from ovman_core.observation import Observation

MIN_SHARE = 1e-3
"""Label shares below this are dropped (as the learned segmenter does)."""


class ClipSegmenter:
    """Learned class-agnostic proposals with open_clip labels and embeddings (see the module docstring)."""

    kind = "clip"
    reads_simulator_segments = False
    exact_labels = False

    def __init__(
        self, config: SegmenterConfig, encoder: EncoderConfig, vocabulary: Sequence[str] | None = None
    ) -> None:
        self.proposals = LearnedSegmenter(config, vocabulary)
        self.vocabulary = self.proposals.vocabulary
        self.encoder = ClipEncoder(encoder)
        self.padding = encoder.crop_padding
        self._text: np.ndarray | None = None

    @property
    def description(self) -> str:
        return f"clip segmenter: proposals of {self.proposals.description}; labels by {self.encoder.description}"

    def warm_up(self) -> None:
        self.proposals.warm_up()
        self.encoder.warm_up()

    def _prompts(self) -> np.ndarray:
        """(K, D) unit text vectors of the vocabulary (computed once)."""
        if self._text is None:
            self._text = self.encoder.embed_labels(list(self.vocabulary))
        return self._text

    def segment(self, observation: Observation) -> Segmentation:
        return self.segment_batch([observation])[0]

    def segment_batch(self, observations: Sequence[Observation]) -> list[Segmentation]:
        """The network's proposals of all the frames in one pass, each labelled by its crops."""
        proposals = self.proposals.segment_batch(observations)
        return [self._labelled(o, p) for o, p in zip(observations, proposals, strict=True)]

    def _labelled(self, observation: Observation, proposals: Segmentation) -> Segmentation:
        """``proposals`` of ``observation`` with open_clip labels and embeddings."""
        if not proposals.segments:
            return proposals
        rgb = np.asarray(observation.rgb)
        crops = []
        for k in range(1, len(proposals.segments) + 1):
            rows, cols = np.nonzero(proposals.ids == k)
            crops.append(padded_crop(rgb, (rows.min(), cols.min(), rows.max() + 1, cols.max() + 1), self.padding))
        features = self.encoder.embed_images(crops)
        text = self._prompts()
        scale = float(self.encoder.logit_scale)
        logits = scale * (features @ text.T)
        logits -= logits.max(axis=1, keepdims=True)
        shares = np.exp(logits)
        shares /= shares.sum(axis=1, keepdims=True)
        segments = []
        for row, feature in zip(shares, features, strict=True):
            kept = np.nonzero(row >= MIN_SHARE)[0]
            total = float(row[kept].sum())
            labels = {self.vocabulary[i]: float(row[i] / total) for i in kept}
            segments.append(Segment(labels, float(row.max()), np.asarray(feature, dtype=float)))
        return Segmentation(proposals.ids, tuple(segments), proposals.cell, proposals.lattice)
