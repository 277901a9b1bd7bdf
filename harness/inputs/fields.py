"""Field types the parts of a scenario share: the strict model (an unknown key is refused), RocketMQ resource
names, and tag filters with what they match."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints


class Strict(BaseModel):
    """A part of a scenario: a key it does not know is an error, never ignored (a typo would run another load)."""

    model_config = ConfigDict(extra="forbid")


# RocketMQ topic / group names: letters, digits, '_', '-', '%', '|' (TopicValidator); no '+' so V2 retry
# names parse.
ResourceName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,100}$")]

ALL_TAGS = "*"
TagName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
# A consumer's tag filter: '*' (everything) or tags joined by '||' (RocketMQ's TAG expression).
TagFilter = Annotated[str, StringConstraints(pattern=r"^(\*|[A-Za-z0-9_-]{1,64}(\|\|[A-Za-z0-9_-]{1,64})*)$")]


def tag_matches(expression: str, tag: str | None) -> bool:
    """Whether a consumer filtering on ``expression`` is meant to get a message tagged ``tag``."""
    if expression == ALL_TAGS:
        return True
    return tag is not None and tag in expression.split("||")
