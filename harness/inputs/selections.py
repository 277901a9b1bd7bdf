"""Selections: which deliveries a scenario's checks count, by the attributes each delivery carries in the events
(its delivery attempt, whether it came under another topic name than the one popped, its tag, queue, message group,
group). A scenario names them under ``select:`` and checks each as ``selected.<name>.deliveries`` (the deliveries
that match) or ``selected.<name>.messages`` (the distinct messages among them), e.g. "no first delivery comes under
a %RETRY% name":

    select:
      renamed_first: {attempt: 1, renamed: true}
    expect:
      - selected.renamed_first.deliveries == 0

Every attribute given must match; one left out matches anything. harness.measure.tally counts them, in the run's
own summary and Spark's alike.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints, model_validator

from harness.inputs.expectations import SELECTION_STATS as STATS
from harness.inputs.fields import ResourceName, Strict

SelectionName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]
__all__ = ["STATS", "Selection", "SelectionName"]


class Selection(Strict):
    attempt: int | None = Field(None, ge=1, le=1_000, description="the delivery attempt (1: the first delivery)")
    min_attempt: int | None = Field(None, ge=1, le=1_000, description="attempts from this one on (2: the retries)")
    renamed: bool | None = Field(None, description="true: came under another topic name than the one popped (a "
                                 "retry under its %RETRY% name); false: under the topic popped")
    tag: str | None = Field(None, min_length=1, max_length=128, description="the message's tag")
    queue_id: int | None = Field(None, ge=0, le=1_024, description="the queue of the copy delivered")
    message_group: str | None = Field(None, min_length=1, max_length=128,
                                      description="its message group (a FIFO topic) or lite topic")
    group: ResourceName | None = Field(None, description="the consumer group it was delivered to")

    @model_validator(mode="after")
    def _something(self) -> Selection:
        if all(v is None for v in self.model_dump().values()):
            raise ValueError("a selection names at least one attribute (attempt, min_attempt, renamed, tag, "
                             "queue_id, message_group, group); every delivery is `deliveries`")
        if self.attempt is not None and self.min_attempt is not None:
            raise ValueError("give attempt or min_attempt, not both")
        return self
