"""An exec into a pod's container goes through an ApiClient of its own: the client library's `stream` swaps its
client's `call_api` for a websocket call while the exec opens, so on the shared client another thread's ordinary
request (a pod listing) would go out as a websocket upgrade and fail with "Handshake status 200 OK"."""

import functools
import threading

from kubernetes import client
from kubernetes.stream.stream import _websocket_request

from harness.deploy.k8s import transfer


class _Resp:
    returncode = 0

    def run_forever(self, timeout):
        pass

    def read_stdout(self):
        return "ok"

    def read_stderr(self):
        return ""

    def close(self):
        pass


def _core() -> client.CoreV1Api:
    conf = client.Configuration()
    conf.host = "https://127.0.0.1:1"  # nothing is sent: the websocket call is replaced below
    return client.CoreV1Api(client.ApiClient(conf))


def test_an_exec_leaves_the_shared_client_alone_while_it_opens(monkeypatch):
    shared = _core()
    original = shared.api_client.call_api
    seen = {}
    opened, release = threading.Event(), threading.Event()

    def websocket_call(configuration, method, url, **kwargs):
        # The real `stream` has swapped call_api on the client the exec was made on: here, the shared one must not be.
        seen["shared"] = shared.api_client.call_api
        seen["url"] = url
        opened.set()
        release.wait(5)
        return _Resp()

    # The library's own `stream` (it does the swapping), over a websocket call that sends nothing.
    monkeypatch.setattr("kubernetes.stream.stream", functools.partial(_websocket_request, websocket_call, None))

    got = {}
    t = threading.Thread(target=lambda: got.update(r=transfer.exec_in(shared, "ns", "pod", "namesrv", ["true"])))
    t.start()
    assert opened.wait(5)
    # Meanwhile, what another thread would call for an ordinary request is still the plain one.
    assert shared.api_client.call_api == original and seen["shared"] == original
    release.set()
    t.join(5)
    assert got["r"] == (0, "ok", "")
    assert "/namespaces/ns/pods/pod/exec" in seen["url"] and "container=namesrv" in seen["url"]
    assert shared.api_client.call_api == original


def test_the_private_client_shares_the_configuration():
    shared = _core()
    own = transfer.private_core(shared)
    assert own.api_client is not shared.api_client
    assert own.api_client.configuration is shared.api_client.configuration


def test_an_exec_that_could_not_open_is_tried_again_and_said(monkeypatch):
    from kubernetes.client.exceptions import ApiException

    monkeypatch.setattr(transfer, "OPEN_PAUSE_S", 0.0)
    opens = []

    def flaky(*args, **kwargs):
        opens.append(kwargs["command"])
        if len(opens) < 3:
            raise ApiException(status=0, reason="Handshake status 200 OK")
        return _Resp()

    monkeypatch.setattr("kubernetes.stream.stream", flaky)
    said = []
    assert transfer.exec_in(_core(), "ns", "pod", "broker-b", ["sh", "-c", "kill -KILL 7"], log=said.append) == \
        (0, "ok", "")
    assert len(opens) == 3 and len(said) == 2
    assert "could not open (ApiException" in said[0] and "tried again (2 of 3)" in said[0]


def test_an_exec_that_never_opens_fails_after_its_tries(monkeypatch):
    import pytest
    from kubernetes.client.exceptions import ApiException

    monkeypatch.setattr(transfer, "OPEN_PAUSE_S", 0.0)
    opens = []

    def refused(*args, **kwargs):
        opens.append(1)
        raise ApiException(status=0, reason="Handshake status 200 OK")

    monkeypatch.setattr("kubernetes.stream.stream", refused)
    with pytest.raises(ApiException):
        transfer.exec_in(_core(), "ns", "pod", "broker-b", ["true"])
    assert len(opens) == transfer.OPEN_TRIES


def test_an_exec_whose_command_ran_is_not_tried_again(monkeypatch):
    import pytest

    class _Broken(_Resp):
        def run_forever(self, timeout):
            raise ConnectionResetError("the websocket dropped while the command ran")

    opens = []
    monkeypatch.setattr("kubernetes.stream.stream", lambda *a, **k: opens.append(1) or _Broken())
    with pytest.raises(ConnectionResetError):
        transfer.exec_in(_core(), "ns", "pod", "broker-b", ["sh", "-c", "kill -KILL 7"])
    assert opens == [1]  # a signal may have been delivered: never sent twice
