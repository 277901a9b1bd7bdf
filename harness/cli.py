"""The `rmq-harness` command. ``main(argv)`` is callable from tests; the console script calls it."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.table import Table

from harness import __version__
from harness.backends.base import Endpoints
from harness.errors import EXIT_USAGE, HarnessError
from harness.paths import state_dir
from harness.variants import load_variants, select

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmq-harness", description="Load-test and regression harness for RocketMQ POP")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--variants", type=Path, default=None, help="variants file (default: workloads/variants.yaml)")
    sub = p.add_subparsers(dest="command", required=True)

    brokers = sub.add_parser("brokers", help="start, inspect and stop RocketMQ brokers locally")
    bsub = brokers.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workdir", type=Path, default=None,
        help="where brokers keep state, stores and logs (default: $RMQ_HARNESS_STATE or ~/.local/state/rmq-harness)",
    )
    up = bsub.add_parser("up", parents=[common], help="start variants and wait until each passes a send/pop")
    up.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                    help="variant to start (repeatable; default: unpatched)")
    up.add_argument("--timeout", type=float, default=180.0, help="seconds each variant may take to be ready")
    fetch = bsub.add_parser("fetch", help="download variants' jars into the cache (up does this when needed)")
    fetch.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME")
    bsub.add_parser("status", parents=[common], help="show the variants that are up and whether they are healthy")
    down = bsub.add_parser("down", parents=[common], help="stop variants (default: all)")
    down.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME")
    return p


def _print_endpoints(rows: Sequence[Endpoints], health: dict[str, tuple[bool, str]] | None = None) -> None:
    # One block per variant: endpoints are long and a wide table wraps them unreadably.
    for ep in rows:
        title = f"[bold]{ep.variant}[/] (RocketMQ {ep.version})"
        if health is not None:
            ok, detail = health[ep.variant]
            title += f"  [green]healthy[/] [dim]{detail}[/]" if ok else f"  [red]unhealthy:[/] {detail}"
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column()
        for label, value in (("gRPC proxy", ep.grpc), ("remoting proxy", ep.remoting), ("broker", ep.broker),
                             ("name server", ep.namesrv), ("metrics", ep.metrics)):
            grid.add_row(label, value)
        console.print(title)
        console.print(grid, soft_wrap=True)


def _brokers(args: argparse.Namespace) -> int:
    from harness.backends.local import LocalBackend
    from harness.backends.local.jars import distribution_for

    if args.action == "fetch":
        for v in select(load_variants(args.variants), args.variants_wanted or ["unpatched"]):
            dist = distribution_for(v.version, v.jars, log=console.print)
            console.print(f"{v.name}: RocketMQ {v.version} jars in {dist.lib}")
        return 0
    backend = LocalBackend(
        args.workdir or state_dir() / "brokers",
        ready_timeout_s=getattr(args, "timeout", 180.0),
        log=lambda line: console.print(f"[dim]{line}[/]"),
    )
    if args.action == "up":
        variants = select(load_variants(args.variants), args.variants_wanted or ["unpatched"])
        with console.status("starting brokers ..."):
            eps = backend.up(variants)
        _print_endpoints(eps)
        return 0
    if args.action == "status":
        health = backend.status()
        if not health:
            console.print("no variants are up")
            return 0
        _print_endpoints([h.endpoints for h in health], {h.endpoints.variant: (h.healthy, h.detail) for h in health})
        return 0 if all(h.healthy for h in health) else 1
    stopped = backend.down(args.variants_wanted)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM into an exception so cleanup (stopping half-started brokers) runs as for Ctrl-C.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if args.command == "brokers":
            return _brokers(args)
        return EXIT_USAGE
    except HarnessError as e:
        err_console.print(f"[red]error:[/] {e}", soft_wrap=True)
        if e.detail:
            err_console.print(e.detail, style="dim", markup=False, soft_wrap=True)
        return e.exit_code
    except KeyboardInterrupt:
        err_console.print("interrupted; started processes were stopped")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
