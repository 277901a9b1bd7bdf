"""A fault's target on Kubernetes: any process of a variant's pod in its topology (harness.deploy.k8s.pod: the
name server, the brokers, the proxy; in single the broker inside its proxy's JVM).

The chart's pods share one PID namespace (shareProcessNamespace), so the server's JVM is an ordinary
process seen from another container of the pod: signalled from there with the shell's own `kill` (a signal
sent from inside a container to its own PID 1 would be ignored). The kubelet then restarts the container
it belonged to, on the pod's emptyDir, so the store survives as it does when a local process is started
again. A killed container cannot be held down for a while: the kubelet decides when it comes back.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.core.errors import HarnessError
from harness.core.waiting import Pending, wait_until
from harness.deploy.k8s import pod
from harness.inputs.brokers import SINGLE, Topology


def containers(topology: Topology = SINGLE) -> dict[str, tuple[str, str]]:
    """Each fault target of the topology: the container it runs in, and what tells its JVM from the pod's others
    on their command lines (the file it was started with: two brokers share a main class)."""
    return {t: (c.name, c.marker) for t in topology.targets for c in [pod.container_of(t, topology)]}


# Finds the JVM by its marker in /proc (the images have no pgrep), prints its PID: a process whose program
# (argv[0]) is java (not this shell, whose own command line names the marker too) and whose arguments hold it.
FIND = ('for p in /proc/[0-9]*; do a=$(tr "\\000" "\\n" < "$p/cmdline" 2>/dev/null) || continue; '
        'case "$(printf "%s\\n" "$a" | head -n 1)" in */java|java) ;; *) continue;; esac; '
        'case "$a" in *"$1"*) echo "${p#/proc/}";; esac; done')
# (pod, container, argv) -> (exit code, stdout, stderr)
Exec = Callable[[str, str, list[str]], tuple[int, str, str]]


class PodProcess:
    """One server JVM in a variant's pod. ``exec`` runs a command in a container; ``pods`` lists the variant's
    pods (API models); ``ready_timeout_s`` bounds the wait for the kubelet's restart."""

    holds_down = False  # the kubelet restarts a killed container at once

    def __init__(self, variant: str, target: str, exec_: Exec, pods: Callable[[], list], ready_timeout_s: float,
                 after_start: Callable[[], None] = lambda: None, topology: Topology = SINGLE) -> None:
        targets = containers(topology)
        if target not in targets:
            raise HarnessError(f"variant {variant} on Kubernetes has no {target} (its targets: "
                               f"{', '.join(targets)})")
        self.variant = variant
        self.target = target
        self.container, self.main_class = targets[target]
        # Signals go from another container of the pod: the one whose JVM dies must not be the one running them.
        self.signaller = next(c for c, _ in targets.values() if c != self.container)
        self._exec = exec_
        self._pods = pods
        self.ready_timeout_s = ready_timeout_s
        self._after_start = after_start
        self._restarts = 0

    def _pod(self) -> object:
        live = [p for p in self._pods() if not p.metadata.deletion_timestamp]
        if len(live) != 1:
            raise HarnessError(f"{self.variant}: expected one pod, found {len(live)}")
        return live[0]

    def _status(self) -> object:
        pod = self._pod()
        for s in pod.status.container_statuses or []:
            if s.name == self.container:
                return s
        raise HarnessError(f"{self.variant}: pod {pod.metadata.name} has no container {self.container} status")

    def _pid(self) -> str:
        pod = self._pod()
        code, out, err = self._exec(pod.metadata.name, self.signaller, ["sh", "-c", FIND, "find", self.main_class])
        pids = out.split()
        if code or len(pids) != 1:
            raise HarnessError(f"{self.variant}: no single {self.main_class} process in pod {pod.metadata.name} "
                               f"(exit {code}, found {pids or 'none'}{'; ' + err.strip()[:200] if err.strip() else ''})"
                               "; the chart's pods must share their process namespace")
        return pids[0]

    def _signal(self, sig: str) -> None:
        pid = self._pid()
        pod = self._pod().metadata.name
        code, _, err = self._exec(pod, self.signaller, ["sh", "-c", f"kill -{sig} {pid}"])
        if code:
            raise HarnessError(f"{self.variant}: kill -{sig} {pid} in pod {pod} failed: {err.strip()[:200]}")

    def describe(self) -> str:
        try:
            s = self._status()
            return f"{self.target} (container {self.container} of pod {self._pod().metadata.name}, restarts " \
                   f"{s.restart_count})"
        except HarnessError as e:
            return f"{self.target} ({e})"

    def kill(self) -> None:
        self._restarts = self._status().restart_count
        self._signal("KILL")

    def pause(self) -> None:
        self._signal("STOP")

    def resume(self) -> None:
        self._signal("CONT")

    def terminate(self) -> None:
        self._restarts = self._status().restart_count
        self._signal("TERM")

    def start(self) -> None:
        """The kubelet starts it again: wait until the container restarted and is ready."""
        def back() -> bool | Pending:
            s = self._status()
            return True if s.restart_count > self._restarts and s.ready else \
                Pending(f"restarts {s.restart_count}, ready {s.ready}")

        wait_until(f"{self.variant}'s container {self.container} to be back", back, self.ready_timeout_s)
        self._after_start()
