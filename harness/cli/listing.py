"""`rmq-harness list`: what a command line can name, one line each (the built-in scenarios, the variants)."""

from __future__ import annotations

import argparse

from harness.cli.options import add_variants_file
from harness.inputs.variants import Variant, load_variants
from harness.report.console import console, log


def add_parsers(sub: argparse._SubParsersAction) -> None:
    ls = sub.add_parser("list", help="list the built-in scenarios or the variants, one line each")
    lsub = ls.add_subparsers(dest="what", required=True, metavar="WHAT")
    sc = lsub.add_parser("scenarios", help="the built-in scenarios (workloads/scenarios/): name and what it does")
    sc.set_defaults(func=scenarios_command)
    va = lsub.add_parser("variants", help="the variants of the variants file: name, build in a word, description")
    add_variants_file(va)
    va.set_defaults(func=variants_command)


def _rows(rows: list[tuple[str, ...]]) -> None:
    """Left-aligned columns, one line a row, the last column as long as it is (a terminal wraps it)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        text = "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        console.print(text, markup=False, soft_wrap=True)


def scenarios_command(args: argparse.Namespace) -> int:
    from harness.inputs.catalogue import builtin_names, load_scenarios

    rows = []
    for name in builtin_names():
        points = load_scenarios(name)
        first = points[0]
        tags = ", ".join(x for x in (first.protocol, first.retry_topic.upper(), "gate" if first.gate else "",
                                     "upstream" if first.upstream else "",
                                     f"series of {len(points)}" if len(points) > 1 else "") if x)
        rows.append((name, tags, " ".join(first.description.split())))
    _rows(rows)
    return 0


def build_in_a_word(v: Variant) -> str:
    """A variant's build: its version, and what changes it (agents, local jars), or the cluster it measures."""
    if v.is_external:
        return f"endpoints {v.endpoints.namesrv}"  # type: ignore[union-attr]
    extra = [a.jar.rsplit("/", 1)[-1].removesuffix(".jar") for a in v.agents]
    if v.jars is not None:
        extra.append(f"jars:{v.jars}")
    if v.broker or v.proxy or v.jvm_options:
        extra.append("conf")
    return "+".join([v.version or "?", *extra])


def variants_command(args: argparse.Namespace) -> int:
    variants = load_variants(args.variants, say=log)
    _rows([(name, build_in_a_word(v), " ".join(v.description.split())) for name, v in variants.items()])
    return 0
