"""What an agent does in a world: the primitive actions and their outcome (AI2-THOR names).

A simulator, a robot's base driver and the navigation executor all speak these; nothing here
depends on a simulator.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence


class Action(str, enum.Enum):
    """Primitive actions (AI2-THOR names). Stop ends an episode and does not move the agent."""

    MOVE_AHEAD = "MoveAhead"
    ROTATE_LEFT = "RotateLeft"
    ROTATE_RIGHT = "RotateRight"
    LOOK_UP = "LookUp"
    LOOK_DOWN = "LookDown"
    STOP = "Stop"


@dataclasses.dataclass(frozen=True)
class ActionResult:
    """Outcome of an action or change: ``success``; ``collided`` when a move was blocked."""

    success: bool
    collided: bool = False
    message: str = ""


def action_sequence(names: Sequence[str]) -> list[Action]:
    """Parse AI2-THOR action names; raises ValueError naming the first unknown one."""
    actions = []
    for index, name in enumerate(names):
        try:
            actions.append(Action(name))
        except ValueError:
            valid = ", ".join(a.value for a in Action)
            raise ValueError(f"action {index}: unknown action {name!r}; expected one of {valid}") from None
    return actions
