"""An exec into a pod's container whose websocket upgrade the API server refused (a plain 200: nothing ran) is asked
for again; any other failure is not (the command may have run)."""

import pytest
from kubernetes.client.exceptions import ApiException

from harness.deploy.k8s import transfer


class _Core:
    def connect_get_namespaced_pod_exec(self, *args, **kwargs):
        raise AssertionError("called through the stream function only")


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


def _refused() -> ApiException:
    return ApiException(status=0, reason="Handshake status 200 OK -+-+- {'audit-id': 'x'} -+-+- None")


def test_a_refused_upgrade_is_tried_again_and_the_command_runs_once(monkeypatch):
    answers = [_refused(), _refused(), _Resp()]
    calls = []

    def stream(*args, **kwargs):
        calls.append(kwargs["command"])
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr("kubernetes.stream.stream", stream)
    slept = []
    assert transfer.exec_in(_Core(), "ns", "pod", "broker-b", ["kill", "-9", "1"], sleep=slept.append) == (0, "ok", "")
    assert len(calls) == 3 and slept == [transfer.HANDSHAKE_PAUSE_S] * 2


def test_another_failure_or_too_many_refusals_is_raised(monkeypatch):
    monkeypatch.setattr("kubernetes.stream.stream", lambda *a, **k: (_ for _ in ()).throw(ApiException(status=403)))
    with pytest.raises(ApiException):
        transfer.exec_in(_Core(), "ns", "pod", "c", ["true"], sleep=lambda s: None)
    tries = []

    def refused(*a, **k):
        tries.append(1)
        raise _refused()

    monkeypatch.setattr("kubernetes.stream.stream", refused)
    with pytest.raises(ApiException, match="Handshake status 200"):
        transfer.exec_in(_Core(), "ns", "pod", "c", ["true"], sleep=lambda s: None)
    assert len(tries) == transfer.HANDSHAKE_TRIES
