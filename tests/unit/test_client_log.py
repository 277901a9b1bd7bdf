"""A failing callback of the gRPC client (its heartbeat, when a proxy stops under it) is logged in the client's
log, not as a traceback on the harness's stderr (harness/client/grpc.py load_client)."""

import logging
from concurrent.futures import Future

from harness.client.grpc import _CLIENT_LOGGER, load_client


def test_a_failing_client_callback_goes_to_the_client_log_not_stderr(tmp_path, capfd):
    futures, client = logging.getLogger("concurrent.futures"), logging.getLogger(_CLIENT_LOGGER)
    before = (list(futures.handlers), futures.propagate, list(client.handlers))
    try:
        load_client(tmp_path / "client.log")
        f: Future = Future()

        def heartbeat_callback(_f: Future) -> None:
            raise ConnectionError("failed to connect to all addresses")

        f.add_done_callback(heartbeat_callback)
        f.set_result(None)
        for h in futures.handlers:
            h.flush()
        assert "exception calling callback" in (tmp_path / "client.log").read_text()
        assert "Traceback" not in capfd.readouterr().err
    finally:
        futures.handlers, futures.propagate = before[0], before[1]
        for h in list(client.handlers):
            client.removeHandler(h)
        for h in before[2]:
            client.addHandler(h)
