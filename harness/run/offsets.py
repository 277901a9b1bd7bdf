"""What each group left unconsumed when the load stopped: per group, its committed offsets against the queues'
ends on every master (remoting admin requests to the brokers). A group that acked everything should have no lag:
where it does, the broker's committed offset trails what was consumed (apache/rocketmq#10949 on the KV pop
service), and a monitor reading the lag would page for a backlog that is not there."""

from __future__ import annotations

from harness.client import remoting
from harness.contracts.endpoints import Endpoints
from harness.inputs.scenario import Scenario
from harness.run.hooks import Hook, RunState


def lag(ep: Endpoints, scenario: Scenario) -> dict[str, object]:
    """{"lag": messages behind over every group, "groups": {group: messages behind}} (a queue the group never
    committed on counts whole)."""
    queues = {t.name: t.queues for t in scenario.topics}
    groups: dict[str, int] = {}
    for g in scenario.groups:
        topic, group = ep.physical(g.topic), ep.physical(g.name)
        behind = 0
        for broker in ep.masters:
            for q in range(queues[g.topic]):
                end = remoting.max_offset(broker, topic, q)
                committed = remoting.consumer_offset(broker, group, topic, q)
                behind += max(end - (committed or 0), 0)
        groups[g.name] = behind
    return {"lag": sum(groups.values()), "groups": groups}


class Offsets(Hook):
    """Each variant's lag into its record once the load ended; unknown (None, said in the log) where the brokers
    would not tell (a broker a fault left down)."""

    def load_ended(self, run: RunState) -> None:
        for ep in run.endpoints:
            try:
                run.record.variant(ep.variant).offsets = lag(ep, run.scenario)
            except (OSError, remoting.RemotingError) as e:
                run.log(f"{ep.variant}: the groups' lag is unknown: {e}")
