"""Every command line README.md and docs/ tell a user to type names a command that exists, with flags that command
takes (the `--help`-level check: a renamed flag or a dropped sub-command fails here, not in a reader's terminal),
and every `make` target they name is in the Makefile."""

from __future__ import annotations

import argparse
import re

import pytest

from harness.cli.main import parser
from harness.core.paths import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
# Code as a reader copies it: fenced blocks (a line continued with a backslash joined) and inline spans.
FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
# (not the namespace of a kubectl or helm line: `-n rmq-harness`)
COMMAND = re.compile(r"(?:^|[\s(;&|])(?<!-n )(?<!--namespace )(?:\.venv/bin/)?rmq-harness((?:\s+[^\s|;&#]+)*)")
MAKE = re.compile(r"(?:^|[\s(;&|])make((?:\s+[A-Za-z_][A-Za-z0-9_-]*(?:=\S*)?)+)")


def _code(text: str) -> list[str]:
    blocks = [b.replace("\\\n", " ") for b in FENCED.findall(text)]
    prose = FENCED.sub("", text)
    lines = [line for b in blocks for line in b.splitlines()] + INLINE.findall(prose)
    # A shell comment is not part of the command; a quoted assignment (VARIANTS="a b") is one word.
    return [re.sub(r"\s+#.*$", "", re.sub(r"""\w+=("[^"]*"|'[^']*')""", "VAR=x", line)) for line in lines]


def _found(pattern: re.Pattern) -> list[tuple[str, str]]:
    return [(f"{doc.relative_to(REPO_ROOT)}: {line.strip()}", m.group(1))
            for doc in DOCS for line in _code(doc.read_text()) for m in pattern.finditer(line)]


COMMANDS = _found(COMMAND)
MAKES = _found(MAKE)


def _options(p: argparse.ArgumentParser) -> set[str]:
    return {o for a in p._actions for o in a.option_strings}


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((a.choices for a in p._actions if isinstance(a, argparse._SubParsersAction)), {})


def test_the_docs_hold_command_lines_to_check():
    # (so that a change of the patterns that finds none fails here rather than passing every check below)
    assert len(COMMANDS) > 50 and len(MAKES) > 10


@pytest.mark.parametrize(("where", "args"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_a_documented_command_and_its_flags_exist(where: str, args: str):
    top = parser()
    words = [w.strip("[]'\"") for w in args.split()]
    p, path, top_flags = top, [], _options(top)
    i = 0
    while i < len(words):  # the program's own options, then the command's words
        w = words[i]
        if w.startswith("--") and w.split("=", 1)[0] in top_flags and not path:
            i += 1 if "=" in w or w in ("--version", "--help") else 2
            continue
        if w in _subcommands(p):
            p, path = _subcommands(p)[w], [*path, w]
            i += 1
            continue
        break
    if not words:
        return  # the program named alone ("`rmq-harness`")
    assert path or words[0] in ("--version", "--help", "-h"), f"{where}: rmq-harness has no command {words[0]!r}"
    known = _options(p) | top_flags
    flags = [w.split("=", 1)[0] for w in words[i:] if w.startswith("--") and len(w) > 2]
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"{where}: rmq-harness {' '.join(path)} takes no {', '.join(unknown)}"


TARGETS = set(re.findall(r"^([A-Za-z0-9_-]+):", (REPO_ROOT / "Makefile").read_text(), re.M))


@pytest.mark.parametrize(("where", "args"), MAKES, ids=[w for w, _ in MAKES])
def test_a_documented_make_target_exists(where: str, args: str):
    targets = [w for w in args.split() if "=" not in w]
    missing = [t for t in targets if t not in TARGETS]
    assert not missing, f"{where}: the Makefile has no target {', '.join(missing)}"
