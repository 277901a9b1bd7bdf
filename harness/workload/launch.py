"""Start Locust (master or worker) with the monkey-patching the RocketMQ gRPC client survives.

Locust patches everything with gevent on import. The gRPC client runs an asyncio loop on its own
thread, and with threads patched that thread becomes a greenlet and ``startup()`` hangs forever. So
Locust's own patching is skipped and everything but threads (and queue, which wraps thread locks) is
patched here, before Locust is imported. Usage: ``python -m harness.workload.launch <locust args>``.
"""

import os
import sys

# How long a master waits for a worker's heartbeat (sent every second) before it drops the worker and its users,
# and stops the test when none is left, yet exits 0. Locust's 3 s is shorter than a loaded machine can hold up
# a worker's hub while its users start: in a k8s run beside other tests both workers of a variant were dropped
# 4 s after the spawn and the variant sent nothing (docs/findings/dropped-workers.md). A worker that dies is
# still seen at once, by its exit code (harness.workload.fleet); a dropped one fails the run.
WORKER_SILENCE_S = 15


def main() -> int:
    os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
    from gevent import monkey

    monkey.patch_all(thread=False, queue=False)
    import locust.runners
    from locust.main import main as locust_main

    # Read by the master each time a worker connects or beats (a module global, not an option).
    locust.runners.HEARTBEAT_LIVENESS = WORKER_SILENCE_S
    return locust_main()


if __name__ == "__main__":
    sys.exit(main())
