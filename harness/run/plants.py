"""A scenario's planted failures (plant:, harness.inputs.brokers.Plant) as a part of the run: the pop-fault agent
counts no call until the variant's load starts, when this arms it (harness.deploy.agents.ARM_FILE), so the brokers'
start-up and the readiness round trips are never planted, and a plant's after_s counts from the first sends, on
the faults' and the actions' clock."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.run.hooks import Hook, RunState


class Plants(Hook):
    def sending_started(self, run: RunState, variant: str, since: float) -> None:
        try:
            run.backend.arm_plants(variant)
        except OSError as e:  # a plant that never arms would read as a build without the defect
            raise HarnessError(f"{variant}: the planted failures could not be armed: {e}") from e
        run.log(f"{variant}: planted failures armed (the load started; plant: after_s counts from now)")
