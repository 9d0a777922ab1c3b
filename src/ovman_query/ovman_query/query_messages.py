"""ROS messages of ovman_query, built from core values; never imports rclpy.

The only module of the package that imports message packages, so every conversion is unit-testable
without a graph: the Query request and response, the change set (``ovman_interfaces/ChangeSet``) and
the answer markers (MarkerArray). Frames: the core's AI2-THOR world (metres, y up) → REP 103 ``map``;
floor points (x, z) become ``map`` points on the floor (z = 0) through :mod:`ovman_core.frames`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, PointStamped
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from ovman_core.boxes import Vec2, Vec3
from ovman_core.config import AnswerMarkersConfig, ConfigError
from ovman_core.frames import thor_to_ros_point
from ovman_interfaces.msg import ChangeSet, InstanceChange
from ovman_interfaces.srv import Query
from ovman_query.change_set import Change, ChangeKind
from ovman_query.query_requests import QueryOutcome, QueryRequest, Status

ANSWER_DISC_NAMESPACE = "answer/disc"
ANSWER_TEXT_NAMESPACE = "answer/text"

_STATUS = {
    Status.ANSWERED: Query.Response.ANSWERED,
    Status.ABSTAINED: Query.Response.ABSTAINED,
    Status.PARSE_FAILED: Query.Response.PARSE_FAILED,
    Status.NO_MAP: Query.Response.NO_MAP,
    Status.INVALID_REQUEST: Query.Response.INVALID_REQUEST,
}
_KIND = {
    ChangeKind.STAYED: InstanceChange.STAYED,
    ChangeKind.MOVED: InstanceChange.MOVED,
    ChangeKind.REMOVED: InstanceChange.REMOVED,
    ChangeKind.APPEARED: InstanceChange.APPEARED,
    ChangeKind.MOVING: InstanceChange.MOVING,
}


def floor_point_msg(point: Vec2) -> Point:
    """The ``map`` point (on the floor, z = 0) of a world floor point (x, z)."""
    x, y, z = thor_to_ros_point((point[0], 0.0, point[1]))
    return Point(x=x, y=y, z=z)


def _point(position: Vec3 | None) -> Point:
    if position is None:
        return Point()
    x, y, z = thor_to_ros_point(position)
    return Point(x=x, y=y, z=z)


def request_from_msg(request: Query.Request) -> QueryRequest:
    return QueryRequest(
        text=request.text,
        category=request.category,
        relation=request.relation,
        arm=request.arm,
        exclude_ids=tuple(int(i) for i in request.exclude_ids),
    )


def response_msg(outcome: QueryOutcome, frame_id: str, stamp: Time, response: Query.Response) -> Query.Response:
    """Fill ``response`` from ``outcome``; the goal is set (``frame_id``, ``stamp``) only when answered."""
    response.status = _STATUS[outcome.status]
    response.answered = outcome.status is Status.ANSWERED
    if response.answered:
        assert outcome.point is not None
        response.goal = PointStamped(
            header=Header(stamp=stamp, frame_id=frame_id), point=floor_point_msg(outcome.point)
        )
    response.relation = outcome.relation
    response.noun_phrase = outcome.noun_phrase
    response.instance_visit1 = outcome.instance_visit1
    response.instance_visit2 = outcome.instance_visit2
    response.confidence = outcome.confidence
    response.explanation = outcome.explanation
    return response


def change_set_msg(
    changes: Sequence[Change], ids1: Mapping[str, int], ids2: Mapping[str, int], frame_id: str, stamp: Time
) -> ChangeSet:
    """The ChangeSet message; instance ids are the maps' wire ids (-1 where absent)."""
    return ChangeSet(
        header=Header(stamp=stamp, frame_id=frame_id),
        changes=[
            InstanceChange(
                kind=_KIND[c.kind],
                label=c.label,
                id_visit1=ids1[c.uid1] if c.uid1 is not None else -1,
                id_visit2=ids2[c.uid2] if c.uid2 is not None else -1,
                position_visit1=_point(c.position1),
                position_visit2=_point(c.position2),
                displacement=float(c.displacement),
                cost=float(c.cost),
            )
            for c in changes
        ],
    )


def check_answer_style(style: AnswerMarkersConfig) -> None:
    """ConfigError unless the answer marker's colour, opacity and sizes are usable."""
    if len(style.rgb) != 3 or not all(0.0 <= v <= 1.0 for v in (*style.rgb, style.alpha)):
        raise ConfigError(
            f"config query_node markers.rgb must be three values in [0, 1] and markers.alpha in [0, 1], "
            f"got {list(style.rgb)}, {style.alpha}"
        )
    for name in ("disc_height", "text_height"):
        if not getattr(style, name) > 0.0:
            raise ConfigError(f"config query_node markers.{name} must be positive metres, got {getattr(style, name)}")


def answer_markers(
    outcome: QueryOutcome, radius: float, style: AnswerMarkersConfig, frame_id: str, stamp: Time
) -> MarkerArray:
    """DELETEALL, then, when answered, a disc of ``radius`` (m) on the floor at the answer and a
    text above it (relation, noun phrase, arm)."""
    header = Header(stamp=stamp, frame_id=frame_id)
    markers = [Marker(header=header, action=Marker.DELETEALL)]
    if outcome.status is Status.ANSWERED and outcome.point is not None:
        centre = floor_point_msg(outcome.point)
        colour = ColorRGBA(r=float(style.rgb[0]), g=float(style.rgb[1]), b=float(style.rgb[2]), a=float(style.alpha))
        disc = Marker(header=header, ns=ANSWER_DISC_NAMESPACE, id=0, type=Marker.CYLINDER, color=colour)
        disc.pose.position = Point(x=centre.x, y=centre.y, z=centre.z + style.disc_height / 2.0)
        disc.pose.orientation.w = 1.0
        disc.scale.x = disc.scale.y = 2.0 * radius
        disc.scale.z = style.disc_height
        text = Marker(
            header=header,
            ns=ANSWER_TEXT_NAMESPACE,
            id=0,
            type=Marker.TEXT_VIEW_FACING,
            text=f"{outcome.relation} {outcome.noun_phrase} ({outcome.arm})",
            color=ColorRGBA(r=colour.r, g=colour.g, b=colour.b, a=1.0),
        )
        text.pose.position = Point(x=centre.x, y=centre.y, z=centre.z + style.text_offset)
        text.pose.orientation.w = 1.0
        text.scale.z = style.text_height
        markers += [disc, text]
    return MarkerArray(markers=markers)
