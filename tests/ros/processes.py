"""A node started as a child process for integration tests, stopped like ``ros2 launch`` does."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

STOP_TIMEOUT_S = 10.0
"""(s) Wait after SIGINT and again after SIGTERM before SIGKILL."""


class NodeProcess:
    """A child process with its combined stdout/stderr log.

    It inherits ``os.environ`` (the test's ROS settings from the ``ros_env`` fixture and the ROS
    wheels' library path) and gets a stdin pipe: helpers such as echo_server.py exit when it closes,
    so they also end if the test process dies.
    """

    def __init__(self, args: list[str], log_path: Path, name: str = "process") -> None:
        self.name = name
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                args, env=dict(os.environ), stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT
            )

    def diagnosis(self) -> str:
        """Exit status and log, for assertion messages."""
        code = self.process.poll()
        state = "still running" if code is None else f"exited with code {code}"
        return f"{self.name} {state}; its output:\n{self.log_path.read_text(errors='replace')}"

    def stop(self) -> int:
        """SIGINT (a clean exit), then SIGTERM, then SIGKILL; reaps the process, returns its exit code."""
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                if self.process.poll() is not None:
                    break
                self.process.send_signal(sig)
                try:
                    self.process.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    continue
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            if self.process.stdin is not None:
                self.process.stdin.close()
        return self.process.returncode
