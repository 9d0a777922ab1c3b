"""``ovman show-world``: draw an embedded home from above and a strip of its camera frames.

Writes ``DIR/top_down.png`` (rooms, walls, doorways, furniture and small objects labelled with
their instance ids, the reachable grid, the start pose and the tour route) and ``DIR/frames.png``
(RGB, planar depth and per-frame segment ids: the busiest view of each sixth of the tour). Coordinates are AI2-THOR
world (x, z) in metres; the plot shows x to the right and z up.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ovman_core.config import ConfigError, load_config

FRAME_COLUMNS = 6
"""Number of camera frames in the strip."""


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("--seed", type=int, default=0, help="home seed: the scene is embedded-<seed> (default 0)")
    parser.add_argument("--out", default=None, help="output directory (default runs/show-world/embedded-<seed>)")
    parser.add_argument(
        "--config", default=None, help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)"
    )
    return run


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"ovman show-world: {err}", file=sys.stderr)
        return 1
    if args.seed < 0:
        print(f"ovman show-world: --seed must be a non-negative integer, got {args.seed}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("runs") / "show-world" / f"embedded-{args.seed}"
    out.mkdir(parents=True, exist_ok=True)
    top, frames = write_figures(config.sim_node, args.seed, out)
    print(f"wrote {top}")
    print(f"wrote {frames}")
    return 0


def write_figures(sim, seed: int, out: Path) -> tuple[Path, Path]:
    """Render the two figures of ``embedded-<seed>`` into ``out``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ovman_sim.embedded import EmbeddedWorld
    from ovman_sim.homes import CATEGORIES, scene_name
    from ovman_sim.tours import plan_tour, tour_observations

    world = EmbeddedWorld(sim)
    world.reset(scene_name(seed))
    home = world.home
    state = world.objects()
    reachable = world.reachable_positions()
    plan = plan_tour(reachable, world.agent_pose().floor, sim.world.grid_size, sim.tour)

    # ---- top-down map
    scale = 1.1
    fig, ax = plt.subplots(figsize=(home.size_x * scale + 1.5, home.size_z * scale + 1.2))
    for room in home.rooms:
        ax.add_patch(
            plt.Rectangle(
                (room.x_min, room.z_min),
                room.x_max - room.x_min,
                room.z_max - room.z_min,
                facecolor=room.floor_colour,
                edgecolor="none",
                alpha=0.55,
                zorder=0,
            )
        )
        ax.text(
            room.x_min + 0.15,
            room.z_max - 0.2,
            room.name,
            fontsize=9,
            weight="bold",
            va="top",
            zorder=6,
            color="#202020",
        )
    for wall in home.walls:
        ax.add_patch(
            plt.Rectangle(
                (wall.lo[0], wall.lo[2]),
                wall.hi[0] - wall.lo[0],
                wall.hi[2] - wall.lo[2],
                facecolor="#303030",
                edgecolor="none",
                zorder=4,
            )
        )
    if reachable:
        pts = np.array(reachable)
        ax.scatter(pts[:, 0], pts[:, 1], s=1.5, c="#3060a0", alpha=0.45, zorder=1, linewidths=0)
    furniture = [o for o in state if CATEGORIES.get(o.category) and CATEGORIES[o.category].furniture]
    small = [o for o in state if o not in furniture]
    for group, fontsize, zorder in ((furniture, 5.5, 2), (small, 4.0, 3)):
        for obj in sorted(group, key=lambda o: o.box.lo[1]):
            colour = world.appearance(obj.instance_id).primary
            fp = obj.box.footprint
            ax.add_patch(
                plt.Rectangle(
                    (fp.x_min, fp.z_min),
                    fp.x_max - fp.x_min,
                    fp.z_max - fp.z_min,
                    facecolor=colour,
                    edgecolor="black",
                    linewidth=0.4,
                    zorder=zorder,
                )
            )
            ax.text(
                *fp.center,
                obj.instance_id,
                fontsize=fontsize,
                ha="center",
                va="center",
                zorder=7,
                color="black",
                bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "alpha": 0.6, "linewidth": 0},
            )
    if plan.waypoints:
        route = np.array(plan.waypoints)
        ax.plot(route[:, 0], route[:, 1], "-", color="#e07000", linewidth=0.8, alpha=0.7, zorder=5)
        ax.scatter(route[:, 0], route[:, 1], s=12, c="#e07000", zorder=5)
    start = world.agent_pose()
    ax.plot(start.x, start.z, marker="^", color="red", markersize=9, zorder=8)
    categories = len({o.category for o in state})
    ax.set_title(
        f"{home.scene}: {len(home.rooms)} rooms, {len(state)} objects, {categories} categories; "
        f"dots = reachable grid, orange = tour ({len(plan.waypoints)} waypoints), red = start"
    )
    ax.set_xlim(-0.3, home.size_x + 0.3)
    ax.set_ylim(-0.3, home.size_z + 0.3)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("z (m)")
    fig.tight_layout()
    top = out / "top_down.png"
    fig.savefig(top, dpi=160)
    plt.close(fig)

    # ---- frames at waypoints spread over the tour
    observations = list(tour_observations(world, sim.tour, sim.world))
    # The frame showing the most objects from each of FRAME_COLUMNS equal stretches of the tour.
    chunks = np.array_split(np.arange(len(observations)), min(FRAME_COLUMNS, len(observations)))
    chosen = [max((observations[k] for k in chunk), key=lambda o: len(o.segment_labels)) for chunk in chunks]
    fig, axes = plt.subplots(3, len(chosen), figsize=(3.2 * len(chosen), 7.6), squeeze=False)
    palette = np.random.default_rng(0).uniform(0.15, 1.0, size=(256, 3))
    palette[0] = 0.0
    for col, obs in enumerate(chosen):
        axes[0, col].imshow(obs.rgb)
        axes[0, col].set_title(f"({obs.pose.x:g}, {obs.pose.z:g}) yaw {obs.pose.yaw_deg:g}", fontsize=8)
        depth_img = axes[1, col].imshow(np.ma.masked_invalid(obs.depth), cmap="viridis", vmin=0.0, vmax=8.0)
        axes[2, col].imshow(palette[obs.segments % 256])
        axes[2, col].set_title(f"{len(obs.segment_labels)} segments", fontsize=8)
        for row in range(3):
            axes[row, col].set_xticks([])
            axes[row, col].set_yticks([])
    axes[0, 0].set_ylabel("RGB")
    axes[1, 0].set_ylabel("depth (m)")
    axes[2, 0].set_ylabel("segments")
    fig.colorbar(depth_img, ax=axes[1, :].tolist(), fraction=0.02, pad=0.01)
    frames = out / "frames.png"
    fig.savefig(frames, dpi=110)
    plt.close(fig)
    world.close()
    return top, frames
