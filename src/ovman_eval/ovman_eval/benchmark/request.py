"""What a benchmark run is asked to do, and the parts of it every runner shares.

The request (dataset, arms, seeds, stress conditions), its parsers, the unit of work (a recorded
group under one condition) and what a unit produces, the single-visit arm's seed, the dataset's
hash and the configuration a dataset's world needs. The in-process runner
(:mod:`ovman_eval.benchmark.runner`) and the graph's (:mod:`ovman_eval.graph.run`) share them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ovman_core.config import OvmanConfig, SimConfig
from ovman_eval.generation.dataset import EPISODES, DatasetError
from ovman_eval.runs.results import (
    ARM_ORDER,
    BASELINE,
    CONDITION_ORDER,
    EpisodeSketch,
    ResultRecord,
)
from ovman_eval.runs.run_dir import BenchmarkError
from ovman_eval.task.episodes import EpisodeRecord
from ovman_mapping.segmenter import with_segmenter
from ovman_query.arms import BUILT_IN_ARMS, Arm
from ovman_sim.world import World

MAP_ARMS = {Arm.TWO_VISIT, Arm.TWO_VISIT_TEXT, Arm.SIM_PERCEPTION, Arm.ORACLE_GROUNDING, Arm.MAINTAINED_MAP}
"""Arms that read both maps and the agent's association (their diagnostics include memory)."""
VISIT2_ARMS = {Arm.SINGLE_VISIT, Arm.CATEGORY_ONLY}
"""Arms that read only the visit-2 map."""
THOR_WORLD, LEARNED, CLIP = "thor", "learned", "clip"
"""A dataset's world kind, and the agent's segmenter kinds it decides between (:func:`configured_for`)."""

ABSTAINED_ERROR = "ABSTAINED"
"""EmbodiedResult.error of an arm that abstained and so never navigated."""
SETUP_ERROR = "SETUP"
"""EmbodiedResult.error of an episode whose evaluated world could not be set up
(:func:`ovman_eval.benchmark.navigation.error_result`)."""

TIMING_KEYS = ("maps_build_s", "maps_load_s", "static_s", "embodied_s", "sketch_s")
"""Cost split of the work (seconds, summed over workers)."""

WorldFactory = Callable[[SimConfig], World]


class EpisodeSetupError(BenchmarkError):
    """The evaluated world of one episode cannot be set up (the world refused its start pose); the
    episode gets an embodied error result (:func:`ovman_eval.benchmark.navigation.error_result`)
    instead of ending the run."""


# ---- the request ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BenchmarkRequest:
    """What to run: ``arms`` × ``seeds`` on every episode of ``dataset``; embodied unless
    ``static_only``; also under each stress condition in ``conditions`` (``low_light``,
    ``texture``), compared with the baseline on the same episodes. ``multi_change``: a dataset of
    the multi-change split run with the same arms and seeds (baseline only) as the run's part
    :data:`ovman_eval.runs.results.MULTI_CHANGE_PART` (None: no such part)."""

    dataset: Path
    arms: tuple[Arm, ...]
    seeds: tuple[int, ...]
    static_only: bool = False
    conditions: tuple[str, ...] = ()
    multi_change: Path | None = None

    def __post_init__(self) -> None:
        if not self.arms or len(set(self.arms)) != len(self.arms):
            raise BenchmarkError("arms must be a non-empty list without repeats")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or any(s < 0 for s in self.seeds):
            raise BenchmarkError(f"seeds must be distinct non-negative integers, got {list(self.seeds)}")
        object.__setattr__(self, "arms", tuple(sorted(self.arms, key=lambda a: ARM_ORDER.index(a.value))))
        object.__setattr__(self, "conditions", parse_conditions(self.conditions))

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "dataset": str(self.dataset),
            "arms": [a.value for a in self.arms],
            "seeds": list(self.seeds),
            "static_only": self.static_only,
        }
        if self.conditions:  # absent for baseline runs: their identity is what it was before conditions
            document["conditions"] = list(self.conditions)
        if self.multi_change is not None:  # absent without the part, as for conditions
            document["multi_change"] = str(self.multi_change)
        return document

    def multi_change_part(self) -> BenchmarkRequest:
        """The request of the multi-change part: its dataset, the same arms, seeds and mode."""
        if self.multi_change is None:
            raise BenchmarkError("the request has no multi-change part")
        return BenchmarkRequest(self.multi_change, self.arms, self.seeds, self.static_only)


def parse_conditions(text: str | Sequence[str]) -> tuple[str, ...]:
    """Stress conditions from a comma-separated string or names, in :data:`CONDITION_ORDER`
    (``baseline`` is always run and may be named; repeats are dropped)."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    stress = [c for c in CONDITION_ORDER if c != BASELINE]
    for name in names:
        if name not in CONDITION_ORDER:
            raise BenchmarkError(f"unknown condition {name!r}; expected one of {', '.join(stress)}")
    return tuple(c for c in stress if c in names)


def check_in_process(arms: Sequence[Arm]) -> None:
    """Refuse ``external`` for an in-process run: it is a system outside OVMAN, which only the ROS
    graph's benchmark_node evaluates (through the services of docs/external-agent.md)."""
    if Arm.EXTERNAL in arms:
        raise BenchmarkError(
            "arm external is an agent outside OVMAN, evaluated only through the ROS graph: "
            "ovman launch benchmark --arms external --agent-namespace NS (see docs/external-agent.md)"
        )


def parse_arms(text: str | Sequence[str]) -> tuple[Arm, ...]:
    """Arms from a comma-separated string or names; ``all`` means every built-in arm
    (:data:`ovman_query.arms.BUILT_IN_ARMS`: ``external`` is named on its own)."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    if names == ["all"]:
        return BUILT_IN_ARMS
    arms = []
    for name in names:
        try:
            arms.append(Arm(name))
        except ValueError:
            raise BenchmarkError(f"unknown arm {name!r}; expected one of {', '.join(ARM_ORDER)} (or all)") from None
    return tuple(arms)


def pick_seed(config: OvmanConfig, run_seed: int, episode_id: str) -> int:
    """The single-visit arm's seed for one episode: ``query_node.seed``, the run seed and the id."""
    sequence = np.random.SeedSequence([config.query_node.seed, run_seed, zlib.crc32(episode_id.encode())])
    return int(sequence.generate_state(1)[0] >> 1)


def dataset_hash(dataset: Path) -> str:
    """sha256 of the dataset's ``episodes.jsonl`` (the recordings are keyed per group in the map cache)."""
    path = dataset / EPISODES
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise DatasetError(f"{path}: cannot read ({err.strerror})") from err


def configured_for(config: OvmanConfig, records: Sequence[EpisodeRecord]) -> OvmanConfig:
    """``config`` with the world kind of the dataset's episodes (all episodes must share it); on
    AI2-THOR a ``learned`` agent segmenter becomes ``clip``."""
    worlds = sorted({r.scene.world for r in records})
    if len(worlds) > 1:
        raise BenchmarkError(f"the dataset mixes worlds ({', '.join(worlds)}); run each world's episodes separately")
    if not worlds or worlds[0] == config.sim_node.world.kind:
        return config
    sim = dataclasses.replace(config.sim_node, world=dataclasses.replace(config.sim_node.world, kind=worlds[0]))
    configured = dataclasses.replace(config, sim_node=sim)
    if worlds[0] == THOR_WORLD and configured.mapping_node.segmenter.kind == LEARNED:
        # The learned network knows the embedded world's assets only: on AI2-THOR the agent's
        # segments come from its class-agnostic proposals labelled by open_clip.
        configured = segmented_by(configured, CLIP)
    return configured


# ---- one unit of work: a recorded group ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WorkUnit:
    """A recorded group under one condition: its episodes (dataset order), the (episode, arm, seed)
    keys still to run, whether its sketch is still missing, and the stress ``condition`` (None: the
    recordings as they are)."""

    group_id: str
    episode_ids: tuple[str, ...]
    pending: tuple[tuple[str, str, int], ...]
    need_sketch: bool
    condition: str | None = None

    @property
    def label(self) -> str:
        """The group, and its condition when there is one (progress lines)."""
        return self.group_id if self.condition is None else f"{self.group_id} ({self.condition})"


@dataclasses.dataclass
class UnitOutcome:
    """What one unit produced, and its cost split (:data:`TIMING_KEYS`). ``group_id``: the unit's
    :attr:`WorkUnit.label` (the group, and its condition when there is one)."""

    group_id: str
    records: list[ResultRecord]
    sketch: EpisodeSketch | None
    timings: dict[str, float]


def segmented_by(config: OvmanConfig, kind: str) -> OvmanConfig:
    """``config`` with ``mapping_node.segmenter.kind`` set to ``kind``."""
    return dataclasses.replace(config, mapping_node=with_segmenter(config.mapping_node, kind))
