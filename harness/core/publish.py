"""Publishing what the harness writes (run archives, report directories, result files): whole or not at all,
and never over something already there.

A directory is assembled in a hidden staging directory beside its final place (``.<name>.partial``) that
holds an ``INCOMPLETE`` file from its creation until just before it is renamed into place, so whatever an
interrupted or killed writer leaves behind says so itself. A file is written beside its place and renamed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from harness.core.errors import ConfigError

INCOMPLETE = "INCOMPLETE"
# What a reader should do with what a writer left: inspect it (a run's logs), or remove it (made again).
KEEP, REMOVE = "keep", "remove"
_ADVICE = {
    KEEP: "what is here is kept for inspection only, nothing reads it, and it may be deleted.",
    REMOVE: "delete this directory (it can be made again).",
}


def staging_of(final: Path) -> Path:
    return final.with_name(f".{final.name}.partial")


def incomplete_note(what: str, final: Path, left: str = KEEP) -> str:
    """The text of the INCOMPLETE marker of a staging directory that will become ``final``."""
    return (
        f"INCOMPLETE: this {what} was never completed.\n"
        f"It was being written by process {os.getpid()} on {socket.gethostname()}, started "
        f"{dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}, to become {final}.\n"
        "This file is written when the staging directory is created and removed just before the directory is "
        f"renamed to {final.name}; a directory whose name starts with '.' and ends with '.partial' is never "
        f"a complete {what}. If that process is no longer running, it was interrupted or killed: {_ADVICE[left]}\n"
    )


def write_atomically(path: Path, data: str | bytes) -> Path:
    """``path`` holds either its old content (or nothing) or all of ``data``, never a part of it."""
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    tmp.replace(path)
    return path


def mark_incomplete(staging: Path, what: str, final: Path, left: str = KEEP) -> None:
    write_atomically(staging / INCOMPLETE, incomplete_note(what, final, left))


def writer_alive(staging: Path) -> bool:
    """Whether the process an INCOMPLETE marker names still runs on this host."""
    import psutil

    try:
        text = (staging / INCOMPLETE).read_text()
    except OSError:
        return False
    m = re.search(r"written by process (\d+) on (\S+), started", text)
    return bool(m) and m.group(2) == socket.gethostname() and psutil.pid_exists(int(m.group(1)))


def refuse_existing(final: Path, what: str, hint: str = " (choose another --out)") -> None:
    if final.exists():
        raise ConfigError(f"{final} already exists; {what}s are never overwritten{hint}")


def begin(final: Path, what: str, left: str = KEEP) -> Path:
    """Create the staging directory of ``final`` (marked INCOMPLETE) and return it. One left by a writer that
    was killed is removed when its contents can be made again (``left`` REMOVE), else refused."""
    refuse_existing(final, what)
    staging = staging_of(final)
    if staging.exists():
        if left == REMOVE and (staging / INCOMPLETE).is_file() and not writer_alive(staging):
            shutil.rmtree(staging)  # left by a killed writer: never a whole one
        else:
            raise ConfigError(f"{staging} exists (another process writing {final}?); remove it or choose "
                              "another --out")
    staging.mkdir(parents=True)
    mark_incomplete(staging, what, final, left)
    return staging


def publish(staging: Path, final: Path, what: str, left: str = KEEP) -> Path:
    """Rename the complete ``staging`` to ``final``, taking its INCOMPLETE marker away just before; should
    the rename fail, the marker is put back."""
    if final.exists():
        raise ConfigError(f"{final} appeared while it was being written; kept {staging}")
    (staging / INCOMPLETE).unlink(missing_ok=True)
    try:
        os.rename(staging, final)
    except BaseException:
        if staging.is_dir():
            mark_incomplete(staging, what, final, left)
        raise
    return final


def remove_whole(directory: Path) -> None:
    """Remove ``directory`` and everything in it, even when an interrupt lands inside the removal: a Ctrl-C that
    spark.session.interruptible delivers again every half second while a comparison unwinds once stopped an
    rmtree half way and left a staging directory behind. The interrupt being handled is the caller's to raise."""
    while True:
        try:
            shutil.rmtree(directory, ignore_errors=True)
            return
        except KeyboardInterrupt:
            continue  # the same stop asked for again: finish removing, then the caller's interrupt goes on


@contextmanager
def staged(final: Path, what: str, left: str = REMOVE) -> Iterator[Path]:
    """``with staged(out, "report") as staging:`` write into ``staging``; it becomes ``final`` when the block
    ends, and an interrupted or failed block leaves nothing (REMOVE) or the marked staging (KEEP)."""
    staging = begin(final, what, left)
    try:
        yield staging
        publish(staging, final, what, left)
    except BaseException:
        if left == REMOVE:
            remove_whole(staging)
        raise


def publish_dir(final: Path, fill: Callable[[Path], None], what: str = "report",
                log: Callable[[str], None] | None = None) -> Path:
    """A directory ``fill`` writes into its staging, published whole or not at all."""
    with staged(final, what) as staging:
        if log:  # where it ends up is said once it is there; the staging directory is gone by then
            log(f"writing the {what} ...")
        fill(staging)
    return final


def json_safe(node: object) -> object:
    """JSON has no infinity: an endless wait is written as the string "inf"."""
    if isinstance(node, float) and not math.isfinite(node):
        return "inf" if node > 0 else ("-inf" if node < 0 else None)
    if isinstance(node, dict):
        return {k: json_safe(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [json_safe(v) for v in node]
    if isinstance(node, np.floating | np.integer):
        return json_safe(node.item())
    return node


def json_text(doc: object) -> str:
    return json.dumps(json_safe(doc), indent=2, allow_nan=False, default=str) + "\n"


def publish_json(doc: object, out: Path, what: str) -> Path:
    """A result file, whole or not at all, never over an existing one (``what`` names it in the error)."""
    if out.exists():
        raise ConfigError(f"{out} already exists; {what} are never overwritten")
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_atomically(out, json_text(doc))
