"""The comparison's driver watched: runs spark.jobs.compare in this process (its arguments as given) and prints,
every second, the process's RSS and where its main thread is in spark/ and harness/ (the last three frames), so
a figure of driver memory can be tied to the step that holds it (docs/benchmarks.md, spark.json). Not part of
`make bench`; asserts nothing.

    .venv/bin/python -m tests.benchmarks.watch_driver ARCHIVE --baseline unpatched --candidate patched \\
        --master 'local[2]' --out /tmp/report
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback

import psutil


def _watch(main: int) -> None:
    me = psutil.Process()
    while True:
        time.sleep(1)
        frame = sys._current_frames().get(main)
        ours = [f for f in traceback.extract_stack(frame) if f"{os.sep}spark{os.sep}" in f.filename
                or f"{os.sep}harness{os.sep}" in f.filename]
        where = " > ".join(f"{os.path.basename(f.filename)}:{f.name}:{f.lineno}" for f in ours[-3:])
        print(f"driver {me.memory_info().rss >> 20} MiB  {where}", file=sys.stderr, flush=True)


def main() -> int:
    threading.Thread(target=_watch, args=(threading.get_ident(),), daemon=True).start()
    from spark.jobs import compare

    return compare.main()


if __name__ == "__main__":
    sys.exit(main())
