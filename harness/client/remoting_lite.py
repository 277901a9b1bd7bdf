"""Lite topics over remoting, straight to the broker (RIP-83, 5.5.0): a consumer that subscribes one client to a set
of lite topics of a LITE parent topic and pops their messages (each lite topic its own FIFO queue, an LMQ
``%LMQ%$<parent>$<lite>`` with one queue), as upstream's own client code does for the proxy
(MQClientAPIImpl.popLiteMessageAsync / processPopLiteResponse; the proxy's remoting port serves no lite codes).

Read from the released 5.5.0 and 5.5.1 sources (broker PopLiteMessageProcessor, AckMessageProcessor.ackLite,
ChangeInvisibleTimeProcessor.processChangeInvisibleTimeForLite):
- subscribe: LITE_SUBSCRIPTION_CTL, a JSON body ``{"subscriptionSet": [{action, clientId, group, topic,
  liteTopicSet, version}]}``; the broker keeps this connection as the client's.
- pop: POP_LITE_MESSAGE with ``clientId, consumerGroup, topic`` (the parent), ``maxMsgNum`` (at most 32),
  ``invisibleTime, pollTime, bornTime``; the answer's messages are the parent's records, the LMQ offset in property
  INNER_MULTI_QUEUE_OFFSET and the lite topic in __LITE_TOPIC; ``orderCountInfo`` holds each message's consume count.
- there is no retry topic: a nack moves the message's next visible time in place (CHANGE_MESSAGE_INVISIBLETIME with
  ``liteTopic``), and an ack (ACK_MESSAGE with ``liteTopic``, queue 0, the LMQ offset) lets its lite topic go on.

A delivery's attempt is counted here, per (group, lite topic, LMQ offset) over every consumer of the driver (one
worker process), not read from the answer's ``orderCountInfo``: measured on 5.5.0, that holds a count only for the
offsets a lite topic had delivered before (keyed ``Q0%<offset>``, in hash order) or one count for all, joined over the
lite topics of the answer, so reading it in the body's order (as upstream's parseLiteOrderCountInfo does) gave first
deliveries a second attempt's count. A lite scenario therefore runs one worker (harness.inputs.scenario).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from harness.client import remoting
from harness.client.driver import Delivery, Received
from harness.client.remoting import Command, Connection
from harness.client.remoting_messages import TAGS, MessageFormatError, decode_batch

LITE_TOPIC = "__LITE_TOPIC"  # MessageConst.PROPERTY_LITE_TOPIC: the lite topic a message is sent to / came from
LMQ_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # its offset in the lite topic's LMQ (the first, when it has several)
REVIVE_QID = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: what a lite handle names as its revive queue
MAX_MESSAGES = 32  # the broker refuses a lite pop of more
POLL_MARGIN_S = 10.0
REQUEST_TIMEOUT_S = 5.0


def new_client_id() -> str:
    """A lite client's id: the broker keeps its subscription and its event queue under it."""
    return f"rmq-harness-{uuid.uuid4().hex[:12]}"


def lmq(parent: str, lite_topic: str) -> str:
    """The LMQ (light message queue) that holds a lite topic's messages on its broker, one queue (0)."""
    return f"%LMQ%${parent}${lite_topic}"


@dataclass
class LiteHandle:
    """What an ack or a change of one lite message names: its lite topic, LMQ offset and the pop's time."""

    lite_topic: str
    offset: int
    pop_time: int
    invisible_ms: int
    broker_name: str

    def extra_info(self) -> str:
        # The eight POP_CK fields as upstream's client builds them for a lite message: no checkpoint offset, no
        # retry, queue 0.
        return " ".join(str(x) for x in (0, self.pop_time, self.invisible_ms, REVIVE_QID, 0, self.broker_name, 0,
                                         self.offset))


class RemotingLiteConsumer:
    """One client of ``group`` subscribed to ``lite_topics`` of the LITE parent ``topic`` on one broker; with
    ``client_id``, a poller of that client, which others share (their pops take from one event queue)."""

    def __init__(self, conn: Connection, broker_name: str, group: str, topic: str, long_poll_s: int,
                 lite_topics: Sequence[str], seen: dict[tuple[str, str, int], int] | None = None,
                 client_id: str | None = None) -> None:
        self._conn, self._broker_name = conn, broker_name
        self._seen = {} if seen is None else seen  # (group, lite topic, offset) -> deliveries so far
        self.group, self.topic, self.long_poll_s = group, topic, long_poll_s
        self.lite_topics = list(lite_topics)
        self.client_id = client_id or new_client_id()
        body = {"subscriptionSet": [{"action": "PARTIAL_ADD", "clientId": self.client_id, "group": group,
                                     "topic": topic, "liteTopicSet": self.lite_topics, "version": 0}]}
        remoting.check(conn.call(Command(remoting.LITE_SUBSCRIPTION_CTL, {}, body=json.dumps(body).encode()),
                                 REQUEST_TIMEOUT_S), f"subscribe {group} to {len(self.lite_topics)} lite topics")

    def receive(self, max_messages: int, invisible_s: int) -> Received:
        header = {"clientId": self.client_id, "consumerGroup": self.group, "topic": self.topic,
                  "maxMsgNum": min(max_messages, MAX_MESSAGES), "invisibleTime": invisible_s * 1000,
                  "pollTime": self.long_poll_s * 1000, "bornTime": int(time.time() * 1000)}
        resp = self._conn.call(Command(remoting.POP_LITE_MESSAGE, header), self.long_poll_s + POLL_MARGIN_S)
        at = time.time_ns()
        if resp.code in (remoting.POLLING_TIMEOUT, remoting.PULL_NOT_FOUND, remoting.POLLING_FULL):
            return Received([], at)
        remoting.check(resp, f"lite pop {self.topic} as {self.group}")
        f = resp.ext_fields
        messages = decode_batch(resp.body)
        try:
            pop_time, invisible_ms = int(f["popTime"]), int(f["invisibleTime"])
        except (KeyError, ValueError) as e:
            raise MessageFormatError(f"lite pop response header {dict(f)!r}: {e}") from None
        out = []
        for m in messages:
            lite, offset = m.properties.get(LITE_TOPIC), m.properties.get(LMQ_OFFSET, "").split(",")[0]
            if not lite or not offset.lstrip("-").isdigit():
                raise MessageFormatError(f"lite message {m.message_id} without its lite topic or LMQ offset "
                                         f"({LITE_TOPIC}={lite!r}, {LMQ_OFFSET}={offset!r})")
            key = (self.group, lite, int(offset))
            attempt = self._seen[key] = self._seen.get(key, 0) + 1
            handle = LiteHandle(lite, int(offset), pop_time, invisible_ms, self._broker_name)
            out.append(Delivery(body=m.body, message_id=m.message_id, delivery_attempt=attempt,
                                store_ts_ms=m.store_ts_ms, born_ts_ms=m.born_ts_ms, handle=handle,
                                tag=m.properties.get(TAGS) or None, queue_id=0))
        return Received(out, at)

    def _fields(self, h: LiteHandle) -> dict[str, object]:
        return {"consumerGroup": self.group, "topic": self.topic, "queueId": 0, "offset": h.offset,
                "extraInfo": h.extra_info(), "liteTopic": h.lite_topic}

    def ack(self, delivery: Delivery) -> None:
        err = self.ack_all([delivery])[0]
        if err is not None:
            raise err

    def ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        # The broker takes no batch ack of lite messages: one ACK_MESSAGE each, written together.
        cmds = [Command(remoting.ACK_MESSAGE, self._fields(d.handle)) for d in deliveries]
        return remoting.pipelined(self._conn, cmds, f"lite ack on {self.topic} as {self.group}", REQUEST_TIMEOUT_S)

    def change_invisible(self, delivery: Delivery, invisible_s: int, suspend: bool = False) -> None:
        h: LiteHandle = delivery.handle
        fields = {**self._fields(h), "invisibleTime": invisible_s * 1000}
        if suspend:
            fields["suspend"] = "true"
        resp = remoting.check(self._conn.call(Command(remoting.CHANGE_MESSAGE_INVISIBLETIME, fields),
                                              REQUEST_TIMEOUT_S), f"lite change invisible time on {self.topic}")
        # The lease keeps its popTime; the new deadline is popTime + the answer's invisibleTime.
        h.pop_time = int(resp.ext_fields.get("popTime", h.pop_time))
        h.invisible_ms = int(resp.ext_fields.get("invisibleTime", h.invisible_ms))
