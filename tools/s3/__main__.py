"""`python -m tools.s3 build|up|down|status|env` (what `make s3-tools s3-up s3-down` call): one SeaweedFS S3
server on 127.0.0.1 for a user, running in the background; its PID, endpoint and credentials in a 0600 state
file in its data directory, which `down`, `status` and `env` read and the next `up` takes the credentials from
(the data, the ports and so the endpoint stay too)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core.paths import cache_dir
from harness.report.console import console, err_console
from tools import entry
from tools.s3 import build, seaweedfs
from tools.s3.seaweedfs import S3Server

STATE = "server.json"


def default_dir() -> Path:
    return cache_dir() / "s3"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.s3", description="a SeaweedFS S3 server on 127.0.0.1 "
                                "(built from the Go module proxy at a pinned version)")
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("build", help=f"build weed {build.VERSION} into the cache (once)")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--dir", type=Path, default=None, help="its data directory (default: ~/.cache/rmq-harness/s3)")
    up = sub.add_parser("up", parents=[where], help="start the server in the background; prints the AWS_* "
                        "exports that reach it")
    up.add_argument("--bucket", action="append", default=[], metavar="NAME", help="create this bucket (repeatable)")
    sub.add_parser("down", parents=[where], help="stop the server")
    sub.add_parser("status", parents=[where], help="whether it runs (exit 0) or not (exit 1)")
    sub.add_parser("env", parents=[where], help="print the exports again")
    return p


def _state_file(data_dir: Path) -> Path:
    return data_dir / STATE


def load(data_dir: Path) -> S3Server | None:
    """The server last started from ``data_dir``, whether it still runs or not; None if none was."""
    try:
        return S3Server.from_json(json.loads(_state_file(data_dir).read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigError(f"unreadable state file {_state_file(data_dir)} ({e}): remove it and run up again") from e


def exports(server: S3Server) -> str:
    return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in server.env().items())


def _running(data_dir: Path) -> S3Server:
    server = load(data_dir)
    if server is None or not seaweedfs.running(server):
        raise ConfigError(f"no S3 server runs from {data_dir}: `make s3-up` (python -m tools.s3 up) first")
    return server


def _up(data_dir: Path, buckets: list[str]) -> None:
    for b in buckets:
        seaweedfs.check_bucket_name(b)
    server = load(data_dir)
    if server is not None and seaweedfs.running(server):
        err_console.print(f"already running: pid {server.pid}, {server.endpoint}")
    else:
        build.find_weed()  # not built: said before anything is started or written
        err_console.print(f"starting SeaweedFS {build.VERSION} in {data_dir}")
        # The last start's credentials (its ports are kept too): exports pasted earlier still work.
        server = seaweedfs.start(data_dir, *((server.access_key, server.secret_key) if server else ()))
        seaweedfs.write_private(_state_file(data_dir), json.dumps(server.to_json(), indent=1))
    for b in buckets:
        seaweedfs.create_bucket(server, b)
        err_console.print(f"bucket {b} ready")
    # stdout carries only the exports: `eval "$(python -m tools.s3 up)"` works.
    print(exports(server))


def _down(data_dir: Path) -> None:
    server = load(data_dir)
    if server is None or not seaweedfs.running(server):
        err_console.print(f"no S3 server runs from {data_dir}")
    else:
        killed = seaweedfs.stop(server)
        err_console.print(f"stopped pid {server.pid}" + (" (killed: it did not end in time)" if killed else ""))


def run(args: argparse.Namespace) -> int:
    if args.action == "build":
        console.print(f"weed: {build.build(err_console.print)}")
        return 0
    data_dir = (args.dir or default_dir()).resolve()
    if args.action == "up":
        _up(data_dir, args.bucket)
    elif args.action == "down":
        _down(data_dir)
    elif args.action == "env":
        print(exports(_running(data_dir)))
    else:
        server = load(data_dir)
        if server is None or not seaweedfs.running(server):
            console.print(f"S3 server ({data_dir}): [red]stopped[/]")
            return 1
        console.print(f"S3 server ({data_dir}): [green]running[/], pid {server.pid}, {server.endpoint}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return entry.main(parser, run, argv)

if __name__ == "__main__":
    sys.exit(main())
