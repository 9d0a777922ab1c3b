"""What sim_node does, without ROS: one World (or a recorded visit) and the clock of its frames.

A :class:`SimSession` loads a live visit into its World (created lazily from
``sim_node.world.kind``, so a node that only replays recordings never starts a simulator) or
opens a recorded visit; executes primitive actions; plays the coverage tour (live) or the recorded
frames, optionally writing them as a new recording; and stamps every frame with one
:class:`ovman_ros.bundle.FrameClock` for its whole life, so stamps never go back across visits.
Frames: AI2-THOR world in the core (see :mod:`ovman_sim.world`); the node converts to REP 103.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ovman_ros.bundle import FrameClock

from ovman_core.actions import ActionResult, action_sequence
from ovman_core.config import OvmanConfig, SimConfig
from ovman_core.grid import GridError, OccupancyGridFields, grid_from_reachable, to_occupancy_fields
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, WorldState
from ovman_sim.recording import (
    RawFrame,
    RecordingError,
    VisitInfo,
    VisitWriter,
    read_visit,
    read_visit_info,
    read_visit_raw,
)
from ovman_sim.tours import tour_observations
from ovman_sim.world import Condition, World

WORLD_KINDS = ("embedded", "ai2thor")


class SessionError(ValueError):
    """A request the session cannot serve in its current state, or with these arguments."""


class Mode(str, enum.Enum):
    """What the session holds: nothing yet, a live world, or a recorded visit."""

    EMPTY = "empty"
    LIVE = "live"
    RECORDING = "recording"


@dataclasses.dataclass(frozen=True)
class Frame:
    """One published frame: the observation, every object's ground-truth state, and its stamp
    (integer nanoseconds of sim time)."""

    observation: Observation
    objects: WorldState
    stamp_ns: int


def make_world(sim: SimConfig) -> World:
    """The World named by ``sim.world.kind``: ``embedded`` (EmbeddedWorld) or ``ai2thor`` (ThorWorld)."""
    kind = sim.world.kind
    if kind == "embedded":
        from ovman_sim.embedded import EmbeddedWorld

        return EmbeddedWorld(sim)
    if kind == "ai2thor":
        from ovman_sim.thor import ThorWorld

        return ThorWorld(sim)
    raise SessionError(f"config sim_node.world.kind = {kind!r}; expected one of {', '.join(WORLD_KINDS)}")


class SimSession:
    """One simulator (or recording) and the frame clock; not thread-safe (one caller at a time)."""

    def __init__(self, config: OvmanConfig, world_factory: Callable[[SimConfig], World] = make_world) -> None:
        self.config = config
        self.clock = FrameClock(config.sim_node.node.step_dt)
        self._world_factory = world_factory
        self._world: World | None = None
        self.mode = Mode.EMPTY
        self.scene = ""
        self._recording: Path | None = None
        self._recording_info: VisitInfo | None = None
        self.frame_count = 0
        self.latest: Frame | None = None

    @property
    def world(self) -> World:
        """The live World, created on first use."""
        if self._world is None:
            self._world = self._world_factory(self.config.sim_node)
        return self._world

    def load_scene(
        self,
        scene: str,
        objects: WorldState | None = None,
        pose: AgentPose | None = None,
        mover: tuple[str, int] | None = None,
        camera: bool = True,
        condition: tuple[Condition, int] = (Condition.BASELINE, 0),
    ) -> Frame:
        """Load a live visit: ``scene`` with exactly ``objects`` (default: the scene's own), the
        agent at ``pose`` (default: the scene's start), the mover carrying ``mover[0]`` with seed
        ``mover[1]``, rendered under ``condition`` (and its seed). Returns the first frame (without
        ``camera``: not rendered, as in :meth:`act`)."""
        if not scene:
            raise SessionError("load a visit: the scene name is empty")
        world = self.world
        try:
            world.set_condition(*condition)
            world.reset(scene, objects, pose)
            if mover is not None:
                world.start_mover(*mover)
        except (ValueError, KeyError, OSError, RuntimeError) as err:
            # Unknown scene, invalid object states or start pose, or a simulator that failed.
            self.mode = Mode.EMPTY
            raise SessionError(f"cannot load scene {scene!r}: {err}") from err
        self.mode, self.scene = Mode.LIVE, scene
        self._recording = self._recording_info = None
        self.frame_count = 0
        return self._frame(world.observe() if camera else world.observe_pose(), world.objects())

    def load_recording(self, path: str | Path) -> int:
        """Open a recorded visit to play instead of a live world; returns its frame count."""
        try:
            info, count = read_visit_info(path)
        except RecordingError as err:
            raise SessionError(str(err)) from err
        self.mode, self.scene = Mode.RECORDING, info.scene
        self._recording, self._recording_info = Path(path), info
        self.frame_count = count
        self.latest = None
        return count

    def act(self, action: str, camera: bool = True) -> tuple[ActionResult, Frame]:
        """Execute one primitive action (AI2-THOR name) in the live world; returns its result and
        the frame observed after it (without ``camera``: not rendered, see World.observe_pose)."""
        if self.mode is not Mode.LIVE:
            raise SessionError(f"act: no live world is loaded (the session holds {self.mode.value}); call load_visit")
        try:
            (parsed,) = action_sequence([action])
        except ValueError as err:
            raise SessionError(str(err)) from None
        result = self.world.step(parsed)
        observation = self.world.observe() if camera else self.world.observe_pose()
        return result, self._frame(observation, self.world.objects())

    def act_sequence(
        self,
        actions: Sequence[str],
        expected: Sequence[AgentPose],
        position_tolerance: float,
        yaw_tolerance_deg: float,
        camera: bool = True,
    ) -> tuple[list[tuple[ActionResult, Frame]], str]:
        """Execute ``actions`` in order, each as :meth:`act` does, stopping after the first that
        fails, collides, or ends farther than ``position_tolerance`` (m, floor) or
        ``yaw_tolerance_deg`` from its ``expected`` pose (none given: no pose check).

        Returns the executed actions' results and frames, in order, and why the sequence ended
        early ("" when every action ran as expected). Unknown action names fail before any runs."""
        if expected and len(expected) != len(actions):
            raise SessionError(f"act_sequence: {len(actions)} actions but {len(expected)} expected poses")
        if self.mode is not Mode.LIVE:
            raise SessionError(f"act: no live world is loaded (the session holds {self.mode.value}); call load_visit")
        try:
            action_sequence(actions)
        except ValueError as err:
            raise SessionError(str(err)) from None
        done: list[tuple[ActionResult, Frame]] = []
        for index, action in enumerate(actions):
            result, frame = self.act(action, camera)
            done.append((result, frame))
            if result.collided or not result.success:
                what = "collided" if result.collided else "failed"
                return done, f"action {index} ({action}) {what}{': ' + result.message if result.message else ''}"
            if expected:
                distance, turn = frame.observation.pose.deviation(expected[index])
                if distance > position_tolerance or turn > yaw_tolerance_deg:
                    return done, (
                        f"action {index} ({action}) ended {distance:.4f} m and {turn:.3f} deg from its expected pose"
                    )
        return done, ""

    def play(self, record_path: str | Path | None = None, visit: int = 1) -> Iterator[Frame]:
        """Yield the frames of the loaded visit: the coverage tour of the live world, or every frame
        of the loaded recording. With ``record_path`` they are also written there as a recording
        (complete only when the iteration finishes; removed if it stops early or fails)."""
        if self.mode is Mode.EMPTY:
            raise SessionError("play_tour: nothing is loaded; call load_visit first")
        writer = None
        if record_path:
            info = self._recording_info or VisitInfo(
                self.scene, visit, self.config.sim_node.node.step_dt, self.config.frames
            )
            if self.mode is Mode.RECORDING:
                info = dataclasses.replace(info, visit=visit)
            try:
                writer = VisitWriter(record_path, info)
            except RecordingError as err:
                raise SessionError(str(err)) from err
        return self._play(writer)

    def play_recorded(self) -> Iterator[RawFrame]:
        """Yield the loaded recording's frames as stored, for publishing unchanged (``ros2 bag
        play``): CDR bytes with their recorded stamps, which restart with every recording instead
        of following this session's clock. Errors of a damaged recording as SessionError."""
        if self.mode is not Mode.RECORDING or self._recording is None:
            raise SessionError(f"play a recording: no recording is loaded (the session holds {self.mode.value})")
        try:
            frames = read_visit_raw(self._recording)
        except RecordingError as err:
            raise SessionError(str(err)) from err
        return self._recorded(frames)

    @staticmethod
    def _recorded(frames: Iterator[RawFrame]) -> Iterator[RawFrame]:
        try:
            yield from frames
        except RecordingError as err:
            raise SessionError(str(err)) from err

    def _play(self, writer: VisitWriter | None) -> Iterator[Frame]:
        try:
            for observation, objects in self._source():
                frame = self._frame(observation, objects)
                if writer is not None:
                    writer.write(observation, objects)
                yield frame
            if writer is not None:
                writer.close()
        except RecordingError as err:
            # A damaged recording being played, or a frame the recorder refused.
            if writer is not None:
                writer.abort()
            raise SessionError(str(err)) from err
        except BaseException:
            if writer is not None:
                writer.abort()
            raise

    def _source(self) -> Iterator[tuple[Observation, WorldState]]:
        if self.mode is Mode.RECORDING:
            assert self._recording is not None
            for recorded in read_visit(self._recording):
                yield recorded.observation, recorded.objects
            return
        sim = self.config.sim_node
        world = self.world
        for observation in tour_observations(world, sim.tour, sim.world):
            yield observation, world.objects()

    def occupancy(self) -> OccupancyGridFields | None:
        """The /map fields of the live world's reachable grid (None while no live world is loaded)."""
        if self.mode is not Mode.LIVE:
            return None
        try:
            grid = grid_from_reachable(self.world.reachable_positions(), self.config.sim_node.world.grid_size)
        except GridError as err:
            raise SessionError(f"scene {self.scene!r}: cannot build the occupancy grid: {err}") from err
        return to_occupancy_fields(grid, self.config.frames.map)

    def close(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None
        self.mode = Mode.EMPTY

    def _frame(self, observation: Observation, objects: WorldState) -> Frame:
        frame = Frame(observation, objects, self.clock.stamp(observation.step))
        self.latest = frame
        return frame


__all__ = ["Frame", "Mode", "SessionError", "SimSession", "make_world"]
