"""The learned segmenter's cells into fragments: the integer half of turning the network's output into segments.

On the network's ``h`` × ``w`` output grid, compiled with numba (``cache=True``, as
``ovman_sim.render``). Integer logic only, so the numbering and the merge order are exact (pinned by
tests/mapping/test_segmenter.py). :func:`ovman_mapping.learned_segmenter.segments_from_logits` does the rest.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def cell_classes(per_cell: np.ndarray, bits: np.ndarray) -> tuple[np.ndarray, bool]:
    """(int64 (n,) class of each cell, all finite) for ``per_cell`` (n, K + 2) float32 logits (K + 1
    classes, then the boundary logit); ``bits`` is ``per_cell`` viewed as uint32. A cell's class is
    the argmax of its K + 1 class logits. When any logit is NaN or ±inf, the classes are zeros and
    the flag False."""
    n, channels = per_cell.shape
    best = np.zeros(n, dtype=np.int64)
    special = 0
    for i in range(n):  # an exponent of all ones: NaN or ±inf
        for j in range(channels):
            special |= (bits[i, j] & 0x7F800000) == 0x7F800000
    if special:
        return best, False
    for i in range(n):
        top = per_cell[i, 0]
        for j in range(1, channels - 1):
            if per_cell[i, j] > top:
                top = per_cell[i, j]
                best[i] = j
    return best, True


@numba.njit(cache=True)
def _root(parent: np.ndarray, k: int) -> int:
    while parent[k] != k:
        parent[k] = parent[parent[k]]
        k = parent[k]
    return k


@numba.njit(cache=True)
def _components(best: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, int]:
    """(int64 (h, w) ids, 0 = none; count): the 4-connected components of the ``seeds`` cells of
    one class of ``best``, numbered class by class, within a class in raster order of first cell."""
    h, w = best.shape
    parent = np.arange(h * w)
    for i in range(h):
        for j in range(w):
            if not seeds[i, j]:
                continue
            for a, b in ((i, j - 1), (i - 1, j)):
                if a >= 0 and b >= 0 and seeds[a, b] and best[a, b] == best[i, j]:
                    r, s = _root(parent, i * w + j), _root(parent, a * w + b)
                    if r != s:
                        parent[max(r, s)] = min(r, s)
    number = np.zeros(h * w, dtype=np.int64)  # a root's component, in raster order of first cell
    component_class = np.zeros(h * w + 1, dtype=np.int64)
    count = 0
    for c in range(h * w):
        if seeds[c // w, c % w]:
            r = _root(parent, c)
            if number[r] == 0:
                count += 1
                number[r] = count
                component_class[count] = best[c // w, c % w]
    classes = 0
    for k in range(1, count + 1):
        classes = max(classes, component_class[k] + 1)
    start = np.zeros(classes + 1, dtype=np.int64)  # a stable counting sort by class
    for k in range(1, count + 1):
        start[component_class[k] + 1] += 1
    for m in range(classes):
        start[m + 1] += start[m]
    renumber = np.zeros(count + 1, dtype=np.int64)
    for k in range(1, count + 1):
        start[component_class[k]] += 1
        renumber[k] = start[component_class[k]]
    ids = np.zeros((h, w), dtype=np.int64)
    for c in range(h * w):
        if seeds[c // w, c % w]:
            ids[c // w, c % w] = renumber[number[_root(parent, c)]]
    return ids, count


@numba.njit(cache=True)
def _merge_small(ids: np.ndarray, count: int, min_cells: int) -> int:
    """Merge the small fragments of ``ids`` in place; the new count. Each fragment of fewer than
    ``min_cells`` cells joins the fragment (group) it shares the longest 4-neighbour border with,
    smallest first (ties: the lower id); the rest are renumbered 1..count."""
    h, w = ids.shape
    size = np.zeros(count + 1, dtype=np.int64)
    for i in range(h):
        for j in range(w):
            size[ids[i, j]] += 1
    keys = np.array([size[k] * (count + 1) + k for k in range(1, count + 1) if size[k] < min_cells], dtype=np.int64)
    if len(keys) == 0:
        return count
    small = np.sort(keys) % (count + 1)  # by size, then id
    is_small = np.zeros(count + 1, dtype=np.bool_)
    is_small[small] = True
    pairs = []  # min * (count + 1) + max for every 4-neighbour pair of cells touching a small fragment
    for i in range(h):
        for j in range(w):
            a = ids[i, j]
            for b in (ids[i, j + 1] if j + 1 < w else 0, ids[i + 1, j] if i + 1 < h else 0):
                if a != b and a > 0 and b > 0 and (is_small[a] or is_small[b]):
                    pairs.append(min(a, b) * (count + 1) + max(a, b))
    order = np.sort(np.array(pairs, dtype=np.int64))
    # Border lengths, both ways, grouped by fragment (CSR): neighbour[start[k]:start[k + 1]].
    degree = np.zeros(count + 2, dtype=np.int64)
    for e in range(len(order)):
        if e == 0 or order[e] != order[e - 1]:
            degree[order[e] // (count + 1) + 1] += 1
            degree[order[e] % (count + 1) + 1] += 1
    for k in range(count + 1):
        degree[k + 1] += degree[k]
    fill = degree[:-1].copy()
    neighbour = np.zeros(degree[-1], dtype=np.int64)
    length = np.zeros(degree[-1], dtype=np.int64)
    e = 0
    while e < len(order):
        run = e
        while run < len(order) and order[run] == order[e]:
            run += 1
        a, b = order[e] // (count + 1), order[e] % (count + 1)
        neighbour[fill[a]] = b
        length[fill[a]] = run - e
        neighbour[fill[b]] = a
        length[fill[b]] = run - e
        fill[a] += 1
        fill[b] += 1
        e = run
    parent = np.arange(count + 1)
    total = size.copy()
    shared = np.zeros(count + 1, dtype=np.int64)
    for k in small:
        mine = _root(parent, k)
        if total[mine] >= min_cells:  # grown by fragments merged into it
            continue
        into = -1
        for e in range(degree[k], degree[k + 1]):
            other = _root(parent, neighbour[e])
            if other != mine:
                shared[other] += length[e]
        for e in range(degree[k], degree[k + 1]):
            other = _root(parent, neighbour[e])
            if other != mine and (
                into < 0 or shared[other] > shared[into] or (shared[other] == shared[into] and other < into)
            ):
                into = other
        for e in range(degree[k], degree[k + 1]):
            shared[_root(parent, neighbour[e])] = 0
        if into >= 0:
            parent[mine] = into
            total[into] += total[mine]
    renumber = np.zeros(count + 1, dtype=np.int64)  # kept roots in ascending order: 1, 2, ...
    kept = 0
    for k in range(1, count + 1):
        if _root(parent, k) == k:
            kept += 1
            renumber[k] = kept
    for i in range(h):
        for j in range(w):
            ids[i, j] = renumber[_root(parent, ids[i, j])]
    return kept


@numba.njit(cache=True)
def cell_fragments(best: np.ndarray, seeds: np.ndarray, objects: np.ndarray, min_cells: int) -> tuple[np.ndarray, int]:
    """(int64 (h * w,) fragment of each cell, 0 = none; count) from ``best`` (h, w) classes,
    ``seeds`` and ``objects`` (h, w) bool (seeds among the object cells): the components of the
    seeds of each class, small ones merged, then grown one 4-neighbour step over the object cells that
    are not seeds (the largest id around wins)."""
    h, w = best.shape
    ids, count = _components(best, seeds)
    if count == 0:
        return np.zeros(h * w, dtype=np.int64), 0
    count = _merge_small(ids, count, min_cells)
    cells = np.zeros(h * w, dtype=np.int64)
    for i in range(h):
        for j in range(w):
            if ids[i, j] > 0:
                cells[i * w + j] = ids[i, j]
            elif objects[i, j]:
                grown = 0
                for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                    if 0 <= a < h and 0 <= b < w:
                        grown = max(grown, ids[a, b])
                cells[i * w + j] = grown
    return cells, count


def compile_cell_kernels() -> None:
    """Compile (or load from the cache) both kernels for the arrays the segmenter passes."""
    logits = np.zeros((4, 3), dtype=np.float32)
    best, _ = cell_classes(logits, logits.view(np.uint32))
    cells = best.reshape(2, 2) > 0
    cell_fragments(best.reshape(2, 2), cells, cells, 1)
