"""How a long command shows its progress: a live bar with rate and ETA on a terminal (tqdm), and
the command's own plain lines anywhere else (CI, logs, a pipe), so logs keep one line per event.

Presentation only: the core reports counts through its callbacks and never imports this module.
"""

from __future__ import annotations

from typing import Any, TextIO


class ProgressDisplay:
    """One tqdm bar per stage on a terminal; elsewhere the plain line of each update, unchanged.

    ``update`` takes the stage's ``done`` of ``total`` units; ``resumed`` of them were done before
    this invocation (they count towards the bar but not towards its rate). ``tty`` overrides the
    stream's own ``isatty()`` (tests)."""

    def __init__(self, stream: TextIO, tty: bool | None = None) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._bar: Any = None
        self._stage: str | None = None

    def update(
        self,
        stage: str,
        done: int,
        total: int,
        unit: str,
        postfix: str = "",
        plain: str | None = None,
        resumed: int = 0,
    ) -> None:
        """Show ``done``/``total`` ``unit``s of ``stage``; without a terminal write ``plain`` (if any)."""
        if not self.tty:
            if plain is not None:
                self.stream.write(plain + "\n")
                self.stream.flush()
            return
        if self._bar is None or stage != self._stage or total != self._bar.total:
            self._open(stage, total, unit, initial=resumed)
        self._bar.n = done
        self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.refresh()

    def note(self, text: str) -> None:
        """A line of its own, above the bar on a terminal."""
        if self.tty and self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._stage = None

    def _open(self, stage: str, total: int, unit: str, initial: int) -> None:
        from tqdm import tqdm

        self.close()
        self._stage = stage
        self._bar = tqdm(
            total=total,
            initial=initial,
            desc=stage,
            unit=unit,
            file=self.stream,
            dynamic_ncols=True,
            mininterval=0.2,
            smoothing=0.1,
            leave=True,
        )

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
