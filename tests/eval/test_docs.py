"""The README and docs/ stay true to the code: every relative link resolves, and every ``ovman``
command and ``make`` target they quote exists, with every flag it is quoted with."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from functools import cache
from pathlib import Path

import pytest

from ovman_eval.cli.main import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
README_MAX_BYTES = 15_000

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
PROMPT = re.compile(r"^\s*(?:\$\s+|#\s+)?")


def _relative(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped,
    spaces to hyphens."""
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*_]{1,2}", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for line in text.splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = INLINE.sub("", text)
    return LINK.findall(text)


def link_problems(page: Path) -> list[str]:
    problems = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            problems.append(f"{_relative(page)}: link {target!r} names a file that does not exist")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{_relative(page)}: link {target!r} names a heading that does not exist")
    return problems


def commands(page: Path) -> list[str]:
    """Every line of a fenced block and every inline code span of ``page`` that runs ``ovman`` or
    ``make``, with continuation lines joined."""
    text = page.read_text(encoding="utf-8")
    lines = []
    for block in FENCE.finditer(text):
        lines.extend(block.group(2).replace("\\\n", " ").splitlines())
    lines.extend(INLINE.findall(FENCE.sub("", text)))
    out = []
    for line in lines:
        line = PROMPT.sub("", line.split(" # ")[0]).strip()
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
            words = part.split()
            if words and words[0] in ("ovman", ".venv/bin/ovman", "make"):
                out.append(part)
    return out


@cache
def help_text(words: tuple[str, ...]) -> str:
    """What ``ovman WORDS... --help`` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*words, "--help"])
    return out.getvalue()


def options(words: tuple[str, ...]) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", help_text(words)))


def subcommands(words: tuple[str, ...]) -> set[str]:
    """The nested subcommands ``ovman WORDS...`` takes (its help's first positional choice list)."""
    match = re.search(r"^positional arguments:\n\s+\{([^}]+)\}", help_text(words), re.M)
    return set(match.group(1).split(",")) if match else set()


@cache
def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", text, re.M))


def command_problems(page: Path, command: str) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    where = f"{_relative(page)}: `{command}`"
    if words[0] == "make":
        targets, rest = [], iter(words[1:])
        for word in rest:
            if word in ("-C", "-f", "--directory", "--file"):
                next(rest, None)  # the option's argument
            elif not word.startswith("-") and "=" not in word:
                targets.append(word)
        return [f"{where}: no make target {t!r}" for t in targets if t not in make_targets()]
    if len(words) < 2 or words[1].startswith("-"):
        return []  # `ovman` or `ovman --help`
    name = words[1]
    if name not in COMMANDS:
        return [f"{where}: ovman has no subcommand {name!r}"]
    path: tuple[str, ...] = (name,)
    problems = []
    next_is_subcommand = True  # a nested subcommand comes right after its parent
    for word in words[2:]:
        nested = subcommands(path) if next_is_subcommand else set()
        next_is_subcommand = False
        if nested and not word.startswith("-"):
            if word in nested:
                path, next_is_subcommand = (*path, word), True
            elif not re.fullmatch(r"[A-Z_|]+|\w+\|[\w|]+", word):  # a placeholder, or a choice list
                problems.append(f"{where}: ovman {' '.join(path)} has no subcommand {word!r}")
            continue
        if word.startswith("-"):
            flag = word.split("=", 1)[0]
            if flag not in options(path):
                problems.append(f"{where}: {flag} is not an option of ovman {' '.join(path)} (see its --help)")
    return problems


def test_the_readme_is_a_front_door_of_at_most_15_kb() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (limit {README_MAX_BYTES})"


def test_the_readme_carries_no_status_by_issue_number() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"\bissue\s+#?\d+", text, re.I), "README.md refers to issues by number"


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_every_relative_link_resolves(page: Path) -> None:
    assert link_problems(page) == []


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_every_quoted_ovman_command_and_make_target_exists(page: Path) -> None:
    problems = [p for command in commands(page) for p in command_problems(page, command)]
    assert problems == []


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")}
    missing = [_relative(p) for p in PAGES if p.parent == ROOT / "docs" and p.resolve() not in linked]
    assert missing == [], f"README.md does not link {missing}"


def test_the_checks_catch_a_broken_link_an_unknown_flag_and_a_missing_target(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\nSee [there](missing.md), [here](#title) and [nowhere](#no-such-heading).\n\n"
        "```bash\novman benchmark --no-such-flag\nmake no-such-target\novman no-such-command\n"
        "ovman benchmark --dataset DIR --arms two_visit\n```\n",
        encoding="utf-8",
    )
    assert [p.split(": ", 1)[1] for p in link_problems(page)] == [
        "link 'missing.md' names a file that does not exist",
        "link '#no-such-heading' names a heading that does not exist",
    ]
    found = [p for command in commands(page) for p in command_problems(page, command)]
    assert len(found) == 3
    assert "--no-such-flag is not an option of ovman benchmark" in found[0]
    assert "no make target 'no-such-target'" in found[1]
    assert "ovman has no subcommand 'no-such-command'" in found[2]
