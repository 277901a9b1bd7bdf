"""`python -m tools.cluster build|up|status|images|down` (what `make cluster-tools cluster-up cluster-images
cluster-down` call): a Kubernetes of one node (or two: `up --nodes 2`) on this machine without Docker. Needs
root."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core.paths import REPO_ROOT
from harness.report.console import console
from tools import entry
from tools.cluster import binaries, host, images, node
from tools.cluster.layout import default_layout


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.cluster", description="a Kubernetes cluster of one or two nodes "
                                "on this machine, without Docker (Kubernetes and etcd built from the Go module proxy)")
    p.add_argument("--variants", type=Path, default=None, help="variants file (default: workloads/variants.yaml)")
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("build", help="build the cluster's programs into the cache (up does this when needed)")
    up = sub.add_parser("up", help="start the cluster; prints the KUBECONFIG to use")
    up.add_argument("--nodes", type=int, choices=(1, 2), default=1,
                    help="1 (default), or 2: a second node in a network namespace of this machine, with its own "
                         "runtime, kubelet and kube-proxy (the chart's two-node profile places brokers and load apart)")
    sub.add_parser("status", help="which components run, and whether the API and the node are ready")
    img = sub.add_parser("images", help="build the harness image and the broker images of the variants' versions "
                         "(podman, on local Debian stand-ins) and load them into the cluster")
    img.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                     help="variants whose RocketMQ versions get a broker image (repeatable; default: unpatched and "
                          "patched, the chart's default variants)")
    img.add_argument("--tag", default="dev", help="the harness image's tag (the chart's harnessImage.tag)")
    sub.add_parser("down", help="stop the cluster and remove everything it left on the host")
    return p


def _images(args: argparse.Namespace) -> None:
    from harness.deploy.local import jars
    from harness.inputs.variants import load_variants, select

    lay = default_layout()
    if not node.status(lay)["node_ready"]:
        raise ConfigError("the cluster is not up: `make cluster-up` first")
    wanted = select(load_variants(args.variants), args.variants_wanted or ["unpatched", "patched"])
    for v in wanted:
        if v.jars is not None:
            raise ConfigError(f"variant {v.name} runs local jars ({v.jars}); broker images are built from "
                              "Maven Central versions only")
    dists = {}
    for version in dict.fromkeys(v.version for v in wanted):
        jars.ensure_version(version, console.print)
        dists[version] = jars.version_dir(version)
    images.load_all(lay, REPO_ROOT, args.tag, dists, console.print, node.nodes_of(lay))


def run(args: argparse.Namespace) -> int:
    lay = default_layout()
    if args.action == "build":
        for name, path in binaries.build(console.print).items():
            console.print(f"{name}: {path}")
    elif args.action == "up":
        node.up(lay, console.print, args.nodes)
        console.print(f"export KUBECONFIG={lay.admin_kubeconfig}")
    elif args.action == "down":
        node.down(host.owner() or lay, console.print)
    elif args.action == "images":
        _images(args)
    else:
        st = node.status(lay)
        for name, up in st["components"].items():
            console.print(f"{name:24} {'[green]running[/]' if up else '[red]stopped[/]'}")
        console.print(f"API ready: {st['api']}; nodes Ready ({', '.join(st['nodes'])}): {st['node_ready']}")
        return 0 if st["node_ready"] else 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return entry.main(parser, run, argv)

if __name__ == "__main__":
    sys.exit(main())
