"""Topics and groups, created over remoting on every master of a variant: the admin side both client drivers
share (the proxy has no admin API)."""

from __future__ import annotations

from harness.client import remoting
from harness.contracts.endpoints import Endpoints


class RemotingAdmin:
    """Mixed into a driver that has ``endpoints``."""

    endpoints: Endpoints

    def create_topic(self, name: str, queues: int, message_type: str = "NORMAL") -> None:
        for broker in self.endpoints.masters:
            remoting.create_topic(broker, name, queues=queues, message_type=message_type)

    def create_group(self, name: str, retry_max_times: int, orderly: bool = False,
                     lite_bind_topic: str | None = None) -> None:
        for broker in self.endpoints.masters:
            remoting.create_group(broker, name, retry_max_times=retry_max_times, orderly=orderly,
                                  lite_bind_topic=lite_bind_topic)
