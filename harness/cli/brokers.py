"""`rmq-harness brokers`: start, inspect and stop RocketMQ variants on this machine by hand."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.options import add_variants_file
from harness.core.errors import ConfigError
from harness.core.paths import state_dir
from harness.inputs.variants import Variant, load_variants, select
from harness.report.console import console, log
from harness.report.run_tables import print_endpoints


def add_parsers(sub: argparse._SubParsersAction) -> None:
    brokers = sub.add_parser("brokers", help="start, inspect and stop RocketMQ brokers locally")
    bsub = brokers.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workdir", type=Path, default=None,
        help="where brokers keep state, stores and logs (default: $RMQ_HARNESS_STATE/brokers, or "
             "$XDG_STATE_HOME/rmq-harness/brokers, or ~/.local/state/rmq-harness/brokers)",
    )
    up = bsub.add_parser("up", parents=[common], help="start variants and wait until each passes a send/pop")
    up.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                    help="variant to start (repeatable; default: unpatched)")
    up.add_argument("--timeout", type=float, default=180.0, help="seconds each variant may take to be ready")
    add_variants_file(up)
    up.set_defaults(func=up_command)
    fetch = bsub.add_parser("fetch", help="download variants' jars into the cache (up does this when needed)")
    fetch.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                       help="variant whose jars to fetch (repeatable; default: unpatched)")
    add_variants_file(fetch)
    fetch.set_defaults(func=fetch_command)
    status = bsub.add_parser("status", parents=[common], help="show the variants that are up and whether they are "
                             "healthy")
    status.set_defaults(func=status_command)
    down = bsub.add_parser("down", parents=[common], help="stop variants (default: all)")
    down.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                      help="variant to stop (repeatable; a name of the variants file)")
    add_variants_file(down)
    down.set_defaults(func=down_command)


def _backend(args: argparse.Namespace) -> object:
    from harness.deploy.local import LocalBackend

    return LocalBackend(args.workdir or state_dir() / "brokers", ready_timeout_s=getattr(args, "timeout", 180.0),
                        log=log)


def fetch_command(args: argparse.Namespace) -> int:
    from harness.deploy.local.jars import distribution_for

    for v in _built(select(load_variants(args.variants, say=log), args.variants_wanted or ["unpatched"])):
        dist = distribution_for(v.version, v.jars, log=console.print)
        console.print(f"{v.name}: RocketMQ {v.version} jars in {dist.lib}"
                      + (f" ({dist.hybrid})" if dist.hybrid else ""))
    return 0


def _built(variants: list[Variant]) -> list[Variant]:
    """The variants, none of them external (a cluster the harness does not start)."""
    for v in variants:
        if v.is_external:
            raise ConfigError(f"variant {v.name} names endpoints: it is a cluster the harness does not start; use it "
                              f"with rmq-harness run --variant {v.name}")
    return variants


def up_command(args: argparse.Namespace) -> int:
    variants = _built(select(load_variants(args.variants, say=log), args.variants_wanted or ["unpatched"]))
    backend = _backend(args)
    with console.status("starting brokers ..."):
        eps = backend.up(variants)
    print_endpoints(eps)
    return 0


def status_command(args: argparse.Namespace) -> int:
    health = _backend(args).status()
    if not health:
        console.print("no variants are up")
        return 0
    print_endpoints([h.endpoints for h in health], {h.endpoints.variant: (h.healthy, h.detail) for h in health})
    return 0 if all(h.healthy for h in health) else 1


def down_command(args: argparse.Namespace) -> int:
    if args.variants_wanted:  # a typo must not read as "nothing was running": the variant may well be
        select(load_variants(args.variants, say=log), args.variants_wanted)
    stopped = _backend(args).down(args.variants_wanted)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0
