"""The harness's Locust workload: producers and pop consumers that nack, per the run's scenario.

Started by `rmq-harness run` (master and workers, through harness.workload.launch); the run's
settings arrive in the file named by $RMQ_HARNESS_WORKLOAD. The users themselves live in
harness/workload/users.py.
"""

from locust import events
from locust.env import Environment
from locust.runners import MasterRunner

from harness.workload import hooks
from harness.workload.settings import WorkloadSettings
from harness.workload.users import user_classes

SETTINGS = WorkloadSettings.from_env()

# Locust collects the User classes defined in this module: one producer and one consumer class per group.
globals().update({cls.__name__: cls for cls in user_classes(SETTINGS.parsed_scenario(), module=__name__)})


@events.init.add_listener
def _init(environment: Environment, **_kwargs: object) -> None:
    if not isinstance(environment.runner, MasterRunner):
        hooks.start_worker(environment, SETTINGS)


@events.test_stop.add_listener
def _test_stop(environment: Environment, **_kwargs: object) -> None:
    if not isinstance(environment.runner, MasterRunner):
        hooks.stop_worker()


@events.quitting.add_listener
def _quitting(environment: Environment, **_kwargs: object) -> None:
    if not isinstance(environment.runner, MasterRunner):
        hooks.stop_worker()
