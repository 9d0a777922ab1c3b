"""Test helper process: a small external agent, independent of OVMAN's code, for the arm external.

It keeps the contract of docs/external-agent.md and imports nothing of OVMAN but the message
types: it reads only what a robot gives (a driver's depth and camera_info, the frame tree on /tf
and /tf_static, chained here by hand; never the simulator's instance topics or its ground truth), and
serves ``mapping/start_visit``, ``mapping/finish_visit`` and ``ovman/query`` in its namespace.

What it does (a change detector that ignores the category): each depth pixel (one in
``STRIDE``² of them) is back-projected into ``map`` (REP 103, z up, metres) and counted in the
floor cell (``CELL`` m) under it when it lies ``BAND`` m above the floor. A visit's occupied cells
are those with at least ``MIN_POINTS`` points. Asked about something that appeared, it answers the
centroid of the largest 8-connected set of cells occupied in visit 2 but not in visit 1; about
something removed, moved or former, the converse; for stable and moving it abstains. Each answer
is appended to the JSON-lines file ``ANSWERS`` (argument 1) for the test to compare.

Usage: python external_agent.py ANSWERS --ros-args -r __ns:=/agent
           -r camera/depth/image_raw:=/player/camera/depth/image_raw -r /tf:=/player/tf ... (docs/external-agent.md)
Exits cleanly on SIGINT or SIGTERM, and when its stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from scipy import ndimage
from sensor_msgs.msg import CameraInfo, Image
from tf2_msgs.msg import TFMessage

from ovman_interfaces.srv import MapVisit, Query

STRIDE = 4
CELL = 0.25
BAND = (0.15, 1.6)
MIN_POINTS = 3
FINISH_WAIT_S = 60.0
CAMERA_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
STATIC_QOS = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
MAP_FRAME = "map"


def rotation(q) -> np.ndarray:
    """The rotation matrix of a unit quaternion (geometry_msgs/Quaternion)."""
    x, y, z, w = q.x, q.y, q.z, q.w
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def depth_metres(message: Image) -> np.ndarray:
    """A depth image in metres (NaN where invalid), from 16UC1 millimetres or 32FC1 metres."""
    if message.encoding == "16UC1":
        mm = np.frombuffer(bytes(message.data), dtype="<u2").reshape(message.height, message.width)
        return np.where(mm > 0, mm.astype(np.float32) / 1000.0, np.nan)
    if message.encoding == "32FC1":
        return np.frombuffer(bytes(message.data), dtype="<f4").reshape(message.height, message.width).copy()
    raise ValueError(f"unexpected depth encoding {message.encoding!r}")


class ExternalAgent(Node):
    def __init__(self, answers: Path) -> None:
        super().__init__("external_agent")
        self.answers = answers
        self.lock = threading.Lock()
        self.visit = 0
        self.frames = 0
        self.cells: dict[int, dict[tuple[int, int], int]] = {1: {}, 2: {}}
        self.pending: dict[int, dict[str, object]] = {}
        services = MutuallyExclusiveCallbackGroup()  # apart from the camera's, so finish_visit may wait
        self.create_service(MapVisit, "mapping/start_visit", self.start_visit, callback_group=services)
        self.create_service(MapVisit, "mapping/finish_visit", self.finish_visit, callback_group=services)
        self.create_service(Query, "ovman/query", self.query, callback_group=services)
        self.create_subscription(Image, "camera/depth/image_raw", lambda m: self.add("depth", m), CAMERA_QOS)
        self.create_subscription(CameraInfo, "camera/color/camera_info", lambda m: self.add("info", m), CAMERA_QOS)
        self.static: dict[str, object] = {}
        """child frame -> its TransformStamped from /tf_static."""
        self.create_subscription(TFMessage, "/tf", self.add_transforms, CAMERA_QOS)
        self.create_subscription(TFMessage, "/tf_static", self.add_static, STATIC_QOS)

    def add_static(self, message: TFMessage) -> None:
        with self.lock:
            self.static.update({t.child_frame_id: t for t in message.transforms})

    def add_transforms(self, message: TFMessage) -> None:
        # The simulator stamps each frame's moving transforms with the frame's own stamp.
        stamp = message.transforms[0].header.stamp.sec * 10**9 + message.transforms[0].header.stamp.nanosec
        self.add("tf", {t.child_frame_id: t for t in message.transforms}, stamp)

    def add(self, kind: str, message, stamp: int | None = None) -> None:
        if stamp is None:
            stamp = message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
        with self.lock:
            if self.visit == 0:
                return
            parts = self.pending.setdefault(stamp, {})
            parts[kind] = message
            if len(parts) < 3:
                return
            del self.pending[stamp]
            self.fuse(parts["depth"], parts["info"], self.pose(parts["depth"].header.frame_id, parts["tf"]))
            self.frames += 1

    def pose(self, frame: str, moving: dict) -> tuple[np.ndarray, np.ndarray]:
        """(rotation, translation) of ``frame`` in ``map``: its chain of transforms up the tree."""
        r, t = np.eye(3), np.zeros(3)
        while frame != MAP_FRAME:
            edge = moving.get(frame) or self.static[frame]
            q, p = edge.transform.rotation, edge.transform.translation
            step = rotation(q)
            r, t = step @ r, step @ t + np.array([p.x, p.y, p.z])
            frame = edge.header.frame_id
        return r, t

    def fuse(self, depth_msg: Image, info: CameraInfo, pose: tuple[np.ndarray, np.ndarray]) -> None:
        depth = depth_metres(depth_msg)[::STRIDE, ::STRIDE]
        v, u = np.mgrid[0 : depth_msg.height : STRIDE, 0 : depth_msg.width : STRIDE]
        fx, cx, fy, cy = info.k[0], info.k[2], info.k[4], info.k[5]
        valid = np.isfinite(depth) & (depth > 0)
        z = depth[valid]
        optical = np.stack([(u[valid] - cx) / fx * z, (v[valid] - cy) / fy * z, z], axis=1)
        world = optical @ pose[0].T + pose[1]
        band = world[(world[:, 2] >= BAND[0]) & (world[:, 2] <= BAND[1])]
        counts = self.cells[self.visit]
        cells, seen = np.unique(np.floor(band[:, :2] / CELL).astype(int), axis=0, return_counts=True)
        for (i, j), n in zip(cells.tolist(), seen.tolist(), strict=True):
            counts[(i, j)] = counts.get((i, j), 0) + n

    def start_visit(self, request: MapVisit.Request, response: MapVisit.Response) -> MapVisit.Response:
        with self.lock:
            self.visit, self.frames = int(request.visit), 0
            self.cells[self.visit] = {}
            self.pending.clear()
        response.success, response.message = True, f"visit {request.visit} open"
        return response

    def finish_visit(self, request: MapVisit.Request, response: MapVisit.Response) -> MapVisit.Response:
        deadline = time.monotonic() + FINISH_WAIT_S
        while self.frames < request.expected_frames and time.monotonic() < deadline:
            time.sleep(0.01)
        with self.lock:
            response.frames = self.frames
            response.instances = sum(n >= MIN_POINTS for n in self.cells[self.visit].values())
            response.success = self.visit == request.visit and self.frames == request.expected_frames
            response.message = f"visit {self.visit}: {self.frames} frames of {request.expected_frames}"
            self.visit = 0
        return response

    def query(self, request: Query.Request, response: Query.Response) -> Query.Response:
        occupied = {k: {c for c, n in self.cells[k].items() if n >= MIN_POINTS} for k in (1, 2)}
        response.relation, response.noun_phrase = request.relation, request.category
        if request.relation == "appeared":
            changed = occupied[2] - occupied[1]
        elif request.relation in ("removed", "moved", "former"):
            changed = occupied[1] - occupied[2]
        else:
            changed = set()
        point = self.largest_centroid(changed)
        if point is None:
            response.status, response.explanation = Query.Response.ABSTAINED, "no changed cells"
        else:
            response.status, response.answered = Query.Response.ANSWERED, True
            response.goal.header.frame_id = "map"
            response.goal.point.x, response.goal.point.y = point
            response.confidence = 0.5
            response.explanation = f"{len(changed)} changed cells"
        with self.answers.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"category": request.category, "relation": request.relation, "point": point}) + "\n")
        return response

    @staticmethod
    def largest_centroid(cells: set[tuple[int, int]]) -> tuple[float, float] | None:
        if not cells:
            return None
        index = np.array(sorted(cells))
        low = index.min(axis=0)
        grid = np.zeros(tuple(index.max(axis=0) - low + 1), dtype=bool)
        grid[tuple((index - low).T)] = True
        labels, count = ndimage.label(grid, structure=np.ones((3, 3)))
        sizes = ndimage.sum(grid, labels, range(1, count + 1))
        largest = np.argwhere(labels == 1 + int(np.argmax(sizes))) + low
        x, y = (largest.mean(axis=0) + 0.5) * CELL
        return float(x), float(y)


def shutdown_when_stdin_closes() -> None:
    while os.read(0, 4096):
        pass
    rclpy.try_shutdown()


def main(argv: list[str]) -> int:
    args = rclpy.utilities.remove_ros_args(argv)
    if len(args) != 2:
        print(f"usage: {argv[0]} ANSWERS --ros-args ...", file=sys.stderr)
        return 2
    rclpy.init(args=argv)
    threading.Thread(target=shutdown_when_stdin_closes, daemon=True).start()
    node = ExternalAgent(Path(args[1]))
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
