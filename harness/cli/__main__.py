"""`python -m harness.cli`, as the rmq-harness script."""

from harness.cli.main import entry

entry()
