"""Hand-built benchmark result records and sketches for the tables and report tests."""

from __future__ import annotations

from collections.abc import Sequence

from ovman_eval.runs.results import (
    FORMAT_VERSION,
    EmbodiedResult,
    EpisodeSketch,
    ResultRecord,
    SketchInstance,
    SketchPair,
    StaticResult,
)

RELATIONS = ("moved", "former", "removed", "appeared", "stable", "moving")


def memory(sir: float, predicted: int, correct: int, relevant: int) -> dict:
    kinds = {k: {"predicted": predicted, "correct": correct, "relevant": relevant} for k in ("stayed", "moved")}
    kinds.update({k: {"predicted": 0, "correct": 0, "relevant": 0} for k in ("removed", "appeared")})
    return {"sir": sir, "identity_ratio": sir, "carried": 10, "resolved": round(10 * sir), "changes": kinds}


def map_summary(aec: float) -> dict:
    return {
        "instances": 10,
        "discoverable": 10,
        "aec": aec,
        "matched_coverage": aec,
        "pa": 0.9,
        "rmse_m": 0.05,
        "spread_m": 2.0,
        "tbs": 0.8,
        "duplicated": 1,
        "hallucinated": 0,
    }


def record(
    episode: str,
    arm: str,
    static: bool,
    embodied: bool | None = None,
    *,
    seed: int = 0,
    relation: str = "moved",
    scene: str = "embedded-0",
    instances: int = 2,
    failure: str | None = None,
    probability: float | None = None,
    category_static: bool = False,
    spl: float | None = None,
    diagnostics: dict | None = None,
) -> ResultRecord:
    """One record: ``static``/``embodied`` successes; the failure class defaults to success or far."""
    point = (1.0, 1.0) if failure != "abstained" else None
    static_result = StaticResult(
        point=point,
        success=static,
        distance=None if point is None else (0.1 if static else 3.0),
        failure=failure or ("success" if static else "far"),
        category_success=category_static,
        success_probability=probability,
        instance_ids=("v2:1",),
        confidence=0.5,
        explanation="test",
    )
    embodied_result = None
    if embodied is not None:
        embodied_result = EmbodiedResult(
            stop=(1.0, 1.0),
            success=embodied,
            stop_distance=0.5 if embodied else 3.0,
            failure="success" if embodied else "far",
            category_success=embodied,
            spl=(spl if spl is not None else 0.8) if embodied else 0.0,
            path_length=5.0,
            shortest_path=4.0,
            steps=20,
            collisions=0,
            error="NONE",
            answer_point=(1.0, 1.0),
            trajectory=((0.0, 0.0), (1.0, 1.0)),
            retargets=0,
        )
    return ResultRecord(
        format_version=FORMAT_VERSION,
        episode_id=episode,
        group_id=episode,
        split="single",
        scene=scene,
        relation=relation,
        category="Vase",
        instances=instances,
        phrase="where is the vase that someone moved",
        answer_instance="Vase_1",
        answer_point=(1.0, 1.2),
        answer_region=(0.9, 1.1, 1.1, 1.3),
        start=(0.0, 0.0),
        arm=arm,
        seed=seed,
        static=static_result,
        embodied=embodied_result,
        diagnostics=diagnostics,
    )


def paired(outcomes: dict[str, Sequence[bool]], relations: Sequence[str] | None = None, **kwargs) -> list[ResultRecord]:
    """Records of several arms on the same episodes ``e0``, ``e1``…; static and embodied equal."""
    n = len(next(iter(outcomes.values())))
    relations = relations or [RELATIONS[i % len(RELATIONS)] for i in range(n)]
    return [
        record(f"e{i}", arm, bool(s), bool(s), relation=relations[i], **kwargs)
        for arm, successes in outcomes.items()
        for i, s in enumerate(successes)
    ]


def sketch(group: str = "e0") -> EpisodeSketch:
    def inst(uid: str, label: str, x: float, z: float, moving: bool = False) -> SketchInstance:
        return SketchInstance(uid, label, (x, z), (x - 0.1, z - 0.1, x + 0.1, z + 0.1), moving)

    return EpisodeSketch(
        format_version=FORMAT_VERSION,
        group_id=group,
        scene="embedded-0",
        map1=(inst("v1:0", "Vase", 3.0, 3.0), inst("v1:1", "Chair", 2.0, 0.5)),
        map2=(inst("v2:1", "Vase", 1.0, 1.2), inst("v2:2", "Chair", 2.0, 0.5), inst("v2:3", "Vase", 4.0, 0.5, True)),
        pairs=(SketchPair("v1:0", "v2:1", 2, 2.7), SketchPair("v1:1", "v2:2", 1, 0.0)),
        removed=(),
        appeared=("v2:3",),
        truth1=(inst("Vase_1", "Vase", 3.0, 3.0), inst("Vase_2", "Vase", 4.0, 0.5)),
        truth2=(inst("Vase_1", "Vase", 1.0, 1.2), inst("Vase_2", "Vase", 4.0, 0.5)),
        reachable=tuple((x * 0.25, z * 0.25) for x in range(20) for z in range(16)),
        grid_size=0.25,
    )
