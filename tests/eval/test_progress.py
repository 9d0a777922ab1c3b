"""Long commands' progress: a live bar with rate and ETA on a terminal, the plain lines elsewhere."""

from __future__ import annotations

import io
import re

from ovman_eval.cli.generate import ProgressBar, plain_line
from ovman_eval.cli.progress import ProgressDisplay
from ovman_eval.generation.dataset import Progress


def _progress(done: int, total: int = 10) -> Progress:
    return Progress(done, total, 0, done, 0, 2 * done, 3.0 * done, None if done == 0 else 3.0 * (total - done), "x")


def test_without_a_terminal_each_update_writes_its_plain_line_unchanged_and_nothing_else() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream)
    display.update("benchmark", 1, 4, "group", "two_visit moved-0000", "[1/4 groups, 0 resumed] a (3 s)")
    display.update("benchmark", 2, 4, "group", "quiet update", None)
    display.note("ovman benchmark: a warning")
    display.close()
    assert stream.getvalue() == "[1/4 groups, 0 resumed] a (3 s)\novman benchmark: a warning\n"


def test_on_a_terminal_a_bar_shows_counts_rate_eta_and_the_postfix() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, tty=True)
    for done in range(1, 4):
        display.update("generate", done, 10, "slot", f"{done} episodes", "plain line never shown")
    display.close()
    text = stream.getvalue()
    assert "plain line never shown" not in text
    last = text.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("generate:")
    assert " 3/10 " in last
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d, ", last), last  # elapsed < ETA
    assert re.search(r"(slot/s|s/slot)", last), last  # the rate
    assert last.rstrip().endswith("3 episodes]"), last


def test_on_a_terminal_a_new_stage_opens_a_new_bar_and_resumed_units_start_it() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, tty=True)
    display.update("render train", 2, 2, "home", "", resumed=0)
    display.update("train", 5, 40, "epoch", "loss 0.1", resumed=4)
    display.close()
    lines = stream.getvalue().replace("\r", "\n").split("\n")
    assert any(line.startswith("render train: 100%") for line in lines)
    assert any(line.startswith("train:") and " 5/40 " in line for line in lines)


def test_generation_logs_a_plain_line_every_period_and_at_the_end() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, period_s=3600.0, tty=False)
    for done in range(11):
        bar(_progress(done))
    bar.close()
    assert stream.getvalue().splitlines() == [plain_line(_progress(0)), plain_line(_progress(10))]
    assert plain_line(_progress(10)).startswith("[" + "#" * 30 + "] 10/10 slots  10 episodes  0 given up")
