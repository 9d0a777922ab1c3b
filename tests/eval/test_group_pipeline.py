"""benchmark_node's group scheduler without ROS: order, the look-ahead bound, waits, failures."""

from __future__ import annotations

import pytest

from ovman_eval.benchmark.request import WorkUnit
from ovman_eval.graph.group_pipeline import GraphCallError, GroupPipeline
from ovman_eval.graph.stepwise import StepsT, Wait
from ovman_eval.runs.run_dir import BenchmarkError


def unit(name: str) -> WorkUnit:
    return WorkUnit(name, (name,), ((name, "two_visit", 0),), need_sketch=False)


class Graph:
    """Stands in for the graph: each group waits for one reply, which ``reply`` delivers."""

    def __init__(self) -> None:
        self.replies: set[str] = set()
        self.started: list[str] = []

    def steps(self, work: WorkUnit) -> StepsT[str]:
        self.started.append(work.group_id)
        yield Wait.within(lambda: work.group_id in self.replies, f"{work.group_id}'s maps", 60.0)
        return f"maps of {work.group_id}"


def test_groups_start_in_order_one_at_a_time_at_most_ahead_of_the_last_taken():
    graph = Graph()
    units = [unit(n) for n in "abcd"]
    pipeline = GroupPipeline(units, graph.steps, ahead=2)
    pipeline.step()
    assert graph.started == ["a"]  # one at a time: b waits for a
    graph.replies.add("a")
    pipeline.step()
    assert graph.started == ["a", "b"]  # a ready; b started; c would be 3 ahead of none taken
    graph.replies.add("b")
    pipeline.step()
    assert graph.started == ["a", "b"]
    assert pipeline.take(units[0], wait=lambda: None) == "maps of a"
    assert graph.started == ["a", "b", "c"]  # one taken: one more may start
    waits = []
    graph_reply = lambda: (waits.append(1), graph.replies.update("cd"))  # noqa: E731
    assert pipeline.take(units[1], wait=graph_reply) == "maps of b"
    assert pipeline.take(units[2], wait=graph_reply) == "maps of c"
    assert pipeline.take(units[3], wait=graph_reply) == "maps of d"
    assert graph.started == ["a", "b", "c", "d"]


def test_a_group_taken_out_of_order_is_refused():
    pipeline = GroupPipeline([unit("a"), unit("b")], Graph().steps, ahead=1)
    with pytest.raises(ValueError, match="group b taken out of order"):
        pipeline.take(unit("b"), wait=lambda: None)


def test_a_failure_is_kept_raised_once_to_the_taker_and_stops_the_preparation():
    def failing(work: WorkUnit) -> StepsT[str]:
        raise BenchmarkError(f"{work.group_id}: the recording is damaged")
        yield  # a generator

    pipeline = GroupPipeline([unit("a"), unit("b")], failing, ahead=2)
    pipeline.step()  # from a callback: nothing raised there
    with pytest.raises(BenchmarkError, match="a: the recording is damaged"):
        pipeline.take(unit("a"), wait=lambda: None)
    pipeline.check()  # clean-up that waits afterwards is not interrupted again
    assert pipeline.stopped and pipeline.started == 1


def test_a_wait_past_its_deadline_names_what_was_awaited():
    def stuck(work: WorkUnit) -> StepsT[str]:
        yield Wait(lambda: False, "query_node's change set of the new maps", deadline=0.0)
        return "never"

    pipeline = GroupPipeline([unit("a")], stuck, ahead=1)
    with pytest.raises(GraphCallError, match="query_node's change set of the new maps: nothing in time"):
        pipeline.take(unit("a"), wait=lambda: None)


def test_ahead_must_be_at_least_one_group():
    with pytest.raises(ValueError, match="ahead must be at least 1"):
        GroupPipeline([unit("a")], Graph().steps, ahead=0)
