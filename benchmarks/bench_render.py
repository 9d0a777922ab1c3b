"""Frames per second of the embedded world's renderer, and of the alternatives that were tried.

A 5-room home with at least 150 objects (config overrides: rooms_min = rooms_max = 5 and more
small objects per room), 320×240, one core (the process is pinned to one CPU). Frames are taken at
the poses of the home's coverage tour. Prints one line per engine:

- ``zbuffer-faces (numba)``: ovman_sim.render, the engine in use (per-face screen rectangle +
  exact ray/plane test, z-buffer), with and without the rest of ``EmbeddedWorld.observe``
  (segment relabelling);
- ``ray-slab brute force (numba)``: per pixel, a slab test against every box, no culling;
- ``ray-slab vectorised (numpy)``: rays × boxes arrays (measured on a few frames only: slow).

Also prints the numba compile time with an empty cache and the start-up time with a warm cache,
each in a fresh interpreter. Run: ``python benchmarks/bench_render.py [--frames N]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numba
import numpy as np

from ovman_core.config import load_config
from ovman_core.frames import optical_axes_thor
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.homes import scene_name
from ovman_sim.render import render
from ovman_sim.tours import plan_tour

MIN_OBJECTS = 150


def big_home_world() -> tuple[EmbeddedWorld, int]:
    """An EmbeddedWorld config with 5 rooms and a seed whose home holds >= MIN_OBJECTS objects."""
    config = load_config()
    sim = config.sim_node
    embedded = dataclasses.replace(
        sim.embedded,
        rooms_min=5,
        rooms_max=5,
        furniture_per_room_min=5,
        furniture_per_room_max=7,
        small_objects_per_room_min=24,
        small_objects_per_room_max=30,
    )
    world = EmbeddedWorld(dataclasses.replace(sim, embedded=embedded))
    for seed in range(100):
        world.reset(scene_name(seed))
        if len(world.objects()) >= MIN_OBJECTS:
            return world, seed
    raise RuntimeError(f"no seed in 0..99 gives a 5-room home with {MIN_OBJECTS} objects; raise the overrides")


@numba.njit(cache=True)
def _brute_force(lo, hi, cam, axes, fx, fy, cx, cy, width, height, near, far):
    depth = np.full((height, width), np.nan, dtype=np.float32)
    index = np.full((height, width), -1, dtype=np.int32)
    d = np.empty(3)
    for v in range(height):
        for u in range(width):
            x, y = (u - cx) / fx, (v - cy) / fy
            for k in range(3):
                d[k] = axes[k, 0] * x + axes[k, 1] * y + axes[k, 2]
            best = np.inf
            hit = -1
            for b in range(lo.shape[0]):
                t0, t1 = -np.inf, np.inf
                for k in range(3):
                    if d[k] != 0.0:
                        a, c = (lo[b, k] - cam[k]) / d[k], (hi[b, k] - cam[k]) / d[k]
                        t0, t1 = max(t0, min(a, c)), min(t1, max(a, c))
                    elif cam[k] < lo[b, k] or cam[k] > hi[b, k]:
                        t0 = np.inf
                if t0 <= t1 and near <= t0 < best and t0 <= far:
                    best, hit = t0, b
            if hit >= 0:
                depth[v, u] = best
                index[v, u] = hit
    return depth, index


def _numpy_slab(lo, hi, cam, axes, intrinsics, near, far):
    rays = intrinsics.pixel_rays().reshape(-1, 3) @ axes.T  # (P, 3) world directions, optical z = 1
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / rays
        a = (lo[None, :, :] - cam) * inv[:, None, :]
        b = (hi[None, :, :] - cam) * inv[:, None, :]
        t0 = np.nanmax(np.minimum(a, b), axis=2)
        t1 = np.nanmin(np.maximum(a, b), axis=2)
    t0 = np.where((t0 <= t1) & (t0 >= near) & (t0 <= far), t0, np.inf)
    index = t0.argmin(axis=1)
    depth = t0[np.arange(len(index)), index]
    return depth.reshape(intrinsics.height, intrinsics.width), index.reshape(intrinsics.height, intrinsics.width)


def _timed(fn, poses) -> float:
    start = time.perf_counter()
    for pose in poses:
        fn(pose)
    return (time.perf_counter() - start) / len(poses)


def _startup(cache_dir: str | None) -> float:
    """Seconds for a fresh interpreter to import the renderer and draw its first frame."""
    code = (
        "import time; t = time.perf_counter();"
        "from ovman_sim.embedded import EmbeddedWorld; w = EmbeddedWorld(); w.reset('embedded-0'); w.observe();"
        "print(time.perf_counter() - t)"
    )
    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=200, help="frames per engine (default 200)")
    parser.add_argument("--numpy-frames", type=int, default=2, help="frames for the slow numpy engine (default 2)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    world, seed = big_home_world()
    sim = world.config
    boxes, _, _ = world._geometry()
    home = world.home
    print(
        f"home embedded-{seed} (5-room overrides): {len(home.rooms)} rooms, {len(world.objects())} objects, "
        f"{boxes.lo.shape[0]} boxes; {sim.camera.width}x{sim.camera.height}, 1 core, numba {numba.__version__}, "
        f"numpy {np.__version__}"
    )
    plan = plan_tour(world.reachable_positions(), world.agent_pose().floor, sim.world.grid_size, sim.tour)
    poses = plan.poses(sim.world.rotate_step_deg)
    poses = [poses[k % len(poses)] for k in range(args.frames)]
    K, near, far = world.intrinsics, sim.camera.near, sim.camera.far
    height = sim.world.camera_height

    def camera(pose):
        return np.array([pose.x, height, pose.z]), optical_axes_thor(pose.yaw_deg, pose.horizon_deg)

    def engine_render(pose):
        cam, axes = camera(pose)
        render(boxes, tuple(cam), axes, K, near, far, world._shading)

    def engine_observe(pose):
        world.teleport(pose)
        world.observe()

    def engine_brute(pose):
        cam, axes = camera(pose)
        _brute_force(boxes.lo, boxes.hi, cam, axes, K.fx, K.fy, K.cx, K.cy, K.width, K.height, near, far)

    def engine_numpy(pose):
        cam, axes = camera(pose)
        _numpy_slab(boxes.lo, boxes.hi, cam, axes, K, near, far)

    for fn in (engine_render, engine_brute):
        fn(poses[0])  # compile or load from cache outside the timing
    rows = [
        ("zbuffer-faces (numba), render only", _timed(engine_render, poses)),
        ("zbuffer-faces (numba), EmbeddedWorld.observe", _timed(engine_observe, poses)),
        ("ray-slab brute force (numba)", _timed(engine_brute, poses[: max(args.frames // 10, 5)])),
        ("ray-slab vectorised (numpy)", _timed(engine_numpy, poses[: args.numpy_frames])),
    ]
    for name, seconds in rows:
        print(f"{name:48s} {seconds * 1e3:9.2f} ms/frame {1.0 / seconds:9.1f} fps")
    with tempfile.TemporaryDirectory() as empty:
        print(f"{'first frame in a fresh process, empty numba cache':48s} {_startup(empty):9.2f} s")
    print(f"{'first frame in a fresh process, warm numba cache':48s} {_startup(None):9.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
