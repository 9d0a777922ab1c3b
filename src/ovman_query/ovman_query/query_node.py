"""query_node: ``ovman/query`` served from the two latest visit maps through the reference agent.

A thin node around :func:`ovman_query.query_requests.answer_query`: it keeps the latest
``ovman/map/visit1`` and ``visit2`` (transient local); a map too large, not finite or out of range is
refused, and the refusal replaces the visit's older map, so no query is answered from another
episode's map. It publishes, latched, the answer markers after every query and ``ovman/changes``
for every new pair of maps. It never receives ground truth. Parameters: ``node_parameters(config,
"query_node")`` plus mapping_node's ``encoder.*`` (queries are embedded with the maps' encoder), read
at start-up. Frames: REP 103 ``map`` on the wire.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ovman_ros.messages import stamp_of
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from visualization_msgs.msg import MarkerArray

from ovman_core.config import OvmanConfig, load_config
from ovman_interfaces.msg import ChangeSet
from ovman_interfaces.msg import InstanceMap as InstanceMapMsg
from ovman_interfaces.srv import Query
from ovman_mapping.encoders import FeatureEncoder, make_encoder
from ovman_mapping.map_messages import MapMessageError, instance_map_from_msg
from ovman_query.association import AssociationError
from ovman_query.change_set import change_set
from ovman_query.query_messages import (
    answer_markers,
    change_set_msg,
    check_answer_style,
    request_from_msg,
    response_msg,
)
from ovman_query.query_requests import CachingAgent, HeldMap, RejectedMap, VisitMap, answer_query, second_visit_of
from ovman_ros import names, qos

NODE_NAME = "query_node"
ENCODER_NODE = "mapping_node"
"""The node whose ``encoder`` section query_node also declares."""
ENCODER_PREFIX = "encoder."
VISITS = (1, 2)


class QueryNode(GraphNode):
    """Holds the latest visit maps, answers queries, publishes the answer marker and the change set."""

    def __init__(self, config: OvmanConfig | None = None, encoder: FeatureEncoder | None = None, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.config = self._declare_parameters(config if config is not None else load_config())
        self.qos_event_warnings = self.config.shared.ros.qos_event_warnings
        check_answer_style(self.config.query_node.markers)
        encoder = encoder if encoder is not None else make_encoder(self.config.mapping_node.encoder)
        self.agent = CachingAgent(self.config, encoder)
        encoder.warm_up()  # a model loads now, not during the first query
        self.maps: dict[int, HeldMap] = dict.fromkeys(VISITS)
        for visit in VISITS:
            self.create_subscription(
                InstanceMapMsg, names.VISIT_MAP.format(visit=visit), functools.partial(self._on_map, visit), qos.LATCHED
            )
        self._changes = self.create_publisher(ChangeSet, names.CHANGES, qos.LATCHED)
        self._markers = self.create_publisher(MarkerArray, names.ANSWER_MARKERS, qos.LATCHED)
        self.create_service(Query, names.QUERY, self._on_query)
        self.get_logger().info(f"serving {names.QUERY}; encoder {self.agent.encoder_description}")

    # ---------------------------------------------------------------- parameters

    def _declare_parameters(self, config: OvmanConfig) -> OvmanConfig:
        updated = config_from_parameters(self, config, [(NODE_NAME, ""), (ENCODER_NODE, ENCODER_PREFIX)])
        self.refuse_parameter_changes()
        return updated

    # ---------------------------------------------------------------- maps

    def _on_map(self, visit: int, message: InstanceMapMsg) -> None:
        topic = names.VISIT_MAP.format(visit=visit)
        try:
            if message.visit != visit:
                raise MapMessageError(f"the message says visit {message.visit}")
            instance_map, ids = instance_map_from_msg(message, self.config.shared.limits)
        except MapMessageError as err:
            self.maps[visit] = RejectedMap(f"{topic}: {err}")
            self.get_logger().error(f"{topic}: refused a map; queries needing visit {visit} get NO_MAP: {err}")
            return
        self.maps[visit] = VisitMap(instance_map, ids, stamp_of(message.header), message.map_id, message.follows)
        self.get_logger().info(f"{topic}: {len(instance_map)} instances ({instance_map.encoder})")
        self._publish_changes()

    def _publish_changes(self) -> None:
        first, second = self.maps[1], self.maps[2]
        if not (isinstance(first, VisitMap) and isinstance(second, VisitMap) and second_visit_of(first, second)):
            return
        map1, map2 = first.instance_map, second.instance_map
        try:
            association = self.agent.associate(map1, map2)
        except AssociationError as err:
            self.get_logger().error(f"no change set for these maps: {err}")
            return
        changes = change_set(map1, map2, association, self.config.task, self.config.query_node.association)
        stamp = self.get_clock().now().to_msg()
        self._changes.publish(change_set_msg(changes, first.ids, second.ids, self.config.frames.map, stamp))

    # ---------------------------------------------------------------- queries

    def _on_query(self, request: Query.Request, response: Query.Response) -> Query.Response:
        outcome = answer_query(
            self.agent, self.maps[1], self.maps[2], request_from_msg(request), self.config.query_node.seed
        )
        stamp = self.get_clock().now().to_msg()
        frame = self.config.frames.map
        self._markers.publish(
            answer_markers(outcome, self.config.task.static_gate_radius, self.config.query_node.markers, frame, stamp)
        )
        return response_msg(outcome, frame, stamp, response)


def main(args: Sequence[str] | None = None) -> int:
    """Console script ``query_node``: spin until Ctrl-C or an external shutdown. 0 then, 1 when it cannot start."""
    return run_node("query_node", QueryNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
