"""Map and memory diagnostics: a visit's map and the association against ground truth (TASK.md §8).

Per visit: the matching to ground truth, coverage (AEC), positional accuracy (PA) and temporal
belief stability (TBS); across visits: identity resolution (SIR), change-kind precision and recall,
and the appearance cues of same-category pairs. Positions are box centres in the AI2-THOR world
(metres, y up); displacement is floor (x, z) distance. Pure; undefined ratios are None.

Why one module: the map and memory metrics share the matching of map instances to the ground
truth, and the map cache keys its entries on this one source file.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.transform import Rotation

from ovman_core.boxes import Vec3
from ovman_core.world_state import WorldState

if TYPE_CHECKING:
    from ovman_mapping.instances import InstanceMap, MapSnapshot
    from ovman_query.association import Association

DEGENERATE_ROTATION_WARNING = "Optimal rotation is not uniquely or poorly defined"
"""scipy's warning for collinear point sets; the residual is still minimal there, so it is expected."""


class DiagnosticsError(ValueError):
    """Inputs to a diagnostic are inconsistent (unknown ids, bad labels, empty sets)."""


class ChangeKind(str, enum.Enum):
    """What happened to an object between the two visits; the value is the name used in reports."""

    STAYED = "stayed"
    MOVED = "moved"
    REMOVED = "removed"
    APPEARED = "appeared"


# -- per visit: matching ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GroundTruthMatch:
    """One visit's map matched to its ground truth.

    ``truth_of``: map uid → ground-truth instance id (one-to-one); ``distance``: map uid → distance
    between the matched box centres (3D, metres); ``duplicate_of``: unmatched map uid → the matched
    ground-truth id it duplicates; ``hallucinated``: unmatched map uids near no object of their label.
    """

    truth_of: Mapping[str, str]
    distance: Mapping[str, float]
    duplicate_of: Mapping[str, str]
    hallucinated: tuple[str, ...]


def match_to_ground_truth(instance_map: InstanceMap, truth: WorldState, gate: float) -> GroundTruthMatch:
    """Hungarian matching of map instances to ground-truth instances on the distance of box centres.

    A pair is allowed only when the map label equals the ground-truth category (the seed paper
    counts coverage per category) and the centres are at most ``gate`` apart; the matching has the
    most pairs possible and, among those, the least total distance. An unmatched map instance within
    the gate of a matched ground-truth instance of its category is a duplicate, any other one is
    hallucinated.

    ``gate``: largest allowed distance between box centres (metres, 3D). Every ground-truth
    instance is a candidate, discoverable or not, so a real object is never called hallucinated.
    """
    if not gate > 0.0:
        raise DiagnosticsError(f"benchmark_node.diagnostics.match_gate must be positive, got {gate}")
    instances = list(instance_map.instances)
    objects = sorted(truth, key=lambda o: o.instance_id)
    if not instances or not objects:
        return GroundTruthMatch({}, {}, {}, tuple(i.uid for i in instances))
    estimated = instance_map.positions()
    actual = np.array([o.position for o in objects], dtype=float)
    distance = np.linalg.norm(estimated[:, None, :] - actual[None, :, :], axis=2)
    same_label = np.array([[i.label == o.category for o in objects] for i in instances])
    allowed = same_label & (distance <= gate)
    # Costlier than any set of allowed pairs: the solver first maximises the number of allowed pairs.
    forbidden = gate * (min(len(instances), len(objects)) + 1) + 1.0
    rows, cols = linear_sum_assignment(np.where(allowed, distance, forbidden))
    truth_of: dict[str, str] = {}
    matched_distance: dict[str, float] = {}
    for r, c in zip(rows, cols, strict=True):
        if allowed[r, c]:
            truth_of[instances[r].uid] = objects[c].instance_id
            matched_distance[instances[r].uid] = float(distance[r, c])
    matched_ids = set(truth_of.values())
    matched_columns = [c for c, o in enumerate(objects) if o.instance_id in matched_ids]
    duplicate_of: dict[str, str] = {}
    hallucinated: list[str] = []
    for r, instance in enumerate(instances):
        if instance.uid in truth_of:
            continue
        near = [c for c in matched_columns if allowed[r, c]]
        if near:
            duplicate_of[instance.uid] = objects[min(near, key=lambda c: distance[r, c])].instance_id
        else:
            hallucinated.append(instance.uid)
    return GroundTruthMatch(truth_of, matched_distance, duplicate_of, tuple(hallucinated))


# -- per visit: coverage and positional accuracy -------------------------------------------------


def _checked_discoverable(truth: WorldState, discoverable: Collection[str]) -> set[str]:
    unknown = sorted(set(discoverable) - set(truth.objects))
    if unknown:
        raise DiagnosticsError(f"discoverable instances {unknown} are not in the visit's ground-truth world state")
    if not discoverable:
        raise DiagnosticsError("no discoverable instance: coverage and accuracy are undefined for an empty tour")
    return set(discoverable)


def environment_coverage(labels: Iterable[str], truth: WorldState, discoverable: Collection[str]) -> float:
    """AEC of one map: ``Σ_k min(|M_k|, |E_k|) / |E|`` over the discoverable categories.

    ``labels``: the map instances' labels (one per instance); ``discoverable``: ground-truth ids.
    """
    seen = _checked_discoverable(truth, discoverable)
    per_category: dict[str, int] = {}
    for instance_id in seen:
        category = truth[instance_id].category
        per_category[category] = per_category.get(category, 0) + 1
    mapped: dict[str, int] = {}
    for label in labels:
        mapped[label] = mapped.get(label, 0) + 1
    covered = sum(min(mapped.get(category, 0), count) for category, count in per_category.items())
    return covered / len(seen)


@dataclasses.dataclass(frozen=True)
class PositionalAccuracy:
    """PA of one map. ``matched`` is K, ``baseline`` |G_base|; ``rmse`` and ``spread`` (L) in
    metres; ``rotation_deg`` and ``translation`` (metres) describe the aligning rigid motion."""

    matched: int
    baseline: int
    rmse: float
    spread: float
    rotation_deg: float
    translation: Vec3
    score: float


def spread_of(points: np.ndarray) -> float:
    """RMS distance of (K, 3) points from their mean (metres); 0 for fewer than two points."""
    if len(points) < 2:
        return 0.0
    return float(np.sqrt(np.mean(np.sum((points - points.mean(axis=0)) ** 2, axis=1))))


def _normalised_exp(error: float, spread: float) -> float:
    """``exp(−error / spread)``; with no spread (one point) any error is total and none is perfect."""
    if spread > 0.0:
        return math.exp(-error / spread)
    return 1.0 if error == 0.0 else 0.0


def positional_accuracy(estimated: np.ndarray, actual: np.ndarray, baseline: int) -> PositionalAccuracy:
    """PA of matched centres after the optimal rigid alignment of ``estimated`` onto ``actual``.

    ``score`` = ``exp(−RMSE / L) · K / |G_base|``: RMSE the residual after the alignment (rotation
    of the centred sets, then the translation of the means), L the RMS spread of ``actual``.

    ``estimated``, ``actual``: float (K, 3) centres, row k of one the match of row k of the other
    (world frame, metres). ``baseline``: |G_base|, the discoverable instances (≥ K, ≥ 1).
    """
    estimated = np.asarray(estimated, dtype=float).reshape(-1, 3)
    actual = np.asarray(actual, dtype=float).reshape(-1, 3)
    if estimated.shape != actual.shape:
        raise DiagnosticsError(f"{len(estimated)} estimated centres but {len(actual)} ground-truth centres")
    matched = len(estimated)
    if baseline < max(matched, 1):
        raise DiagnosticsError(f"baseline |G_base|={baseline} must be at least 1 and at least K={matched}")
    if matched == 0:
        return PositionalAccuracy(0, baseline, 0.0, 0.0, 0.0, (0.0, 0.0, 0.0), 0.0)
    estimated_mean, actual_mean = estimated.mean(axis=0), actual.mean(axis=0)
    estimated_centred, actual_centred = estimated - estimated_mean, actual - actual_mean
    rotation = Rotation.identity()
    if np.any(estimated_centred) and np.any(actual_centred):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=DEGENERATE_ROTATION_WARNING, category=UserWarning)
            rotation, _ = Rotation.align_vectors(actual_centred, estimated_centred)
    aligned = rotation.apply(estimated_centred) + actual_mean
    rmse = float(np.sqrt(np.mean(np.sum((aligned - actual) ** 2, axis=1))))
    spread = spread_of(actual)
    translation = actual_mean - rotation.apply(estimated_mean)
    return PositionalAccuracy(
        matched=matched,
        baseline=baseline,
        rmse=rmse,
        spread=spread,
        rotation_deg=float(np.degrees(rotation.magnitude())),
        translation=(float(translation[0]), float(translation[1]), float(translation[2])),
        score=_normalised_exp(rmse, spread) * matched / baseline,
    )


# -- per visit: temporal stability ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StabilityAt:
    """TBS at one snapshot: ``mapped`` is |M_t|, ``drift`` Δd(t) (metres)."""

    frame_index: int
    step: int
    mapped: int
    drift: float
    score: float


@dataclasses.dataclass(frozen=True)
class InstanceStability:
    """How one final instance's estimated position moved as frames accumulated.

    ``drifts``: per snapshot where it was present, the mean distance of its working tracks from
    where each was first seen (metres); ``score``: ``exp(−mean drift / L)``.
    """

    uid: str
    drifts: tuple[float, ...]
    max_drift: float
    mean_drift: float
    score: float


@dataclasses.dataclass(frozen=True)
class TemporalStability:
    """TBS of one visit: the series over snapshots, its mean, and each final instance's stability."""

    series: tuple[StabilityAt, ...]
    mean: float
    instances: Mapping[str, InstanceStability]


def temporal_stability(
    history: Sequence[MapSnapshot],
    aliases: Mapping[str, str],
    counted: Collection[str],
    spread: float,
    baseline: int,
) -> TemporalStability:
    """TBS from a map's incremental snapshots: at snapshot t, ``exp(−Δd(t) / L) · |M_t| / |G_base|``.

    Δd(t) is the mean drift of the counted working tracks present at t from where each was first
    seen, and M_t the counted final instances present at t.

    ``aliases``: working uid → final uid (``InstanceMap.aliases``; absent = dropped); ``counted``:
    final uids matched to discoverable ground truth (they make ``M_t`` and ``Δd``); ``spread``: L
    (metres); ``baseline``: |G_base|. Per-instance stability is reported for every final instance.
    """
    if not history:
        raise DiagnosticsError("the map has no incremental snapshots (InstanceMap.history is empty)")
    if baseline < 1:
        raise DiagnosticsError(f"baseline |G_base| must be at least 1, got {baseline}")
    # Vectorised per snapshot: working uids get a row of ``origins`` when first seen, their final
    # instance an index (-1: dropped), and the drifts of a snapshot are averaged per final instance.
    row_of: dict[str, int] = {}
    origins: list[np.ndarray] = []
    finals = sorted({f for f in aliases.values()})
    final_index = {f: k for k, f in enumerate(finals)}
    is_counted = np.array([f in counted for f in finals], dtype=bool)
    final_of: list[int] = []
    series: list[StabilityAt] = []
    per_instance: dict[str, list[float]] = {}
    for snapshot in history:
        working = list(snapshot.positions)
        for uid in working:
            if uid not in row_of:
                row_of[uid] = len(origins)
                origins.append(np.asarray(snapshot.positions[uid], dtype=float))
                final_of.append(final_index.get(aliases.get(uid, ""), -1) if uid in aliases else -1)
        rows = np.array([row_of[u] for u in working], dtype=np.int64)
        owner = np.array(final_of, dtype=np.int64)[rows] if len(rows) else np.zeros(0, np.int64)
        kept = owner >= 0
        points = np.array([snapshot.positions[u] for u in working], dtype=float).reshape(-1, 3)[kept]
        starts = np.array(origins)[rows[kept]] if kept.any() else np.zeros((0, 3))
        drift = np.sqrt(((points - starts) ** 2).sum(axis=1))
        owners = owner[kept]
        sums = np.bincount(owners, weights=drift, minlength=len(finals))
        counts = np.bincount(owners, minlength=len(finals))
        for k in np.nonzero(counts)[0]:
            per_instance.setdefault(finals[k], []).append(float(sums[k] / counts[k]))
        counted_mask = is_counted[owners] if len(owners) else np.zeros(0, bool)
        present = int((counts[is_counted] > 0).sum()) if len(finals) else 0
        mean_drift = float(drift[counted_mask].mean()) if counted_mask.any() else 0.0
        score = _normalised_exp(mean_drift, spread) * present / baseline
        series.append(StabilityAt(snapshot.frame_index, snapshot.step, present, mean_drift, score))
    instances = {
        uid: InstanceStability(
            uid=uid,
            drifts=tuple(drifts),
            max_drift=max(drifts),
            mean_drift=float(np.mean(drifts)),
            score=_normalised_exp(float(np.mean(drifts)), spread),
        )
        for uid, drifts in sorted(per_instance.items())
    }
    return TemporalStability(tuple(series), float(np.mean([s.score for s in series])), instances)


# -- per visit: all of it ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MapDiagnostics:
    """One visit's map against its ground truth.

    ``discoverable`` is |E| = |G_base|; ``coverage`` AEC; ``matched_coverage`` K / |E| (coverage by
    matched objects rather than label counts); ``duplicated`` and ``hallucinated`` are counts of map
    instances (ids in ``match``).
    """

    visit: int
    instances: int
    discoverable: int
    coverage: float
    matched_coverage: float
    positional: PositionalAccuracy
    duplicated: int
    hallucinated: int
    stability: TemporalStability
    match: GroundTruthMatch

    def summary(self) -> dict[str, float | int]:
        """Flat numbers for report tables."""
        return {
            "instances": self.instances,
            "discoverable": self.discoverable,
            "aec": self.coverage,
            "matched_coverage": self.matched_coverage,
            "pa": self.positional.score,
            "rmse_m": self.positional.rmse,
            "spread_m": self.positional.spread,
            "tbs": self.stability.mean,
            "duplicated": self.duplicated,
            "hallucinated": self.hallucinated,
        }


def diagnose_map(
    instance_map: InstanceMap, truth: WorldState, discoverable: Collection[str], gate: float
) -> MapDiagnostics:
    """AEC, PA, TBS and the duplicate/hallucination counts of one visit's map.

    ``discoverable``: ground-truth ids seen in at least one frame of the (unperturbed) tour, the
    paper's ``G_base``; ``gate``: ``benchmark_node.diagnostics.match_gate`` (metres).
    """
    seen = _checked_discoverable(truth, discoverable)
    match = match_to_ground_truth(instance_map, truth, gate)
    kept = sorted(uid for uid, instance_id in match.truth_of.items() if instance_id in seen)
    by_uid = {instance.uid: instance for instance in instance_map}
    estimated = np.array([by_uid[uid].position for uid in kept], dtype=float).reshape(-1, 3)
    actual = np.array([truth[match.truth_of[uid]].position for uid in kept], dtype=float).reshape(-1, 3)
    positional = positional_accuracy(estimated, actual, len(seen))
    stability = temporal_stability(instance_map.history, instance_map.aliases, set(kept), positional.spread, len(seen))
    return MapDiagnostics(
        visit=instance_map.visit,
        instances=len(instance_map),
        discoverable=len(seen),
        coverage=environment_coverage((i.label for i in instance_map), truth, seen),
        matched_coverage=len(kept) / len(seen),
        positional=positional,
        duplicated=len(match.duplicate_of),
        hallucinated=len(match.hallucinated),
        stability=stability,
        match=match,
    )


# -- across visits -------------------------------------------------------------------------------


def change_labels(first: WorldState, second: WorldState, moved_threshold: float) -> dict[str, ChangeKind]:
    """Ground-truth change kind of every object of either visit: removed (visit 1 only), appeared
    (visit 2 only), moved (floor displacement ≥ ``moved_threshold``, metres; Δmin) or stayed."""
    labels: dict[str, ChangeKind] = {}
    for obj in first:
        if obj.instance_id not in second:
            labels[obj.instance_id] = ChangeKind.REMOVED
            continue
        (x1, z1), (x2, z2) = obj.floor, second[obj.instance_id].floor
        moved = math.hypot(x2 - x1, z2 - z1) >= moved_threshold
        labels[obj.instance_id] = ChangeKind.MOVED if moved else ChangeKind.STAYED
    for obj in second:
        if obj.instance_id not in first:
            labels[obj.instance_id] = ChangeKind.APPEARED
    return labels


@dataclasses.dataclass(frozen=True)
class IdentityResolution:
    """SIR. ``carried`` is |M_first| (objects in both visits held by the visit-1 map), ``resolved``
    those the association pairs correctly, ``wrong`` the pairs from a carried object's visit-1
    instance to anything else; ``ratio`` = resolved / carried, ``coverage`` the anchor AEC₁,
    ``score`` = coverage · ratio (None when nothing was carried)."""

    carried: int
    resolved: int
    wrong: int
    ratio: float | None
    coverage: float
    score: float | None


def identity_resolution(
    association: Association,
    first: GroundTruthMatch,
    second: GroundTruthMatch,
    truth1: WorldState,
    truth2: WorldState,
    coverage: float,
) -> IdentityResolution:
    """Coverage-anchored SIR of an association between the visit-1 and visit-2 maps.

    ``first``/``second``: each map's ground-truth matching; ``coverage``: AEC of the visit-1 map.
    """
    if not 0.0 <= coverage <= 1.0:
        raise DiagnosticsError(f"coverage (AEC of visit 1) must lie in [0, 1], got {coverage}")
    in_both = set(truth1.objects) & set(truth2.objects)
    carried = {uid: instance_id for uid, instance_id in first.truth_of.items() if instance_id in in_both}
    resolved = wrong = 0
    for pair in association.pairs:
        if pair.uid1 not in carried:
            continue
        if second.truth_of.get(pair.uid2) == carried[pair.uid1]:
            resolved += 1
        else:
            wrong += 1
    ratio = resolved / len(carried) if carried else None
    return IdentityResolution(
        carried=len(carried),
        resolved=resolved,
        wrong=wrong,
        ratio=ratio,
        coverage=coverage,
        score=None if ratio is None else coverage * ratio,
    )


@dataclasses.dataclass(frozen=True)
class ChangeKindScore:
    """Precision and recall of one change kind: ``predicted`` by the association, ``correct`` among
    them, ``relevant`` ground-truth objects of the kind that the maps hold; ratios None when 0/0."""

    kind: ChangeKind
    predicted: int
    correct: int
    relevant: int
    precision: float | None
    recall: float | None


def change_scores(
    association: Association,
    first: GroundTruthMatch,
    second: GroundTruthMatch,
    labels: Mapping[str, ChangeKind],
    moved_threshold: float,
) -> dict[ChangeKind, ChangeKindScore]:
    """Precision and recall of the association for each change kind.

    A pair is a predicted move when its floor displacement is at least ``moved_threshold``, else a
    stay; unmatched visit-1 / visit-2 instances are predicted removals / arrivals. A prediction is
    correct when its map instances match one ground-truth object (the same in both visits for a
    pair) of that kind. Recall counts only objects the maps hold where the kind needs them (both
    maps for stayed and moved, visit 1 for removed, visit 2 for appeared): it measures the
    association, not the mapping.

    ``labels``: ground-truth id → kind for every object either map is matched to (for example
    :func:`change_labels`); ``moved_threshold``: floor displacement (metres, Δmin) from which a
    pair is a predicted move.
    """
    for name, match in (("visit-1", first), ("visit-2", second)):
        unlabelled = sorted(set(match.truth_of.values()) - set(labels))
        if unlabelled:
            raise DiagnosticsError(f"ground-truth ids {unlabelled} of the {name} matching have no change label")
    predicted = dict.fromkeys(ChangeKind, 0)
    correct = dict.fromkeys(ChangeKind, 0)
    for pair in association.pairs:
        kind = ChangeKind.MOVED if pair.displacement >= moved_threshold else ChangeKind.STAYED
        predicted[kind] += 1
        instance_id = first.truth_of.get(pair.uid1)
        if instance_id is not None and second.truth_of.get(pair.uid2) == instance_id and labels[instance_id] == kind:
            correct[kind] += 1
    for kind, uids, match in (
        (ChangeKind.REMOVED, association.removed, first),
        (ChangeKind.APPEARED, association.appeared, second),
    ):
        for uid in uids:
            predicted[kind] += 1
            instance_id = match.truth_of.get(uid)
            if instance_id is not None and labels[instance_id] == kind:
                correct[kind] += 1
    held1, held2 = set(first.truth_of.values()), set(second.truth_of.values())
    relevant = dict.fromkeys(ChangeKind, 0)
    for instance_id, kind in labels.items():
        needed = {
            ChangeKind.STAYED: instance_id in held1 and instance_id in held2,
            ChangeKind.MOVED: instance_id in held1 and instance_id in held2,
            ChangeKind.REMOVED: instance_id in held1,
            ChangeKind.APPEARED: instance_id in held2,
        }[kind]
        relevant[kind] += int(needed)
    return {
        kind: ChangeKindScore(
            kind=kind,
            predicted=predicted[kind],
            correct=correct[kind],
            relevant=relevant[kind],
            precision=correct[kind] / predicted[kind] if predicted[kind] else None,
            recall=correct[kind] / relevant[kind] if relevant[kind] else None,
        )
        for kind in ChangeKind
    }


@dataclasses.dataclass(frozen=True)
class MemoryDiagnostics:
    """Cross-visit diagnostics: SIR and the per-kind precision and recall of the association."""

    identity: IdentityResolution
    changes: Mapping[ChangeKind, ChangeKindScore]

    def summary(self) -> dict[str, float | int | None]:
        """Flat numbers for report tables."""
        row: dict[str, float | int | None] = {"sir": self.identity.score, "identity_ratio": self.identity.ratio}
        for kind, score in self.changes.items():
            row[f"{kind.value}_precision"] = score.precision
            row[f"{kind.value}_recall"] = score.recall
        return row


def diagnose_visits(
    association: Association,
    first: MapDiagnostics,
    second: MapDiagnostics,
    truth1: WorldState,
    truth2: WorldState,
    moved_threshold: float,
) -> MemoryDiagnostics:
    """SIR (anchored by the visit-1 AEC) and per-kind scores with labels from the world states.

    ``moved_threshold``: Δmin (``task.min_displacement``, metres), for both the ground-truth labels
    and the association's pairs.
    """
    labels = change_labels(truth1, truth2, moved_threshold)
    return MemoryDiagnostics(
        identity=identity_resolution(association, first.match, second.match, truth1, truth2, first.coverage),
        changes=change_scores(association, first.match, second.match, labels, moved_threshold),
    )


# -- across visits: the appearance cue ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AppearancePairs:
    """Appearance cues of same-category map instance pairs across the visits: ``same`` for one
    object seen in both visits, ``different`` for two objects of one category. Each pair is a row of
    the cues of :data:`ovman_query.association.CUES` (embedding, colour, extent); rows sorted,
    rounded to 1e-4 (they are stored in every result line). :meth:`colour` gives the colour column
    alone."""

    same: tuple[tuple[float, ...], ...]
    different: tuple[tuple[float, ...], ...]

    def cue(self, name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """One cue's scores of the same-object and of the different-object pairs, each sorted."""
        from ovman_query.association import CUES

        k = CUES.index(name)
        return tuple(sorted(r[k] for r in self.same)), tuple(sorted(r[k] for r in self.different))


def appearance_pairs(
    map1: InstanceMap,
    map2: InstanceMap,
    first: GroundTruthMatch,
    second: GroundTruthMatch,
    truth1: WorldState,
    truth2: WorldState,
) -> AppearancePairs:
    """The appearance cues (:func:`ovman_query.association.appearance_cues`) on every pair of matched
    visit-1 and visit-2 map instances whose objects share a category: one object seen twice is a
    positive, two objects a negative; :func:`auroc` of the pooled scores says how well a cue tells
    them apart (0.5 = chance)."""
    from ovman_query.association import CUES, appearance_cues

    rows = [k for k, i in enumerate(map1.instances) if i.uid in first.truth_of]
    cols = [k for k, i in enumerate(map2.instances) if i.uid in second.truth_of]
    if not rows or not cols:
        return AppearancePairs((), ())
    cues = appearance_cues(map1, map2)
    same: list[tuple[float, ...]] = []
    different: list[tuple[float, ...]] = []
    for r in rows:
        id1 = first.truth_of[map1.instances[r].uid]
        for c in cols:
            id2 = second.truth_of[map2.instances[c].uid]
            if truth1[id1].category != truth2[id2].category:
                continue
            row = tuple(round(float(cues[name][r, c]), 4) for name in CUES)
            (same if id1 == id2 else different).append(row)
    return AppearancePairs(tuple(sorted(same)), tuple(sorted(different)))


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """Area under the ROC curve of scores that should rank ``positives`` above ``negatives``:
    the Mann–Whitney probability that a positive outscores a negative, ties counting one half.
    None when either set is empty."""
    if not positives or not negatives:
        return None
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([np.asarray(positives, float), np.asarray(negatives, float)]))
    n1, n2 = len(positives), len(negatives)
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n2))
