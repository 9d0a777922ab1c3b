"""Work that waits, advanced a step at a time in one thread between other work.

benchmark_node builds the next recorded group's maps (calls to the player and mapping_node, waits
for their messages) while it drives the current group's embodied runs, in its one executor
thread: the map building is a generator that yields a :class:`Wait` each time it must wait for
something, and :class:`Stepwise` runs it on whenever something it may be waiting for has happened
(a reply, a message) and whenever the thread checks the deadlines. No rclpy here: the waits are
plain callables. Times are ``time.monotonic`` seconds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Generator
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Wait:
    """What a step waits for: ``ready()`` to hold, by ``deadline`` (monotonic s); ``what`` names it."""

    ready: Callable[[], bool]
    what: str
    deadline: float

    @classmethod
    def within(cls, ready: Callable[[], bool], what: str, timeout_s: float) -> Wait:
        """A wait that must end within ``timeout_s`` seconds from now."""
        return cls(ready, what, time.monotonic() + timeout_s)


class WaitTimeoutError(RuntimeError):
    """A step's wait did not end by its deadline; the message names what it waited for."""


StepsT = Generator[Wait, None, T]
"""Steps: a generator that yields each :class:`Wait` and returns the work's result."""


class Stepwise(Generic[T]):
    """Runs ``steps`` as far as it can without waiting, each time :meth:`advance` is called.

    Not re-entrant: the steps must not call :meth:`advance` themselves. An exception raised by a
    step, or :class:`WaitTimeoutError`, propagates out of :meth:`advance` and ends the work."""

    def __init__(self, steps: StepsT[T]) -> None:
        self._steps = steps
        self._wait: Wait | None = None
        self.done = False
        self._returned = False
        self._result: T | None = None

    def advance(self) -> bool:
        """Run the steps on while what they wait for is ready; True once they have ended (returned,
        raised or timed out)."""
        while not self.done:
            if self._wait is not None and not self._wait.ready():
                if time.monotonic() > self._wait.deadline:
                    what, self.done = self._wait.what, True
                    self._steps.close()
                    raise WaitTimeoutError(what)
                return False
            try:
                self._wait = next(self._steps)
            except StopIteration as stop:
                self.done, self._returned, self._result = True, True, stop.value
            except BaseException:
                self.done = True
                raise
        return True

    @property
    def result(self) -> T:
        """What the steps returned (only once :attr:`done` after a successful :meth:`advance`)."""
        if not self._returned:
            raise RuntimeError("the steps have not returned a result")
        return self._result  # type: ignore[return-value]


__all__ = ["StepsT", "Stepwise", "Wait", "WaitTimeoutError"]
