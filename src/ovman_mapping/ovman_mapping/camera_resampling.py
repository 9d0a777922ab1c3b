"""A pinhole camera's frames resampled to a segmentation model's input geometry, and its cells back.

The model sees through its training camera (focal lengths, principal point, image size). A frame is
scaled by model_f / camera_f on each axis (fx and fy apart), cropped or padded (black and no depth,
or the edge pixels) so the principal points coincide: colour by pixel area (two sparse products),
depth by the nearest pixel (planar depth does not change). Back, each camera pixel takes the model
cell its ray falls in, pixels outside the model's view none. Pixel centres lie at integers
(OpenCV/ROS, as :mod:`ovman_core.camera`); a pixel covers [u - 0.5, u + 0.5).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np
from scipy import sparse

from ovman_core.camera import Intrinsics
from ovman_mapping.backprojection import CellLattice


def to_model_coordinates(camera: Intrinsics, model: Intrinsics, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(N, 2) model pixel coordinates of the rays through camera pixel coordinates ``u``, ``v``."""
    u, v = np.asarray(u, dtype=float), np.asarray(v, dtype=float)
    return np.stack(
        [
            _to_model(u, camera.cx, camera.fx, model.cx, model.fx),
            _to_model(v, camera.cy, camera.fy, model.cy, model.fy),
        ],
        axis=-1,
    )


def to_camera_coordinates(camera: Intrinsics, model: Intrinsics, um: np.ndarray, vm: np.ndarray) -> np.ndarray:
    """(N, 2) camera pixel coordinates of the rays through model pixel coordinates ``um``, ``vm``."""
    um, vm = np.asarray(um, dtype=float), np.asarray(vm, dtype=float)
    return np.stack(
        [
            _to_camera(um, camera.cx, camera.fx, model.cx, model.fx),
            _to_camera(vm, camera.cy, camera.fy, model.cy, model.fy),
        ],
        axis=-1,
    )


def _to_model(x: Any, centre: float, focal: float, model_centre: float, model_focal: float) -> Any:
    """Model coordinate of camera coordinate ``x`` on one axis (a float or an array)."""
    return model_centre + model_focal * (x - centre) / focal


def _to_camera(x: Any, centre: float, focal: float, model_centre: float, model_focal: float) -> Any:
    """Camera coordinate of model coordinate ``x`` on one axis (a float or an array)."""
    return centre + focal * (x - model_centre) / model_focal


def view_share(camera: Intrinsics, model: Intrinsics) -> float:
    """The share of the model's input area (its ``width`` x ``height`` pixels) the camera's image
    covers, in [0, 1]: 1 when the camera sees at least the model's whole view."""
    shares = []
    for size, centre, focal, model_size, model_centre, model_focal in (
        (camera.width, camera.cx, camera.fx, model.width, model.cx, model.fx),
        (camera.height, camera.cy, camera.fy, model.height, model.cy, model.fy),
    ):
        lo = _to_model(-0.5, centre, focal, model_centre, model_focal)
        hi = _to_model(size - 0.5, centre, focal, model_centre, model_focal)
        shares.append(max(0.0, min(hi, model_size - 0.5) - max(lo, -0.5)) / model_size)
    return shares[0] * shares[1]


def is_whole_multiple(camera: Intrinsics, model: Intrinsics, scale: int) -> bool:
    """Whether ``camera`` is ``model`` with every pixel split into ``scale`` x ``scale`` pixels (the
    same rays): its size ``scale`` times the model's, its focal lengths too, its principal point
    ``scale`` c + (``scale`` - 1) / 2, equal to float rounding (a relative 1e-9)."""

    def same(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)

    return (
        scale >= 1
        and (camera.width, camera.height) == (scale * model.width, scale * model.height)
        and same(camera.fx, scale * model.fx)
        and same(camera.fy, scale * model.fy)
        and same(camera.cx, scale * model.cx + (scale - 1) / 2)
        and same(camera.cy, scale * model.cy + (scale - 1) / 2)
    )


@dataclasses.dataclass(frozen=True, eq=False)
class CameraResampling:
    """Frames of ``camera`` resampled to ``model`` (see the module docstring), whose output cells are
    ``cell`` x ``cell`` model pixels from its corner (a model side divisible by ``cell``). Model
    pixels beyond the camera's image are ``padding``: ``black`` (black colour, invalid depth) or
    ``edge`` (the nearest edge pixel's colour and depth, which the network reads only: no camera
    pixel lies there).

    - ``row_weights`` (model height, camera height), ``column_weights`` (model width, camera width):
      float32 CSR, the share of each model pixel's extent each camera pixel covers (rows sum to 1,
      less where a model pixel reaches past the camera's image with black padding).
    - ``depth_rows`` (model height,), ``depth_columns`` (model width,): the camera pixel whose area
      holds each model pixel centre (ties: the lower one, as :func:`segnet.network_input` samples a
      block's top-left pixel); -1 outside the camera's image (black padding) or the nearest (edge).
    - ``cell_rows`` (camera height,), ``cell_columns`` (camera width,): the model cell row or column
      each camera pixel's centre falls in; the cell count (one past the last) outside the model's view.
    - ``lattice``: where back-projection samples the cells on the camera's pixels, one pixel a cell
      the camera sees, the one nearest the cell's centre (ties: the higher, as the cell path's
      ``cell // 2``).
    """

    camera: Intrinsics
    model: Intrinsics
    cell: int
    padding: str
    row_weights: sparse.csr_matrix
    column_weights: sparse.csr_matrix
    depth_rows: np.ndarray
    depth_columns: np.ndarray
    cell_rows: np.ndarray
    cell_columns: np.ndarray
    lattice: CellLattice

    @property
    def cell_shape(self) -> tuple[int, int]:
        """(rows, columns) of the model's output cells."""
        return self.model.height // self.cell, self.model.width // self.cell

    def to_model(self, rgb: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(uint8 (h, w, 3), (h, w) depth of ``depth``'s dtype, NaN where invalid) at the model's
        geometry from the camera's uint8 (H, W, 3) ``rgb`` and planar ``depth`` (H, W)."""
        height, width = self.camera.height, self.camera.width
        model_height, model_width = self.model.height, self.model.width
        colour = self.row_weights @ rgb.reshape(height, width * 3).astype(np.float32)  # (h, W * 3)
        colour = np.ascontiguousarray(colour.reshape(model_height, width, 3).transpose(1, 0, 2))
        colour = self.column_weights @ colour.reshape(width, model_height * 3)  # (w, h * 3)
        colour = colour.reshape(model_width, model_height, 3).transpose(1, 0, 2)
        rgb_out = np.rint(np.clip(colour, 0.0, 255.0)).astype(np.uint8)
        rows, columns = self.depth_rows, self.depth_columns
        sampled = np.take(np.take(np.asarray(depth), np.maximum(rows, 0), axis=0), np.maximum(columns, 0), axis=1)
        if not np.issubdtype(sampled.dtype, np.floating):
            sampled = sampled.astype(np.float32)
        sampled[rows < 0, :] = np.nan
        sampled[:, columns < 0] = np.nan
        return rgb_out, sampled

    def to_camera(self, cell_ids: np.ndarray) -> np.ndarray:
        """int32 (H, W) camera image of the model's (cell rows, cell columns) ``cell_ids``: each camera
        pixel takes the id of the cell its ray falls in, 0 outside the model's view."""
        padded = np.zeros((cell_ids.shape[0] + 1, cell_ids.shape[1] + 1), dtype=np.int32)
        padded[:-1, :-1] = cell_ids
        return np.take(np.take(padded, self.cell_rows, axis=0), self.cell_columns, axis=1)

    def visible_cells(self, cell_ids: np.ndarray) -> np.ndarray:
        """The ids of the cells at least one camera pixel falls in, from (cell rows, cell columns)
        ``cell_ids``."""
        return cell_ids[np.ix_(self.lattice_cells[0], self.lattice_cells[1])]

    @functools.cached_property
    def lattice_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(cell rows, cell columns) the camera sees, ascending: those of ``lattice``'s pixels."""
        return self.cell_rows[self.lattice.rows], self.cell_columns[self.lattice.columns]


PADDINGS = ("black", "edge")
"""``mapping_node.segmenter.padding``: how the model's view is filled beyond a camera's image."""


@functools.lru_cache(maxsize=16)
def camera_resampling(camera: Intrinsics, model: Intrinsics, cell: int, padding: str) -> CameraResampling:
    """The :class:`CameraResampling` of ``camera`` onto ``model`` (built once per camera: a robot
    keeps one). ValueError unless the focal lengths are finite and > 0, the principal points finite,
    ``cell`` divides the model's sides and ``padding`` is one of :data:`PADDINGS`."""
    for name, intrinsics in (("camera", camera), ("model", model)):
        for field in ("fx", "fy"):
            value = getattr(intrinsics, field)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} intrinsics {field} = {value}: a focal length must be finite and > 0 (px)")
        for field in ("cx", "cy"):
            if not math.isfinite(getattr(intrinsics, field)):
                raise ValueError(f"{name} intrinsics {field} = {getattr(intrinsics, field)}: must be finite (px)")
    if cell < 1 or model.width % cell or model.height % cell:
        raise ValueError(f"model cells of {cell} px must tile its {model.width}x{model.height} image")
    if padding not in PADDINGS:
        raise ValueError(f"padding {padding!r}: expected one of {', '.join(PADDINGS)}")
    edge = padding == "edge"
    axes = []
    for size, centre, focal, model_size, model_centre, model_focal in (
        (camera.height, camera.cy, camera.fy, model.height, model.cy, model.fy),
        (camera.width, camera.cx, camera.fx, model.width, model.cx, model.fx),
    ):
        m = np.arange(model_size, dtype=float)
        weights = _area_weights(size, model_size, centre, focal, model_centre, model_focal, edge)
        nearest = np.ceil(_to_camera(m, centre, focal, model_centre, model_focal) - 0.5).astype(np.int64)
        if edge:
            nearest = np.clip(nearest, 0, size - 1)
        else:
            nearest[(nearest < 0) | (nearest >= size)] = -1
        cells = model_size // cell
        position = _to_model(np.arange(size, dtype=float), centre, focal, model_centre, model_focal)
        owner = np.floor((position + 0.5) / cell).astype(np.int64)  # ascending with the pixel
        seen = np.arange(max(int(owner[0]), 0), min(int(owner[-1]), cells - 1) + 1)
        spans = np.stack([np.searchsorted(owner, seen, "left"), np.searchsorted(owner, seen, "right") - 1], axis=1)
        middle = _to_camera(seen * cell + (cell - 1) / 2, centre, focal, model_centre, model_focal)
        samples = np.clip(np.floor(middle + 0.5).astype(np.int64), spans[:, 0], spans[:, 1])
        owner = np.where((owner >= 0) & (owner < cells), owner, cells).astype(np.intp)
        axes.append((weights, nearest, owner, samples, spans.astype(np.int64)))
    (row_weights, depth_rows, cell_rows, sample_rows, row_spans) = axes[0]
    (column_weights, depth_columns, cell_columns, sample_columns, column_spans) = axes[1]
    return CameraResampling(
        camera,
        model,
        cell,
        padding,
        row_weights,
        column_weights,
        depth_rows,
        depth_columns,
        cell_rows,
        cell_columns,
        CellLattice(sample_rows, sample_columns, row_spans, column_spans),
    )


def _area_weights(
    size: int, model_size: int, centre: float, focal: float, model_centre: float, model_focal: float, edge: bool
) -> sparse.csr_matrix:
    """(model_size, size) float32 CSR: the length of camera pixel u's extent inside model pixel m's,
    over the length of m's (a box filter over the camera pixels). Beyond the image, nothing (rows
    sum to less: black) or, with ``edge``, the edge pixel again (rows sum to 1)."""
    m = np.arange(model_size, dtype=float)
    lo = _to_camera(m - 0.5, centre, focal, model_centre, model_focal)
    hi = _to_camera(m + 0.5, centre, focal, model_centre, model_focal)
    length = focal / model_focal
    candidates = np.floor(lo + 0.5)[:, None] + np.arange(math.ceil(length) + 2)  # every pixel [lo, hi) touches
    overlap = np.minimum(hi[:, None], candidates + 0.5) - np.maximum(lo[:, None], candidates - 0.5)
    keep = overlap > 0.0
    if edge:
        candidates = np.clip(candidates, 0, size - 1)  # duplicates sum up in the CSR
    else:
        keep &= (candidates >= 0) & (candidates < size)
    rows = np.broadcast_to(np.arange(model_size)[:, None], candidates.shape)[keep]
    weights = (overlap[keep] / (hi - lo)[rows]).astype(np.float32)
    return sparse.csr_matrix((weights, (rows, candidates[keep].astype(np.int64))), shape=(model_size, size))
