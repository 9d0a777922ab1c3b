"""The hand-over of frames from reception to fusion (ovman_mapping.frame_queue)."""

from __future__ import annotations

import threading

import pytest

from ovman_mapping.frame_queue import KEEP_ALL, KEEP_NEWEST, FrameQueue

MS = 1_000_000


def drain(queue: FrameQueue[str]) -> list[str]:
    out = []
    while (job := queue.take()) is not None:
        out.append(job[1])
    return out


def test_keep_all_hands_every_frame_over_in_order():
    queue: FrameQueue[str] = FrameQueue(KEEP_ALL, 0.0)
    for k in range(5):
        assert queue.put(k * MS, f"f{k}")
    assert drain(queue) == ["f0", "f1", "f2", "f3", "f4"]
    assert (queue.counts.accepted, queue.counts.skipped_busy, queue.counts.skipped_rate) == (5, 0, 0)


def test_keep_newest_lets_a_newer_frame_replace_the_waiting_one_and_counts_it():
    queue: FrameQueue[str] = FrameQueue(KEEP_NEWEST, 0.0)
    queue.put(0, "f0")
    assert drain(queue) == ["f0"]  # taken by the fuser at once
    for k in (1, 2, 3):  # arrive while f0 is fused
        queue.put(k * MS, f"f{k}")
    assert len(queue) == 1 and drain(queue) == ["f3"]
    assert (queue.counts.accepted, queue.counts.skipped_busy) == (4, 2)


def test_max_rate_skips_frames_stamped_too_soon_by_their_stamps():
    queue: FrameQueue[str] = FrameQueue(KEEP_ALL, 10.0)  # at most a frame every 100 ms of stamps
    kept = [queue.put(stamp * MS, str(stamp)) for stamp in (0, 40, 99, 100, 150, 230)]
    assert kept == [True, False, False, True, False, True]
    assert drain(queue) == ["0", "100", "230"] and queue.counts.skipped_rate == 3


def test_reset_forgets_frames_counts_and_the_rate_reference():
    queue: FrameQueue[str] = FrameQueue(KEEP_ALL, 10.0)
    queue.put(0, "a")
    queue.reset()
    assert len(queue) == 0 and queue.counts.accepted == 0
    assert queue.put(1, "b")  # no longer too soon after "a"


def test_frames_put_from_one_thread_are_taken_by_another_all_and_in_order():
    queue: FrameQueue[int] = FrameQueue(KEEP_ALL, 0.0)
    taken: list[int] = []
    done = threading.Event()

    def fuser() -> None:
        while not done.is_set() or len(queue):
            job = queue.take()
            if job is not None:
                taken.append(job[1])

    thread = threading.Thread(target=fuser)
    thread.start()
    for k in range(2000):
        queue.put(k, k)
    done.set()
    thread.join(timeout=10.0)
    assert taken == list(range(2000))


@pytest.mark.parametrize(
    ("policy", "rate", "why"), [("newest", 0.0, "must be one of"), (KEEP_ALL, -1.0, "max_rate_hz")]
)
def test_a_queue_that_cannot_work_is_refused(policy, rate, why):
    with pytest.raises(ValueError, match=why):
        FrameQueue(policy, rate)
