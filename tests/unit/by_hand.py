"""What unit tests make by hand instead of reading or computing it: a variant from its body, and what Spark
collected for a comparison (spark.comparison.Collected) without Spark."""

from __future__ import annotations

import pandas as pd

from harness.inputs.variants import Variant, parse_variants
from spark.comparison import Collected


def variant(name: str, **body: object) -> Variant:
    """The variant ``name`` as a variants file with only it, ``body`` its entry, defines it."""
    return parse_variants({"variants": {name: body}})[name]


def collected(**parts: object) -> Collected:
    """A Collected of the given parts; every other one empty (no archive, scenario, row, sample or plot)."""
    empty = {"archives": [], "scenarios": {}, "per_variant": [], "per_run": [], "samples": pd.DataFrame(),
             "plot": pd.DataFrame(), "per_variant_table": pd.DataFrame()}
    return Collected(**{**empty, **parts})
