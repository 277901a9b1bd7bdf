{{- /* The alerts on the harness's own metrics (harness/contracts/metrics.py), as the groups of a Prometheus
rule file: the chart's own Prometheus loads them (prometheus.yaml) and monitoring.prometheusRule hands the same
groups to yours. Every rule is tested with `promtool test rules` on recorded series (tests/chart/
test_monitoring.py); docs/alerts.md says what each means and what to look at. Series are grouped by run as well
as by variant, scenario and group: each run of the harness is its own population. */}}
{{- define "rph.alertGroups" -}}
{{- $r := .Values.monitoring.prometheusRule }}
{{- $w := $r.window }}
{{- $by := "namespace, run, variant, scenario, group" }}
{{- $run := "namespace, run, variant, scenario" }}
{{- /* `le` as the workers write it: prometheus_client prints 5.0 as "5.0", Helm's toString as "5". */}}
{{- $le := toString $r.waitBucketSeconds }}
{{- if not (regexMatch "[.eE]" $le) }}{{ $le = printf "%s.0" $le }}{{ end }}
- name: rmq-harness.pop-retries
  rules:
    - alert: RmqHarnessRetryWakeupSlow
      expr: >-
        histogram_quantile(0.99, sum by ({{ $by }}, le) (rate(rmq_harness_retry_wakeup_seconds_bucket[{{ $w }}])))
        > {{ $r.wakeupP99Seconds }}
      for: {{ index $r "for" }}
      labels: {severity: warning}
      annotations:
        summary: Retries wait long for a poll that was already waiting
        description: {{`'The p99 of the retry wakeup of group {{ $labels.group }} (variant {{ $labels.variant }}, run {{ $labels.run }}) is {{ $value | humanizeDuration }}: the broker wakes the pops waiting for retries late.'`}}
    - alert: RmqHarnessRetriesWaitForAPoll
      expr: >-
        (sum by ({{ $by }}) (rate(rmq_harness_retry_wakeup_seconds_count[{{ $w }}]))
        - sum by ({{ $by }}) (rate(rmq_harness_retry_wakeup_seconds_bucket{le="{{ $le }}"}[{{ $w }}])))
        / sum by ({{ $by }}) (rate(rmq_harness_retry_wakeup_seconds_count[{{ $w }}]))
        > {{ $r.waitingShare }}
      for: {{ index $r "for" }}
      labels: {severity: warning}
      annotations:
        summary: Retries are not woken; they wait for the next poll
        description: {{ printf "'%s of the retries of group {{ $labels.group }} (variant {{ $labels.variant }}, run {{ $labels.run }}) came later than %ss after their retry copy was stored, while a poll was waiting: the stall of a pop that is not notified.'" "{{ $value | humanizePercentage }}" $le }}
    - alert: RmqHarnessRetriesNotRedelivered
      expr: >-
        sum by ({{ $by }}) (increase(rmq_harness_nacks_total[{{ $w }}])) > 0
        unless on ({{ $by }})
        (sum by ({{ $by }}) (increase(rmq_harness_retry_wakeup_seconds_count[{{ $w }}])) > 0
        or sum by ({{ $by }}) (increase(rmq_harness_retry_pickup_seconds_count[{{ $w }}])) > 0)
      for: {{ index $r "for" }}
      labels: {severity: critical}
      annotations:
        summary: Nacked messages are not coming back
        description: {{`'Group {{ $labels.group }} (variant {{ $labels.variant }}, run {{ $labels.run }}) nacks messages, and none has come back as a retry: the broker does not revive them, or nothing polls where they are.'`}}
    - alert: RmqHarnessDeliveriesStopped
      expr: >-
        sum by ({{ $run }}) (increase(rmq_harness_messages_sent_total[{{ $w }}])) > 0
        unless on ({{ $run }})
        sum by ({{ $run }}) (increase(rmq_harness_deliveries_total[{{ $w }}])) > 0
      for: {{ index $r "for" }}
      labels: {severity: critical}
      annotations:
        summary: Messages are sent and nothing is delivered
        description: {{`'Variant {{ $labels.variant }} (run {{ $labels.run }}) sends messages and its consumers receive none.'`}}
    - alert: RmqHarnessMessagesOverdue
      expr: >-
        sum by ({{ $by }}, stage) (rmq_harness_overdue_messages) > 0
      for: {{ index $r "for" }}
      labels: {severity: warning}
      annotations:
        summary: The canary is owed messages past their time
        description: {{`'{{ $value }} messages of group {{ $labels.group }} (variant {{ $labels.variant }}) are overdue at stage {{ $labels.stage }} (first: sent, never delivered; retry: nacked, not back after its invisible time), each by more than the canary grace.'`}}
    - alert: RmqHarnessMessagesLost
      expr: >-
        sum by ({{ $by }}, stage) (increase(rmq_harness_lost_messages_total[{{ $w }}])) > 0
      labels: {severity: critical}
      annotations:
        summary: The canary lost messages
        description: {{`'{{ $value }} messages of group {{ $labels.group }} (variant {{ $labels.variant }}) were still owed at stage {{ $labels.stage }} long past their time (the canary lost-after-s) and are counted lost.'`}}
    - alert: RmqHarnessCrossTopicDeliveries
      expr: >-
        sum by ({{ $by }}) (increase(rmq_harness_cross_topic_deliveries_total[{{ $w }}])) > 0
      labels: {severity: critical}
      annotations:
        summary: A consumer received another topic's or group's message
        description: {{`'Group {{ $labels.group }} (variant {{ $labels.variant }}, run {{ $labels.run }}) received {{ $value }} messages meant for another topic or group.'`}}
    - alert: RmqHarnessClientErrors
      expr: >-
        sum by ({{ $by }}, operation) (rate(rmq_harness_errors_total[{{ $w }}])) > 0
      for: {{ index $r "for" }}
      labels: {severity: warning}
      annotations:
        summary: Client operations keep failing
        description: {{`'{{ $labels.operation }} of group {{ $labels.group }} (variant {{ $labels.variant }}, run {{ $labels.run }}) failed {{ $value | humanize }} times a second, throughout.'`}}
{{- end }}
