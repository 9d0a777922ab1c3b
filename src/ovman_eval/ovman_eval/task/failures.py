"""The failure partition of TASK.md §7 (the paper's Table V) and "lost in navigation".

Every episode lands in exactly one class, in this order of precedence: ``success`` (the gate's
success test, :mod:`ovman_core.success`), ``abstained`` (no point), ``wrong_instance`` (within R of
another instance of the queried category in visit 2), ``far`` (more than ``far_miss_distance`` from
the answer point), ``other``. "Lost in navigation" is a flag on paired outcomes, not a class: the
static gate succeeded and the embodied run failed. Points and footprints: floor (x, z), AI2-THOR world, metres.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence

from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import TaskConfig
from ovman_core.success import embodied_success, static_success
from ovman_core.world_state import WorldState
from ovman_eval.task.answers import Answer


class FailureClass(enum.Enum):
    """One row of the partition; the declaration order is the order of precedence and of the table."""

    SUCCESS = "success"
    ABSTAINED = "abstained"
    WRONG_INSTANCE = "wrong_instance"
    FAR = "far"
    OTHER = "other"


class Gate(enum.Enum):
    """Which success test decides the ``success`` class (TASK.md §3)."""

    STATIC = "static"
    """The predicted point is within ``static_gate_radius`` of the answer point (Table V)."""
    EMBODIED = "embodied"
    """The stop point is within ``success_radius`` of the answer footprint (Eq. 4)."""


@dataclasses.dataclass(frozen=True)
class PartitionRadii:
    """The distances the partition uses, metres (defaults in ``config/ovman.yaml``, ``task``)."""

    static_gate_radius: float
    """Static success: predicted point within this of the answer point."""
    success_radius: float
    """R: embodied success, and the ``wrong_instance`` test against other instances' footprints."""
    far_miss_distance: float
    """A point farther than this from the answer point is ``far``."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not (isinstance(value, float) and math.isfinite(value) and value >= 0.0):
                raise ValueError(f"PartitionRadii.{field.name} must be a finite float ≥ 0 (metres), got {value!r}")

    @classmethod
    def from_task(cls, task: TaskConfig) -> PartitionRadii:
        return cls(task.static_gate_radius, task.success_radius, task.far_miss_distance)


@dataclasses.dataclass(frozen=True)
class EpisodeOutcome:
    """What one arm did on one episode, with the ground truth needed to classify it.

    ``point`` is the predicted point (static gate) or the stop point (embodied run), or None when
    the agent abstained or never stopped. ``answer_point`` and ``answer_region`` are a and A of
    TASK.md §1 (for a moving answer, taken at the end of the visit-2 recording for the static gate
    and at the stop for the embodied run). ``other_instances`` are the floor footprints of the other
    instances of the queried category present in visit 2 (see :func:`other_instance_footprints`).
    """

    point: Vec2 | None
    answer_point: Vec2
    answer_region: Footprint
    other_instances: tuple[Footprint, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "other_instances", tuple(self.other_instances))
        for i, footprint in enumerate(self.other_instances):
            if not isinstance(footprint, Footprint):
                raise TypeError(
                    f"EpisodeOutcome.other_instances[{i}] must be a Footprint, got {type(footprint).__name__}"
                )
        if not isinstance(self.answer_region, Footprint):
            raise TypeError(
                f"EpisodeOutcome.answer_region must be a Footprint, got {type(self.answer_region).__name__}"
            )


def other_instance_footprints(w2: WorldState, answer: Answer) -> tuple[Footprint, ...]:
    """Footprints of the instances of the answer's category in visit 2 other than the answer.

    For a vacated answer (former, removed) nothing stands at the answer, so every instance of the
    category in visit 2 counts, the moved instance at its new place included: the same set the
    anti-shortcut rule keeps away from the answer (:mod:`ovman_eval.task.admissibility`).
    """
    return tuple(
        o.box.footprint
        for o in w2.of_category(answer.category)
        if answer.vacated or o.instance_id != answer.instance_id
    )


def classify_failure(outcome: EpisodeOutcome, gate: Gate, radii: PartitionRadii) -> FailureClass:
    """The one class of ``outcome`` under ``gate`` (precedence in the module docstring)."""
    point = outcome.point
    if gate is Gate.STATIC:
        succeeded = static_success(point, outcome.answer_point, radii.static_gate_radius)
    elif gate is Gate.EMBODIED:
        succeeded = embodied_success(point, outcome.answer_region, radii.success_radius)
    else:
        raise TypeError(f"gate must be a Gate, got {gate!r}")
    if succeeded:
        return FailureClass.SUCCESS
    if point is None:
        return FailureClass.ABSTAINED
    if any(embodied_success(point, other, radii.success_radius) for other in outcome.other_instances):
        return FailureClass.WRONG_INSTANCE
    miss = math.hypot(point[0] - outcome.answer_point[0], point[1] - outcome.answer_point[1])
    if miss > radii.far_miss_distance:
        return FailureClass.FAR
    return FailureClass.OTHER


def lost_in_navigation(static: Sequence[bool], embodied: Sequence[bool]) -> list[bool]:
    """Per episode: the static gate succeeded but the embodied run of the same arm failed.

    The two sequences are the same arm's outcomes on the same episodes, in the same order.
    """
    if len(static) != len(embodied):
        raise ValueError(
            f"lost_in_navigation needs one static and one embodied outcome per episode, "
            f"got {len(static)} and {len(embodied)}"
        )
    return [bool(s) and not bool(e) for s, e in zip(static, embodied, strict=True)]


@dataclasses.dataclass(frozen=True)
class FailureTable:
    """Counts per class (every class present, in precedence order) over ``total`` episodes.

    ``lost_in_navigation`` counts static successes lost when executed (a subset of ``success``),
    or is None when no embodied outcomes were given.
    """

    counts: Mapping[FailureClass, int]
    total: int
    lost_in_navigation: int | None

    @property
    def fractions(self) -> dict[FailureClass, float]:
        """Each class's count over ``total``; they sum to 1 up to rounding."""
        if self.total == 0:
            raise ValueError("the failure table has no episodes; fractions are undefined")
        return {cls: count / self.total for cls, count in self.counts.items()}

    @property
    def lost_in_navigation_fraction(self) -> float | None:
        """Lost in navigation over ``total`` episodes (as the paper's table rows are)."""
        if self.lost_in_navigation is None:
            return None
        if self.total == 0:
            raise ValueError("the failure table has no episodes; fractions are undefined")
        return self.lost_in_navigation / self.total


def tabulate_failures(classes: Sequence[FailureClass], lost: Sequence[bool] | None = None) -> FailureTable:
    """Count the classes of a set of episodes; the counts sum to ``len(classes)``.

    ``lost`` (from :func:`lost_in_navigation`, same episodes and order) adds the lost-in-navigation
    count; each lost episode must be a ``success`` in ``classes`` (the static partition), else the
    inputs are not paired correctly and a :class:`ValueError` names the first offending episode.
    """
    counts = dict.fromkeys(FailureClass, 0)
    for i, cls in enumerate(classes):
        if not isinstance(cls, FailureClass):
            raise TypeError(f"classes[{i}] must be a FailureClass, got {cls!r}")
        counts[cls] += 1
    lost_count: int | None = None
    if lost is not None:
        if len(lost) != len(classes):
            raise ValueError(f"lost must have one flag per episode: {len(lost)} flags for {len(classes)} episodes")
        for i, (cls, flag) in enumerate(zip(classes, lost, strict=True)):
            if flag and cls is not FailureClass.SUCCESS:
                raise ValueError(
                    f"episode {i} is lost in navigation but classed {cls.value} statically; lost episodes "
                    "must be static successes (pass the static-gate classes with the flags)"
                )
        lost_count = sum(bool(flag) for flag in lost)
    return FailureTable(counts=counts, total=len(classes), lost_in_navigation=lost_count)
