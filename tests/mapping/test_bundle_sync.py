"""The exact-stamp synchroniser of the camera bundle."""

import pytest

from ovman_mapping.bundle_sync import StampSynchronizer

KEYS = ("rgb", "depth", "labels")


def feed(sync, items):
    """Add (key, stamp) items; returns the stamps of the bundles completed, in order."""
    done = []
    for key, stamp in items:
        bundle = sync.add(key, stamp, f"{key}@{stamp}")
        if bundle is not None:
            assert dict(bundle.items) == {k: f"{k}@{bundle.stamp_ns}" for k in KEYS}
            done.append(bundle.stamp_ns)
    return done


def test_a_bundle_completes_when_every_key_has_its_stamp_and_older_partial_stamps_are_dropped():
    sync = StampSynchronizer(KEYS, max_pending=5)
    items = [("depth", 20), ("rgb", 10), ("labels", 20), ("depth", 10), ("rgb", 20), ("labels", 10)]
    assert feed(sync, items) == [20]  # 20 completes first; 10 is then older than a complete stamp
    assert sync.counts.completed == 1 and sync.counts.dropped_incomplete == 1 and sync.counts.dropped_stale == 1


def test_in_order_streams_come_out_in_stamp_order():
    sync = StampSynchronizer(KEYS, max_pending=5)
    items = [(k, s) for k in KEYS for s in (10, 20, 30)]  # each topic delivers all its frames in turn
    assert feed(sync, items) == [10, 20, 30]
    assert sync.pending == 0 and sync.counts.dropped_incomplete == 0


def test_a_lost_message_drops_its_stamp_once_a_newer_one_completes():
    sync = StampSynchronizer(KEYS, max_pending=5)
    items = [("rgb", 10), ("depth", 10), ("rgb", 20), ("depth", 20), ("labels", 20)]
    assert feed(sync, items) == [20]
    assert sync.pending == 0 and sync.counts.dropped_incomplete == 1
    assert sync.add("labels", 10, "late") is None and sync.counts.dropped_stale == 1


def test_pending_stamps_are_bounded_by_dropping_the_oldest():
    sync = StampSynchronizer(KEYS, max_pending=2)
    assert feed(sync, [("rgb", 10), ("rgb", 20), ("rgb", 30)]) == []
    assert sync.pending == 2 and sync.counts.dropped_incomplete == 1
    assert feed(sync, [("depth", 10), ("labels", 10)]) == []  # 10 was evicted: only part of it is back
    assert feed(sync, [("depth", 30), ("labels", 30)]) == [30]


def test_holding_counts_the_incomplete_stamps_with_an_item_of_a_key():
    sync = StampSynchronizer(KEYS, max_pending=5)
    feed(sync, [("rgb", 10), ("rgb", 20), ("depth", 20), ("labels", 30)])
    assert (sync.holding("rgb"), sync.holding("depth"), sync.holding("labels")) == (2, 1, 1)
    feed(sync, [("depth", 10), ("labels", 10)])
    assert (sync.holding("rgb"), sync.holding("depth"), sync.holding("labels")) == (1, 1, 1)


def test_a_repeated_message_replaces_the_first_and_reset_forgets_everything():
    sync = StampSynchronizer(KEYS, max_pending=5)
    sync.add("rgb", 10, "first")
    sync.add("rgb", 10, "second")
    sync.add("depth", 10, "d")
    bundle = sync.add("labels", 10, "l")
    assert bundle is not None and bundle.items["rgb"] == "second" and sync.counts.replaced == 1
    sync.reset()
    assert sync.counts.completed == 0
    assert feed(sync, [("rgb", 5), ("depth", 5), ("labels", 5)]) == [5]  # older than before the reset


def test_unknown_keys_and_bad_bounds_are_refused():
    with pytest.raises(KeyError, match="unknown bundle key 'pose'"):
        StampSynchronizer(KEYS, max_pending=1).add("pose", 1, None)
    with pytest.raises(ValueError, match=r"node\.sync_max_pending"):
        StampSynchronizer(KEYS, max_pending=0)
    with pytest.raises(ValueError, match="at least one key"):
        StampSynchronizer((), max_pending=1)
