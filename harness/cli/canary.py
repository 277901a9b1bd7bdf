"""`rmq-harness canary`: a small steady pop-retry load against one variant until stopped, served as Prometheus
metrics for the alerts (docs/alerts.md) to watch. The command checks what it is given, chooses the backend and
serves the metrics; harness.run.canary does the rest."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from harness.cli.options import add_variants_file
from harness.contracts.metrics import create
from harness.contracts.workers import GRPC_CLIENTS
from harness.core.errors import ConfigError
from harness.core.paths import state_dir
from harness.inputs.catalogue import load_scenario
from harness.inputs.variants import load_variants, select
from harness.report.console import console, log

DEFAULT_PORT = 9300
# How much later than due a message may come before it counts overdue, beyond the consumer's long poll (a retry
# the broker does not wake a poll for is handed over when the poll runs out: the stall the alerts tell apart).
GRACE_BEYOND_POLL_S = 10.0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("canary", help="a small steady pop-retry load against one variant until stopped, served as "
                       "Prometheus metrics (a rolling ledger: overdue, lost, late)")
    p.add_argument("--variant", default="unpatched",
                   help="the variant: a build the canary starts (and stops), or a cluster of yours (endpoints)")
    p.add_argument("--scenario", default="steady",
                   help="what to send and how to nack: its first group, produce.rate, consume and nack "
                        "(produce.pattern steady; default: steady)")
    p.add_argument("--metrics-port", type=port_number, default=DEFAULT_PORT,
                   help=f"serve the metrics at http://127.0.0.1:PORT/metrics (default {DEFAULT_PORT})")
    p.add_argument("--metrics-address", default="127.0.0.1",
                   help="the address to serve them on (in a pod: 0.0.0.0)")
    p.add_argument("--grace-s", type=float, default=None,
                   help="how late a message may be before it counts overdue (default: the scenario's long poll "
                        f"+ {GRACE_BEYOND_POLL_S:g} s)")
    p.add_argument("--lost-after-s", type=float, default=300.0,
                   help="how long an overdue message stays owed before it counts lost (default 300)")
    p.add_argument("--for-s", type=float, default=0.0, help="stop after this many seconds (default 0: until "
                   "stopped, Ctrl-C or SIGTERM)")
    p.add_argument("--grpc-client", choices=GRPC_CLIENTS, default=None,
                   help="the gRPC client (default: the scenario's, else official)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where a build the canary starts keeps its state (default: $RMQ_HARNESS_STATE/canary, or "
                        "~/.local/state/rmq-harness/canary)")
    add_variants_file(p)
    p.set_defaults(func=canary_command)


def port_number(text: str) -> int:
    port = int(text)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (1-65535)")
    return port


def canary_command(args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server

    from harness.run.canary import CanaryOptions, refusal, serve
    from harness.run.plan import refuse_clash, with_scenario_settings

    [variant] = select(load_variants(args.variants, say=log), [args.variant])
    scenario = load_scenario(args.scenario)
    why = refusal(scenario)
    if why:
        raise ConfigError(why)
    refuse_clash(variant, scenario)
    variant = with_scenario_settings(variant, scenario)
    grace_s = args.grace_s if args.grace_s is not None else scenario.consume.long_poll_s + GRACE_BEYOND_POLL_S
    for name, value, least in (("--lost-after-s", args.lost_after_s, 1.0), ("--for-s", args.for_s, 0.0),
                               ("--grace-s", grace_s, 0.0)):
        if not math.isfinite(value) or value < least:
            raise ConfigError(f"{name} {value:g}: give a number of seconds, at least {least:g}")
    metrics = create()
    try:  # first: a port in use is refused before any broker starts
        server, _ = start_http_server(args.metrics_port, addr=args.metrics_address, registry=metrics.registry)
    except OSError as e:
        raise ConfigError(f"--metrics-address {args.metrics_address} --metrics-port {args.metrics_port}: "
                          f"{e.strerror or e}; pick a free port on an address of this machine") from None
    try:
        if variant.is_external:
            from harness.deploy.external import ExternalBackend

            backend: object = ExternalBackend([variant], scenario.protocol, f"canary-{time.strftime('%Y%m%d-%H%M%S')}",
                                              log=log)
            backend.preflight(scenario)
        else:
            from harness.deploy.local import LocalBackend

            backend = LocalBackend(args.workdir or state_dir() / "canary", log=log)
        options = CanaryOptions(grace_s, args.lost_after_s, args.for_s, args.grpc_client,
                                f"http://{args.metrics_address}:{args.metrics_port}/metrics")
        console.print(serve(backend, variant, scenario, metrics, options, say=console.print))
        return 0
    finally:
        server.shutdown()
