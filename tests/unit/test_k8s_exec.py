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
