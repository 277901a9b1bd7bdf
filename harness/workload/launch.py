"""Start Locust (master or worker) with the monkey-patching the RocketMQ gRPC client survives.

Locust patches everything with gevent on import. The gRPC client runs an asyncio loop on its own
thread, and with threads patched that thread becomes a greenlet and ``startup()`` hangs forever. So
Locust's own patching is skipped and everything but threads (and queue, which wraps thread locks) is
patched here, before Locust is imported. Usage: ``python -m harness.workload.launch <locust args>``.
"""

import os
import sys


def main() -> int:
    os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
    from gevent import monkey

    monkey.patch_all(thread=False, queue=False)
    from locust.main import main as locust_main

    return locust_main()


if __name__ == "__main__":
    sys.exit(main())
