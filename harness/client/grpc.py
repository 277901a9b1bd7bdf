"""The Apache rocketmq-python-client (gRPC, through the proxy), imported and used the harness's way."""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from types import ModuleType

_CLIENT_LOGGER = "rocketmq-python-client"


def load_client(log_file: Path | None = None) -> ModuleType:
    """Import the client and, when ``log_file`` is given, send its log there instead of ~/logs."""
    import rocketmq

    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        logger = logging.getLogger(_CLIENT_LOGGER)
        for h in list(logger.handlers):
            logger.removeHandler(h)
            h.close()
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s"))
        logger.addHandler(handler)
    return rocketmq


def store_timestamp_ms(message: object) -> int | None:
    """The broker's store time of a received message, in ms since the epoch.

    rocketmq-python-client 5.1.2 parses ``system_properties.store_timestamp`` but exposes no getter;
    the name-mangled attribute is read here, in one place, so a client upgrade breaks one test.
    """
    return getattr(message, "_Message__store_timestamp", None)


def round_trip(endpoint: str, topic: str, group: str, timeout_s: float = 60.0) -> float:
    """Send one message through the gRPC proxy and pop it back; return the seconds it took.

    Raises TimeoutError when the message is not seen within ``timeout_s``.
    """
    rmq = load_client()
    started = time.monotonic()
    cfg = rmq.ClientConfiguration(endpoint, rmq.Credentials(), request_timeout=5)
    consumer = rmq.SimpleConsumer(cfg, group, {topic: rmq.FilterExpression()}, await_duration=5)
    producer = rmq.Producer(cfg, (topic,))
    token = uuid.uuid4().hex
    try:
        consumer.startup()
        producer.startup()
        msg = rmq.Message()
        msg.topic = topic
        msg.body = json.dumps({"readiness": token}).encode()
        producer.send(msg)
        while time.monotonic() - started < timeout_s:
            # The proxy's minimum invisible duration for receive is 10 s.
            for m in consumer.receive(16, 15):
                consumer.ack(m)
                if json.loads(m.body).get("readiness") == token:
                    return time.monotonic() - started
        raise TimeoutError(f"message sent to {topic} via {endpoint} was not popped within {timeout_s:.0f} s")
    finally:
        for client in (producer, consumer):
            try:
                client.shutdown()
            except Exception:  # noqa: BLE001 - a client that never started cannot shut down cleanly
                pass

