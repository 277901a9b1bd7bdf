"""Commands in a pod's container over the API (what `kubectl exec` does), and copying a directory out of
one (what `kubectl cp` does): tar in the container, base64 so the websocket's text frames carry it intact,
unpacked here."""

from __future__ import annotations

import base64
import io
import shlex
import tarfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from harness.core.errors import HarnessError

# The API server now and then answers an exec's websocket upgrade with a plain 200 (the client's ApiException
# "Handshake status 200 OK", status 0; seen twice on the cluster layer's fault run, 2026-11-28 and -29): the command
# never started, so it is asked for again, this many times, a moment apart.
HANDSHAKE_TRIES = 4
HANDSHAKE_PAUSE_S = 0.5


def handshake_failed(error: Exception) -> bool:
    """Whether ``error`` is an exec whose websocket upgrade failed (nothing ran in the container)."""
    return getattr(error, "status", None) == 0 and "Handshake status" in str(error)


def exec_in(core: object, namespace: str, pod: str, container: str, argv: list[str],
            timeout_s: float = 60.0, sleep: Callable[[float], object] = time.sleep) -> tuple[int, str, str]:
    """Run ``argv`` in the container; (exit code, stdout, stderr). HarnessError when it does not finish in time.
    An upgrade the API server refused (nothing ran) is tried again (HANDSHAKE_TRIES)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    for attempt in range(1, HANDSHAKE_TRIES + 1):
        try:
            resp = stream(core.connect_get_namespaced_pod_exec, pod, namespace, container=container, command=argv,
                          stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
            break
        except ApiException as e:
            if not handshake_failed(e) or attempt == HANDSHAKE_TRIES:
                raise
            sleep(HANDSHAKE_PAUSE_S)
    try:
        resp.run_forever(timeout=timeout_s)
        out, err, code = resp.read_stdout() or "", resp.read_stderr() or "", resp.returncode
    finally:
        resp.close()
    if code is None:
        raise HarnessError(f"{argv[0]} in pod {pod} ({container}) did not finish within {timeout_s:.0f} s")
    return code, out, err


def read_tree(core: object, namespace: str, pod: str, container: str, path: str, timeout_s: float = 300.0) -> bytes:
    """The directory ``path`` in the container as gzipped tar bytes (its last component at the top)."""
    p = PurePosixPath(path)
    # Through a file, not a pipe: sh has no pipefail, and a failed tar must fail the command. GNU tar's exit 1 is
    # "a file changed as we read it" (a live server's log): the archive is written, with that file as it was.
    tmp = f"/tmp/rmq-harness-copy-{p.name}.tgz"
    command = (f"tar czf {tmp} -C {shlex.quote(str(p.parent))} {shlex.quote(p.name)}; rc=$?; "
               f"if [ $rc -le 1 ]; then base64 -w 0 {tmp}; rc=$?; fi; rm -f {tmp}; exit $rc")
    try:
        code, out, err = exec_in(core, namespace, pod, container, ["sh", "-c", command], timeout_s)
    except HarnessError:
        raise HarnessError(f"copying {path} out of pod {pod} did not finish within {timeout_s:.0f} s") from None
    if code:
        raise HarnessError(f"copying {path} out of pod {pod} failed (exit {code}): {err.strip()[:300]}")
    data = base64.b64decode(out)
    if not data:
        raise HarnessError(f"copying {path} out of pod {pod} returned nothing")
    return data


def unpack(data: bytes, dest: Path) -> list[str]:
    """Unpack tar bytes into ``dest``; return the top-level names. Paths leaving ``dest`` are refused."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            # Python 3.11 before 3.11.4 (Debian bookworm's 3.11.2) has no extraction filters: refuse by hand
            # what the "data" filter refuses (absolute paths, escapes, links, devices).
            root = dest.resolve()
            for m in tar.getmembers():
                target = (dest / m.name).resolve()
                if not (m.isfile() or m.isdir()) or (target != root and root not in target.parents):
                    raise HarnessError(f"refusing to unpack {m.name!r}: not a plain file or directory inside {dest}")
            tar.extractall(dest)
        return sorted({PurePosixPath(m.name).parts[0] for m in tar.getmembers() if m.name not in ("", ".")})
