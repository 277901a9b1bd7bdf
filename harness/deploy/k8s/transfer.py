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


def private_core(core: object) -> object:
    """A CoreV1Api on its own ApiClient, sharing ``core``'s configuration (server, credentials).

    Why: the client's ``kubernetes.stream.stream`` swaps its ApiClient's ``call_api`` for a websocket call while an
    exec opens, and swaps it back after. On a client other threads use (the run's pod listings, another fault's
    exec) their ordinary requests go out as websocket upgrades meanwhile, and the API server answers them with their
    JSON and a plain 200: "ApiException: (0) Handshake status 200 OK" (the cluster layer's two-master fault run,
    2026-11-28 and -29, and CI's run of stop 55). Two overlapping execs can even leave the shared client swapped for
    good. An exec on a client of its own touches no one else's."""
    from kubernetes import client

    return client.CoreV1Api(client.ApiClient(core.api_client.configuration))


# An exec whose websocket could not be opened (the API server or the kubelet refused the upgrade, a connection
# dropped): the command never ran, so it is tried again, this many times in all, OPEN_PAUSE_S apart. A failure once
# the command runs is not retried: a signal may have been delivered.
OPEN_TRIES = 3
OPEN_PAUSE_S = 0.5


def exec_in(core: object, namespace: str, pod: str, container: str, argv: list[str],
            timeout_s: float = 60.0, log: Callable[[str], None] | None = None) -> tuple[int, str, str]:
    """Run ``argv`` in the container; (exit code, stdout, stderr). HarnessError when it does not finish in time.
    An exec that could not open is tried again (OPEN_TRIES), each retry said through ``log``."""
    from kubernetes.stream import stream

    own = private_core(core)
    try:
        for attempt in range(1, OPEN_TRIES + 1):
            try:
                resp = stream(own.connect_get_namespaced_pod_exec, pod, namespace, container=container,
                              command=argv, stderr=True, stdin=False, stdout=True, tty=False,
                              _preload_content=False)
                break
            except Exception as e:  # noqa: BLE001 - the library raises ApiException, websocket and socket errors
                if attempt == OPEN_TRIES:
                    raise
                if log:
                    log(f"{argv[0]} in pod {pod} ({container}) could not open ({type(e).__name__}: "
                        f"{str(e).strip()[:160]}); tried again ({attempt + 1} of {OPEN_TRIES})")
                time.sleep(OPEN_PAUSE_S)
        try:
            resp.run_forever(timeout=timeout_s)
            out, err, code = resp.read_stdout() or "", resp.read_stderr() or "", resp.returncode
        finally:
            resp.close()
    finally:
        own.api_client.close()
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
