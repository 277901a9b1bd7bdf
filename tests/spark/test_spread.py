"""The Spark stage at less cost, the same results: a comparison's bootstraps spread over Spark's tasks
(spark.comparison.on_executors) give what they give on the driver (each is seeded by the rule, whichever
process draws it); the JVM runs with the harness's options (spark.jvm)."""

import numpy as np

from harness.contracts.verdict import VerdictRule
from spark.comparison import compare_one, on_executors, serially


def test_comparisons_on_the_executors_are_the_comparisons_on_the_driver(spark):
    gen = np.random.default_rng(8)

    def side(runs: int, scale: float) -> list[list[np.ndarray]]:
        return [[gen.exponential(scale, gen.integers(1, 20)) for _ in range(gen.integers(3, 9))] for _ in range(runs)]

    rule = VerdictRule(bootstrap=300)
    args = [{"rule": rule, "statistic": "median", "base": side(3, 30), "cand": side(3, 45),
             "runs": (["r1", "r2", "r3"], ["r1", "r2", "r3"])},
            {"rule": rule, "statistic": "share", "base": [[(c > 30).astype(float) for c in run] for run in side(2, 30)],
             "cand": [[(c > 30).astype(float) for c in run] for run in side(2, 60)], "runs": None}]
    spread = on_executors(spark)(compare_one, args)
    assert spread == serially(compare_one, args)
    assert spread[0]["paired"] and spread[0]["ci"] is not None and spread[1]["ci"] is not None


def test_the_spark_jvm_runs_with_the_harness_jvm_options(spark):
    """spark.jvm's options reach the JVM the session runs on (local mode: driver and executors in one): C1 only,
    and the class archive of this java and Spark, which `make setup` built, mapped in."""
    from spark import jvm

    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert jvm.JIT in args, args
    assert jvm.archive().is_file(), "no class archive: `make setup` (python -m spark.jvm) builds it"
    assert f"-XX:SharedArchiveFile={jvm.archive()}" in args, args
