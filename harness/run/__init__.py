"""One run: its plan and checks before anything starts (plan), its sequence of phases (sequence) and the hooks that
act at them (hooks; the standard ones: standard, brokers, faults, cpu, offsets, observability/), where it happens
(site: this machine or the chart's load-test pod), and its events once the load is over (events)."""
