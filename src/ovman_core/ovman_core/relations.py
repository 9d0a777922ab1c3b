"""The six change relations of TASK.md §1 (Eq. 1)."""

from __future__ import annotations

import enum


class Relation(str, enum.Enum):
    """A change relation between two visits; the value is the name used on the wire and on disk."""

    MOVED = "moved"
    FORMER = "former"
    REMOVED = "removed"
    APPEARED = "appeared"
    STABLE = "stable"
    MOVING = "moving"

    @property
    def vacated(self) -> bool:
        """True when the answer is a place where nothing is at the end (former, removed)."""
        return self in (Relation.FORMER, Relation.REMOVED)

    @property
    def answer_visit(self) -> int:
        """The visit (1 or 2) whose pose of the selected instance gives the answer."""
        return 1 if self.vacated else 2

    @classmethod
    def parse(cls, name: str) -> Relation:
        """The relation called ``name``; raises ValueError listing the valid names."""
        try:
            return cls(name)
        except ValueError:
            valid = ", ".join(r.value for r in cls)
            raise ValueError(f"unknown relation {name!r}; expected one of {valid}") from None
