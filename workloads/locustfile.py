"""The harness's Locust workload: producers and pop consumers that nack, per the run's scenario.

Started by `rmq-harness run` (master and workers, through harness.workload.launch); each process reads
its WorkloadSpec from the file named by $RMQ_HARNESS_WORKLOAD (a worker pod: the JSON itself in
$RMQ_HARNESS_WORKLOAD_JSON). The users live in harness/workload/users.py.
"""

from locust import events
from locust.env import Environment

from harness.workload import shipping
from harness.workload.cycles import CycleBook, attach_master
from harness.workload.runtime import WorkerRuntime
from harness.workload.spec import WorkloadSpec
from harness.workload.users import user_classes

SPEC = WorkloadSpec.from_env()
# A worker builds its runtime now, before it connects to the master, so no user can start ahead of it.
RUNTIME = None if SPEC.is_master else WorkerRuntime(SPEC)

# Locust collects the User classes defined in this module: one producer and one consumer class per group.
globals().update({cls.__name__: cls for cls in user_classes(SPEC, RUNTIME, module=__name__)})


@events.init.add_listener
def _init(environment: Environment, **_kwargs: object) -> None:
    if RUNTIME is not None:
        RUNTIME.drains.attach(environment.runner)
        if SPEC.ship_files:
            shipping.attach_worker(environment.runner, SPEC, RUNTIME.close)
    else:
        sc = SPEC.scenario
        groups = [g.name for g in sc.groups if g.topic == sc.produce_topic]
        attach_master(environment.runner, CycleBook(groups, sc.produce.producers))
        if SPEC.ship_files:
            shipping.attach_master(environment.runner, environment.events, SPEC)


@events.test_stop.add_listener
@events.quitting.add_listener
def _close(environment: Environment, **_kwargs: object) -> None:
    if RUNTIME is not None:
        RUNTIME.close()
