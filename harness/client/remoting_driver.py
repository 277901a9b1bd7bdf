"""The remoting driver: pop consumption straight from the broker on the project's own codec, as the Java
remoting client does in pop mode (no proxy, so the broker's own limits: any invisible time, any poll).

Each producer and consumer holds one connection to the topic's master broker, found through the name
server. Calls block on plain sockets: under gevent they yield, so no thread bridge and no pool.
"""

from __future__ import annotations

import itertools
import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.client import remoting
from harness.client.admin import RemotingAdmin
from harness.client.driver import PLAIN, Delivery, Offload, Outgoing, Received, ReceiveOptions, direct, refuse_options
from harness.client.remoting import Command, Connection
from harness.client.remoting_lite import LITE_TOPIC, RemotingLiteConsumer, new_client_id
from harness.client.remoting_messages import (
    PRIORITY,
    SHARDING_KEY,
    TAGS,
    UNIQ_KEY,
    WAIT,
    PopHandle,
    decode_batch,
    encode_properties,
    handle_of,
)
from harness.contracts.endpoints import Endpoints

PRODUCER_GROUP = "rmq-harness-producer"
# The broker answers an empty long poll ~50 ms before its poll time; the Java client gives it 10 s more.
POLL_MARGIN_S = 10.0
REQUEST_TIMEOUT_S = 5.0
MIN_INIT = 0  # a new group starts at the queue's first message: nothing sent before its first pop is missed


@dataclass
class Receipt:
    """What ack and change_invisible need; the handle is replaced after each invisible-time change."""

    handle: PopHandle



class RemotingProducer:
    """``lite``: ``topic`` is a LITE parent topic (RIP-83), and a message's message group is the lite topic it is sent
    to (property __LITE_TOPIC; the broker dispatches it into that lite topic's queue)."""

    def __init__(self, conn: Connection, topic: str, write_queues: int, lite: bool = False) -> None:
        self._conn = conn
        self.topic = topic
        self._queues = write_queues
        self._next = itertools.count()
        self.lite = lite

    def send(self, body: bytes, tag: str | None = None, message_group: str | None = None) -> str:
        result = self.send_all([(body, tag, message_group, None)])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _request(self, body: bytes, tag: str | None, message_group: str | None,
                 priority: int | None = None) -> tuple[str, Command]:
        msg_id = uuid.uuid4().hex.upper()
        props = {UNIQ_KEY: msg_id, WAIT: "true"}
        if tag:
            props[TAGS] = tag
        if priority is not None:  # the broker queues it by priority (RIP-80), whatever queue is asked for
            props[PRIORITY] = str(priority)
        if message_group and self.lite:
            props[LITE_TOPIC] = message_group
            queue = next(self._next) % self._queues  # every queue of the parent leads to the one lite queue
        elif message_group:
            props[SHARDING_KEY] = message_group
            # One queue per message group keeps its order, as the proxy's FIFO sends do.
            queue = zlib.crc32(message_group.encode()) % self._queues
        else:
            queue = next(self._next) % self._queues
        header = {"a": PRODUCER_GROUP, "b": self.topic, "c": "TBW102", "d": 4, "e": queue, "f": 0,
                  "g": int(time.time() * 1000), "h": 0, "i": encode_properties(props), "j": 0, "k": "false",
                  "m": "false"}
        return msg_id, Command(remoting.SEND_MESSAGE_V2, header, body=body)

    def send_all(self, messages: list[Outgoing]) -> list[str | Exception]:
        requests = [self._request(*m) for m in messages]
        errors = remoting.pipelined(self._conn, [cmd for _, cmd in requests], f"send to {self.topic}")
        return [msg_id if err is None else err for (msg_id, _), err in zip(requests, errors, strict=True)]


# keep_deadline: tries before it gives up (on loopback a try lands on its millisecond about one time in a few),
# and the least time left before the deadline that is still worth aiming at.
DEADLINE_TRIES = 40
MIN_DEADLINE_LEFT_MS = 2_000


class RemotingPopConsumer:
    def __init__(self, conn: Connection, broker_name: str, group: str, topic: str, long_poll_s: int,
                 tags: str) -> None:
        self._conn = conn
        self._broker_name = broker_name
        self.group = group
        self.topic = topic
        self.long_poll_s = long_poll_s
        self.tags = tags

    def receive(self, max_messages: int, invisible_s: int) -> Received:
        header = {"consumerGroup": self.group, "topic": self.topic, "queueId": -1, "maxMsgNums": max_messages,
                  "invisibleTime": invisible_s * 1000, "pollTime": self.long_poll_s * 1000,
                  "bornTime": int(time.time() * 1000), "initMode": MIN_INIT, "expType": "TAG", "exp": self.tags,
                  "order": "false"}
        resp = self._conn.call(Command(remoting.POP_MESSAGE, header), self.long_poll_s + POLL_MARGIN_S)
        at = time.time_ns()
        if resp.code in (remoting.POLLING_TIMEOUT, remoting.PULL_NOT_FOUND):
            return Received([], at)
        remoting.check(resp, f"pop {self.topic} as {self.group}")
        out = []
        for m in decode_batch(resp.body):
            out.append(Delivery(body=m.body, message_id=m.message_id, delivery_attempt=m.reconsume_times + 1,
                                store_ts_ms=m.store_ts_ms, born_ts_ms=m.born_ts_ms,
                                handle=Receipt(handle_of(m, resp.ext_fields, self._broker_name)),
                                tag=m.properties.get(TAGS) or None, topic=None if m.topic == self.topic else m.topic,
                                queue_id=m.queue_id))
        return Received(out, at)

    def _fields(self, receipt: Receipt) -> dict[str, object]:
        h = receipt.handle
        return {"consumerGroup": self.group, "topic": h.topic(self.topic, self.group), "queueId": h.queue_id,
                "extraInfo": str(h), "offset": h.offset, "bname": h.broker_name}

    def ack(self, delivery: Delivery) -> None:
        err = self.ack_all([delivery])[0]
        if err is not None:
            raise err

    def ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        # One ACK_MESSAGE per delivery, written together and answered together (a pipeline, not the
        # broker's batch ack: each message keeps its own request and its own answer).
        cmds = [Command(remoting.ACK_MESSAGE, self._fields(d.handle)) for d in deliveries]
        return remoting.pipelined(self._conn, cmds, f"ack on {self.topic} as {self.group}")

    def change_invisible(self, delivery: Delivery, invisible_s: int, suspend: bool = False) -> None:
        receipt: Receipt = delivery.handle
        fields = {**self._fields(receipt), "invisibleTime": invisible_s * 1000}
        if suspend:
            fields["suspend"] = "true"
        cmd = Command(remoting.CHANGE_MESSAGE_INVISIBLETIME, fields)
        resp = remoting.check(self._conn.call(cmd, REQUEST_TIMEOUT_S),
                              f"change invisible time on {self.topic} as {self.group}")
        f = resp.ext_fields
        receipt.handle = receipt.handle.changed(int(f["popTime"]), int(f["invisibleTime"]), int(f["reviveQid"]))


    def keep_deadline(self, delivery: Delivery, tries: int = DEADLINE_TRIES) -> tuple[int, int]:
        """Change the invisible time so that the new deadline (the broker's popTime + the new invisible time)
        is the old one to the millisecond (apache/rocketmq#10276): the broker takes its own clock for popTime,
        so each try aims at the deadline the last one left and checks the answer. Returns (tries made, 1 if the
        last hit its deadline else 0); the handle is the last change's."""
        receipt: Receipt = delivery.handle
        lead_ms = 0.0  # how far the broker's popTime runs ahead of the time the request was written
        for n in range(1, tries + 1):
            h = receipt.handle
            deadline = h.pop_time + h.invisible_ms
            sent_ms = time.time() * 1000
            invisible_ms = round(deadline - sent_ms - lead_ms)
            if invisible_ms < MIN_DEADLINE_LEFT_MS:
                return n - 1, 0
            fields = {**self._fields(receipt), "invisibleTime": invisible_ms}
            resp = remoting.check(self._conn.call(Command(remoting.CHANGE_MESSAGE_INVISIBLETIME, fields),
                                                  REQUEST_TIMEOUT_S), f"change invisible time on {self.topic}")
            f = resp.ext_fields
            pop_time = int(f["popTime"])
            receipt.handle = h.changed(pop_time, int(f["invisibleTime"]), int(f["reviveQid"]))
            if pop_time + invisible_ms == deadline:
                return n, 1
            lead_ms = pop_time - sent_ms
        return tries, 0


class RemotingDriver(RemotingAdmin):
    protocol = "remoting"

    def __init__(self, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None) -> None:
        # Neither a thread bridge nor a client log: the calls are plain socket I/O, errors are exceptions.
        del offload, log_file
        self.endpoints = endpoints
        self._conns: list[Connection] = []
        self._lite_seen: dict[tuple[str, str, int], int] = {}  # every lite consumer's deliveries (remoting_lite)
        self._lite_clients: dict[tuple[str, str], str] = {}  # (group, parent) -> the client id its consumers share

    def _connect(self, topic: str) -> tuple[remoting.Route, Connection]:
        r = remoting.route(self.endpoints.namesrv, topic)
        conn = Connection(r.broker)
        self._conns.append(conn)
        return r, conn

    def producer(self, topic: str, lite: bool = False) -> RemotingProducer:
        r, conn = self._connect(topic)
        return RemotingProducer(conn, topic, r.write_queues, lite)

    def pop_consumer(self, group: str, topic: str, long_poll_s: int, tags: str = "*",
                     lite_topics: Sequence[str] = (),
                     options: ReceiveOptions = PLAIN) -> RemotingPopConsumer | RemotingLiteConsumer:
        refuse_options(options, "remoting", can=("one_client",) if lite_topics else ())
        r, conn = self._connect(topic)
        if lite_topics:
            shared = self._lite_clients.setdefault((group, topic), new_client_id()) if options.one_client else None
            return RemotingLiteConsumer(conn, r.broker_name, group, topic, long_poll_s, lite_topics, self._lite_seen,
                                        client_id=shared)
        return RemotingPopConsumer(conn, r.broker_name, group, topic, long_poll_s, tags)

    def close(self) -> None:
        conns, self._conns = self._conns, []
        for c in conns:
            c.close()
