"""A benchmark table (markdown, HTML and plain text) and the number formats every table uses.

The gates are named here too: a result is scored at the static gate (the answer chosen from the
maps) and at the embodied gate (where the robot stopped).
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Sequence

from ovman_eval.analysis.stats import wilson_interval

STATIC = "static"
EMBODIED = "embodied"
GATES = (STATIC, EMBODIED)


class TableError(ValueError):
    """Records that cannot make a table (none, or not paired across arms)."""


@dataclasses.dataclass(frozen=True)
class Table:
    """A titled table of strings; ``key`` is its anchor in reports."""

    key: str
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise TableError(f"table {self.key}: row {row} has {len(row)} cells, header {len(self.header)}")

    def markdown(self) -> str:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        out = [f"### {self.title}", "", line(self.header), "|" + "|".join("---" for _ in self.header) + "|"]
        out += [line(row) for row in self.rows]
        for note in self.notes:
            out += ["", f"_{note}_"]
        return "\n".join(out) + "\n"

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in self.notes)
        return (
            f"<h3 id='{html.escape(self.key)}'>{html.escape(self.title)}</h3>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"
        )

    def text(self) -> str:
        rows = [self.header, *self.rows]
        widths = [max(len(r[k]) for r in rows) for k in range(len(self.header))]
        lines = [self.title]
        for index, row in enumerate(rows):
            lines.append(
                "  ".join(
                    c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True))
                )
            )
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines + list(self.notes))


def fmt_rate(k: int, n: int) -> str:
    return f"{k / n:.3f} ({k}/{n})" if n else "–"


def fmt_ci(k: int, n: int) -> str:
    if not n:
        return "–"
    low, high = wilson_interval(k, n)
    return f"{k / n:.3f} [{low:.3f}, {high:.3f}] ({k}/{n})"


def fmt_p(p: float) -> str:
    if p == 0.0:
        return "0"
    if p < 1e-3:
        return f"{p:.1e}"
    return f"{p:.3f}"


def fmt_num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"
