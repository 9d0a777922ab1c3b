"""query_node: ``ovman/query`` served from the two latest visit maps through the reference agent.

A thin node around :func:`ovman_query.query_requests.answer_query`: it keeps the latest
``ovman/map/visit1`` and ``visit2`` (transient local), or a pair loaded from the map store (at
start-up, ``load_stored_visits``, and on ``query/load_visits``); a map too large, not finite or out
of range is refused, and the refusal replaces the visit's older map. It publishes, latched, the
answer markers after every query and ``ovman/changes`` for every new pair of maps. It never
receives ground truth. Parameters: its own plus mapping_node's ``encoder.*`` (queries are embedded
with the maps' encoder) and ``mapping.store_dir``. Frames: REP 103 ``map`` on the wire.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from builtin_interfaces.msg import Time
from ovman_ros.messages import stamp_of
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from visualization_msgs.msg import MarkerArray

from ovman_core.config import OvmanConfig, load_config
from ovman_interfaces.msg import ChangeSet
from ovman_interfaces.msg import InstanceMap as InstanceMapMsg
from ovman_interfaces.srv import LoadVisits, Query
from ovman_mapping.encoders import FeatureEncoder, make_encoder
from ovman_mapping.map_messages import MapMessageError, instance_map_from_msg, instance_map_msg
from ovman_mapping.map_store import STORE_DIR_KEY, MapStore, MapStoreError, StoredVisit, store_dir
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
        self.store = MapStore(store_dir(self.config.mapping_node.mapping.store_dir))
        self.create_service(LoadVisits, names.QUERY_LOAD_VISITS, self._on_load_visits)
        self.get_logger().info(f"serving {names.QUERY}; encoder {self.agent.encoder_description}")
        if self.config.query_node.load_stored_visits:
            try:
                loaded = self.load_visits("")
            except (MapStoreError, MapMessageError) as err:
                self.get_logger().warning(f"no stored visit pair loaded at start-up: {err}")
            else:
                self.get_logger().info(f"loaded stored visits {loaded[0]} and {loaded[1]} from {self.store.root}")

    # ---------------------------------------------------------------- parameters

    def _declare_parameters(self, config: OvmanConfig) -> OvmanConfig:
        updated = config_from_parameters(
            self, config, [(NODE_NAME, ""), (ENCODER_NODE, ENCODER_PREFIX), (ENCODER_NODE, STORE_DIR_KEY)]
        )
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

    def load_visits(self, visit2: str) -> tuple[str, str]:
        """Hold the stored pair of visit 2 ``visit2`` ("" the latest) as if mapping_node had just
        published it (the same wire conversion, so answers are the same); its map_ids.
        MapStoreError when the store has no such pair or a map of another encoder."""
        pair = self.store.pair(visit2 or None)
        for entry in pair:
            if entry.map.encoder != self.agent.encoder_description:
                raise MapStoreError(
                    f"{self.store.path_of(entry.map_id)}: built by encoder {entry.map.encoder!r}, this node embeds "
                    f"queries with {self.agent.encoder_description!r} (set encoder.* as the maps were built)"
                )
        held = [self._held(entry) for entry in pair]
        for visit, visit_map in zip(VISITS, held, strict=True):
            self.maps[visit] = visit_map
        self._publish_changes()
        return pair[0].map_id, pair[1].map_id

    def _held(self, entry: StoredVisit) -> VisitMap:
        stamp = Time(sec=entry.created_ns // 10**9, nanosec=entry.created_ns % 10**9)
        message = instance_map_msg(entry.map, entry.stamps, entry.frame_id, stamp, entry.map_id, entry.follows or "")
        instance_map, ids = instance_map_from_msg(message, self.config.shared.limits)
        return VisitMap(instance_map, ids, entry.created_ns, entry.map_id, entry.follows or "")

    def _on_load_visits(self, request: LoadVisits.Request, response: LoadVisits.Response) -> LoadVisits.Response:
        try:
            response.visit1, response.visit2 = self.load_visits(request.visit2)
        except (MapStoreError, MapMessageError) as err:
            response.success, response.message = False, str(err)
            self.get_logger().error(f"{names.QUERY_LOAD_VISITS}: {err}")
            return response
        response.success = True
        response.message = f"answering from stored visits {response.visit1} and {response.visit2}"
        self.get_logger().info(response.message)
        return response

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
