"""Stepwise work (ovman_eval.graph.stepwise): run as far as it goes without waiting, deadlines, errors."""

from __future__ import annotations

import time

import pytest

from ovman_eval.graph.stepwise import StepsT, Stepwise, Wait, WaitTimeoutError


def test_steps_run_on_only_while_what_they_wait_for_is_ready():
    ready = {"reply": False, "message": False}
    done: list[str] = []

    def steps() -> StepsT[str]:
        done.append("call")
        yield Wait.within(lambda: ready["reply"], "the reply", 60.0)
        done.append("reply")
        yield Wait.within(lambda: ready["message"], "the message", 60.0)
        done.append("message")
        return "maps"

    job = Stepwise(steps())
    assert done == [] and not job.done  # nothing runs before the first advance
    assert job.advance() is False and done == ["call"]
    assert job.advance() is False and done == ["call"]  # still waiting: nothing more runs
    ready["reply"] = ready["message"] = True
    assert job.advance() is True and done == ["call", "reply", "message"]  # both waits are over: to the end
    assert job.done and job.result == "maps"
    assert job.advance() is True and done == ["call", "reply", "message"]  # done work stays done


def test_a_wait_past_its_deadline_ends_the_work_naming_what_it_waited_for():
    closed: list[bool] = []

    def steps() -> StepsT[None]:
        try:
            yield Wait(lambda: False, "the visit-1 map", time.monotonic() - 1.0)
        finally:
            closed.append(True)

    job = Stepwise(steps())
    with pytest.raises(WaitTimeoutError, match="the visit-1 map"):
        job.advance()
    assert job.done and closed == [True]  # the steps' clean-up ran
    with pytest.raises(RuntimeError, match="not returned"):
        _ = job.result


def test_an_error_of_a_step_propagates_and_ends_the_work():
    def steps() -> StepsT[int]:
        yield Wait.within(lambda: True, "nothing", 60.0)
        raise ValueError("the player refused the recording")

    job = Stepwise(steps())
    with pytest.raises(ValueError, match="refused"):
        job.advance()
    assert job.done
    assert job.advance() is True  # ended: advancing again runs nothing
    with pytest.raises(RuntimeError, match="not returned"):
        _ = job.result
